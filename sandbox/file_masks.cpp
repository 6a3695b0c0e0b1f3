#include "sandbox/file_masks.hpp"

#include <algorithm>
#include <filesystem>

#include "base/text.hpp"

namespace broker::sandbox {

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

std::vector<std::string> agreed_paths(const std::vector<config::policy>& layers,
                                      std::vector<std::string> config::files_spec::*list,
                                      const std::string& home, bool absolute_paths) {
  std::vector<std::string> agreed;
  bool first = true;
  for (const auto& layer : layers) {
    const auto& listed = layer.files.*list;
    if (listed.empty()) continue;
    std::vector<std::string> mine;
    for (const auto& p : listed) {
      const std::string path = expand(p, home);
      add_path(mine, absolute_paths ? absolute(path) : path);
    }
    if (first)
      agreed = std::move(mine);
    else
      std::erase_if(agreed, [&](const std::string& p) {
        return std::find(mine.begin(), mine.end(), p) == mine.end();
      });
    first = false;
  }
  return agreed;
}

std::vector<std::string> passed_paths(const std::vector<config::policy>& layers,
                                      const std::string& home) {
  return agreed_paths(layers, &config::files_spec::pass, home, false);
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
      // A login file is shown to the child as its dummy copy instead (docs/agents.md).
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

}  // namespace broker::sandbox
