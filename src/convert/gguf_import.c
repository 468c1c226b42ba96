/* gguf_import.c — GGUF tensors onto Hugging Face names (dims reversed:
 * GGUF lists ne0, the fastest dim, first), MoE banks split per expert,
 * llama.cpp's q/k row permutation undone for
 * llama-arch files; then the stream into the CMF writer, one tensor at a
 * time (dequantized to f32, re-encoded by the quant policy). */
#include "convert/gguf.h"
#include "convert/convert_internal.h"
#include "format/format.h"
#include "quant/quant.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/file.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static cmf_status push(cmf__gguf_plan *p, size_t *cap, const cmf__gguf_out *o)
{
    if (p->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        cmf__gguf_out *n = realloc(p->outs, nc * sizeof *n);
        if (!n) return cmf__error(CMF_ERR_NOMEM, "gguf plan: out of memory");
        p->outs = n;
        *cap = nc;
    }
    p->outs[p->n++] = *o;
    return CMF_OK;
}

void cmf__gguf_plan_free(cmf__gguf_plan *plan)
{
    free(plan->outs);
    plan->outs = NULL;
    plan->n = 0;
}

/* Reversed dims of t into o (HF order). */
static void hf_shape(const cmf__gguf_tensor *t, cmf__gguf_out *o)
{
    o->ndim = (int)t->ndim;
    for (uint32_t d = 0; d < t->ndim; d++) o->shape[d] = t->ne[t->ndim - 1 - d];
}

typedef struct name_map {
    const char *gguf;  /* blk.N.<gguf>.weight|bias */
    const char *hf;    /* model.layers.N.<hf>.weight|bias */
} name_map;

static const name_map layer_names[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_qkv", "self_attn.qkv_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
};

