#include "gateway/console/console.hpp"

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>
#include <utility>

#include "base/text.hpp"
#include "gateway/admin/admin_auth.hpp"
#include "gateway/admin/admin_listener.hpp"
#include "gateway/console/console_api.hpp"
#include "gateway/console/console_assets.hpp"
#include "session/log.hpp"

namespace broker::gateway {
namespace {

// Scripts, styles, images and connections from this listener only; no inline script or style,
// no plugin, no framing, forms posting here only.
constexpr std::string_view content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

constexpr std::string_view pages[] = {"/console/sessions", "/console/refusals", "/console/asks",
                                      "/console/spend"};

admin_response with_console_headers(admin_response r, bool cache = false) {
  r.fields.emplace_back("Content-Security-Policy", std::string(content_security_policy));
  r.fields.emplace_back("X-Content-Type-Options", "nosniff");
  r.fields.emplace_back("X-Frame-Options", "DENY");
  // same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on the
  // console's own form posts, and the Origin check could not tell them from a sandboxed page's.
  r.fields.emplace_back("Referrer-Policy", "same-origin");
  r.fields.emplace_back("Cache-Control", cache ? "private, max-age=300" : "no-store");
  return r;
}

admin_response asset_response(int status, std::string_view name) {
  const auto* asset = find_console_asset(name);
  if (!asset) return with_console_headers({404, "text/plain; charset=utf-8", "not found\n", {}});
  return with_console_headers(
      {status, std::string(asset->content_type), std::string(asset->body), {}},
      status == 200 && name != "page.html" && name != "login.html");
}

// The sign-in form, with a sentence of why when there is one (as text: escaped for HTML).
admin_response login_page(int status, const std::string& problem) {
  auto r = asset_response(status, "login.html");
  if (!problem.empty()) {
    std::string escaped;
    for (char c : problem) {
      switch (c) {
        case '<':
          escaped += "&lt;";
          break;
        case '>':
          escaped += "&gt;";
          break;
        case '&':
          escaped += "&amp;";
          break;
        case '"':
          escaped += "&quot;";
          break;
        case '\'':
          escaped += "&#39;";
          break;
        default:
          escaped += c;
      }
    }
    const std::string marker = "<!--problem-->";
    if (const auto at = r.body.find(marker); at != std::string::npos)
      r.body.replace(at, marker.size(), "<p class=\"problem\" id=\"problem\">" + escaped + "</p>");
  }
  return r;
}

admin_response redirect(std::string location) {
  auto r = with_console_headers({303, "text/plain; charset=utf-8", "see " + location + "\n", {}});
  r.fields.emplace_back("Location", std::move(location));
  return r;
}

// Where a sign-in goes next: a console page, never another site.
std::string next_page(const std::string& next) {
  if (next.starts_with("/console/") && next.find("//") == std::string::npos &&
      next.find('\\') == std::string::npos && next.find_first_of("\r\n") == std::string::npos)
    return next;
  return "/console/sessions";
}

std::string set_cookie(std::string_view value, std::int64_t max_age_s) {
  return std::string(admin_logins::cookie_name) + "=" + std::string(value) +
         "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age_s);
}

// POST /console/login: token=ADMIN_TOKEN&next=PATH (a form). A sign-in from another origin
// (login CSRF: a page signing the victim in as its author) is refused like a bad token.
admin_response sign_in(const admin_request& request, admin_gate& gate) {
  if (!origin_is_own(request)) {
    gate.record_refusal(request, 403, "a console sign-in from another origin");
    return login_page(403, "This sign-in came from another site, so it was refused.");
  }
  base::secret token(base::form_value(request.body, "token"));
  std::optional<admin_token_info> holder;
  try {
    if (!token.expose().empty()) holder = gate.tokens().holder(token);
    if (!holder) {
      gate.record_refusal(request, 401, "console sign-in with an unknown or revoked admin token");
      return login_page(401, "That admin token is unknown or revoked.");
    }
    const auto cookie = gate.logins().open(*holder);
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(admin_logins::lifetime).count();
    auto r = redirect(next_page(base::form_value(request.body, "next")));
    r.fields.emplace_back("Set-Cookie", set_cookie(cookie.expose(), seconds));
    session::log(spdlog::level::info, session::log_tag("admin"),
                 "console sign-in by {} ({}) from {}", holder->name, holder->id, request.peer);
    return r;
  } catch (const std::exception& e) {
    session::log(spdlog::level::err, session::log_tag("admin"), "console sign-in: {}", e.what());
    return login_page(503, "The gateway's shared state (Redis) cannot be reached; try again.");
  }
}

// A console page: the shell for a signed-in operator, else 401 with the sign-in form.
admin_response page(const admin_request& request, admin_gate& gate) {
  auto admitted = gate.admit(request, false);
  if (admitted.holder) return asset_response(200, "page.html");
  if (admitted.refused.status == 503)
    return login_page(503, "The gateway's shared state (Redis) cannot be reached; try again.");
  return login_page(401, "");
}

}  // namespace

void add_console(admin_listener& listener, std::shared_ptr<gateway> team,
                 std::shared_ptr<admin_gate> gate, const std::filesystem::path& log_dir) {
  auto api = std::make_shared<console_api>(std::move(team), log_dir);
  listener.route("GET", "/console",
                 [](const admin_request&) { return redirect("/console/sessions"); });
  listener.route("GET", "/console/",
                 [](const admin_request&) { return redirect("/console/sessions"); });
  listener.route("GET", "/console/login", [](const admin_request&) { return login_page(200, ""); });
  listener.route("POST", "/console/login",
                 [gate](const admin_request& request) { return sign_in(request, *gate); });
  listener.route("POST", "/console/logout", [gate](const admin_request& request) {
    auto admitted = gate->admit(request, true);
    if (!admitted.holder) return with_console_headers(admitted.refused);
    if (const auto* cookies = request.head.find("cookie"))
      if (auto cookie = cookie_value(*cookies, admin_logins::cookie_name))
        gate->logins().close(*cookie);
    auto r = redirect("/console/login");
    r.fields.emplace_back("Set-Cookie", set_cookie("", 0));
    return r;
  });
  for (const auto path : pages)
    listener.route("GET", std::string(path),
                   [gate](const admin_request& request) { return page(request, *gate); });
  listener.route("GET", "/console/session/*",
                 [gate](const admin_request& request) { return page(request, *gate); });
  listener.route("GET", "/console/static/*", [](const admin_request& request) {
    constexpr std::string_view prefix = "/console/static/";
    return asset_response(200, std::string_view(request.path).substr(prefix.size()));
  });

  // The JSON the pages read: the same credential, answers as the API's.
  // Reading files and the registry can take a while: those routes run on the listener's
  // worker, so that /metrics and the asks answer meanwhile.
  const auto guarded = [gate, api](auto answer) {
    return [gate, api, answer](const admin_request& request) {
      auto admitted = gate->admit(request, false);
      if (!admitted.holder) return with_console_headers(admitted.refused);
      return with_console_headers(answer(*api, request, admitted));
    };
  };
  constexpr bool slow = true;
  listener.route("GET", "/api/console/me",
                 guarded([](console_api&, const admin_request&, const admin_gate::admission& a) {
                   nlohmann::ordered_json me{{"name", a.holder->name}, {"token_id", a.holder->id}};
                   if (a.login) me["csrf"] = a.login->csrf;
                   return json_answer(200, me);
                 }));
  listener.route("GET", "/api/console/sessions",
                 guarded([](console_api& c, const admin_request& r, const admin_gate::admission&) {
                   return c.sessions(r.query);
                 }),
                 slow);
  listener.route("GET", "/api/console/sessions/*",
                 guarded([](console_api& c, const admin_request& r, const admin_gate::admission&) {
                   return c.timeline(r.path, r.query);
                 }),
                 slow);
  listener.route("GET", "/api/console/refusals",
                 guarded([](console_api& c, const admin_request& r, const admin_gate::admission&) {
                   return c.refusals(r.query);
                 }),
                 slow);
  listener.route("GET", "/api/console/spend",
                 guarded([](console_api& c, const admin_request& r, const admin_gate::admission&) {
                   return c.spend(r.query);
                 }),
                 slow);
}

}  // namespace broker::gateway
