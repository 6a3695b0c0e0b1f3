#include "wrap/session_views.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "wrap/git_scan.hpp"
#include "wrap/kept.hpp"
#include "wrap/path_lists.hpp"

namespace broker::wrap {

namespace fs = std::filesystem;

fs::path views_place(const fs::path& log_dir, const std::string& session_id) {
  const std::string mine = "/dev/shm/broker-" + std::to_string(::getuid());
  struct stat st {};
  if (::mkdir(mine.c_str(), 0700) == 0 || errno == EEXIST)
    if (::lstat(mine.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid() &&
        (st.st_mode & 0077) == 0)
      return fs::path(mine) / session_id;
  return log_dir / (session_id + ".views");
}

std::vector<std::string> add_guard_views(const home_guard& guard, const std::string& cwd,
                                         const launch_options& launch,
                                         std::vector<directory_view>& views,
                                         const fs::path& views_dir, copy_budget& budget) {
  std::vector<std::string> warnings;
  std::size_t n = 0;
  for (const auto& dir : guard.view_directories(cwd, warnings)) {
    if (std::any_of(views.begin(), views.end(), [&](const auto& v) { return v.target == dir; }))
      continue;  // a login file's view already
    view_plan plan;
    plan.target = dir;
    plan.view = (views_dir / ("guard-" + std::to_string(n++))).string();
    plan.links_go_back = guard.is_path_directory(dir);
    const auto add_hidden = [&](const std::string& path) {
      const fs::path p(path);
      if (p.parent_path() == dir) {
        plan.hidden.push_back(p.filename().string());
      } else if (path.size() > dir.size() + 1 && within(path, dir)) {
        // Deeper: the name under the view that leads to it, when the real directory lacks it.
        const std::string first = (*fs::path(path.substr(dir.size() + 1)).begin()).string();
        struct stat st {};
        if (::lstat((dir + "/" + first).c_str(), &st) < 0 &&
            std::find(plan.absent.begin(), plan.absent.end(), first) == plan.absent.end())
          plan.absent.push_back(first);
      }
    };
    for (const auto& m : launch.masks) add_hidden(m);
    for (const auto& o : launch.overlays) add_hidden(o.target);
    fs::create_directories(views_dir);
    views.push_back(make_directory_view(plan, budget));
  }
  std::stable_sort(views.begin(), views.end(), [](const auto& a, const auto& b) {
    return std::count(a.target.begin(), a.target.end(), '/') <
           std::count(b.target.begin(), b.target.end(), '/');
  });
  show_agent_stores(guard, views, warnings);
  return warnings;
}

void show_agent_stores(const home_guard& guard, const std::vector<directory_view>& views,
                       std::vector<std::string>& warnings) {
  for (const std::string& real : guard.agent_stores()) {
    struct stat st {};
    const std::string store = guard.agent_store(real);
    if (::lstat(real.c_str(), &st) == 0 || ::lstat(store.c_str(), &st) < 0 || !S_ISREG(st.st_mode))
      continue;  // the home's own file wins; nothing kept
    // The deepest view above it (views are ordered parents first).
    const directory_view* view = nullptr;
    for (const auto& v : views)
      if (real.starts_with(v.target + "/")) view = &v;
    if (!view) continue;
    // Every directory between the view and the file must be missing from the host too: one that
    // exists is bound through live, and the file would land in the real home.
    const fs::path rel = fs::path(real.substr(view->target.size() + 1));
    fs::path host = view->target, inside = view->view;
    bool placeable = true;
    for (const auto& part : rel.parent_path()) {
      host /= part;
      inside /= part;
      if (::lstat(host.c_str(), &st) == 0) placeable = false;
    }
    if (!placeable) continue;
    std::error_code ec;
    fs::create_directories(inside, ec);
    const fs::path file = inside / rel.filename();
    if (ec || !fs::copy_file(store, file, ec) || ec) {
      warnings.push_back("could not show " + real + " from " + store);
      continue;
    }
    ::chmod(file.c_str(), 0600);
  }
}

views_returned return_views(const std::vector<directory_view>& views, const fs::path& views_dir,
                            const fs::path& kept_root, const home_guard* guard) {
  views_returned out;
  copy_budget budget = copy_budget::starting_now();
  bool left_in_place = false;
  // Children first: a new directory in a nested view reaches its real parent before that
  // parent's own view is judged.
  for (auto v = views.rbegin(); v != views.rend(); ++v) {
    try {
      auto r = copy_back(*v, kept_root.string(), budget, guard);
      for (const auto& name : r.copied) out.copied.push_back(v->target + "/" + name);
      for (auto& k : r.kept) {
        left_in_place |= k.kept.starts_with(views_dir.string() + "/");
        out.kept.push_back(std::move(k));
      }
    } catch (const std::exception& e) {
      out.warnings.push_back("copying " + v->target + " back: " + e.what());
      left_in_place = true;
    }
  }
  std::error_code ec;
  // The overlay's own directory in each work directory is left mode 0 by the kernel.
  for (const auto& v : views)
    if (!v.work.empty()) ::chmod((v.work + "/work").c_str(), 0700);
  if (!views.empty() && !left_in_place) fs::remove_all(views_dir, ec);
  return out;
}

void keep_out_git_leftovers(const std::string& cwd, const std::string& home, const timespec& since,
                            const fs::path& log_dir, const fs::path& kept_root,
                            views_returned& out) {
  if (cwd.empty() || cwd == "/" || cwd == home) return;
  bool complete = true;
  std::error_code ec;
  const std::vector<std::string> skip{fs::absolute(log_dir, ec).lexically_normal().string()};
  for (const auto& left : git_leftovers(cwd, since, skip, complete)) {
    const auto to = kept_path(kept_root, left.path);
    std::error_code made;
    fs::create_directories(to.parent_path(), made);
    std::string where = to.string();
    if (made || ::rename(left.path.c_str(), to.c_str()) < 0) where = left.path + " (left in place)";
    out.kept.push_back({left.path, left.reason, where});
  }
  if (!complete)
    out.warnings.push_back(
        "the working directory is too large to search whole for git hooks "
        "the command may have left; the search stopped early");
}

}  // namespace broker::wrap
