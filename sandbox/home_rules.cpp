#include "sandbox/home_rules.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "sandbox/file_masks.hpp"
#include "sandbox/path_lists.hpp"

namespace broker::sandbox {

namespace {

namespace fs = std::filesystem;

// The agents' own data, which goes through (docs/security-model.md): what each agent keeps of its
// sessions and reads back only as data. Never its instruction or memory files (CLAUDE.md,
// AGENTS.md, GEMINI.md), commands, prompts, skills, agents, plugins or extensions: those are
// read as instructions or run, and stay out like any other file. "~codex" is $CODEX_HOME.
constexpr const char* agent_data[] = {
    // Claude Code
    "~/.claude/projects",
    "~/.claude/todos",
    "~/.claude/history.jsonl",
    "~/.claude/plans",
    "~/.claude/file-history",
    "~/.claude/debug",
    // Codex
    "~codex/sessions",
    "~codex/archived_sessions",
    "~codex/history.jsonl",
    "~codex/log",
    "~codex/version.json",
    "~codex/models_cache.json",
    "~codex/installation_id",
    "~codex/state_*",           // its threads (SQLite, with -wal and -shm beside it)
    "~codex/thread_history_*",  // what was said in them
    "~codex/logs_*",
    // Gemini CLI
    "~/.gemini/tmp",
    "~/.gemini/history",
    "~/.gemini/installation_id",
    "~/.gemini/user_id",
    "~/.gemini/google_accounts.json",
    "~/.gemini/projects.json",
};

// What an agent makes again every session, or a cache of what it fetched: dropped at the end.
constexpr std::pair<const char*, const char*> agent_dropped[] = {
    {"~/.claude/shell-snapshots", "an agent's shell snapshots, made again every session"},
    {"~/.claude/statsig", "an agent's cache"},
    {"~/.claude/session-env", "an agent's session state, made again every session"},
    {"~/.claude/ide", "an agent's session state, made again every session"},
    {"~/.claude/telemetry", "an agent's unsent telemetry"},
    {"~/.claude/downloads", "an agent's own program updates"},
    {"~/.claude.json.backup", "an agent's backup of its settings, read in their place"},
    {"~/.claude/backups", "an agent's backup of its settings, read in their place"},
    {"~/.claude.json.lock", "an agent's lock file"},
    {"~/.claude/sessions", "an agent's session state, made again every session"},
    {"~/.claude/remote-settings.json", "an agent's cache of its organization's settings"},
    {"~/.claude/remote-settings.json.synced-at", "an agent's cache of its organization's settings"},
    {"~/.claude/plugins/store", "an agent's plugin bookkeeping, made again every session"},
    {"~codex/packages", "an agent's own programs, installed again every session"},
    {"~codex/app-server-daemon", "an agent's background server's state, ended with the session"},
    {"~codex/app-server-control", "an agent's background server's state, ended with the session"},
    {"~codex/tmp", "an agent's session state, made again every session"},
    {"~codex/.tmp", "an agent's session state, made again every session"},
    {"~codex/auth.json.lock", "an agent's lock file"},
    {"~codex/auth.lock", "an agent's lock file"},
    {"~codex/shell_snapshots", "an agent's shell snapshots, made again every session"},
    {"~codex/thread-writer-locks", "an agent's lock files"},
    {"~codex/.sandbox_migration", "an agent's session state, made again every session"},
    // Codex's databases of what it is doing now, and the memories and skills it reads as
    // instructions in a later session (its threads, their history and its logs go through).
    {"~codex/goals_*", "an agent's session state, made again every session"},
    {"~codex/queue_*", "an agent's session state, made again every session"},
    {"~codex/memories_*", "an agent's memories, read as instructions later: never kept"},
    {"~codex/skills", "an agent's skills, read as instructions later: never kept"},
};

// Claude Code's state file: counters, what it has shown, its account, the approved-key list
// (the last 20 characters of keys the user said yes or no to), and per project its history,
// costs and whether the folder is trusted (for the session's own workspace only). Not: MCP
// servers, allowed tools, enabled .mcp.json servers, external include approvals, the bypass
// mode's acceptance, a stored API key (primaryApiKey).
const std::vector<std::string> claude_state = {
    "numStartups",
    "installMethod",
    "autoUpdates",
    "autoUpdatesProtectedForNative",
    "firstStartTime",
    "firstStartVersion",
    "userID",
    "anonymousId",
    "machineID",
    "migrationVersion",
    "pluginUsage",
    "hasResetAutoModeOptInForDefaultOffer",
    "hasCompletedOnboarding",
    "lastOnboardingVersion",
    "lastReleaseNotesSeen",
    "customApiKeyResponses",
    "tipsHistory",
    "promptQueueUseCount",
    "memoryUsageCount",
    "cachedChangelog",
    "changelogLastFetched",
    "oauthAccount",
    "claudeCodeFirstTokenDate",
    "subscriptionNoticeCount",
    "hasAvailableSubscription",
    "fallbackAvailableWarningThreshold",
    "isQualifiedForDataSharing",
    "shiftEnterKeyBindingInstalled",
    "hasUsedBackslashReturn",
    "hasSeenTasksHint",
    "recommendedSubscription",
    "cachedStatsigGates",
    "cachedDynamicConfigs",
    "cachedGrowthBookFeatures",
    "cachedExtraUsageDisabledReason",
    "feedbackSurveyState",
    "lastPlanModeUse",
    "hasOpusPlanDefault",
    "theme",
    "verbose",
    "editorMode",
    "autoCompactEnabled",
    "preferredNotifChannel",
    "messageIdleNotifThresholdMs",
    "todoFeatureEnabled",
    "hasShownOpus45Notice",
    "opusProMigrationComplete",
    "sonnet45MigrationComplete",
    "sonnet1m45MigrationComplete",
    "s1mAccessCache",
    "s1mNonSubscriberAccessCache",
    "passesEligibilityCache",
    "groveConfigCache",
    "metricsStatusCache",
    "clientDataCache",
    "hasVisitedPasses",
    "lastShownUpgradeNotice",
    "officialMarketplaceAutoInstallAttempted",
    "officialMarketplaceAutoInstalled",
    "githubRepoPaths",
    "hasIdeOnboardingBeenShown",
    "isNewUser",
    "skillUsage",
    "projects.*.history",
    "projects.*.lastCost",
    "projects.*.lastAPIDuration",
    "projects.*.lastAPIDurationWithoutRetries",
    "projects.*.lastToolDuration",
    "projects.*.lastDuration",
    "projects.*.lastLinesAdded",
    "projects.*.lastLinesRemoved",
    "projects.*.lastTotalInputTokens",
    "projects.*.lastTotalOutputTokens",
    "projects.*.lastTotalCacheCreationInputTokens",
    "projects.*.lastTotalCacheReadInputTokens",
    "projects.*.lastTotalWebSearchRequests",
    "projects.*.lastSessionId",
    "projects.*.lastModelUsage",
    "projects.*.lastSessionMetrics",
    "projects.*.lastFpsAverage",
    "projects.*.lastFpsLow1Pct",
    "projects.*.exampleFiles",
    "projects.*.exampleFilesGeneratedAt",
    "projects.*.projectOnboardingSeenCount",
    "projects.*.hasCompletedProjectOnboarding",
    "projects.*.hasClaudeMdExternalIncludesWarningShown",
    "projects.*.reactVulnerabilityCache",
    "projects.{workspace}.hasTrustDialogAccepted",
};

// Claude Code's user settings: the model, the look, what it writes into commits. Not:
// permissions, hooks, env, helpers, the status line, plugins, marketplaces, MCP switches.
const std::vector<std::string> claude_settings = {
    "model",
    "theme",
    "outputStyle",
    "includeCoAuthoredBy",
    "cleanupPeriodDays",
    "alwaysThinkingEnabled",
    "spinnerTipsEnabled",
    "language",
    "feedbackSurveyState",
    "$schema",
};

// Codex: the model and its effort, notices it has shown, the terminal UI's preferences, and
// whether the session's own workspace is trusted. Not: notify, MCP servers, model providers
// (a base URL that would receive the real key outside broker), profiles, sandbox and approval
// modes, the shell environment, telemetry exporters.
const std::vector<std::string> codex_config = {
    "model",
    "model_reasoning_effort",
    "model_reasoning_summary",
    "model_verbosity",
    "hide_agent_reasoning",
    "show_raw_agent_reasoning",
    "notice",
    "tui",
    "projects.{workspace}.trust_level",
};

// Gemini CLI: the look, the model, the sign-in method chosen, usage statistics, update nags
// and what it has shown. Not: MCP servers, hooks, tools and their commands, extensions,
// context directories, the editor it starts, folder trust's switch.
const std::vector<std::string> gemini_settings = {
    "theme",
    "ui.theme",
    "ui.hideBanner",
    "ui.hideTips",
    "ui.showMemoryUsage",
    "model.name",
    "security.auth.selectedType",
    "privacy.usageStatisticsEnabled",
    "general.disableAutoUpdate",
    "general.disableUpdateNag",
    "general.previewFeatures",
    "ide.hasSeenNudge",
    "hasSeenIdeIntegrationNudge",
    "$schema",
};

struct settings_entry {
  const char* path;
  settings_format format;
  const std::vector<std::string>* data;
};

const settings_entry agent_settings[] = {
    {"~/.claude.json", settings_format::json, &claude_state},
    {"~/.claude/settings.json", settings_format::json, &claude_settings},
    {"~/.claude/settings.local.json", settings_format::json, &claude_settings},
    {"~codex/config.toml", settings_format::toml, &codex_config},
    {"~/.gemini/settings.json", settings_format::json, &gemini_settings},
};

// Gemini CLI's trusted folders: a member per folder; the session's workspace goes back.
const std::vector<std::string> gemini_trust = {"{workspace}"};

constexpr const char* key_stores[] = {"~codex/auth.json", "~/.gemini/gemini-credentials.json"};

// The Codex background server's state (agent_dropped): the existing ones are hidden.
constexpr const char* agent_scratch[] = {"~codex/packages", "~codex/app-server-daemon",
                                         "~codex/app-server-control"};

// Caches nothing verifies on read: a poisoned entry is code that runs later.
constexpr const char* unverified_caches[] = {
    "~/.npm/_npx",          "~/.npm/_logs",        "~/.npm/_prebuilds",         "~/.cargo/registry",
    "~/.cargo/git",         "~/.m2/repository",    "~/.gradle/caches",          "~/.gradle/wrapper",
    "~/.bun/install/cache", "~/.yarn/berry/cache", "~/.local/share/pnpm/store", "~/.cache",
};
constexpr const char* system_caches[] = {"/var/cache", "/var/lib/apt/lists"};

std::string rule_env(const home_rule_inputs& in, std::string_view name) {
  for (const auto& [n, v] : in.env)
    if (n == name) return v;
  return {};
}

std::string normal_path(std::string path) {
  path = fs::path(path).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string expand_home(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.starts_with("~/")) return home + path.substr(1);
  return path;
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  auto p = fs::absolute(path, ec);
  return normal_path((ec ? fs::path(path) : p).string());
}

}  // namespace

std::vector<std::string> writable_paths(const std::vector<config::policy>& layers,
                                        const std::string& home) {
  return agreed_paths(layers, &config::files_spec::writable, home, true);
}

std::vector<std::string> readonly_paths(const std::vector<config::policy>& layers,
                                        const std::string& home) {
  std::vector<std::string> out;
  for (const auto& layer : layers)
    for (const auto& p : layer.files.readonly) add_unique(out, absolute_path(expand_home(p, home)));
  return out;
}

home_rules::home_rules(const home_rule_inputs& in) {
  const std::string home = in.home.empty() || in.home == "/" ? std::string() : normal_path(in.home);
  std::string codex = rule_env(in, "CODEX_HOME");
  if (!codex.starts_with('/')) codex = home.empty() ? "" : home + "/.codex";
  // A rule's path with "~" and "~codex" in place; "" where there is no home to place it in.
  const auto place = [&](std::string_view path) -> std::string {
    if (path.starts_with("~codex")) return codex.empty() ? "" : codex + std::string(path.substr(6));
    if (path.starts_with("~/")) return home.empty() ? "" : home + std::string(path.substr(1));
    return std::string(path);
  };
  const auto add = [&](home_rule rule) {
    if (rule.path.empty()) return;
    rule.path = normal_path(rule.path);
    for (auto& r : rules_)
      if (r.path == rule.path) {
        r = std::move(rule);
        return;
      }
    rules_.push_back(std::move(rule));
  };
  const auto rule = [&](home_rule::kind what, std::string path, std::string why = {}) {
    home_rule r;
    r.what = what;
    r.path = std::move(path);
    r.why = std::move(why);
    return r;
  };
  for (const char* c : unverified_caches) add(rule(home_rule::dropped, place(c), "a cache"));
  if (const std::string cache = rule_env(in, "XDG_CACHE_HOME"); cache.starts_with('/'))
    add(rule(home_rule::dropped, cache, "a cache"));
  if (in.root)
    for (const char* c : system_caches) add(rule(home_rule::dropped, c, "a cache"));
  for (const auto& [path, why] : agent_dropped) add(rule(home_rule::dropped, place(path), why));
  for (const char* path : agent_data) add(rule(home_rule::through, place(path)));
  // Caches that verify what they read by its hash.
  const std::string npm = rule_env(in, "npm_config_cache");
  home_rule npm_cache =
      rule(home_rule::through, npm.starts_with('/') ? npm + "/_cacache" : place("~/.npm/_cacache"));
  npm_cache.cache = true;
  add(std::move(npm_cache));
  std::string go = rule_env(in, "GOMODCACHE");
  if (!go.starts_with('/')) {
    const std::string gopath = rule_env(in, "GOPATH");
    const std::string first = gopath.substr(0, gopath.find(':'));
    go = first.starts_with('/') ? first + "/pkg/mod" : place("~/go/pkg/mod");
  }
  home_rule go_cache = rule(home_rule::through, go);
  go_cache.cache = true;
  add(std::move(go_cache));
  const auto settings = [&](const char* path, settings_format format,
                            const std::vector<std::string>& data) {
    home_rule r = rule(home_rule::settings, place(path));
    r.format = format;
    r.data = data;
    add(std::move(r));
  };
  for (const auto& s : agent_settings) settings(s.path, s.format, *s.data);
  settings("~/.gemini/trustedFolders.json", settings_format::json, gemini_trust);
  for (const char* path : key_stores) add(rule(home_rule::key_store, place(path)));
  // files.writable opens a path on purpose, a cache's below it too.
  for (const auto& path : writable_paths(in.layers, home)) {
    std::erase_if(rules_, [&](const home_rule& r) {
      return r.what == home_rule::dropped && within(r.path, normal_path(path));
    });
    add(rule(home_rule::through, path));
  }
  for (const char* path : agent_scratch)
    if (auto p = place(path); !p.empty()) scratch_.push_back(normal_path(p));
}

namespace {

// `path` is at or under `rule`, whose last name may end in "*" (any name starting so).
bool rule_holds(const std::string& rule, const std::string& path) {
  if (!rule.ends_with('*')) return within(path, rule);
  return path.starts_with(std::string_view(rule.data(), rule.size() - 1));
}

}  // namespace

const home_rule* home_rules::find(const std::string& path) const {
  const home_rule* best = nullptr;
  for (const auto& r : rules_)
    if (rule_holds(r.path, path) && (!best || r.path.size() > best->path.size())) best = &r;
  return best;
}

bool home_rules::any_below(const std::string& dir) const {
  return std::any_of(rules_.begin(), rules_.end(),
                     [&](const home_rule& r) { return r.path != dir && within(r.path, dir); });
}

std::vector<std::string> home_rules::scratch_directories() const {
  std::vector<std::string> out;
  for (const auto& dir : scratch_) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(dir);
  }
  return out;
}

}  // namespace broker::sandbox
