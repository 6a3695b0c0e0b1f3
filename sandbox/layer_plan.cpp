#include "sandbox/layer_plan.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "sandbox/path_lists.hpp"
#include "sandbox/sandbox_layers.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

std::string canonical_path(const std::string& path) {
  if (path.empty() || path.front() != '/') return {};
  std::error_code ec;
  auto p = fs::canonical(path, ec);
  return ec ? std::string() : p.string();
}

bool is_directory_at(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string layer_env(const layer_inputs& in, std::string_view name) {
  for (const auto& [n, v] : in.env)
    if (n == name) return v;
  return {};
}

// Places the child gets from elsewhere: its own /proc and /dev, the kernel's /sys.
bool kernel_place(const std::string& path) {
  return within(path, "/proc") || within(path, "/dev") || within(path, "/sys");
}

const std::string* deepest_within(const std::vector<std::string>& places, const std::string& path) {
  const std::string* best = nullptr;
  for (const auto& p : places)
    if (within(path, p) && (!best || p.size() > best->size())) best = &p;
  return best;
}

}  // namespace

std::string agent_store_path(const std::string& home, const std::string& real) {
  const std::string store = home + "/.config/broker/agent-files";
  return within(real, home) && real != home ? store + real.substr(home.size()) : store + real;
}

layer_plan plan_layers(const layer_inputs& in) {
  layer_plan out;
  const std::string home = canonical_path(in.home);
  // The layers: the home and the XDG places outside it; the system's for a root command.
  const auto add_layer = [&](const std::string& path) {
    const std::string c = canonical_path(path);
    if (c.empty() || c == "/" || kernel_place(c) || !is_directory_at(c)) return;
    if (std::any_of(out.layers.begin(), out.layers.end(),
                    [&](const std::string& l) { return within(c, l); }))
      return;
    std::erase_if(out.layers, [&](const std::string& l) { return within(l, c); });
    out.layers.push_back(c);
  };
  add_layer(home);
  for (const char* name : {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"})
    add_layer(layer_env(in, name));
  if (in.root)
    for (const char* dir : {"/etc", "/usr", "/var", "/opt"}) add_layer(dir);
  // The workspaces: never the home itself (nor "/"), whose every file would then go through.
  std::vector<std::string> asked{in.cwd};
  asked.insert(asked.end(), in.workspaces.begin(), in.workspaces.end());
  for (const auto& w : asked) {
    const std::string c = canonical_path(w);
    if (c.empty() || !is_directory_at(c)) continue;
    if (c == "/" || c == home || kernel_place(c)) {
      out.warnings.push_back(c + (c == home ? " is your home" : " is not a place to work in") +
                             ": it is no workspace, so what the command writes there is kept out "
                             "when it ends; run from a project's directory or name one with "
                             "--workspace");
      continue;
    }
    add_unique(out.workspaces, c);
  }
  // The places writes go through to: the rules' existing directories (an existing file outside
  // every layer too: it would be read-only otherwise; one in a layer goes back at the end).
  if (in.rules)
    for (const auto& rule : in.rules->all()) {
      if (rule.what != home_rule::through) continue;
      struct stat st {};
      if (::lstat(rule.path.c_str(), &st) < 0) continue;
      const std::string c = canonical_path(rule.path);
      if (c.empty() || kernel_place(c)) continue;
      const bool in_layer = deepest_within(out.layers, c) != nullptr;
      if (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && !in_layer)) add_unique(out.through, c);
    }
  // The host's mounts inside a layer: an overlay shows none of them, so each is bound back,
  // read-only like the rest of the host (one inside a place bound through comes with it).
  std::vector<std::string> kept = in.kept;
  std::vector<std::string> all_through = out.workspaces;
  all_through.insert(all_through.end(), out.through.begin(), out.through.end());
  for (const auto& m : parse_mountinfo(in.mountinfo)) {
    if (!deepest_within(out.layers, m.path) ||
        std::find(out.layers.begin(), out.layers.end(), m.path) != out.layers.end() ||
        deepest_within(all_through, m.path))
      continue;
    add_unique(kept, m.path);
  }
  out.steps = private_view(in.private_dirs, kept, out.layers, all_through);
  // The layers as the steps have them (one under a place made private or bound through stays).
  out.layers.clear();
  for (const auto& s : out.steps)
    if (s.what == view_step::layer) out.layers.push_back(s.path);
  // What the layers hold from the start.
  for (const auto& [copy, target] : in.login_copies) out.seeds.push_back({copy, target, true});
  if (in.rules && !home.empty())
    for (const auto& rule : in.rules->all()) {
      if (rule.what != home_rule::key_store) continue;
      struct stat st {};
      const std::string store = agent_store_path(home, rule.path);
      if (::lstat(rule.path.c_str(), &st) == 0) continue;  // the home's own file wins
      if (::lstat(store.c_str(), &st) < 0 || !S_ISREG(st.st_mode)) continue;
      if (std::any_of(in.login_copies.begin(), in.login_copies.end(),
                      [&](const auto& l) { return l.second == rule.path; }))
        continue;
      out.seeds.push_back({store, rule.path, false});
    }
  // A masked name missing now stays missing: the layer shows the host's directory live below,
  // and a credential file the user makes there meanwhile (`npm login`, `aws configure`) would
  // show through where no mask was mounted. The first missing name on its path is whited out.
  for (const auto& mask : in.masks) {
    const std::string* layer = deepest_within(out.layers, mask);
    if (!layer || mask == *layer) continue;
    // Under a place bound through the layer, the host's own directory is what shows.
    if (const std::string* through = deepest_within(all_through, mask);
        through && through->size() > layer->size())
      continue;
    std::string first = mask;
    for (fs::path p = fs::path(mask).parent_path(); p.string().size() > layer->size();
         p = p.parent_path()) {
      struct stat st {};
      if (::lstat(p.c_str(), &st) < 0) first = p.string();
    }
    struct stat st {};
    if (::lstat(first.c_str(), &st) == 0) continue;
    if (std::none_of(out.seeds.begin(), out.seeds.end(),
                     [&](const auto& s) { return s.target == first; }))
      out.seeds.push_back({"", first, false});
  }
  return out;
}

}  // namespace broker::sandbox
