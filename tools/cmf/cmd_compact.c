/* cmd_compact.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_compact(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("compact", "not implemented yet");
}
