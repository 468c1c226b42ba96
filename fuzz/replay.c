/* replay.c — runs a fuzz entry point over every file of the corpus folders
 * given on the command line (and a few built-in edge inputs), so the fuzz
 * targets are exercised by the ordinary suite without libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, fp) : 0;
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 1;
}

int main(int argc, char **argv)
{
    int n = 0;
    static const uint8_t edge[] = {0, 0xff, 'C', 'M', 'F', 1, 2, 0, 0, 0};
    for (size_t len = 0; len <= sizeof edge; len++) LLVMFuzzerTestOneInput(edge, len), n++;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            n += run_file(path);
        }
        closedir(d);
    }
    printf("%d passed, 0 failed\n", n);
    return 0;
}
