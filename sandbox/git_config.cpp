#include "sandbox/git_config.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "base/child_process.hpp"
#include "base/text.hpp"
#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

// A git run is short; one that is not is ended.
constexpr auto git_time = std::chrono::seconds(10);

// The git to run: the system's first, then the broker's PATH.
std::string git_program() {
  std::vector<std::string> dirs{"/usr/bin", "/bin", "/usr/local/bin"};
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    if (colon > start && path[start] == '/') dirs.push_back(path.substr(start, colon - start));
    start = colon + 1;
  }
  return base::find_program("git", dirs);
}

// git with `args`, in an environment of its own: no system or global configuration, no
// terminal prompt, no pager, and every configured command that could run (fsmonitor, hooks)
// turned off on its command line. Its output (bounded) and whether it exited 0.
std::optional<std::string> run_git(std::vector<std::string> args) {
  static const std::string git = git_program();
  if (git.empty()) return std::nullopt;
  base::program_run run;
  run.program = git;
  run.args = {"-c", "core.fsmonitor=false", "-c",        "core.hooksPath=/dev/null",
              "-c", "safe.directory=*",     "--no-pager"};
  run.args.insert(run.args.end(), args.begin(), args.end());
  run.env = {"PATH=/usr/local/bin:/usr/bin:/bin",
             "HOME=/nonexistent",
             "GIT_CONFIG_NOSYSTEM=1",
             "GIT_CONFIG_GLOBAL=/dev/null",
             "GIT_TERMINAL_PROMPT=0",
             "GIT_OPTIONAL_LOCKS=0",
             "LC_ALL=C"};
  run.time = git_time;
  auto result = base::run_program(run);
  if (!result.ran || result.exit_code != 0) return std::nullopt;
  return std::move(result.output);
}

// Keys that say how the repository is laid out and where its history comes from and goes:
// "section.name" or "section.*.name" (any subsection), section and name as git prints them.
constexpr const char* data_keys[] = {
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "core.quotepath",
    "core.compression",
    "core.loosecompression",
    "core.abbrev",
    "core.checkstat",
    "core.trustctime",
    "core.splitindex",
    "core.untrackedcache",
    "core.commitgraph",
    "core.multipackindex",
    "core.bigfilethreshold",
    "extensions.objectformat",
    "extensions.worktreeconfig",
    "extensions.preciousobjects",
    "extensions.partialclone",
    "extensions.refstorage",
    "extensions.noop",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.mirror",
    "remote.*.tagopt",
    "remote.*.prune",
    "remote.*.prunetags",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    "remote.*.skipdefaultupdate",
    "remote.*.skipfetchall",
    "branch.*.remote",
    "branch.*.pushremote",
    "branch.*.merge",
    "branch.*.rebase",
    "branch.*.description",
    "user.name",
    "user.email",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "fetch.prunetags",
    "submodule.*.url",
    "submodule.*.active",
    "submodule.*.branch",
    "submodule.*.fetchrecursesubmodules",
    "submodule.*.ignore",
    "submodule.*.shallow",
    "lfs.repositoryformatversion",
    "lfs.*.access",
    "gc.auto",
    "index.version",
    "maintenance.auto",
};

bool key_matches(std::string_view pattern, const std::string& key) {
  const std::size_t first = pattern.find('.'), last = pattern.rfind('.');
  const std::string_view section = pattern.substr(0, first), name = pattern.substr(last + 1);
  const std::size_t kfirst = key.find('.'), klast = key.rfind('.');
  if (kfirst == std::string::npos) return false;
  if (key.substr(0, kfirst) != section || key.substr(klast + 1) != name) return false;
  const bool has_subsection = klast > kfirst;
  return (first == last) ? !has_subsection : has_subsection;
}

}  // namespace

std::optional<std::vector<git_entry>> read_git_config(const std::string& file) {
  auto out = run_git({"config", "--file", file, "--no-includes", "--null", "--list"});
  if (!out) return std::nullopt;
  std::vector<git_entry> entries;
  for (std::size_t start = 0; start < out->size();) {
    std::size_t end = out->find('\0', start);
    if (end == std::string::npos) end = out->size();
    const std::string item = out->substr(start, end - start);
    start = end + 1;
    const std::size_t newline = item.find('\n');
    if (newline == std::string::npos)
      entries.push_back({item, std::nullopt});
    else
      entries.push_back({item.substr(0, newline), item.substr(newline + 1)});
  }
  return entries;
}

bool git_data_entry(const git_entry& entry, const std::string& git_dir,
                    const std::vector<std::string>& workspaces) {
  if (entry.key == "core.worktree") {
    if (!entry.value || entry.value->empty()) return false;
    fs::path to(*entry.value);
    if (to.is_relative()) to = fs::path(git_dir) / to;
    std::error_code ec;
    const auto resolved = fs::weakly_canonical(to, ec);
    if (ec) return false;
    return std::any_of(workspaces.begin(), workspaces.end(), [&](const std::string& w) {
      return w != "/" && within(resolved.string(), w);
    });
  }
  return std::any_of(std::begin(data_keys), std::end(data_keys),
                     [&](const char* pattern) { return key_matches(pattern, entry.key); });
}

bool write_git_config(const std::string& file, const std::vector<git_entry>& entries) {
  // An empty file is a valid configuration; each entry is added to it in turn.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  for (const auto& e : entries) {
    std::vector<std::string> args{"config", "--file", file, "--add", e.key};
    args.push_back(e.value.value_or("true"));
    if (!run_git(std::move(args))) return false;
  }
  return true;
}

std::vector<std::string> git_tracked(const std::string& worktree,
                                     const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  std::vector<std::string> args{"-C", worktree, "ls-files", "-z", "--"};
  for (const auto& p : paths) args.push_back(p);
  const auto out = run_git(std::move(args));
  std::vector<std::string> tracked;
  if (!out) return tracked;
  for (std::size_t start = 0; start < out->size();) {
    std::size_t end = out->find('\0', start);
    if (end == std::string::npos) end = out->size();
    if (end > start) tracked.push_back(out->substr(start, end - start));
    start = end + 1;
  }
  return tracked;
}

}  // namespace broker::sandbox
