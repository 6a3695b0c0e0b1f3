#include "sandbox/session_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "config/program_identity.hpp"
#include "sandbox/file_masks.hpp"
#include "sandbox/git_dirs.hpp"
#include "sandbox/path_lists.hpp"
#include "sandbox/private_dirs.hpp"
#include "session/audit_log.hpp"
#include "session/audit_record.hpp"
#include "session/session_dir.hpp"

namespace broker::sandbox {

namespace {

std::string env_of(const std::vector<std::pair<std::string, std::string>>& env,
                   std::string_view name) {
  for (const auto& [n, v] : env)
    if (n == name) return v;
  return {};
}

// The regular files the layers' "programs" name by path (not by glob), canonical.
std::vector<std::string> program_files(const std::vector<config::policy>& layers) {
  std::vector<std::string> out;
  const auto add = [&](const std::vector<std::string>& programs) {
    for (const auto& entry : programs) {
      if (config::is_program_glob(entry)) continue;
      std::error_code ec;
      const auto real = std::filesystem::canonical(entry, ec);
      if (!ec && std::filesystem::is_regular_file(real, ec)) add_unique(out, real.string());
    }
  };
  for (const auto& layer : layers) {
    for (const auto& r : layer.allow) add(r.programs);
    for (const auto& [name, c] : layer.credentials) add(c.programs);
  }
  return out;
}

std::string read_mountinfo() {
  std::ifstream in("/proc/self/mountinfo");
  return {std::istreambuf_iterator<char>(in), {}};
}

// The stderr lines a session prints of what it kept out; the rest are in `broker keep --list`.
constexpr std::size_t max_kept_lines = 20;

}  // namespace

session_files::session_files(const session_files_inputs& in, launch_options& launch,
                             std::vector<std::string>& warnings)
    : in_(in) {
  const auto& layers = *in.layers;
  launch.masks = credential_file_masks(layers, in.home);
  std::vector<std::string> unhidden;
  for (auto& m : broker_state_masks(layers, in.log_dir, in.home, in.cwd, &unhidden))
    launch.masks.push_back(std::move(m));
  // A login file's copy is what the child sees there: no mask covers it (gh's hosts.yml is
  // under a masked ~/.config/gh).
  std::erase_if(launch.masks, [&](const std::string& mask) {
    return std::any_of(in.login_copies.begin(), in.login_copies.end(),
                       [&](const auto& f) { return within(f.second, mask); });
  });
  if (!in.netns) return;
  for (const auto& path : unhidden)
    warnings.push_back(path +
                       " holds the working directory, so the command can read and change it");

  home_rule_inputs rule_inputs;
  rule_inputs.home = in.home;
  rule_inputs.env = in.env;
  rule_inputs.layers = layers;
  rule_inputs.root = ::geteuid() == 0;
  rules_ = std::make_unique<home_rules>(rule_inputs);
  started_ = std::make_unique<start_files>(*rules_);

  layer_inputs plan;
  plan.home = in.home;
  plan.cwd = in.cwd;
  plan.workspaces = in.workspaces;
  plan.env = in.env;
  plan.root = rule_inputs.root;
  plan.rules = rules_.get();
  plan.masks = launch.masks;
  plan.login_copies = in.login_copies;
  plan.kept = in.kept;
  for (auto& path : passed_paths(layers, in.home)) plan.kept.push_back(std::move(path));
  // The programs the policy names by path are the host's files inside too, read-only, even in a
  // layer (through which the file the command ran would be the layer's, not the host's:
  // docs/policy.md, "programs", compares device and inode).
  for (auto& path : program_files(layers)) plan.kept.push_back(std::move(path));
  plan.private_dirs = host_ipc_dirs(env_of(in.env, "XDG_RUNTIME_DIR"));
  // Where sessions' control sockets live is the broker's own state: empty even under a /tmp the
  // working directory keeps.
  plan.private_dirs.push_back({view_step::empty, session::runtime_base().string(), 0700});
  plan.mountinfo = read_mountinfo();
  plan_ = plan_layers(plan);
  for (auto& w : plan_.warnings) warnings.push_back(std::move(w));
  launch.private_view = plan_.steps;
  launch.seeds = plan_.seeds;
  launch.layer_bytes = layer_bytes;
  launch.scratch = rules_->scratch_directories();

  // What carries commands where the session writes through, saved now to be judged at the end:
  // the workspaces, and the rules' places but the caches.
  std::vector<std::string> roots = plan_.workspaces;
  for (const auto& path : plan_.through) {
    const home_rule* rule = rules_->find(path);
    if (!rule || !rule->cache) add_unique(roots, path);
  }
  // Not the layers in them (a home inside the working directory): what the session changed
  // there is judged by their own rules.
  std::vector<std::string> skip{in.log_dir};
  skip.insert(skip.end(), plan_.layers.begin(), plan_.layers.end());
  workspace_ = std::make_unique<workspace_guard>(roots, plan_.workspaces, skip);
  for (const auto& w : workspace_->warnings()) warnings.push_back(w);
  launch.read_only = readonly_paths(layers, in.home);
  for (const auto& path : workspace_->read_only()) add_unique(launch.read_only, path);
  // The workspace's own repository above it, held read-only while the session runs.
  for (auto& path : protected_git_paths(in.cwd)) add_unique(launch.read_only, path);
}

std::vector<std::string> session_files::written_through() const {
  std::vector<std::string> places = plan_.workspaces;
  places.insert(places.end(), plan_.through.begin(), plan_.through.end());
  return places;
}

void session_files::launched(child_session& child, std::vector<std::string>& warnings) {
  if (!in_.netns) return;
  mounted_ = child.layers_mounted();
  upper_ = child.take_layer_upper();
  for (std::size_t i = 0; i < plan_.layers.size(); ++i)
    if (i >= mounted_.size() || !mounted_[i])
      warnings.push_back("the kernel would not stack a copy-on-write layer over " +
                         plan_.layers[i] + ": it is read-only for the command");
}

std::vector<kept_out> session_files::end(const std::string& kept_root,
                                         std::vector<std::string>& warnings) {
  if (!in_.netns) return {};
  layer_return_inputs back;
  back.upper = upper_;
  back.layers = plan_.layers;
  back.mounted = mounted_;
  back.rules = rules_.get();
  back.started = started_.get();
  back.home = in_.home;
  back.workspaces = plan_.workspaces;
  for (const auto& seed : plan_.seeds) back.placed.push_back(seed.target);
  auto returned = return_layers(back, kept_root);
  if (upper_ >= 0) ::close(std::exchange(upper_, -1));  // the layers' memory goes with it
  workspace_->judge(kept_root, returned.kept, returned.warnings);
  for (auto& w : returned.warnings) warnings.push_back(std::move(w));
  return std::move(returned.kept);
}

void report_kept_out(const std::vector<kept_out>& kept, const std::string& session_id,
                     session::audit_log& audit) {
  std::size_t printed = 0, more = 0;
  for (const auto& k : kept) {
    const char* change = k.what == kept_out::dropped   ? "dropped"
                         : k.what == kept_out::removed ? "removed"
                                                       : "set_aside";
    audit.write(session::kept_out_record(k.path, k.reason, k.kept, change));
    if (k.what == kept_out::dropped || (k.stored && !k.store_changed)) continue;
    if (printed == max_kept_lines) {
      ++more;
      continue;
    }
    ++printed;
    std::cerr << "broker: kept out: " << k.path << " (" << k.reason << ")";
    if (!k.kept.empty()) std::cerr << " -> " << k.kept;
    std::cerr << "\n";
  }
  if (more) std::cerr << "broker: kept out: " << more << " more\n";
  if (printed)
    std::cerr << "broker: to review: broker keep " << session_id
              << " --list | --diff; to take one in: broker keep " << session_id << " PATH\n";
}

}  // namespace broker::sandbox
