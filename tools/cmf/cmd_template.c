/* cmd_template.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_template(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("template", "not implemented yet");
}
