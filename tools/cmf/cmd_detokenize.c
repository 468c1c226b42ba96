/* cmd_detokenize.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_detokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("detokenize", "not implemented yet");
}
