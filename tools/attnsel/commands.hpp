// The attnsel subcommands. Each add_<name>_command registers one subcommand on `app`;
// when that subcommand is parsed, its callback stores the work in `context.run`, which main
// runs once parsing has finished (so global flags, e.g. plugins, are applied first).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace attnsel::cli {

/// State shared between main and the subcommands.
struct CommandContext {
  /// The parsed subcommand's body; returns the process exit status (see ExitCode).
  std::function<int()> run;
};

void add_select_command(CLI::App& app, CommandContext& context);
void add_list_command(CLI::App& app, CommandContext& context);
void add_plan_command(CLI::App& app, CommandContext& context);
void add_run_command(CLI::App& app, CommandContext& context);
void add_bench_command(CLI::App& app, CommandContext& context);

}  // namespace attnsel::cli
