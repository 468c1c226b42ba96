/* cmd_info.c — `cmf info FILE`: what a .cmf holds, from the envelope,
 * header JSON, directory and masks section only; the weight blob is never
 * read, so it answers at once on a multi-GB file. Text or --json. */
#include "cli.h"
#include "commands.h"
#include "compute/gpu.h"
#include "info_layers.h"
#include "format/format.h"
#include "opts.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *HELP =
    "usage: cmf info FILE [--json] [--tensors] [--single]\n"
    "       cmf info [FILE] --gpu [--json]\n"
    "\n"
    "Summarise a CMF v2 file without reading its weights: architecture,\n"
    "MoE block and layer schedule (attention kind, heads, window, FFN kind\n"
    "per layer; identical consecutive layers share a row),\n"
    "quantization mix (tensors and bytes per dtype), sections and sizes,\n"
    "required features, masks, skills, shards and the chat bundle. A shard\n"
    "name ({base}-NNNNN-of-NNNNN.cmf) shows the whole set. --gpu names the\n"
    "GPU the Vulkan backend would use (device, driver, memory), or why none.\n"
    "\n";
static const char *TAIL =
    "\n"
    "An arch block the runtime would refuse (a field of the wrong type or\n"
    "out of its limit, docs/ARCH_HEADER.md) is reported as `arch error:`\n"
    "(\"arch_error\" in --json) instead of the layer schedule.\n"
    "\n"
    "Exit status: 0 when the file opened (structure valid), 1 otherwise, 2 a\n"
    "usage error.\n";

static const char *FEATURE_NAMES[] = {"TENSOR_DIR", "BINARY_MASKS", "QUANT_2F", "DELTA_MASKS",
                                      "HOT_PACKS",  "LOOP_MASKS",   "SKILL_FILE"};

static json_t *features_json(uint32_t f)
{
    json_t *a = json_array();
    for (int b = 0; b < 32; b++)
        if (f >> b & 1) json_array_append_new(a, b < 7 ? json_string(FEATURE_NAMES[b]) : json_integer(b));
    return a;
}

static const char *dtype_name(int d)
{
    const cmf__dtype_info *i = cmf__dtype_get(d);
    return i ? i->name : "?";
}

static void human(uint64_t b, char *out, size_t cap)
{
    if (b < 1024) snprintf(out, cap, "%llu B", (unsigned long long)b);
    else if (b < (1ull << 20)) snprintf(out, cap, "%.1f KiB", b / 1024.0);
    else if (b < (1ull << 30)) snprintf(out, cap, "%.1f MiB", b / 1048576.0);
    else snprintf(out, cap, "%.2f GiB", b / 1073741824.0);
}

static json_t *shape_json(const cmf__tensor *t)
{
    json_t *a = json_array();
    for (int i = 0; i < t->ndim; i++) json_array_append_new(a, json_integer((json_int_t)t->shape[i]));
    return a;
}

static json_t *section_json(const cmf__section *s)
{
    if (!s->off && !s->len) return json_null();
    return json_pack("{s:I, s:I}", "off", (json_int_t)s->off, "len", (json_int_t)s->len);
}

