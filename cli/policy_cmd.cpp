// `broker policy check FILE...` and `broker policy default`.
#include <cstdlib>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "wrap/file_masks.hpp"

namespace broker::cli {

namespace {

int run_check(const std::vector<std::string>& files) {
  try {
    const auto layers = load_layers(files);
    nlohmann::ordered_json out;
    out["layers"] = nlohmann::ordered_json::array();
    for (const auto& layer : layers) out["layers"].push_back(config::to_json(layer));
    // What wrap keeps the command from leaving for later (DESIGN §8.1), all layers applied.
    auto& kept = out["wrap"]["protected"] = nlohmann::ordered_json::array();
    const char* home_variable = std::getenv("HOME");
    const std::string home = home_variable ? home_variable : "";
    for (auto& p : wrap::persistence_paths(layers, home)) {
      if (!home.empty() && p.path.starts_with(home + "/"))
        p.path = "~" + p.path.substr(home.size());
      kept.push_back({{"path", p.path}, {"reason", p.reason}});
    }
    std::cout << out.dump(2) << "\n";
    return exit_ok;
  } catch (const std::exception& e) {
    std::cerr << "broker: " << e.what() << "\n";
    return exit_usage;
  }
}

}  // namespace

void register_policy(CLI::App& root, int& exit_status) {
  auto* app = root.add_subcommand("policy", "Validate or show policies");
  app->require_subcommand(1);
  auto files = std::make_shared<std::vector<std::string>>();
  auto* check = app->add_subcommand(
      "check", "Validate policy files and print the effective (layered) policy; exit 2 on error");
  check->add_option("files", *files, "Policy files, one layer each")->required();
  check->callback([files, &exit_status] { exit_status = run_check(*files); });
  auto* def = app->add_subcommand("default", "Print the embedded default policy");
  def->callback([&exit_status] {
    std::cout << config::default_policy_text();
    exit_status = exit_ok;
  });
}

}  // namespace broker::cli
