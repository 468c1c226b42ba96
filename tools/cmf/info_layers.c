/* info_layers.c — the part of `cmf info` that describes the network: the
 * MoE block of the header `arch` and the layer schedule, one row per layer,
 * read from the parsed arch (model/arch.h, the struct the engine runs).
 * The schedule joins what the header declares (layer_types, per-layer head
 * dims, sliding window, linear-attention dims) with what the directory
 * holds, because the engine decides by tensor presence too: a layer is MoE
 * when `mlp.gate.weight` exists, has a shared expert when
 * `mlp.shared_expert.*` does, and a per-layer input block when
 * `per_layer_input_gate.weight` does (ARCH_HEADER.md, ARCHS.md). */
#include "info_layers.h"

#include <stdio.h>
#include <string.h>

static const cmf__tensor *layer_tensor(const cmf__file *f, int64_t layer, const char *suffix)
{
    char name[256];
    snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)layer, suffix);
    return cmf__file_find(f, name);
}

/* A JSON integer field of a schedule row (0 when absent). */
static json_int_t row_int(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* Routed experts present in the directory for one layer (their down
 * projections, per-expert or fused `[E, hidden, inter]`). `declared` is
 * bounded by the arch parse (CMF__ARCH_MAX_EXPERTS). */
static json_int_t count_experts(const cmf__file *f, int64_t layer, int64_t declared)
{
    const cmf__tensor *fused = layer_tensor(f, layer, "mlp.experts.down_proj");
    if (fused && fused->ndim == 3) return (json_int_t)fused->shape[0];
    json_int_t n = 0;
    for (int64_t e = 0; e < declared; e++) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, "mlp.experts.%lld.down_proj.weight", (long long)e);
        if (layer_tensor(f, layer, suffix)) n++;
    }
    return n;
}

static json_t *attention_row(const cmf__arch *a, int64_t i)
{
    json_t *row = json_object();
    json_object_set_new(row, "heads", json_integer(a->layer_n_head[i]));
    json_object_set_new(row, "kv_heads", json_integer(a->n_head_kv));
    json_object_set_new(row, "head_dim", json_integer(a->layer_head_dim[i]));
    bool sliding = a->layer_kind[i] == CMF__LAYER_SLIDING;
    const cmf__rope_cfg *r = sliding ? &a->rope_local : &a->rope_full;
    if (sliding) json_object_set_new(row, "window", json_integer(a->sliding_window));
    json_object_set_new(row, "rope_theta", json_real(r->theta));
    json_object_set_new(row, "rotary_fraction", json_real(r->partial));
    if (r->type != CMF__ROPE_DEFAULT) json_object_set_new(row, "rope_type", json_string(cmf__rope_type_name(r->type)));
    return row;
}

static json_t *linear_row(const cmf__arch *a)
{
    const cmf__arch_linear *g = &a->linear;
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "key_heads", (json_int_t)g->num_key_heads, "key_dim",
                     (json_int_t)g->key_head_dim, "value_heads", (json_int_t)g->num_value_heads, "value_dim",
                     (json_int_t)g->value_head_dim, "conv_kernel", (json_int_t)g->conv_kernel_dim);
}

static json_t *ffn_row(const cmf__file *f, const cmf__arch *a, int64_t i)
{
    const cmf__arch_moe *moe = &a->moe;
    if (layer_tensor(f, i, "mlp.gate.weight") && moe->present) {
        json_t *row = json_pack("{s:s, s:I, s:I, s:I}", "kind", "moe", "experts",
                                count_experts(f, i, moe->num_experts), "top_k", (json_int_t)moe->top_k,
                                "expert_intermediate", (json_int_t)moe->moe_intermediate_size);
        const cmf__tensor *sh = layer_tensor(f, i, "mlp.shared_expert.down_proj.weight");
        if (sh && sh->ndim == 2) {
            json_object_set_new(row, "shared_intermediate", json_integer((json_int_t)sh->shape[1]));
            json_object_set_new(row, "shared_gated", json_boolean(layer_tensor(f, i, "mlp.shared_expert_gate.weight")));
        }
        return row;
    }
    const cmf__tensor *down = layer_tensor(f, i, "mlp.down_proj.weight");
    return json_pack("{s:s, s:I}", "kind", "dense", "intermediate",
                     down && down->ndim == 2 ? (json_int_t)down->shape[1] : (json_int_t)a->intermediate_size);
}