/* Everything `info` reports, as one JSON object; text mode prints from it. */
static json_t *build(const cmf__file *f, const cmf__arch *arch, const char *arch_error, bool tensors)
{
    json_t *o = json_object();
    json_object_set_new(o, "path", json_string(f->path));
    json_object_set_new(o, "version", json_integer(f->shards[0].version));
    json_object_set_new(o, "required_features", json_integer(f->features));
    json_object_set_new(o, "feature_names", features_json(f->features));
    json_object_set_new(o, "arch", f->arch ? json_deep_copy(f->arch) : json_null());
    json_object_set_new(o, "layer_schedule", info_layer_schedule(f, arch));
    if (arch_error) json_object_set_new(o, "arch_error", json_string(arch_error));
    const json_t *qt = json_object_get(f->header, "quant_type");
    json_object_set_new(o, "quant_type", qt ? json_deep_copy(qt) : json_null());
    const json_t *prov = json_object_get(f->header, "provenance"); /* who wrote it, and defaults it filled in */
    json_object_set_new(o, "provenance", json_is_object(prov) ? json_deep_copy(prov) : json_null());
    uint64_t total = 0, count[CMF_DTYPE_COUNT_ + 1] = {0}, bytes[CMF_DTYPE_COUNT_ + 1] = {0};
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const cmf__tensor *t = &f->tensors[i];
        int d = t->dtype < CMF_DTYPE_COUNT_ ? t->dtype : CMF_DTYPE_COUNT_;
        count[d]++;
        bytes[d] += t->nbytes;
        total += t->nbytes;
    }
    json_object_set_new(o, "n_tensors", json_integer((json_int_t)f->n_tensors));
    json_object_set_new(o, "tensor_bytes", json_integer((json_int_t)total));
    json_t *mix = json_array();
    for (int d = 0; d < CMF_DTYPE_COUNT_; d++)
        if (count[d])
            json_array_append_new(mix, json_pack("{s:s, s:i, s:I, s:I}", "dtype", dtype_name(d), "id", d, "tensors",
                                                 (json_int_t)count[d], "bytes", (json_int_t)bytes[d]));
    json_object_set_new(o, "quant_mix", mix);
    json_t *shards = json_array();
    for (uint32_t s = 0; s < f->n_shards; s++) {
        const cmf__shard *sh = &f->shards[s];
        uint64_t n = 0, b = 0;
        for (uint64_t i = 0; i < f->n_tensors; i++)
            if (f->tensors[i].shard == s) n++, b += f->tensors[i].nbytes;
        json_t *secs = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "header", section_json(&sh->header), "directory",
                                 section_json(&sh->dir), "data", section_json(&sh->data), "masks",
                                 section_json(&sh->masks), "vocab", section_json(&sh->vocab), "index",
                                 section_json(&sh->index));
        json_array_append_new(shards, json_pack("{s:s, s:I, s:i, s:I, s:I, s:o}", "path", sh->path, "file_bytes",
                                                (json_int_t)sh->map.size, "no", (int)sh->shard_no, "tensors",
                                                (json_int_t)n, "tensor_bytes", (json_int_t)b, "sections", secs));
    }
    json_object_set_new(o, "shards", shards);
    const cmf__masks *ms = cmf__file_mask_set(f);
    if (ms) {
        json_t *list = json_array();
        for (uint32_t i = 0; i < ms->n_masks; i++) {
            const cmf__mask *m = &ms->masks[i];
            const json_t *q = json_object_get(m->meta, "quality"), *sp = json_object_get(m->meta, "sparsity");
            json_array_append_new(list, json_pack("{s:s, s:i, s:O, s:O, s:b}", "name", m->name, "task_id",
                                                  (int)m->task_id, "sparsity", sp ? sp : json_null(), "quality",
                                                  q ? q : json_null(), "expert_fields", m->has_expert_fields));
        }
        json_object_set_new(o, "masks", json_pack("{s:s?, s:o}", "default_task", ms->default_task, "list", list));
    } else {
        json_object_set_new(o, "masks", json_null());
    }
    const json_t *skills = json_object_get(f->header, "skills");
    json_object_set_new(o, "skills", json_is_array(skills) ? json_deep_copy(skills) : json_array());
    const json_t *tc = json_object_get(f->header, "tokenizer_config");
    json_t *chat = json_null();
    if (json_is_object(tc)) {
        const json_t *tpl = json_object_get(tc, "chat_template"), *eos = json_object_get(tc, "eos_token_ids");
        chat = json_pack("{s:b, s:O}", "chat_template", json_is_string(tpl), "eos_token_ids", eos ? eos : json_null());
    }
    json_object_set_new(o, "chat_bundle", chat);
    const cmf__section *voc = cmf__file_vocab(f);
    json_object_set_new(o, "vocab_bytes", voc ? json_integer((json_int_t)voc->len) : json_null());
    if (tensors) {
        json_t *list = json_array();
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const cmf__tensor *t = &f->tensors[i];
            json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:I, s:I, s:i}", "name", t->name, "dtype",
                                                  dtype_name(t->dtype), "shape", shape_json(t), "bytes",
                                                  (json_int_t)t->nbytes, "off", (json_int_t)t->off, "shard",
                                                  (int)t->shard));
        }
        json_object_set_new(o, "tensors", list);
    }
    return o;
}

