/* cmd_requant.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_requant(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("requant", "not implemented yet");
}