json_t *info_layer_schedule(const cmf__file *f, const cmf__arch *a)
{
    if (!a) return json_null();
    json_t *rows = json_array();
    for (int64_t i = 0; i < a->n_layer; i++) { /* n_layer <= CMF__ARCH_MAX_LAYERS */
        json_t *row = json_pack("{s:I, s:s}", "layer", (json_int_t)i, "type", cmf__layer_kind_name(a->layer_kind[i]));
        if (a->layer_kind[i] == CMF__LAYER_LINEAR) json_object_set_new(row, "linear_attention", linear_row(a));
        else json_object_set_new(row, "attention", attention_row(a, i));
        json_object_set_new(row, "ffn", ffn_row(f, a, i));
        if (layer_tensor(f, i, "per_layer_input_gate.weight"))
            json_object_set_new(row, "per_layer_input", json_true());
        json_array_append_new(rows, row);
    }
    return rows;
}

static void print_moe(const cmf__arch_moe *moe)
{
    if (!moe->present) return;
    printf("moe:         %lld experts, top-%lld, expert ffn %lld, router %s%s", (long long)moe->num_experts,
           (long long)moe->top_k, (long long)moe->moe_intermediate_size, moe->router_sigmoid ? "sigmoid" : "softmax",
           moe->norm_topk_prob ? ", top-k renormalised" : "");
    if (moe->shared_expert_intermediate_size)
        printf(", shared expert ffn %lld", (long long)moe->shared_expert_intermediate_size);
    if (moe->routed_scaling_factor != 1.0) printf(", scaling %g", moe->routed_scaling_factor);
    printf("\n");
}

/* One row as text; rows that read the same collapse into a range. */
static void row_text(const json_t *row, char *out, size_t cap)
{
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__)
    PUT("%-17s", json_string_value(json_object_get(row, "type")));
    const json_t *a = json_object_get(row, "attention"), *l = json_object_get(row, "linear_attention");
    if (a) {
        PUT(" heads %lld/%lld x %lld", (long long)row_int(a, "heads"), (long long)row_int(a, "kv_heads"),
            (long long)row_int(a, "head_dim"));
        if (json_object_get(a, "window")) PUT(", window %lld", (long long)row_int(a, "window"));
        const json_t *th = json_object_get(a, "rope_theta"), *fr = json_object_get(a, "rotary_fraction");
        const json_t *rt = json_object_get(a, "rope_type");
        if (json_is_number(th)) PUT(", rope %.10g", json_number_value(th));
        if (json_is_string(rt)) PUT(" %s", json_string_value(rt));
        if (json_is_number(fr) && json_number_value(fr) != 1.0) PUT(" on %g%%", 100.0 * json_number_value(fr));
    } else if (l) {
        PUT(" deltanet qk %lldx%lld, v %lldx%lld, conv %lld", (long long)row_int(l, "key_heads"),
            (long long)row_int(l, "key_dim"), (long long)row_int(l, "value_heads"), (long long)row_int(l, "value_dim"),
            (long long)row_int(l, "conv_kernel"));
    }
    const json_t *ffn = json_object_get(row, "ffn");
    if (strcmp(json_string_value(json_object_get(ffn, "kind")), "moe") == 0) {
        PUT(" | moe %lld experts top-%lld x %lld", (long long)row_int(ffn, "experts"), (long long)row_int(ffn, "top_k"),
            (long long)row_int(ffn, "expert_intermediate"));
        if (json_object_get(ffn, "shared_intermediate"))
            PUT(" + shared %lld%s", (long long)row_int(ffn, "shared_intermediate"),
                json_is_true(json_object_get(ffn, "shared_gated")) ? " (gated)" : "");
    } else {
        PUT(" | ffn %lld", (long long)row_int(ffn, "intermediate"));
    }
    if (json_is_true(json_object_get(row, "per_layer_input"))) PUT(" | per-layer input");
#undef PUT
}

void info_print_layers(const cmf__arch *a, const json_t *schedule)
{
    if (a) print_moe(&a->moe);
    if (!json_is_array(schedule) || !json_array_size(schedule)) return;
    printf("layers:      %zu\n", json_array_size(schedule));
    char cur[512], next[512];
    size_t start = 0, n = json_array_size(schedule);
    row_text(json_array_get(schedule, 0), cur, sizeof cur);
    for (size_t i = 1; i <= n; i++) {
        if (i < n) row_text(json_array_get(schedule, i), next, sizeof next);
        if (i < n && strcmp(next, cur) == 0) continue;
        char range[32];
        if (i - 1 == start) snprintf(range, sizeof range, "%zu", start);
        else snprintf(range, sizeof range, "%zu-%zu", start, i - 1);
        printf("  %-9s  %s\n", range, cur);
        if (i < n) memcpy(cur, next, sizeof cur), start = i;
    }
}
