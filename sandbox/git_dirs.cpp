#include "sandbox/git_dirs.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

// The first line of a small file, without its line end; empty when unreadable.
std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// `text` as a path from `base` when relative, normalized.
fs::path resolve(const fs::path& base, const std::string& text) {
  fs::path p(text);
  return (p.is_absolute() ? p : base / p).lexically_normal();
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(p, ec));
}

void add_existing(std::vector<std::string>& out, const fs::path& p) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(p, ec))) out.push_back(p.string());
}

// A git directory's own paths, then its submodules'.
void add_git_dir(std::vector<std::string>& out, const fs::path& git_dir, int depth) {
  for (const char* dir : {"hooks", "info"}) {
    const fs::path p = git_dir / dir;
    if (!is_dir(p)) ::mkdir(p.c_str(), 0755);
    if (is_dir(p)) out.push_back(p.string());
  }
  add_existing(out, git_dir / "config");
  add_existing(out, git_dir / "config.worktree");
  if (depth >= 8) return;
  // Submodules' git directories: modules/NAME, where NAME may hold slashes (modules/a/b).
  std::error_code ec;
  fs::recursive_directory_iterator it(git_dir / "modules", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    if (fs::exists(it->path() / "HEAD", ec) && is_dir(it->path() / "objects")) {
      add_git_dir(out, it->path(), depth + 1);
      it.disable_recursion_pending();
    }
  }
}

}  // namespace

std::vector<std::string> protected_git_paths(const std::string& cwd) {
  std::vector<std::string> out;
  if (cwd.empty()) return out;
  for (fs::path dir = fs::path(cwd).lexically_normal();; dir = dir.parent_path()) {
    const fs::path dot_git = dir / ".git";
    std::error_code ec;
    const auto status = fs::symlink_status(dot_git, ec);
    if (fs::is_directory(status)) {
      add_git_dir(out, dot_git, 0);
      return out;
    }
    if (fs::is_regular_file(status)) {
      // A linked worktree's or a submodule's checkout: "gitdir: PATH". The gitfile itself is
      // held too: pointed elsewhere, it would make git use a directory the child made.
      out.push_back(dot_git.string());
      const std::string line = first_line(dot_git);
      if (!line.starts_with("gitdir: ")) return out;
      const fs::path git_dir = resolve(dir, line.substr(8));
      const std::string common = first_line(git_dir / "commondir");
      if (!common.empty()) {
        add_existing(out, git_dir / "config.worktree");
        add_git_dir(out, resolve(git_dir, common), 0);
      } else {
        add_git_dir(out, git_dir, 0);
      }
      return out;
    }
    if (dir == dir.root_path() || dir.empty()) return out;
  }
}

}  // namespace broker::sandbox
