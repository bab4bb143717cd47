/* A plugin that needs a function no library provides: loading it must fail cleanly
 * (the host binds every symbol at dlopen time), never crash when it is first called. */
#include "attnsel/plugin.h"

extern int attnsel_test_function_that_does_not_exist(void);

ATTNSEL_PLUGIN_EXPORT const attnsel_plugin* attnsel_plugin_init(const attnsel_host* host) {
  (void)host;
  static attnsel_plugin never;
  return attnsel_test_function_that_does_not_exist() != 0 ? &never : 0;
}
