// Real files standing for programs, for the "programs" tests (docs/policy.md): a fresh directory of
// regular files, and connections whose holders run them as attribution would find them (the
// executable's path, device and inode).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "config/program_identity.hpp"

namespace broker::test {

class program_files {
 public:
  program_files() {
    std::string text = (std::filesystem::temp_directory_path() / "broker-programs-XXXXXX").string();
    root_ = ::mkdtemp(text.data()) ? std::filesystem::canonical(text) : std::filesystem::path();
  }
  ~program_files() {
    std::error_code ec;
    if (!root_.empty()) std::filesystem::remove_all(root_, ec);
  }
  program_files(const program_files&) = delete;
  program_files& operator=(const program_files&) = delete;

  // `relative` made as a regular file under the directory (parents too); its absolute path.
  std::string add(const std::string& relative) {
    const auto path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << relative << "\n";
    return path.string();
  }
  // A link at `relative` to `target`; its absolute path.
  std::string link(const std::string& relative, const std::string& target) {
    const auto path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::filesystem::create_symlink(target, path);
    return path.string();
  }
  std::string path(const std::string& relative) const { return (root_ / relative).string(); }

  // A connection held by processes running `exes` (absolute paths, as /proc/PID/exe reads; a
  // file that does not exist is an unreadable one), with what the session can change.
  static std::shared_ptr<const config::client_identity> held_by(
      const std::vector<std::string>& exes,
      std::shared_ptr<const config::session_writes> writes = config::session_writes::through({}),
      bool complete = true) {
    auto client = std::make_shared<config::client_identity>();
    int pid = 1000;
    for (const auto& exe : exes) {
      config::program_holder h{pid--, exe, std::nullopt};
      if (struct stat st{}; ::stat(exe.c_str(), &st) == 0)
        h.file = config::file_id{static_cast<std::uint64_t>(st.st_dev),
                                 static_cast<std::uint64_t>(st.st_ino)};
      client->holders.push_back(std::move(h));
    }
    client->complete = complete;
    client->writes = std::move(writes);
    return client;
  }

 private:
  std::filesystem::path root_;
};

}  // namespace broker::test