static void print_arch(const json_t *arch)
{
    static const char *keys[] = {"arch_name", "num_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                                 "num_kv_heads", "head_dim", "vocab_size", "norm_style", "rope_theta",
                                 "max_position_embeddings", "tie_word_embeddings"};
    if (!arch) {
        printf("arch:        (none)\n");
        return;
    }
    printf("arch:        ");
    int col = 13;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(arch, keys[i]);
        if (!v) continue;
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        int w = (int)(strlen(keys[i]) + (s ? strlen(s) : 1) + 3);
        if (col > 13 && col + w > 90) {
            printf(",\n             ");
            col = 13;
        } else if (col > 13) {
            col += printf(", ");
        }
        col += printf("%s=%s", keys[i], s ? s : "?");
        free(s);
    }
    const json_t *moe = json_object_get(arch, "moe");
    if (json_is_object(moe)) { /* as found, like the rest: a wrong type shows as itself, never as 0 */
        char *s = json_dumps(json_object_get(moe, "num_experts"), JSON_ENCODE_ANY | JSON_COMPACT);
        printf("%smoe.num_experts=%s", col > 13 ? ", " : "", s ? s : "(absent)");
        free(s);
    }
    printf("\n");
}

static void print_text(const json_t *o, const cmf__arch *arch)
{
    char h[32];
    const json_t *shards = json_object_get(o, "shards");
    printf("file:        %s", cli_esc(json_string_value(json_object_get(o, "path"))));
    if (json_array_size(shards) > 1) printf("  (shard set of %zu files)", json_array_size(shards));
    printf("\nformat:      CMF v%lld, required_features 0x%llx (", (long long)json_integer_value(json_object_get(o, "version")),
           (long long)json_integer_value(json_object_get(o, "required_features")));
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(o, "feature_names"), i, v) printf("%s%s", i ? ", " : "", json_string_value(v));
    printf(")\n");
    print_arch(json_is_object(json_object_get(o, "arch")) ? json_object_get(o, "arch") : NULL);
    const json_t *arch_error = json_object_get(o, "arch_error");
    if (json_is_string(arch_error)) printf("arch error:  %s\n", json_string_value(arch_error));
    const char *dk;
    json_t *dv;
    json_object_foreach(json_object_get(json_object_get(o, "provenance"), "defaults_filled"), dk, dv) {
        char *val = json_dumps(json_object_get(dv, "value"), JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
        printf("default:     %s was missing from the source; %s = %s was used\n", dk,
               json_is_string(json_object_get(dv, "set")) ? json_string_value(json_object_get(dv, "set")) : "?",
               val ? val : "?");
        free(val);
    }
    info_print_layers(arch, json_object_get(o, "layer_schedule"));
    uint64_t total = (uint64_t)json_integer_value(json_object_get(o, "tensor_bytes"));
    human(total, h, sizeof h);
    printf("tensors:     %lld, %s of payload\n", (long long)json_integer_value(json_object_get(o, "n_tensors")), h);
    printf("quant mix:\n");
    json_array_foreach(json_object_get(o, "quant_mix"), i, v) {
        uint64_t b = (uint64_t)json_integer_value(json_object_get(v, "bytes"));
        human(b, h, sizeof h);
        printf("  %-10s %6lld tensors  %12s  %5.1f%%\n", json_string_value(json_object_get(v, "dtype")),
               (long long)json_integer_value(json_object_get(v, "tensors")), h, total ? 100.0 * (double)b / (double)total : 0.0);
    }
    json_array_foreach(shards, i, v) {
        uint64_t fb = (uint64_t)json_integer_value(json_object_get(v, "file_bytes"));
        human(fb, h, sizeof h);
        if (json_array_size(shards) > 1)
            printf("shard %zu:     %s  (%s, %lld tensors)\n", i + 1, cli_esc(json_string_value(json_object_get(v, "path"))), h,
                   (long long)json_integer_value(json_object_get(v, "tensors")));
        else
            printf("file size:   %s (%llu bytes)\n", h, (unsigned long long)fb);
        if (i > 0) continue;
        printf("sections:\n");
        const char *key;
        const json_t *s;
        json_object_foreach((json_t *)json_object_get(v, "sections"), key, s) {
            if (json_is_null(s)) {
                printf("  %-10s absent\n", key);
                continue;
            }
            uint64_t len = (uint64_t)json_integer_value(json_object_get(s, "len"));
            human(len, h, sizeof h);
            printf("  %-10s at 0x%-10llx %12s\n", key, (long long)json_integer_value(json_object_get(s, "off")), h);
        }
    }
    const json_t *masks = json_object_get(o, "masks");
    if (json_is_object(masks)) {
        const json_t *dt = json_object_get(masks, "default_task");
        printf("masks:       %zu", json_array_size(json_object_get(masks, "list")));
        if (json_is_string(dt)) printf(" (default '%s')", cli_esc(json_string_value(dt)));
        printf("\n");
        json_array_foreach(json_object_get(masks, "list"), i, v) {
            const json_t *q = json_object_get(v, "quality"), *sp = json_object_get(v, "sparsity");
            printf("  %-20s task %lld", cli_esc(json_string_value(json_object_get(v, "name"))),
                   (long long)json_integer_value(json_object_get(v, "task_id")));
            if (json_is_number(sp)) printf(", sparsity %.3f", json_number_value(sp));
            printf(", quality %s%s\n", json_is_null(q) ? "not measured" : "measured",
                   json_is_true(json_object_get(v, "expert_fields")) ? ", expert fields" : "");
        }
    } else {
        printf("masks:       none\n");
    }
    const json_t *skills = json_object_get(o, "skills");
    printf("skills:      %zu\n", json_array_size(skills));
    json_array_foreach(skills, i, v) {
        const json_t *id = json_object_get(v, "id"), *base = json_object_get(v, "base_dir_hash");
        printf("  %s", json_is_string(id) ? cli_esc(json_string_value(id)) : "?");
        if (json_is_string(base)) printf("  (standalone, base_dir_hash %s)", cli_esc(json_string_value(base)));
        printf("\n");
    }
    const json_t *chat = json_object_get(o, "chat_bundle");
    if (json_is_object(chat)) {
        char *eos = json_dumps(json_object_get(chat, "eos_token_ids"), JSON_ENCODE_ANY | JSON_COMPACT);
        printf("chat:        template %s, eos %s\n", json_is_true(json_object_get(chat, "chat_template")) ? "yes" : "no",
               eos ? eos : "null");
        free(eos);
    } else {
        printf("chat:        no bundle (ChatML fallback)\n");
    }
    const json_t *vb = json_object_get(o, "vocab_bytes");
    if (json_is_integer(vb)) {
        human((uint64_t)json_integer_value(vb), h, sizeof h);
        printf("tokenizer:   embedded tokenizer.json, %s\n", h);
    } else {
        printf("tokenizer:   none embedded\n");
    }
    const json_t *ts = json_object_get(o, "tensors");
    if (ts) {
        printf("\n%-60s %-9s %-22s %12s %s\n", "name", "dtype", "shape", "bytes", "shard");
        json_array_foreach(ts, i, v) {
            char *shape = json_dumps(json_object_get(v, "shape"), JSON_COMPACT);
            printf("%-60s %-9s %-22s %12lld %lld\n", cli_esc(json_string_value(json_object_get(v, "name"))),
                   cli_esc(json_string_value(json_object_get(v, "dtype"))), shape ? shape : "?",
                   (long long)json_integer_value(json_object_get(v, "bytes")),
                   (long long)json_integer_value(json_object_get(v, "shard")) + 1);
            free(shape);
        }
    }
}

