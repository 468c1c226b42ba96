/* main.c — `cmf`: dispatches argv[1] to its subcommand (commands.h), then
 * closes stdout and checks it: output lost to a full disk, a closed pipe
 * reader or /dev/full is an error (exit status 1), never a silent success. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include <errno.h>
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
                 "usage: cmf <command> [options]   (cmf <command> --help for details)\n"
                 "options take their value as the next argument or as --name=value;\n"
                 "every command takes --help and --version\n\ncommands:\n",
            cmf_version());
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(out, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fputs("\nexit status (every command): 0 success, 1 a failure at run time (a file that\n"
          "cannot be read or fails a check, a write that fails; message on stderr),\n"
          "2 a usage error (unknown option, missing or malformed value, missing argument).\n",
          out);
}

/* Flushes and closes stdout; a write that failed now or earlier (the
 * error flag stays set) turns the exit status into 1 with a message (a
 * command that failed already keeps its status and its own message). */
static int close_stdout(const char *cmd, int rc)
{
    bool failed = ferror(stdout) != 0;
    errno = 0;
    if (fclose(stdout) != 0) failed = true;
    int e = errno;
    if (!failed || (rc && !e)) return rc; /* a failed command has said why */
    fprintf(stderr, "cmf%s%s: writing to stdout failed: %s\n", cmd ? " " : "", cmd ? cmd : "",
            e ? strerror(e) : "write error");
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return close_stdout(NULL, argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cmf %s\n", cmf_version());
        return close_stdout(NULL, 0);
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name) && argc == 3 && !strcmp(argv[2], "--version")) {
            printf("cmf %s\n", cmf_version()); /* also for commands with subcommands (skill) */
            return close_stdout(argv[1], 0);
        }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return close_stdout(argv[1], COMMANDS[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "cmf: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