static const char *const expert_banks[][2] = {
    {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"},
    {"ffn_gate", "gate_proj"},      {"ffn_up", "up_proj"},      {"ffn_down", "down_proj"},
};

static cmf_status unmapped(const cmf__gguf *g, const cmf__gguf_tensor *t, const char *why)
{
    return cmf__error(CMF_ERR_CONFIG, "%s: tensor '%s' at 0x%llx: %s", g->path, t->name,
                      (unsigned long long)t->info_off, why);
}

/* One blk.N.* tensor. */
static cmf_status plan_layer(const cmf__gguf *g, const cmf__gguf_tensor *t, unsigned layer, const char *rest,
                             bool gemma, bool phi3, bool permute, uint64_t n_head, uint64_t n_head_kv,
                             cmf__gguf_plan *p, size_t *cap)
{
    char base[96];
    const char *dot = strrchr(rest, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0) || (size_t)(dot - rest) >= sizeof base)
        return unmapped(g, t, "no .weight/.bias suffix");
    memcpy(base, rest, (size_t)(dot - rest));
    base[dot - rest] = 0;
    const char *suffix = dot + 1;
    cmf__gguf_out o;
    memset(&o, 0, sizeof o);
    o.src = t;
    hf_shape(t, &o);

    /* expert banks [n_expert, out, in] and llama.cpp's older per-expert
     * tensors blk.N.ffn_gate.E.weight */
    for (size_t i = 0; i < sizeof expert_banks / sizeof expert_banks[0]; i++) {
        size_t bl = strlen(expert_banks[i][0]);
        if (strncmp(base, expert_banks[i][0], bl) != 0) continue;
        if (i < 3 && base[bl] == 0) {
            if (t->ndim != 3) return unmapped(g, t, "expert bank is not 3-D");
            uint64_t per = t->ne[0] * t->ne[1];
            for (uint64_t e = 0; e < t->ne[2]; e++) {
                cmf__gguf_out x = o;
                x.ndim = 2;
                x.shape[0] = t->ne[1];
                x.shape[1] = t->ne[0];
                x.shape[2] = 0;
                x.elem_off = e * per;
                snprintf(x.name, sizeof x.name, "model.layers.%u.mlp.experts.%llu.%s.%s", layer,
                         (unsigned long long)e, expert_banks[i][1], suffix);
                cmf_status st = push(p, cap, &x);
                if (st) return st;
            }
            return CMF_OK;
        }
        if (i >= 3 && base[bl] == '.' && base[bl + 1] >= '0' && base[bl + 1] <= '9') {
            char *end;
            unsigned long e = strtoul(base + bl + 1, &end, 10);
            if (*end) break;
            snprintf(o.name, sizeof o.name, "model.layers.%u.mlp.experts.%lu.%s.%s", layer, e,
                     expert_banks[i][1], suffix);
            return push(p, cap, &o);
        }
    }
    if (strcmp(base, "ffn_norm") == 0) {
        snprintf(o.name, sizeof o.name, "model.layers.%u.%s.%s", layer,
                 gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm", suffix);
        return push(p, cap, &o);
    }
    if (phi3 && strcmp(base, "ffn_up") == 0) {
        /* phi3's fused gate_up_proj (rows: gate, then up), kept fused as
         * in the checkpoint */
        snprintf(o.name, sizeof o.name, "model.layers.%u.mlp.gate_up_proj.%s", layer, suffix);
        return push(p, cap, &o);
    }
    if (strcmp(base, "ffn_gate_inp_shexp") == 0 && t->ndim == 1) {
        /* qwen2moe's shared-expert gate is [1, hidden] in HF */
        o.ndim = 2;
        o.shape[0] = 1;
        o.shape[1] = t->ne[0];
    }
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
        if (strcmp(base, layer_names[i].gguf) != 0) continue;
        if (t->ndim > 2) return unmapped(g, t, "more than 2 dims");
        snprintf(o.name, sizeof o.name, "model.layers.%u.%s.%s", layer, layer_names[i].hf, suffix);
        if (permute && strcmp(base, "attn_q") == 0) o.permute_heads = (uint32_t)n_head;
        if (permute && strcmp(base, "attn_k") == 0) o.permute_heads = (uint32_t)n_head_kv;
        if (o.permute_heads) {
            uint64_t rows = o.shape[0];
            if (rows % o.permute_heads || (rows / o.permute_heads) % 2)
                return unmapped(g, t, "rows are not a whole number of even-width heads");
        }
        o.is_router = strcmp(base, "ffn_gate_inp") == 0 || strcmp(base, "ffn_gate_inp_shexp") == 0;
        return push(p, cap, &o);
    }
    return unmapped(g, t, "no Hugging Face name for this tensor");
}

cmf_status cmf__gguf_plan_make(const cmf__gguf *g, cmf__gguf_plan *plan)
{
    plan->outs = NULL;
    plan->n = 0;
    char an[64];
    bool permute;
    cmf_status st = cmf__gguf_arch_name(g, an, sizeof an, &permute);
    if (st) return st;
    char k[128];
    uint64_t n_head = 0, n_head_kv = 0;
    snprintf(k, sizeof k, "%s.attention.head_count", an);
    if ((st = cmf__gguf_get_uint(g, k, &n_head))) return cmf__error_prefix(CMF_ERR_CONFIG, "plan");
    snprintf(k, sizeof k, "%s.attention.head_count_kv", an);
    if (!cmf__gguf_find_kv(g, k)) n_head_kv = n_head;
    else if ((st = cmf__gguf_get_uint(g, k, &n_head_kv))) return st;
    if (n_head == 0 || n_head_kv == 0 || n_head > (1u << 20) || n_head_kv > (1u << 20))
        return cmf__error(CMF_ERR_CONFIG, "%s: head counts %llu / %llu not allowed", g->path,
                          (unsigned long long)n_head, (unsigned long long)n_head_kv);
    bool gemma = strncmp(an, "gemma", 5) == 0, phi3 = strcmp(an, "phi3") == 0;
    size_t cap = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const cmf__gguf_tensor *t = &g->tensors[i];
        cmf__gguf_out o;
        memset(&o, 0, sizeof o);
        o.src = t;
        hf_shape(t, &o);
        const char *top = NULL;
        if (strcmp(t->name, "rope_freqs.weight") == 0) continue; /* read into the arch's rope_scaling */
        if (strcmp(t->name, "token_embd.weight") == 0) top = "model.embed_tokens.weight";
        else if (strcmp(t->name, "output.weight") == 0) top = "lm_head.weight";
        else if (strcmp(t->name, "output_norm.weight") == 0) top = "model.norm.weight";
        if (top) {
            if (t->ndim > 2) {
                st = unmapped(g, t, "more than 2 dims");
                goto fail;
            }
            snprintf(o.name, sizeof o.name, "%s", top);
            if ((st = push(plan, &cap, &o))) goto fail;
            continue;
        }
        unsigned layer;
        int used = 0;
        if (sscanf(t->name, "blk.%u.%n", &layer, &used) == 1 && used > 0) {
            if ((st = plan_layer(g, t, layer, t->name + used, gemma, phi3, permute, n_head, n_head_kv, plan, &cap)))
                goto fail;
            continue;
        }
        st = unmapped(g, t, "no Hugging Face name for this tensor");
        goto fail;
    }
    return CMF_OK;
