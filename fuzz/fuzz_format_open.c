/* fuzz_format_open.c — fuzz entry point for the container reader: opens
 * the input bytes as a CMF file from memory (every envelope, directory,
 * header, masks and index check), and when it opens, looks every tensor up
 * by name and runs the full verify, which reads every tensor's bytes. */
#include "format/format.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = (size & 1) != 0;
    cmf__file *f = NULL;
    if (cmf__file_open_memory(data, size, "fuzz", &o, &f) != CMF_OK) return 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (cmf__file_find(f, f->tensors[i].name) == NULL) abort(); /* an opened file finds its own names */
    cmf__verify_problem *p = NULL;
    size_t n = 0;
    cmf__file_verify(f, NULL, NULL, &p, &n);
    free(p);
    const cmf__masks *ms = cmf__file_mask_set(f);
    for (uint32_t i = 0; ms && i < ms->n_masks; i++)
        (void)cmf__mask_ffn_bit(ms, &ms->masks[i], 0, 0);
    cmf__file_free(f);
    return 0;
}
