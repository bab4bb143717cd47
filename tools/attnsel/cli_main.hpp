// The attnsel command's entry point, in the CLI library so that main.cpp compiles without
// CLI11 (header-only, and most of each object that includes it).
#pragma once

namespace attnsel::cli {

/// Builds the command line's parser with every subcommand, parses `argv` and runs the
/// chosen subcommand; returns the process exit status (see ExitCode).
int cli_main(int argc, char** argv);

}  // namespace attnsel::cli
