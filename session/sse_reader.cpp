#include "session/sse_reader.hpp"

#include "base/heap_bytes.hpp"

namespace broker::session {
namespace {

constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

// Dispatching keeps the buffers' capacity for the next event; one huge event should not pin
// a megabyte to every long-lived stream.
constexpr std::size_t kept_capacity = 64 * 1024;

void release_if_large(std::string& s) {
  if (s.capacity() > kept_capacity) std::string().swap(s);
}

// Between pieces a stream mostly waits (a model's next event, seconds away): a buffer with
// nothing in it then holds no memory.
void release_if_empty(std::string& s) {
  if (s.empty()) std::string().swap(s);
}

}  // namespace

sse_reader::sse_reader(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

void sse_reader::feed(std::string_view piece, const event_handler& on_event) {
  std::size_t pos = 0;
  if (skip_lf_ && !piece.empty()) {
    skip_lf_ = false;
    if (piece.front() == '\n') pos = 1;
  }
  while (pos < piece.size()) {
    const std::size_t end = piece.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
      carry_partial(piece.substr(pos));
      break;
    }
    const std::string_view tail = piece.substr(pos, end - pos);
    if (line_too_long_) {
      line_too_long_ = false;  // the oversized line ends here; its event is already dropped
    } else if (line_.empty()) {
      take_line(tail, on_event);  // the common case: the whole line is in this piece, no copy
    } else {
      carry_partial(tail);
      if (!line_too_long_) take_line(line_, on_event);
      line_too_long_ = false;
      line_.clear();
      release_if_large(line_);
    }
    pos = end + 1;
    if (piece[end] == '\r') {
      if (pos == piece.size()) {
        skip_lf_ = true;
      } else if (piece[pos] == '\n') {
        ++pos;
      }
    }
  }
  release_if_empty(line_);
  release_if_empty(type_);
  release_if_empty(data_);
}

std::size_t sse_reader::held_bytes() const {
  return base::heap_bytes(line_) + base::heap_bytes(type_) + base::heap_bytes(data_);
}

void sse_reader::finish(const event_handler& on_event) {
  if (!line_too_long_ && !line_.empty()) take_line(line_, on_event);
  line_.clear();
  line_too_long_ = false;
  skip_lf_ = false;
  dispatch(on_event);
}

void sse_reader::carry_partial(std::string_view part) {
  if (line_too_long_) return;
  if (line_.size() + part.size() > max_event_bytes_) {
    line_.clear();
    release_if_large(line_);
    line_too_long_ = true;
    first_line_ = false;  // dropped, but it was the first line: no later line may strip a BOM
    event_dropped_ = true;
    data_.clear();
    return;
  }
  line_.append(part);
}

void sse_reader::take_line(std::string_view line, const event_handler& on_event) {
  // A line that came whole in one piece skipped carry_partial's limit. It is measured with its
  // BOM, as carry_partial measures it: the limit must not depend on where the pieces were cut.
  if (line.size() > max_event_bytes_) {
    first_line_ = false;
    event_dropped_ = true;
    data_.clear();
    return;
  }
  if (first_line_) {
    first_line_ = false;
    if (line.starts_with(utf8_bom)) line.remove_prefix(utf8_bom.size());
  }
  if (line.empty()) {
    dispatch(on_event);
    return;
  }
  if (line.front() == ':') return;  // comment, often a keep-alive

  const std::size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
  }

  if (field == "event") {
    type_.assign(value);
  } else if (field == "data") {
    if (event_dropped_) return;
    if (data_.size() + value.size() + 1 > max_event_bytes_) {
      event_dropped_ = true;
      data_.clear();
      return;
    }
    data_.append(value);
    data_.push_back('\n');
  }
}

void sse_reader::dispatch(const event_handler& on_event) {
  // An event with no data line is not dispatched (spec: "If the data buffer is an empty
  // string ... return").
  if (!event_dropped_ && !data_.empty()) {
    data_.pop_back();
    on_event(type_, data_);
  }
  data_.clear();
  type_.clear();
  event_dropped_ = false;
  release_if_large(data_);
}

}  // namespace broker::session
