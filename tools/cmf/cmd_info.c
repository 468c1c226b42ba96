/* cmd_info.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("info", "not implemented yet");
}
