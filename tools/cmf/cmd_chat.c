/* cmd_chat.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_chat(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("chat", "not implemented yet");
}
