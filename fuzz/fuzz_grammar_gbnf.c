/* fuzz_grammar_gbnf.c — fuzz entry point for the GBNF parser and the
 * matcher: the input is parsed as a grammar; when it parses, its own bytes
 * are run through the matcher (up to 4 KiB), copying states on the way. */
#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmf__gram *g = NULL;
    if (cmf__gram_parse((const char *)data, size, "fuzz.gbnf", &g) != CMF_OK) return 0;
    cmf__gstate a = {0}, b = {0}, c = {0};
    if (cmf__gstate_init(g, &a) == CMF_OK) {
        cmf__gstate *cur = &a, *nx = &b;
        for (size_t i = 0; i < size && i < 4096; i++) {
            if (cmf__gstate_byte(g, cur, data[i], nx) != 1) break;
            cmf__gstate *t = cur;
            cur = nx, nx = t;
            if (cmf__gstate_copy(&c, cur) != CMF_OK) break;
            (void)cmf__gstate_can_end(&c);
        }
    }
    cmf__gstate_free(&a);
    cmf__gstate_free(&b);
    cmf__gstate_free(&c);
    cmf__gram_free(g);
    return 0;
}
