// Small helpers for the lists of paths wrap builds (masks, views, the places it guards).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace broker::sandbox {

// `path` is `dir` or lies under it ("/a/b" is within "/a", "/ab" is not; all is within "/").
inline bool within(const std::string& path, const std::string& dir) {
  return path == dir || dir == "/" ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

// Appends `item` unless the list holds it already (first-seen order).
inline void add_unique(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

}  // namespace broker::sandbox
