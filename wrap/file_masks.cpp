#include "wrap/file_masks.hpp"

#include <algorithm>
#include <filesystem>

#include "base/text.hpp"

namespace broker::wrap {

namespace {

constexpr const char* well_known[] = {
    "~/.aws",
    "~/.config/gh",
    "~/.config/gcloud",
    "~/.azure",
    "~/.netrc",
    "~/.git-credentials",
    "~/.docker/config.json",
    "~/.npmrc",
    "~/.pypirc",
    "~/.kube/config",
    "~/.config/broker/ca",
    // Gemini CLI's key store where there is no system keychain: encrypted with a key anyone can
    // derive (the host and user names), so as good as the key itself.
    "~/.gemini/gemini-credentials.json",
};

// What a program outside the session later runs, or fetches code from (DESIGN §8.1), and why.
constexpr std::pair<const char*, const char*> persistence[] = {
    {"~/.bashrc", "a shell startup file"},
    {"~/.bash_profile", "a shell startup file"},
    {"~/.bash_login", "a shell startup file"},
    {"~/.bash_logout", "a shell startup file"},
    {"~/.profile", "a shell startup file"},
    {"~/.zshrc", "a shell startup file"},
    {"~/.zprofile", "a shell startup file"},
    {"~/.zshenv", "a shell startup file"},
    {"~/.zlogin", "a shell startup file"},
    {"~/.config/fish", "a shell startup file"},
    {"~/.gitconfig", "git configuration"},
    {"~/.config/git", "git configuration"},
    {"~/.ssh/config", "ssh configuration"},
    {"~/.ssh/authorized_keys", "ssh configuration"},
    {"~/.config/systemd", "systemd user units"},
    {"~/.config/autostart", "autostart entries"},
    {"~/.config/pip", "a package manager's sources"},
    {"~/.pip/pip.conf", "a package manager's sources"},
    {"~/.pydistutils.cfg", "a package manager's sources"},
    {"~/.npmrc", "a package manager's sources"},
    {"~/.yarnrc", "a package manager's sources"},
    {"~/.yarnrc.yml", "a package manager's sources"},
    {"~/.cargo/config", "a package manager's sources"},
    {"~/.cargo/config.toml", "a package manager's sources"},
    {"~/.m2/settings.xml", "a package manager's sources"},
    {"~/.gradle/init.d", "a package manager's init scripts"},
    {"~/.gradle/gradle.properties", "a package manager's sources"},
    {"~/.bundle/config", "a package manager's sources"},
    {"~/.gemrc", "a package manager's sources"},
};

// Programs an agent installs under its own directory and runs later outside the session (Codex
// starts its app-server daemon from there), and the state of what runs them: made inside, they
// are removed when it ends (the agent installs them again in the next session), and existing
// ones are shown as empty private directories (scratch_directories).
constexpr std::pair<const char*, const char*> agent_programs[] = {
    {"~/.codex/packages", "an agent's own programs, run outside the session later"},
    // Its daemon's pid files and sockets: the daemon ends with the session, and left behind they
    // name one that is gone (Codex then looks for a daemon that is not installed, and stops).
    {"~/.codex/app-server-daemon", "an agent's background server's state, ended with the session"},
    {"~/.codex/app-server-control", "an agent's background server's state, ended with the session"},
};

std::string expand(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.rfind("~/", 0) == 0) return home + path.substr(1);
  return path;
}

// An absolute, lexically normal path (a relative one from the working directory).
std::string absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return (ec ? std::filesystem::path(path) : p).lexically_normal().string();
}

void add_path(std::vector<std::string>& list, std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (std::find(list.begin(), list.end(), path) == list.end()) list.push_back(std::move(path));
}

}  // namespace

std::vector<std::string> passed_paths(const std::vector<config::policy>& layers,
                                      const std::string& home) {
  // A path is passed only when every layer that passes anything passes it.
  std::vector<std::string> passed;
  bool first = true;
  for (const auto& layer : layers) {
    if (layer.files.pass.empty()) continue;
    std::vector<std::string> mine;
    for (const auto& p : layer.files.pass) add_path(mine, expand(p, home));
    if (first) {
      passed = mine;
      first = false;
    } else {
      std::erase_if(passed, [&](const std::string& p) {
        return std::find(mine.begin(), mine.end(), p) == mine.end();
      });
    }
  }
  return passed;
}

