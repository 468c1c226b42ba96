/* cmd_import_gguf.c — placeholder until this subcommand lands; says so and fails. */
#include "cli.h"
#include "commands.h"

int cmd_import_gguf(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("import_gguf", "not implemented yet");
}
