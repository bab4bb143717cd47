// The attnsel command.
#include "cli_main.hpp"

int main(int argc, char** argv) { return attnsel::cli::cli_main(argc, argv); }
