#include "plugin_option.hpp"

#include "attnsel/errors.hpp"
#include "attnsel/plugin_loader.hpp"
#include "attnsel/registry.hpp"

namespace attnsel::cli {

void add_plugin_option(CLI::App& app) {
  register_builtin_backends();  // ATTNSEL_PLUGINS now, so that its warnings come first
  // Subcommands pass options they do not know to the main app, so --plugin may follow
  // the subcommand's name too.
  app.fallthrough();
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  app.add_option("--plugin",
                 "load attention backends from a plugin library, 'path/to/libfoo.so' or 'libfoo.so:init_symbol' "
                 "(a bare name is searched on ATTNSEL_PLUGIN_PATH); repeatable")
      ->type_name("LIB[:SYMBOL]")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->each([](const std::string& spec) {
        try {
          (void)load_plugin(spec);
        } catch (const Error& e) {
          throw CLI::ValidationError(e.what());
        }
      });
}

}  // namespace attnsel::cli