fail:
    cmf__gguf_plan_free(plan);
    return st;
}

cmf_status cmf__gguf_out_f32(const cmf__gguf *g, const cmf__gguf_out *o, float **out, uint64_t *n_out)
{
    *out = NULL;
    uint64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d]; /* bounded by the source's element count */
    const cmf__gguf_tensor *t = o->src;
    uint32_t be, bb;
    if (!cmf__ggml_type_size(t->type, &be, &bb) || !cmf__ggml_can_dequant(t->type))
        return cmf__error(CMF_ERR_DTYPE, "%s: tensor '%s' at 0x%llx: ggml type %s cannot be imported yet", g->path,
                          t->name, (unsigned long long)t->info_off,
                          cmf__ggml_type_name(t->type) ? cmf__ggml_type_name(t->type) : "?");
    if (o->elem_off % be || n % be || o->elem_off + n > t->n_elems)
        return cmf__error(CMF_ERR_SIZE, "%s: tensor '%s': slice [%llu, +%llu) not on %u-blocks", g->path, t->name,
                          (unsigned long long)o->elem_off, (unsigned long long)n, be);
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return cmf__error(CMF_ERR_NOMEM, "%s: tensor '%s': out of memory", g->path, t->name);
    cmf_status st = cmf__ggml_dequant(t->type, t->data + o->elem_off / be * bb, n, v);
    if (st) {
        free(v);
        return cmf__error_prefix(st, "%s: tensor '%s'", g->path, t->name);
    }
    if (o->permute_heads) {
        /* llama.cpp stored HF row h*hd + j*(hd/2) + i at h*hd + 2*i + j
         * (reshape(heads, 2, hd/2).swapaxes(1, 2)); move each row back. */
        uint64_t rows = o->shape[0], cols = n / rows, hd = rows / o->permute_heads, half = hd / 2;
        float *w = malloc((n ? n : 1) * sizeof *w);
        if (!w) {
            free(v);
            return cmf__error(CMF_ERR_NOMEM, "%s: tensor '%s': out of memory", g->path, t->name);
        }
        for (uint64_t h = 0; h < o->permute_heads; h++)
            for (uint64_t i = 0; i < half; i++)
                for (uint64_t j = 0; j < 2; j++)
                    memcpy(w + (h * hd + j * half + i) * cols, v + (h * hd + 2 * i + j) * cols, cols * sizeof *w);
        free(v);
        v = w;
    }
    *out = v;
    *n_out = n;
    return CMF_OK;
}

cmf__gguf_import_opts cmf__gguf_import_opts_default(void)
{
    cmf__gguf_import_opts o;
    memset(&o, 0, sizeof o);
    o.quant = -1;
    return o;
}

