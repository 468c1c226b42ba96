/* cmd_convert.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_convert(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("convert", "not implemented yet");
}
