/* cmd_keygen.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_keygen(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("keygen", "not implemented yet");
}
