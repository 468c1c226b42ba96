/* cmd_chat.c — `cmf chat FILE`: the interactive chat of `cmf run -i`
 * (same options, same template handling); lives in cmd_run.c. */
#include "cli.h"
#include "commands.h"

#include <stdbool.h>

int cmd_run_main(const char *cmd, int argc, char **argv, bool force_interactive);

int cmd_chat(int argc, char **argv) { return cmd_run_main("chat", argc, argv, true); }
