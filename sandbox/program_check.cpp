#include "sandbox/program_check.hpp"

#include <algorithm>
#include <filesystem>

#include "config/program_identity.hpp"
#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

std::string normal(const std::string& path) {
  std::string p = fs::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// `path` as given and, where links make it another, as the kernel names it (an executable's
// path is always the latter).
void add_place(std::vector<writable_place>& out, const std::string& path, writable_place::kind what,
               const std::string& name) {
  if (!path.starts_with('/')) return;
  std::error_code ec;
  const auto real = fs::weakly_canonical(path, ec);
  for (const auto& p : {normal(path), ec ? std::string() : normal(real.string())})
    if (!p.empty() &&
        std::none_of(out.begin(), out.end(), [&](const writable_place& w) { return w.path == p; }))
      out.push_back({p, what, name});
}

std::string env_value(const home_rule_inputs& in, std::string_view name) {
  for (const auto& [n, v] : in.env)
    if (n == name) return v;
  return {};
}

// The directory before a glob's first wildcard; "" when the glob starts with one.
std::string fixed_directory(const std::string& glob) {
  const std::size_t wildcard = glob.find_first_of("*?[");
  const std::size_t slash = wildcard == 0 ? std::string::npos : glob.rfind('/', wildcard);
  if (slash == std::string::npos) return {};
  return normal(glob.substr(0, std::max<std::size_t>(slash, 1)));
}

std::string quoted(const std::string& text) {
  return "\"" + text + "\"";
}

// Why `entry` is refused; "" when it is not.
std::string problem_with(const std::string& entry, const std::vector<writable_place>& places) {
  if (config::is_program_glob(entry)) {
    const std::string dir = fixed_directory(entry);
    if (dir.empty())
      return quoted(entry) +
             " could match a file the session can write: a glob starting with \"*\" matches a "
             "file in any directory, the session's own /tmp among them; name the program by its "
             "absolute path";
    for (const auto& place : places) {
      if (!within(dir, place.path) && !within(place.path, dir)) continue;
      return quoted(entry) + " could match a file the session can write: " +
             (within(dir, place.path) ? "it lies in " : "it reaches into ") + place.path + " (" +
             place.name + "); name the program by its absolute path";
    }
    return {};
  }
  const std::string path = normal(entry);
  std::error_code ec;
  const std::string real = normal(fs::weakly_canonical(path, ec).string());
  for (const auto& place : places)
    if (place.what == writable_place::through &&
        (within(path, place.path) || (!ec && within(real, place.path))))
      return quoted(entry) + " names a file the session can change: it lies in " + place.path +
             " (" + place.name + "); there it could be any program by the time it runs";
  return {};
}

void check_list(const std::string& file, const std::string& key_prefix, int fallback_line,
                const std::vector<std::string>& programs, const std::vector<int>& lines,
                const std::vector<writable_place>& places, std::vector<program_problem>& out) {
  for (std::size_t i = 0; i < programs.size(); ++i) {
    std::string why = problem_with(programs[i], places);
    if (why.empty()) continue;
    out.push_back({file, i < lines.size() ? lines[i] : fallback_line,
                   key_prefix + ".programs[" + std::to_string(i) + "]", std::move(why)});
  }
}

}  // namespace

std::vector<writable_place> session_write_places(const home_rule_inputs& in,
                                                 const std::vector<std::string>& workspaces) {
  std::vector<writable_place> out;
  const std::string own = "private to the session, empty at its start";
  for (const char* dir : {"/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm", "/dev"})
    add_place(out, dir, writable_place::own, own);
  add_place(out, env_value(in, "XDG_RUNTIME_DIR"), writable_place::own, own);
  const home_rules rules(in);
  for (const auto& dir : rules.scratch_directories()) add_place(out, dir, writable_place::own, own);
  if (!in.home.empty() && in.home != "/")
    add_place(out, in.home, writable_place::layer,
              "the home, a copy-on-write layer the session writes in");
  for (const char* name : {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"})
    add_place(out, env_value(in, name), writable_place::layer,
              std::string("$") + name + ", a copy-on-write layer the session writes in");
  if (in.root)
    for (const char* dir : {"/etc", "/usr", "/var", "/opt"})
      add_place(out, dir, writable_place::layer,
                "a copy-on-write layer the session writes in, as its command runs as root");
  // Never the home nor "/", which wrap takes for no workspace (layer_plan.hpp).
  std::error_code ec;
  const auto real_home = fs::weakly_canonical(in.home.empty() ? "/" : in.home, ec);
  for (const auto& w : workspaces) {
    const auto real = fs::weakly_canonical(w, ec);
    if (!ec && real != "/" && real != real_home)
      add_place(out, w, writable_place::through, "a workspace, written through to the host");
  }
  const auto writable = writable_paths(in.layers, in.home);
  for (const auto& rule : rules.all()) {
    if (rule.what != home_rule::through) continue;
    // A rule's last name may end in "*" (any name so starting): its directory is the place.
    std::string path = rule.path;
    if (path.ends_with('*')) path = fs::path(path).parent_path().string();
    const bool asked = std::find(writable.begin(), writable.end(), rule.path) != writable.end();
    add_place(out, path, writable_place::through,
              asked        ? "files.writable, written through to the host"
              : rule.cache ? "a cache, written through to the host"
                           : "an agent's data, written through to the host");
  }
  return out;
}

std::string program_problem::text() const {
  return file + ":" + std::to_string(line) + ": " + key + ": " + message;
}

std::vector<program_problem> program_problems(const std::vector<config::policy>& layers,
                                              const std::vector<writable_place>& places) {
  std::vector<program_problem> out;
  for (const auto& layer : layers) {
    for (const auto& r : layer.allow)
      check_list(layer.source, r.name, r.line, r.programs, r.program_lines, places, out);
    for (const auto& [name, c] : layer.credentials)
      check_list(layer.source, "credentials." + name, c.line, c.programs, c.program_lines, places,
                 out);
  }
  return out;
}

}  // namespace broker::sandbox
