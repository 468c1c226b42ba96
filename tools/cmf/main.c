/* main.c — `cmf`: dispatches argv[1] to its subcommand (commands.h). */
#include "cli.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    cli_cmd_fn fn;
    const char *help;
} command;

static const command COMMANDS[] = {
#define X(name, fn, help) {#name, fn, help},
    CMF_COMMAND_LIST(X)
#undef X
};

static void usage(FILE *out)
{
    fprintf(out, "cmf %s — inference runtime for CMF v2 model files\n\n"
                 "usage: cmf <command> [options]   (cmf <command> --help for details)\n\ncommands:\n",
            cmf_version());
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(out, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cmf %s\n", cmf_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "cmf: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