std::vector<std::string> credential_file_masks(const std::vector<config::policy>& layers,
                                               const std::string& home) {
  std::vector<std::string> masks;
  if (!home.empty()) {
    for (const char* p : well_known) add_path(masks, expand(p, home));
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(home + "/.ssh", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("id_", 0) == 0 && !name.ends_with(".pub"))
        add_path(masks, entry.path().string());
    }
  }
  for (const auto& layer : layers)
    for (const auto& m : layer.files.mask) add_path(masks, expand(m, home));
  const auto passed = passed_paths(layers, home);
  std::erase_if(masks, [&](const std::string& m) {
    return std::find(passed.begin(), passed.end(), m) != passed.end();
  });
  return masks;
}

std::vector<protected_path> persistence_paths(const std::vector<config::policy>& layers,
                                              const std::string& home) {
  std::vector<protected_path> out;
  const auto add = [&](std::string path, const char* why) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (std::none_of(out.begin(), out.end(), [&](const auto& p) { return p.path == path; }))
      out.push_back({std::move(path), why});
  };
  // files.writable opens a path of the floor when every layer that lists any lists it (a
  // layer can only narrow); a layer's files.readonly is never opened.
  std::vector<std::string> writable;
  bool first = true;
  for (const auto& layer : layers) {
    if (layer.files.writable.empty()) continue;
    std::vector<std::string> mine;
    for (const auto& p : layer.files.writable) add_path(mine, absolute(expand(p, home)));
    if (first)
      writable = std::move(mine);
    else
      std::erase_if(writable, [&](const std::string& w) {
        return std::find(mine.begin(), mine.end(), w) == mine.end();
      });
    first = false;
  }
  if (!home.empty())
    for (const auto& [path, why] : agent_programs) {
      std::string p = expand(path, home);
      if (std::find(writable.begin(), writable.end(), p) == writable.end()) {
        add(std::move(p), why);
        out.back().discard = true;
      }
    }
  if (!home.empty())
    for (const auto& [path, why] : persistence) {
      std::string p = expand(path, home);
      if (std::find(writable.begin(), writable.end(), p) == writable.end()) add(std::move(p), why);
    }
  for (const auto& layer : layers)
    for (const auto& p : layer.files.readonly) add(absolute(expand(p, home)), "files.readonly");
  return out;
}

namespace {

// The protected paths that exist, the discarded ones (directories, not links) or the others.
std::vector<std::string> existing_protected(const std::vector<config::policy>& layers,
                                            const std::string& home, bool discarded) {
  std::vector<std::string> out;
  for (auto& p : persistence_paths(layers, home)) {
    std::error_code ec;
    if (p.discard != discarded || !std::filesystem::exists(p.path, ec)) continue;  // not dangling
    if (discarded &&
        (!std::filesystem::is_directory(p.path, ec) || std::filesystem::is_symlink(p.path, ec)))
      continue;
    out.push_back(std::move(p.path));
  }
  return out;
}

}  // namespace

std::vector<std::string> read_only_files(const std::vector<config::policy>& layers,
                                         const std::string& home) {
  return existing_protected(layers, home, false);
}

std::vector<std::string> scratch_directories(const std::vector<config::policy>& layers,
                                             const std::string& home) {
  return existing_protected(layers, home, true);
}

std::vector<std::string> broker_state_masks(const std::vector<config::policy>& layers,
                                            const std::string& log_dir, const std::string& home,
                                            const std::string& cwd,
                                            std::vector<std::string>* unhidden) {
  std::vector<std::string> wanted;
  if (!home.empty()) add_path(wanted, home + "/.config/broker");
  if (!log_dir.empty()) add_path(wanted, absolute(expand(log_dir, home)));
  for (const auto& layer : layers) {
    if (!layer.source.empty() && layer.source.front() != '<')
      add_path(wanted, absolute(layer.source));
    for (const auto& [name, spec] : layer.credentials) {
      // A login file is shown to the child as its dummy copy instead (DESIGN §9).
      if (!spec.source.starts_with("file:") || spec.login_file) continue;
      std::string path(base::trim(std::string_view(spec.source).substr(5)));
      // An AWS shared credentials file names its profile after the last '#'.
      const std::size_t hash = path.rfind('#');
      if (spec.type == "aws-sigv4" && hash != std::string::npos &&
          path.find('/', hash) == std::string::npos)
        path.resize(hash);
      add_path(wanted, absolute(expand(path, home)));
    }
  }
  std::vector<std::string> masks;
  for (auto& path : wanted) {
    const bool holds_cwd = !cwd.empty() && (cwd == path || cwd.starts_with(path + "/"));
    if (holds_cwd || path == "/") {
      if (unhidden) unhidden->push_back(path);
      continue;
    }
    masks.push_back(std::move(path));
  }
  return masks;
}

}  // namespace broker::wrap
