/* fuzz_grammar_schema.c — fuzz entry point for JSON Schema -> GBNF (and the
 * regex subset inside it): any schema the converter accepts must give a
 * grammar the parser accepts; a grammar it writes that does not parse is
 * a bug and aborts. */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmf__buf b = {0};
    if (cmf__schema_to_gbnf((const char *)data, size, &b) == CMF_OK) {
        cmf__gram *g = NULL;
        cmf_status st = cmf__gram_parse((const char *)b.data, b.len, "fuzz schema grammar", &g);
        if (st != CMF_OK && st != CMF_ERR_NOMEM) {
            fprintf(stderr, "converted grammar does not parse: %s\n%.*s\n", cmf_last_error(), (int)b.len,
                    (const char *)b.data);
            abort();
        }
        cmf__gram_free(g);
    }
    cmf__buf_free(&b);
    return 0;
}
