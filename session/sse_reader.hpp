// Server-sent events, read incrementally (WHATWG HTML §9.2.6 "Interpreting an event stream").
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace broker::session {

// Splits a text/event-stream body into events as its bytes pass, in pieces of any size: a line,
// a CRLF or a UTF-8 sequence may straddle two pieces. Lines end in "\n", "\r\n" or "\r"; ':'
// starts a comment; one space after a field's colon is dropped; `data:` lines join with '\n';
// an event dispatches at a blank line; `id:`, `retry:` and unknown fields are ignored.
//
// Memory is bounded: a line or an event's data longer than max_event_bytes drops that whole
// event (it is skipped up to its blank line), so a hostile stream costs at most about twice the
// limit.
class sse_reader {
 public:
  // type is the `event:` field ("" when the event has none); data has no trailing '\n'.
  using event_handler = std::function<void(std::string_view type, std::string_view data)>;

  // An LLM stream's events are a few KiB; a whole non-streamed answer in one event stays well
  // below this.
  static constexpr std::size_t default_max_event_bytes = 1024 * 1024;

  explicit sse_reader(std::size_t max_event_bytes = default_max_event_bytes);

  void feed(std::string_view piece, const event_handler& on_event);

  // End of stream. Unlike the spec, an unterminated last line and a last event with no closing
  // blank line still dispatch: a stream cut right after its usage chunk should not lose it.
  void finish(const event_handler& on_event);

  // The bytes its buffers hold: none between pieces unless a line or an event is unfinished (a
  // long-lived stream waits most of its life between events).
  std::size_t held_bytes() const;

 private:
  void take_line(std::string_view line, const event_handler& on_event);
  void carry_partial(std::string_view part);
  void dispatch(const event_handler& on_event);

  std::size_t max_event_bytes_;
  std::string line_;  // a line begun in an earlier piece
  std::string type_;
  std::string data_;            // each data line followed by '\n', as the spec builds it
  bool skip_lf_ = false;        // the last piece ended in '\r': a leading '\n' ends no new line
  bool line_too_long_ = false;  // skipping the rest of an oversized line
  bool event_dropped_ = false;  // the current event outgrew the limit; ignore it to its end
  bool first_line_ = true;      // a UTF-8 BOM may precede it
};

}  // namespace broker::session
