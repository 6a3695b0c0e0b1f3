#include "sandbox/private_dirs.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string_view>

#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> canonical(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::error_code ec;
  auto p = fs::canonical(path, ec);
  if (ec) return std::nullopt;
  return p.string();
}

// Parents before children, a directory's own tmpfs before what is bound back onto it.
bool before(const view_step& a, const view_step& b) {
  const auto parts = [](const std::string& p) {
    std::vector<std::string_view> out;
    for (std::size_t i = 1; i <= p.size();) {
      const std::size_t end = std::min(p.find('/', i), p.size());
      if (end > i) out.emplace_back(std::string_view(p).substr(i, end - i));
      i = end + 1;
    }
    return out;
  };
  const auto pa = parts(a.path), pb = parts(b.path);
  if (pa != pb) return pa < pb;
  return a.what < b.what;  // empty, bind, layer, through
}

}  // namespace

std::vector<view_step> host_ipc_dirs(const std::string& xdg_runtime_dir) {
  std::vector<view_step> dirs{{view_step::empty, "/tmp", 01777},
                              {view_step::empty, "/var/tmp", 01777},
                              {view_step::empty, "/run", 0755},
                              {view_step::empty, "/var/run", 0755},
                              {view_step::empty, "/dev/shm", 01777}};
  if (!xdg_runtime_dir.empty()) dirs.push_back({view_step::empty, xdg_runtime_dir, 0700});
  return dirs;
}

std::vector<view_step> private_view(const std::vector<view_step>& dirs,
                                    const std::vector<std::string>& kept,
                                    const std::vector<std::string>& layers,
                                    const std::vector<std::string>& through) {
  std::vector<view_step> steps;
  const auto seen = [&](const std::string& path, view_step::kind what) {
    return std::any_of(steps.begin(), steps.end(),
                       [&](const view_step& s) { return s.path == path && s.what == what; });
  };
  for (const auto& dir : dirs)
    if (auto c = canonical(dir.path); c && *c != "/" && !seen(*c, view_step::empty))
      steps.push_back({view_step::empty, *c, dir.mode});
  for (const auto& [list, what] :
       {std::pair{&kept, view_step::bind}, std::pair{&layers, view_step::layer},
        std::pair{&through, view_step::through}})
    for (const auto& path : *list)
      if (auto c = canonical(path); c && *c != "/" && !seen(*c, what)) steps.push_back({what, *c});
  // A place that is itself one of the directories is not made private at all: binding it back
  // would bring along the tmpfs mounted on that very directory. A kept path that is a layer or
  // a place bound through needs no bind of its own.
  std::erase_if(steps, [&](const view_step& s) {
    return s.what <= view_step::bind &&
           std::any_of(steps.begin(), steps.end(),
                       [&](const view_step& o) { return o.path == s.path && o.what > s.what; });
  });
  std::sort(steps.begin(), steps.end(), before);
  std::vector<view_step> needed;
  for (auto& step : steps) {
    const view_step* nearest = nullptr;
    for (const auto& s : needed)
      if (within(step.path, s.path)) nearest = &s;
    const auto holder = nearest ? nearest->what : view_step::bind;  // none: the host's, bound
    // A kept path matters where the nearest step holding it made things empty or a layer; the
    // host's own view or a place bound in shows it already.
    if (step.what == view_step::bind && (holder == view_step::bind || holder == view_step::through))
      continue;
    // A layer or through place within one of its own kind is covered by it already.
    if ((step.what == view_step::layer || step.what == view_step::through) && nearest &&
        holder == step.what)
      continue;
    needed.push_back(std::move(step));
  }
  return needed;
}

std::string find_command(const std::string& command, const std::string& path_variable,
                         const std::string& cwd) {
  if (command.empty()) return {};
  const auto from = [&](std::string_view p) {
    return p.starts_with('/') ? fs::path(p) : fs::path(cwd) / p;
  };
  if (command.find('/') != std::string::npos) return from(command).lexically_normal().string();
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = path_variable.find(':', start);
    const auto dir = std::string_view(path_variable).substr(start, colon - start);
    const auto candidate = (from(dir.empty() ? "." : dir) / command).lexically_normal();
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate))
      return candidate.string();
    if (colon == std::string::npos) return {};
    start = colon + 1;
  }
}

}  // namespace broker::sandbox
