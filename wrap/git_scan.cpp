#include "wrap/git_scan.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <memory>

#include "base/text.hpp"

namespace broker::wrap {

namespace {

bool at_or_after(const timespec& t, const timespec& since) {
  return t.tv_sec > since.tv_sec || (t.tv_sec == since.tv_sec && t.tv_nsec >= since.tv_nsec);
}

bool changed_since(const struct stat& st, const timespec& since) {
  return at_or_after(st.st_mtim, since) || at_or_after(st.st_ctim, since);
}

class walker {
 public:
  walker(const timespec& since, const std::vector<std::string>& skip, const git_scan_limits& l)
      : since_(since),
        skip_(skip),
        limits_(l),
        deadline_(std::chrono::steady_clock::now() + l.time) {}

  void walk(const std::string& dir, int depth) {
    if (!complete || depth > 64) return;
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d) return;
    while (const dirent* e = ::readdir(d.get())) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (++seen_ > limits_.entries || std::chrono::steady_clock::now() > deadline_) {
        complete = false;
        return;
      }
      const std::string path = dir + "/" + name;
      struct stat st {};
      if (::lstat(path.c_str(), &st) < 0 || !S_ISDIR(st.st_mode)) continue;
      if (std::find(skip_.begin(), skip_.end(), path) != skip_.end()) continue;
      if (name == ".git") {
        git_dir(path);
        continue;
      }
      walk(path, depth + 1);
    }
  }

  std::vector<git_leftover> found;
  bool complete = true;

 private:
  void git_dir(const std::string& git) {
    const std::string hooks = git + "/hooks";
    if (std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(hooks.c_str()), ::closedir); d) {
      while (const dirent* e = ::readdir(d.get())) {
        const std::string name = e->d_name;
        if (name == "." || name == ".." || name.ends_with(".sample")) continue;
        struct stat st {};
        const std::string path = hooks + "/" + name;
        if (::lstat(path.c_str(), &st) == 0 && changed_since(st, since_))
          found.push_back({path, "a git hook"});
      }
    }
    for (const char* file : {"/config", "/config.worktree"}) {
      const std::string path = git + file;
      struct stat st {};
      if (::lstat(path.c_str(), &st) < 0 || !S_ISREG(st.st_mode) || !changed_since(st, since_))
        continue;
      std::ifstream in(path);
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      if (git_config_runs_commands(text)) found.push_back({path, "git configuration"});
    }
  }

  timespec since_;
  const std::vector<std::string>& skip_;
  git_scan_limits limits_;
  std::chrono::steady_clock::time_point deadline_;
  std::size_t seen_ = 0;
};

}  // namespace

bool git_config_runs_commands(const std::string& text) {
  std::string section;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = base::lower(text.substr(begin, end - begin));
    begin = end + 1;
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';') continue;
    line = line.substr(first);
    if (line.front() == '[') {
      section = line.substr(1, line.find_first_of(" \"]") - 1);
      // A section line may carry a key after it ("[core] fsmonitor = x").
      const std::size_t close = line.find(']');
      if (close == std::string::npos) continue;
      line = line.substr(close + 1);
      const std::size_t k = line.find_first_not_of(" \t");
      if (k == std::string::npos) continue;
      line = line.substr(k);
    }
    const std::string key = line.substr(0, line.find_first_of(" \t="));
    std::string value;
    if (const std::size_t eq = line.find('='); eq != std::string::npos)
      if (const std::size_t v = line.find_first_not_of(" \t", eq + 1); v != std::string::npos)
        value = line.substr(v);
    if (section == "core" && (key == "fsmonitor" || key == "hookspath" || key == "sshcommand" ||
                              key == "pager" || key == "editor" || key == "askpass"))
      return true;
    if (section == "filter" || section == "credential" || section == "include" ||
        section == "includeif" || section == "sequence" || section == "gpg")
      return true;
    if ((section == "diff" || section == "merge") &&
        (key == "textconv" || key == "command" || key == "driver"))
      return true;
    if (section == "alias" && value.starts_with("!")) return true;
    if (key == "sshcommand" || key == "uploadpack" || key == "receivepack" || key == "proxy")
      return true;
  }
  return false;
}

std::vector<git_leftover> git_leftovers(const std::string& root, const timespec& since,
                                        const std::vector<std::string>& skip, bool& complete,
                                        const git_scan_limits& limits) {
  walker w(since, skip, limits);
  w.walk(root, 0);
  complete = w.complete;
  return w.found;
}

}  // namespace broker::wrap
