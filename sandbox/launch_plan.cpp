#include "sandbox/launch_plan.hpp"

#include <cstdint>
#include <cstring>

namespace broker::sandbox {

namespace {

constexpr std::uint32_t plan_version = 2;

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
    w.number(static_cast<std::uint64_t>(step.what));
    w.text(step.path);
    w.number(step.mode);
  }
  w.number(o.seeds.size());
  for (const auto& seed : o.seeds) {
    w.text(seed.source);
    w.text(seed.target);
    w.number(seed.bind_otherwise ? 1 : 0);
  }
  w.number(o.layer_bytes);
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
    const std::uint64_t what = r.number();
    if (what > view_step::through) throw launch_error("the launch plan names an unknown step");
    step.what = static_cast<view_step::kind>(what);
    step.path = r.text();
    step.mode = static_cast<unsigned>(r.number());
  }
  o.seeds.resize(r.count());
  for (auto& seed : o.seeds) {
    seed.source = r.text();
    seed.target = r.text();
    seed.bind_otherwise = r.number() == 1;
  }
  o.layer_bytes = r.number();
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

}  // namespace broker::sandbox
