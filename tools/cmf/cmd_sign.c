/* cmd_sign.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_sign(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("sign", "not implemented yet");
}
