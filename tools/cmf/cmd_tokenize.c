/* cmd_tokenize.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("tokenize", "not implemented yet");
}
