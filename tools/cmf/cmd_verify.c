/* cmd_verify.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_verify(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("verify", "not implemented yet");
}
