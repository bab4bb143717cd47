// `attnsel list`: every registered backend with its capabilities on a platform, or (with
// --priorities) the platform's automatic priority lists.
#include <fmt/format.h>

#include <memory>

#include "backend_report.hpp"
#include "commands.hpp"
#include "common_options.hpp"
#include "json_output.hpp"
#include "priority_report.hpp"

namespace attnsel::cli {

namespace {

struct ListOptions {
  PlatformOptions platform;
  OutputOptions output;
  bool markdown = false;
  bool priorities = false;
};

int run_list(const ListOptions& o) {
  const std::shared_ptr<Platform> platform = o.platform.make_platform();
  if (o.priorities) {
    const std::vector<PriorityReport> reports = report_priorities(*platform);
    if (o.output.json) {
      nlohmann::ordered_json j = {{"platform", platform->spec()},
                          {"mode", std::string(mode_name(platform->mode()))},
                          {"configurations", nlohmann::ordered_json::array()}};
      for (const PriorityReport& r : reports) j["configurations"].push_back(to_json(r));
      print_json(j);
    } else {
      fmt::print("{}", o.markdown ? render_markdown(*platform, reports) : render_text(*platform, reports));
    }
    return kExitChosen;
  }
  const std::vector<BackendReport> reports = report_backends(*platform);
  if (o.output.json) {
    print_json(report::backends_json(*platform, reports));
  } else {
    fmt::print("{}", o.markdown ? render_markdown(*platform, reports) : render_text(*platform, reports));
  }
  return kExitChosen;
}

}  // namespace

void add_list_command(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* sub = app.add_subcommand("list", "list every registered backend with its capabilities on a platform");
  options->platform.add_to(*sub);
  options->output.add_to(*sub);
  CLI::Option* markdown = sub->add_flag("--markdown", options->markdown, "print Markdown tables (for the docs)");
  markdown->excludes(sub->get_option("--json"));
  sub->add_flag("--priorities", options->priorities,
                "print the platform's automatic priority lists for the main configurations instead");
  sub->callback([options, &context] {
    context.run = [options] { return run_command(options->output.json, [&] { return run_list(*options); }); };
  });
}

}  // namespace attnsel::cli