/* The CMF dtype for one planned tensor. */
static int pick_dtype(const cmf__gguf_out *o, int quant)
{
    if (o->ndim != 2 || o->is_router) return CMF_DTYPE_F32;
    int d;
    if (quant >= 0) d = quant;
    else if (o->src->type == CMF_GGML_F32) d = CMF_DTYPE_F32;
    else if (o->src->type == CMF_GGML_F16) d = CMF_DTYPE_F16;
    else if (o->src->type == CMF_GGML_BF16) d = CMF_DTYPE_BF16;
    else d = CMF_DTYPE_Q8_ROW;
    const cmf__dtype_info *di = cmf__dtype_get(d);
    if (di && di->needs_cols32 && o->shape[1] % 32) d = CMF_DTYPE_Q8_ROW; /* shape the dtype cannot hold */
    return d;
}

/* Each default filled in for an absent metadata key (and not given by
 * --set) is said, with the value and the --set that changes it; the ones
 * --set gave are dropped from `filled` (the provenance's defaults_filled). */
static void warn_defaults(const char *in, json_t *filled, const json_t *over)
{
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(filled, tmp, k, v) {
        const char *field = json_string_value(json_object_get(v, "set"));
        if (over && field && json_object_get(over, field)) {
            json_object_del(filled, k);
            continue;
        }
        char *val = json_dumps(json_object_get(v, "value"), JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
        CMF_WARN("%s: metadata key '%s' missing: used %s for %s (a default; if the model differs, give "
                 "--set %s=VALUE)", in, k, val ? val : "?", field, field);
        free(val);
    }
}

/* Source bytes a planned tensor covers (its share of a split bank). */
static uint64_t out_src_bytes(const cmf__gguf_out *o)
{
    uint64_t n = 1;
    for (int d = 0; d < o->ndim; d++) n *= o->shape[d];
    return o->src->n_elems ? o->src->nbytes / (o->src->n_elems / n) : 0;
}

static void upper(char *dst, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) dst[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    dst[i] = 0;
}

cmf_status cmf__gguf_import(const char *in, const char *out_path, const cmf__gguf_import_opts *opts_in,
                            uint64_t *n_tensors, uint64_t *payload_bytes)
{
    cmf__gguf_import_opts opts = opts_in ? *opts_in : cmf__gguf_import_opts_default();
    cmf__gguf *g = NULL;
    cmf__gguf_plan plan = {0};
    json_t *header = NULL, *arch = NULL, *chat = NULL, *filled = NULL;
    char *tok = NULL;
    size_t tok_len = 0;
    cmf__writer *w = NULL;
    cmf__buf buf = {0};
    uint64_t written = 0, payload = 0;
    cmf_status st = cmf__gguf_open_set(in, &g);
    if (st) return st;
    if (!(filled = json_object())) {
        st = cmf__error(CMF_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = cmf__gguf_arch_filled(g, &arch, filled)) || (st = cmf__gguf_plan_make(g, &plan))) goto done;
    if (opts.arch_override && (st = cmf__gguf_arch_override(arch, opts.arch_override))) goto done;
    warn_defaults(in, filled, opts.arch_override);
    if (opts.quant >= 0) {
        const cmf__dtype_info *di = cmf__dtype_get(opts.quant);
        if (!di || !di->supported) {
            st = cmf__error(CMF_ERR_ARG, "%s: quant dtype %d not writable", in, opts.quant);
            goto done;
        }
    }
    st = cmf__gguf_tokenizer_json(g, &tok, &tok_len);
    if (st == CMF_ERR_NOT_FOUND) st = CMF_OK; /* tensors only: no vocab section */
    else if (st) goto done;
    if (tok && ((st = cmf__gguf_chat_bundle(g, &chat)) ||
                (st = cmf__convert_check_template(chat, "tokenizer.chat_template")))) /* the runtime would refuse it */
        goto done;

    header = json_object();
    json_object_set(header, "arch", arch);
    {
        /* quant_type: the dtype of the first 2-D weight (informational) */
        int qt = CMF_DTYPE_F32;
        for (size_t i = 0; i < plan.n; i++)
            if (plan.outs[i].ndim == 2 && !plan.outs[i].is_router) {
                qt = pick_dtype(&plan.outs[i], opts.quant);
                break;
            }
        char qn[32];
        upper(qn, sizeof qn, cmf__dtype_get(qt)->name);
        json_object_set_new(header, "quant_type", json_string(qn));
        json_t *prov = json_object();
        json_object_set_new(prov, "tool", json_string("cmf import-gguf"));
        json_object_set_new(prov, "source_format", json_string("gguf"));
        json_object_set_new(prov, "gguf_version", json_integer(g->version));
        const char *s;
        uint64_t sl;
        if (cmf__gguf_find_kv(g, "general.name") && !cmf__gguf_get_str(g, "general.name", &s, &sl))
            json_object_set_new(prov, "source_model", json_stringn(s, sl));
        if (json_object_size(filled)) json_object_set(prov, "defaults_filled", filled);
        json_object_set_new(header, "provenance", prov);
    }
    if (chat) json_object_set(header, "tokenizer_config", chat);

    uint64_t total = 0, done_bytes = 0;
    for (size_t i = 0; i < plan.n; i++) total += out_src_bytes(&plan.outs[i]);
    if (!opts.dry_run) {
        /* never over the source (or a part of its split set) */
        const char *src = g->path;
        if ((st = cmf__output_check(out_path, &src, 1))) goto done;
        for (uint32_t i = 0; i < g->n_parts; i++)
            if ((src = g->parts[i]->path) && (st = cmf__output_check(out_path, &src, 1))) goto done;
        if ((st = cmf__writer_open(out_path, &w)) || (st = cmf__writer_set_header(w, header))) goto done;
        if (tok && (st = cmf__writer_set_vocab(w, tok, tok_len))) goto done;
    }
    cmf__quant_opts qopts = cmf__quant_opts_default();
    for (size_t i = 0; i < plan.n; i++) {
        const cmf__gguf_out *o = &plan.outs[i];
        int dt = pick_dtype(o, opts.quant);
        float *v = NULL;
        uint64_t n = 0;
        if ((st = cmf__gguf_out_f32(g, o, &v, &n))) goto done;
        int64_t rows = o->ndim == 2 ? (int64_t)o->shape[0] : 1, cols = (int64_t)(n / (uint64_t)rows);
        buf.len = 0;
        st = cmf__quantize(dt, v, rows, cols, &qopts, &buf, o->name);
        free(v);
        if (st) goto done;
        if (!opts.dry_run && (st = cmf__writer_add_tensor(w, o->name, dt, o->ndim, o->shape, buf.data, buf.len)))
            goto done;
        if (opts.plan_out) {
            if (o->ndim == 2)
                fprintf(opts.plan_out, "%s [%llu, %llu] %s %zu\n", o->name, (unsigned long long)o->shape[0],
                        (unsigned long long)o->shape[1], cmf__dtype_get(dt)->name, buf.len);
            else
                fprintf(opts.plan_out, "%s [%llu] %s %zu\n", o->name, (unsigned long long)o->shape[0],
                        cmf__dtype_get(dt)->name, buf.len);
        }
        written++;
        payload += buf.len;
        done_bytes += out_src_bytes(o);
        if (opts.progress) opts.progress(opts.progress_ctx, done_bytes, total);
    }
    if (!opts.dry_run) {
        st = cmf__writer_finish(w);
        w = NULL;
        if (st) goto done;
    }
    if (n_tensors) *n_tensors = written;
    if (payload_bytes) *payload_bytes = payload;
done:
    json_decref(filled);
    if (w) cmf__writer_abort(w);
    cmf__buf_free(&buf);
    free(tok);
    json_decref(chat);
    json_decref(arch);
    json_decref(header);
    cmf__gguf_plan_free(&plan);
    cmf__gguf_free(g);
    return st;
}
