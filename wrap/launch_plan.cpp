#include "wrap/launch_plan.hpp"

#include <cstdint>
#include <cstring>

namespace broker::wrap {

namespace {

constexpr std::uint32_t plan_version = 1;

class writer {
 public:
  void number(std::uint64_t n) {
    char bytes[sizeof n];
    std::memcpy(bytes, &n, sizeof n);
    out_.append(bytes, sizeof n);
  }
  void text(std::string_view s) {
    number(s.size());
    out_.append(s);
  }
  void texts(const std::vector<std::string>& list) {
    number(list.size());
    for (const auto& s : list) text(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}
  std::uint64_t number() {
    std::uint64_t n = 0;
    need(sizeof n);
    std::memcpy(&n, in_.data(), sizeof n);
    in_.remove_prefix(sizeof n);
    return n;
  }
  std::string text() {
    const std::uint64_t size = number();
    need(size);
    std::string s(in_.substr(0, size));
    in_.remove_prefix(size);
    return s;
  }
  std::vector<std::string> texts() {
    std::vector<std::string> list(count());
    for (auto& s : list) s = text();
    return list;
  }
  // A list's length, never more entries than bytes left (each takes at least one number).
  std::size_t count() {
    const std::uint64_t n = number();
    if (n > in_.size() / sizeof(std::uint64_t)) throw launch_error("the launch plan is cut short");
    return n;
  }
  bool done() const { return in_.empty(); }

 private:
  void need(std::uint64_t size) const {
    if (size > in_.size()) throw launch_error("the launch plan is cut short");
  }
  std::string_view in_;
};

}  // namespace

std::string encode_launch_plan(const launch_options& o) {
  writer w;
  w.number(plan_version);
  w.texts(o.argv);
  w.texts(o.envp);
  w.number(o.mode == isolation::netns ? 1 : 0);
  w.number(o.proxy_port);
  w.number(o.private_view.size());
  for (const auto& step : o.private_view) {
    w.number(step.what == view_step::bind ? 1 : 0);
    w.text(step.path);
    w.number(step.mode);
  }
  w.number(o.overlays.size());
  for (const auto& overlay : o.overlays) {
    w.text(overlay.copy);
    w.text(overlay.target);
  }
  w.number(o.views.size());
  for (const auto& v : o.views) {
    w.text(v.view);
    w.text(v.work);
    w.text(v.target);
    w.text(v.login_name);
    w.texts(v.hidden);
    w.number(v.links_go_back ? 1 : 0);
    w.texts(v.subdirs);
    w.texts(v.live_files);
    std::vector<std::string> files;  // what init copies where it cannot stack: names only
    for (const auto& f : v.files) files.push_back(f.name);
    w.texts(files);
    w.texts(v.links);
  }
  w.texts(o.masks);
  w.texts(o.read_only);
  w.texts(o.scratch);
  w.number(o.capture ? 1 : 0);
  w.number(o.capture_port);
  w.number(o.etc_files.size());
  for (const auto& [copy, target] : o.etc_files) {
    w.text(copy);
    w.text(target);
  }
  w.number(static_cast<std::uint64_t>(o.grace.count()));
  return w.take();
}

launch_options decode_launch_plan(std::string_view bytes) {
  reader r(bytes);
  if (r.number() != plan_version) throw launch_error("the launch plan is of another version");
  launch_options o;
  o.argv = r.texts();
  o.envp = r.texts();
  o.mode = r.number() == 1 ? isolation::netns : isolation::env;
  o.proxy_port = static_cast<std::uint16_t>(r.number());
  o.private_view.resize(r.count());
  for (auto& step : o.private_view) {
    step.what = r.number() == 1 ? view_step::bind : view_step::empty;
    step.path = r.text();
    step.mode = static_cast<unsigned>(r.number());
  }
  o.overlays.resize(r.count());
  for (auto& overlay : o.overlays) {
    overlay.copy = r.text();
    overlay.target = r.text();
  }
  o.views.resize(r.count());
  for (auto& v : o.views) {
    v.view = r.text();
    v.work = r.text();
    v.target = r.text();
    v.login_name = r.text();
    v.hidden = r.texts();
    v.links_go_back = r.number() == 1;
    v.subdirs = r.texts();
    v.live_files = r.texts();
    for (auto& name : r.texts()) v.files.push_back({std::move(name), 0, {}, {}, nullptr});
    v.links = r.texts();
  }
  o.masks = r.texts();
  o.read_only = r.texts();
  o.scratch = r.texts();
  o.capture = r.number() == 1;
  o.capture_port = static_cast<std::uint16_t>(r.number());
  o.etc_files.resize(r.count());
  for (auto& [copy, target] : o.etc_files) {
    copy = r.text();
    target = r.text();
  }
  o.grace = std::chrono::milliseconds(static_cast<long long>(r.number()));
  if (!r.done()) throw launch_error("the launch plan has bytes past its end");
  return o;
}

}  // namespace broker::wrap
