#include "gateway/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace broker::gateway {

namespace {

bool is_name(std::string_view s, bool colons) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool ok = letter || (colons && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool is_metric_name(std::string_view s) {
  return is_name(s, true);
}

// Label names starting with "__" are reserved for Prometheus itself.
bool is_label_name(std::string_view s) {
  return is_name(s, false) && !s.starts_with("__");
}

// The length of the valid UTF-8 sequence at the start of `s`, or 0 when it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
std::size_t utf8_sequence(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto continuation = [&](std::size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return continuation(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

// A label value as the text format wants it between its quotes: backslash, double quote and
// newline escaped (the only escapes it has), and each byte that is not part of valid UTF-8
// replaced by U+FFFD (a scraper refuses a whole scrape over one invalid label value).
void append_label_value(std::string& out, std::string_view v) {
  while (!v.empty()) {
    const std::size_t n = utf8_sequence(v);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      v.remove_prefix(1);
      continue;
    }
    if (n == 1 && (v[0] == '\\' || v[0] == '"')) {
      out += '\\';
      out += v[0];
    } else if (n == 1 && v[0] == '\n') {
      out += "\\n";
    } else {
      out.append(v.substr(0, n));
    }
    v.remove_prefix(n);
  }
}

// A sample value or bucket bound: Go's ParseFloat reads what fmt writes (shortest round trip).
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// The help text escapes backslash and newline only.
std::string escaped_help(std::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string_view type_name(exposition::kind k) {
  switch (k) {
    case exposition::kind::counter:
      return "counter";
    case exposition::kind::gauge:
      return "gauge";
    case exposition::kind::histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void exposition::family(std::string_view name, std::string_view help, kind k) {
  if (!is_metric_name(name))
    throw std::invalid_argument("not a valid metric name: \"" + std::string(name) + "\"");
  if (k == kind::counter && !name.ends_with("_total"))
    throw std::invalid_argument("a counter's name must end in _total: " + std::string(name));
  if (auto it = families_.find(name); it != families_.end()) {
    if (it->second.type != k)
      throw std::invalid_argument("metric " + std::string(name) + " declared as two kinds");
    return;
  }
  families_.emplace(std::string(name), family_text{escaped_help(help), k, {}});
}

exposition::family_text& exposition::declared(std::string_view name, kind expected_a,
                                              kind expected_b) {
  auto it = families_.find(name);
  if (it == families_.end())
    throw std::invalid_argument("metric " + std::string(name) + " was not declared");
  if (it->second.type != expected_a && it->second.type != expected_b)
    throw std::invalid_argument("metric " + std::string(name) + " is a " +
                                std::string(type_name(it->second.type)));
  return it->second;
}

void exposition::write_series(std::string& out, std::string_view name,
                              std::span<const label> labels, std::string_view extra_name,
                              std::string_view extra_value) {
  out += name;
  if (labels.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  const auto one = [&](std::string_view n, std::string_view v) {
    if (!is_label_name(n))
      throw std::invalid_argument("not a valid label name: \"" + std::string(n) + "\"");
    if (!first) out += ',';
    first = false;
    out += n;
    out += "=\"";
    append_label_value(out, v);
    out += '"';
  };
  for (const auto& l : labels) one(l.name, l.value);
  if (!extra_name.empty()) one(extra_name, extra_value);
  out += '}';
}

void exposition::sample(std::string_view name, std::initializer_list<label> labels,
                        std::uint64_t value) {
  sample(name, std::span<const label>(labels.begin(), labels.size()), value);
}

void exposition::sample(std::string_view name, std::initializer_list<label> labels, double value) {
  sample(name, std::span<const label>(labels.begin(), labels.size()), value);
}

void exposition::sample(std::string_view name, std::span<const label> labels, std::uint64_t value) {
  auto& f = declared(name, kind::counter, kind::gauge);
  write_series(f.samples, name, labels);
  f.samples += ' ';
  f.samples += std::to_string(value);
  f.samples += '\n';
}

void exposition::sample(std::string_view name, std::span<const label> labels, double value) {
  auto& f = declared(name, kind::counter, kind::gauge);
  write_series(f.samples, name, labels);
  f.samples += ' ';
  f.samples += number(value);
  f.samples += '\n';
}

void exposition::histogram(std::string_view name, std::span<const label> labels,
                           std::span<const double> upper_bounds,
                           std::span<const std::uint64_t> cumulative, double sum,
                           std::uint64_t count) {
  auto& f = declared(name, kind::histogram, kind::histogram);
  if (upper_bounds.size() != cumulative.size())
    throw std::invalid_argument("histogram " + std::string(name) + ": " +
                                std::to_string(upper_bounds.size()) + " bounds but " +
                                std::to_string(cumulative.size()) + " bucket counts");
  const std::string bucket = std::string(name) + "_bucket";
  const auto line = [&](std::string_view series, std::string_view le, std::string_view value) {
    write_series(f.samples, series, labels, le.empty() ? "" : "le", le);
    f.samples += ' ';
    f.samples += value;
    f.samples += '\n';
  };
  for (std::size_t i = 0; i < upper_bounds.size(); ++i)
    line(bucket, number(upper_bounds[i]), std::to_string(cumulative[i]));
  if (upper_bounds.empty() || !std::isinf(upper_bounds.back()))
    line(bucket, "+Inf", std::to_string(count));
  line(std::string(name) + "_sum", "", number(sum));
  line(std::string(name) + "_count", "", std::to_string(count));
}

std::string exposition::text() const {
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += f.help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    out += f.samples;
  }
  return out;
}

template <class Value>
void metrics::by_value<Value>::add(std::string_view key, Value n) {
  auto it = values.find(key);
  if (it == values.end()) {
    const bool full = values.size() >= max_values_per_family;
    it = values.try_emplace(std::string(full ? other_value : key), Value{}).first;
  }
  it->second += n;
}

metrics::shard& metrics::shard_of(std::string_view session) {
  return shards_[text_hash{}(session) % shard_count];
}

metrics::session_series& metrics::series_of(shard& s, std::string_view session) {
  auto it = s.sessions.find(session);
  if (it == s.sessions.end()) it = s.sessions.try_emplace(std::string(session)).first;
  return it->second;
}

void metrics::exchange(std::string_view session, const session::audit_entry& e) {
  auto& s = shard_of(session);
  std::lock_guard lock(s.mutex);
  auto& series = series_of(s, session);
  series.events.add(e.event, 1);
  if (!e.allowed || !e.error.empty())
    series.refusals.add(e.error.empty() ? std::string_view("unknown") : e.error, 1);
  series.bytes_out += e.bytes_out;
  series.bytes_in += e.bytes_in;
  if (e.llm_tokens) series.tokens.add(e.credential, *e.llm_tokens);
}

void metrics::llm_cost(std::string_view session, std::string_view credential,
                       std::string_view /*model*/, double usd) {
  if (!(usd >= 0) || std::isinf(usd)) return;
  auto& s = shard_of(session);
  std::lock_guard lock(s.mutex);
  series_of(s, session).cost_usd.add(credential, usd);
}

void metrics::forget_session(std::string_view session) {
  auto& s = shard_of(session);
  std::lock_guard lock(s.mutex);
  if (auto it = s.sessions.find(session); it != s.sessions.end()) s.sessions.erase(it);
}

void metrics::add_gauge(std::string name, std::string help, std::function<double()> read) {
  if (!is_metric_name(name))
    throw std::invalid_argument("not a valid metric name: \"" + name + "\"");
  std::lock_guard lock(callbacks_mutex_);
  gauges_.push_back({std::move(name), std::move(help), std::move(read)});
}

void metrics::add_collector(std::function<void(exposition&)> collect) {
  std::lock_guard lock(callbacks_mutex_);
  collectors_.push_back(std::move(collect));
}

std::string metrics::render() const {
  // Each shard is copied under its lock and written after: a scrape holds up the requests of a
  // sixteenth of the sessions for the time of a copy, never for the formatting.
  std::vector<std::pair<std::string, session_series>> sessions;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    sessions.insert(sessions.end(), s.sessions.begin(), s.sessions.end());
  }
  std::sort(sessions.begin(), sessions.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  using kind = exposition::kind;
  exposition out;
  out.family("broker_requests_total", "Requests, tunnels and refusals audited, by audit event.",
             kind::counter);
  out.family("broker_refusals_total", "Requests and connections refused, by error code.",
             kind::counter);
  out.family("broker_bytes_total", "Bytes relayed upstream (out) and back to the client (in).",
             kind::counter);
  out.family("broker_llm_tokens_total", "LLM API tokens (input + output), by credential.",
             kind::counter);
  out.family("broker_llm_cost_usd_total", "LLM API cost in US dollars, by credential.",
             kind::counter);
  for (const auto& [session, series] : sessions) {
    for (const auto& [event, n] : series.events.values)
      out.sample("broker_requests_total", {{"session", session}, {"event", event}}, n);
    for (const auto& [code, n] : series.refusals.values)
      out.sample("broker_refusals_total", {{"session", session}, {"code", code}}, n);
    out.sample("broker_bytes_total", {{"session", session}, {"direction", "out"}},
               series.bytes_out);
    out.sample("broker_bytes_total", {{"session", session}, {"direction", "in"}}, series.bytes_in);
    for (const auto& [credential, n] : series.tokens.values)
      out.sample("broker_llm_tokens_total", {{"session", session}, {"credential", credential}}, n);
    for (const auto& [credential, usd] : series.cost_usd.values)
      out.sample("broker_llm_cost_usd_total", {{"session", session}, {"credential", credential}},
                 usd);
  }

  std::vector<gauge> gauges;
  std::vector<std::function<void(exposition&)>> collectors;
  {
    std::lock_guard lock(callbacks_mutex_);
    gauges = gauges_;
    collectors = collectors_;
  }
  for (const auto& g : gauges) {
    out.family(g.name, g.help, kind::gauge);
    out.sample(g.name, {}, g.read());
  }
  for (const auto& collect : collectors) collect(out);
  return out.text();
}

}  // namespace broker::gateway
