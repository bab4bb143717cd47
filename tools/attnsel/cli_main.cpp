// The attnsel command: subcommands are registered explicitly, one line each.
#include "cli_main.hpp"

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "common_options.hpp"
#include "plugin_option.hpp"

namespace attnsel::cli {

int cli_main(int argc, char** argv) {
  CLI::App app{"attnsel: chooses, explains and runs the attention backend vLLM would use", "attnsel"};
  app.require_subcommand(1);
  CommandContext context;

  add_select_command(app, context);
  add_list_command(app, context);
  add_plan_command(app, context);
  add_plugin_option(app);
  add_run_command(app, context);
  add_bench_command(app, context);

  return run_cli(app, context, argc, argv);
}

}  // namespace attnsel::cli
