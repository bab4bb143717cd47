// The global --plugin flag: shared libraries with attention backends, loaded while the
// command line is parsed so that every subcommand sees their backends.
#pragma once

#include <CLI/CLI.hpp>

namespace attnsel::cli {

/// Loads ATTNSEL_PLUGINS (failures are warnings, as for vLLM's general plugins) and adds
/// --plugin LIB[:SYMBOL] (repeatable, accepted before or after the subcommand) to `app`.
/// A --plugin that fails to load is a command-line error naming the library and why.
void add_plugin_option(CLI::App& app);

}  // namespace attnsel::cli