/* The GPU a backend would use (compute/gpu.h), as JSON: {"device", "memory_bytes",
 * "software"} or {"error"}. */
static json_t *gpu_json(void)
{
    cmf__gpu_info dev;
    if (cmf__gpu_probe(&dev) == CMF_OK)
        return json_pack("{s:s, s:I, s:b}", "device", dev.name, "memory_bytes", (json_int_t)dev.memory, "software",
                         dev.software);
    return json_pack("{s:s}", "error", cmf_last_error());
}

static void gpu_text(const json_t *g)
{
    const json_t *dev = json_object_get(g, "device");
    if (!dev) {
        printf("gpu: none (%s)\n", json_string_value(json_object_get(g, "error")));
        return;
    }
    printf("gpu: %s%s\n", json_string_value(dev),
           json_is_true(json_object_get(g, "software")) ? "\n     a software device: --gpu auto stays on the CPU" : "");
}

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    bool as_json = false, tensors = false, single = false, gpu = false;
    const opt_spec spec[] = {
        {"--json", NULL, OPT_FLAG, &as_json, NULL, "one JSON object on stdout instead of text", NULL, NULL},
        {"--tensors", NULL, OPT_FLAG, &tensors, NULL, "also list every tensor (name, dtype, shape, bytes, shard)",
         NULL, NULL},
        {"--single", NULL, OPT_FLAG, &single, NULL, "only this file, even when it belongs to a shard set", NULL, NULL},
        {"--gpu", NULL, OPT_FLAG, &gpu, NULL, "also name the GPU the Vulkan backend would use (FILE optional)", NULL,
         NULL},
    };
    opts_cmd c = {.name = "info", .head = HELP, .tail = TAIL, .spec = spec, .n_spec = OPTS_N(spec), .pos = &path,
                  .max_pos = 1};
    int prc = opts_parse(&c, argc, argv);
    if (prc != OPTS_RUN) return prc;
    if (!path && gpu) { /* the device alone */
        json_t *g = gpu_json();
        if (as_json) {
            json_t *o = json_pack("{s:O}", "gpu", g);
            char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            if (s) puts(s);
            free(s);
            json_decref(o);
        } else {
            gpu_text(g);
        }
        json_decref(g);
        return 0;
    }
    if (!path) return opts_usage("info", "missing FILE");
    cmf__open_opts o = cmf__open_opts_default();
    o.allow_skill_file = true;
    o.single_shard = single;
    cmf__file *f = NULL;
    cmf_status st = cmf__file_open(path, &o, &f);
    if (st != CMF_OK) return cli_fail_status("info", st);
    /* the arch block as the engine reads it; a file whose block the engine
     * would refuse is still described, with the reason */
    cmf__arch arch;
    bool have_arch = false;
    char *arch_error = NULL;
    if (f->arch) {
        have_arch = cmf__arch_parse(f->arch, path, &arch) == CMF_OK;
        if (!have_arch) arch_error = strdup(cmf_last_error());
    }
    json_t *j = build(f, have_arch ? &arch : NULL, arch_error, tensors);
    free(arch_error);
    json_t *g = gpu ? gpu_json() : NULL;
    if (g && as_json) json_object_set(j, "gpu", g);
    if (as_json) {
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s) puts(s);
        free(s);
    } else {
        print_text(j, have_arch ? &arch : NULL);
        if (g) gpu_text(g);
    }
    json_decref(g);
    json_decref(j);
    if (have_arch) cmf__arch_free(&arch);
    cmf__file_free(f);
    return 0;
}
