/* cmd_logits.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_logits(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("logits", "not implemented yet");
}
