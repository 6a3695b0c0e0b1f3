#include "config/program_identity.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

namespace broker::config {
namespace {

// `path` is `dir` or lies under it ("/a/b" is within "/a", "/ab" is not; all is within "/").
bool within(const std::string& path, const std::string& dir) {
  return path == dir || dir == "/" ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

class through_places final : public session_writes {
 public:
  explicit through_places(std::vector<std::string> places) : places_(std::move(places)) {}
  bool can_change(const std::string& path) const override {
    for (const auto& place : places_)
      if (within(path, place)) return true;
    return false;
  }

 private:
  std::vector<std::string> places_;
};

class user_writes final : public session_writes {
 public:
  bool can_change(const std::string& path) const override {
    // A link's own permissions mean nothing; a file's do. Then whoever can write a directory
    // above it can rename that away and put another file there.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISLNK(st.st_mode) && writable(path)) return true;
    for (std::string dir = path; dir.size() > 1;) {
      dir.erase(std::max<std::size_t>(dir.rfind('/'), 1));
      if (writable(dir)) return true;
    }
    return false;
  }

 private:
  static bool writable(const std::string& path) {
    return ::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0;
  }
};

// Pushes the names of `path` onto `pending` so that the first comes off first.
void push_names(std::string_view path, std::vector<std::string>& pending) {
  for (std::size_t end = path.size(); end > 0;) {
    const std::size_t slash = path.rfind('/', end - 1);
    const std::size_t start = slash == std::string_view::npos ? 0 : slash + 1;
    if (end > start) pending.emplace_back(path.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    end = slash;
  }
}

// At most as many links as the kernel follows in one lookup.
constexpr int max_links = 40;

bool holder_runs(const std::string& entry, const program_holder& holder,
                 const session_writes& writes) {
  if (!holder.file) return false;
  if (!is_program_glob(entry)) return protected_file(entry, writes) == holder.file;
  if (holder.exe.empty() || ::fnmatch(entry.c_str(), holder.exe.c_str(), 0) != 0) return false;
  return protected_file(holder.exe, writes) == holder.file;
}

}  // namespace

std::shared_ptr<const session_writes> session_writes::through(std::vector<std::string> places) {
  return std::make_shared<through_places>(std::move(places));
}

std::shared_ptr<const session_writes> session_writes::user() {
  return std::make_shared<user_writes>();
}

std::optional<file_id> protected_file(const std::string& path, const session_writes& writes) {
  if (!path.starts_with('/')) return std::nullopt;
  // Resolved name by name, as the kernel would, so that every link on the way is looked at: one
  // the session could point elsewhere makes the whole path the session's to choose.
  std::vector<std::string> pending;
  push_names(path, pending);
  std::string at;  // the real directories resolved so far; "" is "/"
  int links = 0;
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      at.erase(at.empty() ? 0 : at.rfind('/'));
      continue;
    }
    std::string next = at + "/" + name;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) return std::nullopt;
    if (!S_ISLNK(st.st_mode)) {
      at = std::move(next);
      continue;
    }
    if (++links > max_links || writes.can_change(next)) return std::nullopt;
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target);
    if (n <= 0 || static_cast<std::size_t>(n) == sizeof target) return std::nullopt;
    const std::string_view text(target, static_cast<std::size_t>(n));
    if (text.starts_with('/')) at.clear();
    push_names(text, pending);
  }
  if (at.empty() || writes.can_change(at)) return std::nullopt;
  struct stat st {};
  if (::stat(at.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return file_id{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

bool is_program_glob(std::string_view entry) {
  return entry.find_first_of("*?[") != std::string_view::npos;
}

bool program_matches(const std::vector<std::string>& entries, const client_identity* client) {
  if (!client || !client->complete || client->holders.empty() || !client->writes) return false;
  for (const auto& holder : client->holders) {
    bool listed = false;
    for (const auto& entry : entries)
      if ((listed = holder_runs(entry, holder, *client->writes))) break;
    if (!listed) return false;
  }
  return true;
}

}  // namespace broker::config
