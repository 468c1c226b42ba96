/* cmd_ppl.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_ppl(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("ppl", "not implemented yet");
}
