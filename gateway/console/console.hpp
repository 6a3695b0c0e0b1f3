// The operators' console (docs/gateway.md) on the gateway's admin listener: web pages for the
// people who run the gateway, and the JSON they read, behind an admin credential (admin_auth.hpp).
//
//   GET  /console/login               the sign-in form (open)
//   POST /console/login               token=ADMIN_TOKEN&next=/console/...: a login cookie, 303
//   POST /console/logout              ends the login (CSRF proof), 303 to the sign-in form
//   GET  /console/sessions            live sessions: counters, budgets as bars, revoke
//        /console/refusals            the latest refusals across sessions, filtered
//        /console/asks                pending asks: approve (once/session) or deny
//        /console/session/ID          one session's audit timeline (replicas merged), verified
//        /console/spend               LLM tokens and cost per day, user and session: charts, table
//   GET  /console/static/NAME         the pages' CSS and scripts, Chart.js (open: no data)
//   GET  /api/console/me              who is signed in, and the login's CSRF token
//   GET  /api/console/sessions        ?page=&per_page=&state=&q=  (a page of sessions, newest
//   first) GET  /api/console/sessions/ID/timeline  ?page=&per_page=  (oldest first; default the
//   last page) GET  /api/console/refusals        ?code=&session=&host=&page=&per_page=  (newest
//   first) GET  /api/console/spend           ?days=N (default 30)
// The pages and their files are embedded in the binary at build time (gateway/console/web/,
// Chart.js from Debian's libjs-chart.js); every page is the same shell whose script draws the
// view its path names, with data from the JSON routes (rendered as text, never as HTML). A page
// asked for without a valid credential is answered 401 with the sign-in form. Every answer
// carries a strict Content-Security-Policy (scripts, styles and connections from the listener
// itself only; no inline script or style; no framing) and is not cached.
#pragma once

#include <filesystem>
#include <memory>

namespace broker::gateway {

class admin_gate;
class admin_listener;
class gateway;

// Routes the console on `listener`. Counters, refusals and spend come from the audit files in
// `log_dir` (console_index.hpp), scanned on a thread of its own while somebody looks; the
// routes own that thread, which ends with the listener.
void add_console(admin_listener& listener, std::shared_ptr<gateway> team,
                 std::shared_ptr<admin_gate> gate, const std::filesystem::path& log_dir);

}  // namespace broker::gateway
