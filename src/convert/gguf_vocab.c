/* gguf_vocab.c — the GGUF vocabulary (tokenizer.ggml.*) as a Hugging Face
 * tokenizer.json: byte-level BPE for `gpt2` vocabularies (pre-tokenizer
 * from tokenizer.ggml.pre, as llama.cpp splits), SentencePiece-style BPE
 * with byte fallback for `llama` vocabularies (merges rebuilt from the
 * piece scores, the way HF's converter does), WordPiece for `bert`; and
 * the header chat bundle (template, eos/bos/pad ids). */
#include "convert/gguf.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char LLAMA3_RE[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?"
    "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RE[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"
    "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* Letters of deepseek-llm's split; the code points that Unicode
 * normalization would fold (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126,
 * U+212A) are escaped so that editors cannot break the ranges. */
static const char DSLLM_LETTERS[] =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-"
    "ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-"
    "ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

/* The split regexes llama.cpp applies for a tokenizer.ggml.pre value, in
 * order (each an Isolated split); NULL entries end the list. A single
 * GPT2_RE list is expressed as ByteLevel's own regex. */
typedef struct pre_desc {
    const char *names;   /* space-separated tokenizer.ggml.pre values */
    const char *re[6];
} pre_desc;

static const pre_desc pres[] = {
    {"default gpt-2 gpt2 mpt olmo jais phi-2 jina-es jina-de jina-v1-en jina-v2-es jina-v2-de jina-v2-code poro-chat viking trillion",
     {GPT2_RE}},
    {"llama3 llama-bpe smaug-bpe dbrx falcon3 pixtral", {LLAMA3_RE}},
    {"qwen2 deepseek-r1-qwen megrez", {QWEN2_RE}},
    {"starcoder refact command-r smollm codeshell exaone minerva-7b", {"\\p{N}", GPT2_RE}},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]"}},
    {"deepseek-llm",
     {"[\r\n]", DSLLM_LETTERS, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"}},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}},
};

static bool word_in(const char *list, const char *w, size_t wl)
{
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == wl && memcmp(p, w, wl) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static json_t *split_isolated(const char *re)
{
    return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", re, "behavior", "Isolated",
                     "invert", 0);
}

static json_t *byte_level(bool use_regex)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                     "use_regex", use_regex);
}

/* gpt2 pre-tokenizer for tokenizer.ggml.pre (absent: GPT-2's). */
static cmf_status gpt2_pre(const cmf__gguf *g, json_t **out)
{
    const char *pre = "default";
    uint64_t pl = 7;
    if (cmf__gguf_find_kv(g, "tokenizer.ggml.pre") && cmf__gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pl))
        return CMF_ERR_PARSE;
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        if (!word_in(pres[i].names, pre, pl)) continue;
        if (pres[i].re[0] == GPT2_RE && !pres[i].re[1]) {
            *out = byte_level(true);
            return CMF_OK;
        }
        json_t *seq = json_array();
        for (int k = 0; k < 6 && pres[i].re[k]; k++) json_array_append_new(seq, split_isolated(pres[i].re[k]));
        json_array_append_new(seq, byte_level(false));
        *out = json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", seq);
        return CMF_OK;
    }
    return cmf__error(CMF_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre '%.*s' not supported", g->path, (int)pl, pre);
}

typedef struct vocab {
    const cmf__gguf_kv *tokens, *types, *scores, *merges;
    uint64_t n;
    int64_t bos, eos, unk, pad;
    bool add_bos, add_eos;
} vocab;

static int64_t opt_id(const cmf__gguf *g, const char *key)
{
    uint64_t v;
    if (!cmf__gguf_find_kv(g, key) || cmf__gguf_get_uint(g, key, &v) || v > INT32_MAX) return -1;
    return (int64_t)v;
}

static cmf_status arr_kv(const cmf__gguf *g, const char *key, uint32_t want, bool is_float, const cmf__gguf_kv **out,
                         uint64_t n)
{
    const cmf__gguf_kv *kv = cmf__gguf_find_kv(g, key);
    *out = NULL;
    if (!kv) return CMF_OK;
    bool ok = kv->type == CMF_GGUF_ARRAY;
    if (ok && want == CMF_GGUF_STRING) ok = kv->arr_type == CMF_GGUF_STRING;
    else if (ok && is_float) ok = kv->arr_type == CMF_GGUF_F32 || kv->arr_type == CMF_GGUF_F64;
    else if (ok) ok = kv->arr_type <= CMF_GGUF_I32 || kv->arr_type == CMF_GGUF_I64 || kv->arr_type == CMF_GGUF_U64;
    if (!ok)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: wrong type", g->path, key, (unsigned long long)kv->off);
    if (n && kv->arr_n != n)
        return cmf__error(CMF_ERR_PARSE, "%s: key '%s' at 0x%llx: %llu entries, tokens has %llu", g->path, key,
                          (unsigned long long)kv->off, (unsigned long long)kv->arr_n, (unsigned long long)n);
    *out = kv;
    return CMF_OK;
}

static cmf_status load_vocab(const cmf__gguf *g, vocab *v, bool spm)
{
    memset(v, 0, sizeof *v);
    cmf_status st = arr_kv(g, "tokenizer.ggml.tokens", CMF_GGUF_STRING, false, &v->tokens, 0);
    if (st) return st;
    if (!v->tokens) return cmf__error(CMF_ERR_PARSE, "%s: key 'tokenizer.ggml.tokens' missing", g->path);
    v->n = v->tokens->arr_n;
    if (v->n == 0 || v->n > INT32_MAX)
        return cmf__error(CMF_ERR_PARSE, "%s: key 'tokenizer.ggml.tokens': %llu tokens", g->path,
                          (unsigned long long)v->n);
    if ((st = arr_kv(g, "tokenizer.ggml.token_type", 0, false, &v->types, v->n)) ||
        (st = arr_kv(g, "tokenizer.ggml.scores", 0, true, &v->scores, v->n)) ||
        (st = arr_kv(g, "tokenizer.ggml.merges", CMF_GGUF_STRING, false, &v->merges, 0)))
        return st;
    v->bos = opt_id(g, "tokenizer.ggml.bos_token_id");
    v->eos = opt_id(g, "tokenizer.ggml.eos_token_id");
    v->unk = opt_id(g, "tokenizer.ggml.unknown_token_id");
    v->pad = opt_id(g, "tokenizer.ggml.padding_token_id");
    v->add_bos = spm;
    v->add_eos = false;
    if (cmf__gguf_find_kv(g, "tokenizer.ggml.add_bos_token") &&
        (st = cmf__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos)))
        return st;
    if (cmf__gguf_find_kv(g, "tokenizer.ggml.add_eos_token") &&
        (st = cmf__gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos)))
        return st;
    if (v->bos >= (int64_t)v->n) v->bos = -1;
    if (v->eos >= (int64_t)v->n) v->eos = -1;
    if (v->unk >= (int64_t)v->n) v->unk = -1;
    if (v->pad >= (int64_t)v->n) v->pad = -1;
    return CMF_OK;
}

static int type_of(const vocab *v, uint64_t i)
{
    return v->types ? (int)cmf__gguf_arr_int(v->types, i) : TT_NORMAL;
}

static json_t *tok_str(const vocab *v, uint64_t i)
{
    const char *s;
    uint64_t l;
    cmf__gguf_arr_str(v->tokens, i, &s, &l);
    return json_stringn(s, l); /* NULL for invalid UTF-8 */
}

/* added_tokens: control and unknown tokens (special), user-defined ones
 * (not special), as llama.cpp always matches them in text. */
static json_t *added_tokens(const vocab *v)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < v->n; i++) {
        int t = type_of(v, i);
        if (t != TT_CONTROL && t != TT_UNKNOWN && t != TT_USER) continue;
        json_t *c = tok_str(v, i);
        if (!c || json_string_length(c) == 0) {
            json_decref(c);
            continue;
        }
        json_array_append_new(a, json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i, "content", c,
                                           "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", t == TT_USER,
                                           "special", t != TT_USER));
    }
    return a;
}

/* TemplateProcessing adding bos / eos as the GGUF asks; null otherwise. */
static json_t *post_processor(const vocab *v)
{
    bool bos = v->add_bos && v->bos >= 0, eos = v->add_eos && v->eos >= 0;
    if (!bos && !eos) return json_null();
    json_t *single = json_array(), *pair = json_array(), *sp = json_object();
    for (int side = 0; side < 2; side++) {
        json_t *arr = side == 0 ? single : pair;
        for (int part = 0; part < (side == 0 ? 1 : 2); part++) {
            const char *seq = part == 0 ? "A" : "B";
            if (bos) {
                json_t *c = tok_str(v, (uint64_t)v->bos);
                json_array_append_new(arr, json_pack("{s:{s:o, s:i}}", "SpecialToken", "id", c, "type_id", part));
            }
            json_array_append_new(arr, json_pack("{s:{s:s, s:i}}", "Sequence", "id", seq, "type_id", part));
            if (eos) {
                json_t *c = tok_str(v, (uint64_t)v->eos);
                json_array_append_new(arr, json_pack("{s:{s:o, s:i}}", "SpecialToken", "id", c, "type_id", part));
            }
        }
    }
    int64_t ids[2] = {bos ? v->bos : -1, eos ? v->eos : -1};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0) continue;
        const char *s;
        uint64_t l;
        cmf__gguf_arr_str(v->tokens, (uint64_t)ids[k], &s, &l);
        json_t *name = json_stringn(s, l);
        if (!name) continue;
        json_object_setn_new(sp, s, l,
                             json_pack("{s:O, s:[I], s:[O]}", "id", name, "ids", (json_int_t)ids[k], "tokens", name));
        json_decref(name);
    }
    return json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", single, "pair", pair,
                     "special_tokens", sp);
}

/* token -> id object; the first id wins when a string repeats. `bert`
 * maps llama.cpp's word-start marker back to WordPiece's "##" form. */
static cmf_status vocab_object(const cmf__gguf *g, const vocab *v, bool bert, json_t **out)
{
    json_t *o = json_object();
    for (uint64_t i = 0; i < v->n; i++) {
        const char *s;
        uint64_t l;
        cmf__gguf_arr_str(v->tokens, i, &s, &l);
        char *tmp = NULL;
        if (bert) {
            tmp = malloc(l + 3);
            if (!tmp) break;
            if (l >= 3 && memcmp(s, "\xe2\x96\x81", 3) == 0) memcpy(tmp, s + 3, l - 3), l -= 3;
            else if (l >= 2 && s[0] == '[' && s[l - 1] == ']') memcpy(tmp, s, l);
            else memcpy(tmp, "##", 2), memcpy(tmp + 2, s, l), l += 2;
            s = tmp;
        }
        if (!json_object_getn(o, s, l)) {
            json_t *id = json_integer((json_int_t)i);
            if (json_object_setn_new(o, s, l, id) != 0) {
                free(tmp);
                json_decref(o);
                return cmf__error(CMF_ERR_PARSE, "%s: key 'tokenizer.ggml.tokens': token %llu is not valid UTF-8",
                                  g->path, (unsigned long long)i);
            }
        }
        free(tmp);
    }
    *out = o;
    return CMF_OK;
}

typedef struct spm_merge {
    float score;
    uint32_t piece, left, right;
} spm_merge;

static int cmp_merge(const void *a, const void *b)
{
    const spm_merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return x->right < y->right ? -1 : (x->right > y->right);
}

/* SentencePiece BPE merges from the scores: every normal piece that splits
 * into two pieces of the vocab gives a merge; higher score merges first
 * (HF's SentencePieceExtractor order). */
static cmf_status spm_merges(const cmf__gguf *g, const vocab *v, const json_t *vobj, json_t **out)
{
    size_t cap = 1024, n = 0;
    spm_merge *m = malloc(cap * sizeof *m);
    if (!m) return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < v->n; i++) {
        if (type_of(v, i) != TT_NORMAL) continue;
        const char *s;
        uint64_t l;
        cmf__gguf_arr_str(v->tokens, i, &s, &l);
        for (uint64_t k = 1; k < l; k++) {
            if (((unsigned char)s[k] & 0xc0) == 0x80) continue; /* inside a UTF-8 sequence */
            json_t *a = json_object_getn(vobj, s, k), *b = json_object_getn(vobj, s + k, l - k);
            if (!a || !b) continue;
            if (n == cap) {
                spm_merge *nm = realloc(m, (cap *= 2) * sizeof *m);
                if (!nm) {
                    free(m);
                    return cmf__error(CMF_ERR_NOMEM, "%s: out of memory", g->path);
                }
                m = nm;
            }
            m[n].score = v->scores ? (float)cmf__gguf_arr_num(v->scores, i) : -(float)i;
            m[n].piece = (uint32_t)i;
            m[n].left = (uint32_t)json_integer_value(a);
            m[n].right = (uint32_t)json_integer_value(b);
            n++;
        }
    }
    qsort(m, n, sizeof *m, cmp_merge);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("[o, o]", tok_str(v, m[i].left), tok_str(v, m[i].right)));
    free(m);
    *out = arr;
    return CMF_OK;
}

static cmf_status gpt2_merges(const cmf__gguf *g, const vocab *v, json_t **out)
{
    json_t *arr = json_array();
    for (uint64_t i = 0; v->merges && i < v->merges->arr_n; i++) {
        const char *s;
        uint64_t l;
        cmf__gguf_arr_str(v->merges, i, &s, &l);
        const char *sp = memchr(s, ' ', l);
        json_t *a = sp ? json_stringn(s, (size_t)(sp - s)) : NULL;
        json_t *b = sp ? json_stringn(sp + 1, l - (uint64_t)(sp + 1 - s)) : NULL;
        if (!a || !b) {
            json_decref(a);
            json_decref(b);
            json_decref(arr);
            return cmf__error(CMF_ERR_PARSE, "%s: key 'tokenizer.ggml.merges' at 0x%llx: merge %llu is not 'a b'",
                              g->path, (unsigned long long)v->merges->off, (unsigned long long)i);
        }
        json_array_append_new(arr, json_pack("[o, o]", a, b));
    }
    *out = arr;
    return CMF_OK;
}

cmf_status cmf__gguf_tokenizer_json(const cmf__gguf *g, char **json_out, size_t *len)
{
    *json_out = NULL;
    *len = 0;
    const char *model;
    uint64_t ml;
    if (!cmf__gguf_find_kv(g, "tokenizer.ggml.model"))
        return cmf__error(CMF_ERR_NOT_FOUND, "%s: no tokenizer.ggml.model", g->path);
    cmf_status st = cmf__gguf_get_str(g, "tokenizer.ggml.model", &model, &ml);
    if (st) return st;
    bool gpt2 = ml == 4 && !memcmp(model, "gpt2", 4), spm = ml == 5 && !memcmp(model, "llama", 5),
         bert = ml == 4 && !memcmp(model, "bert", 4);
    if (!gpt2 && !spm && !bert)
        return cmf__error(CMF_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' not supported (gpt2, llama, bert)",
                          g->path, (int)ml, model);
    vocab v;
    if ((st = load_vocab(g, &v, spm))) return st;
    json_t *root = json_object(), *vobj = NULL, *merges = NULL, *pre = NULL, *model_o = NULL;
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    json_object_set_new(root, "added_tokens", added_tokens(&v));
    if ((st = vocab_object(g, &v, bert, &vobj))) goto fail;
    if (gpt2) {
        if ((st = gpt2_pre(g, &pre)) || (st = gpt2_merges(g, &v, &merges))) goto fail;
        json_object_set_new(root, "normalizer", json_null());
        json_object_set_new(root, "pre_tokenizer", pre);
        pre = NULL;
        json_object_set_new(root, "post_processor", post_processor(&v));
        json_object_set_new(root, "decoder", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                                                       0, "trim_offsets", 1, "use_regex", 1));
        model_o = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:O, s:O}", "type", "BPE", "dropout",
                            "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                            "byte_fallback", 0, "ignore_merges", 0, "vocab", vobj, "merges", merges);
    } else if (spm) {
        bool prefix = true;
        if (cmf__gguf_find_kv(g, "tokenizer.ggml.add_space_prefix") &&
            (st = cmf__gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix)))
            goto fail;
        if ((st = spm_merges(g, &v, vobj, &merges))) goto fail;
        json_t *norms = json_array();
        if (prefix) json_array_append_new(norms, json_pack("{s:s, s:s}", "type", "Prepend", "prepend", "\xe2\x96\x81"));
        json_array_append_new(norms, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ",
                                               "content", "\xe2\x96\x81"));
        json_object_set_new(root, "normalizer", json_pack("{s:s, s:o}", "type", "Sequence", "normalizers", norms));
        json_object_set_new(root, "pre_tokenizer", json_null());
        json_object_set_new(root, "post_processor", post_processor(&v));
        json_t *dec = json_array();
        json_array_append_new(dec, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String",
                                             "\xe2\x96\x81", "content", " "));
        json_array_append_new(dec, json_pack("{s:s}", "type", "ByteFallback"));
        json_array_append_new(dec, json_pack("{s:s}", "type", "Fuse"));
        if (prefix)
            json_array_append_new(dec, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1,
                                                 "stop", 0));
        json_object_set_new(root, "decoder", json_pack("{s:s, s:o}", "type", "Sequence", "decoders", dec));
        json_t *unk = v.unk >= 0 ? tok_str(&v, (uint64_t)v.unk) : json_null();
        model_o = json_pack("{s:s, s:n, s:o, s:n, s:n, s:b, s:b, s:b, s:O, s:O}", "type", "BPE", "dropout",
                            "unk_token", unk, "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 1,
                            "byte_fallback", 1, "ignore_merges", 0, "vocab", vobj, "merges", merges);
    } else {
        json_object_set_new(root, "normalizer",
                            json_pack("{s:s, s:b, s:b, s:n, s:b}", "type", "BertNormalizer", "clean_text", 1,
                                      "handle_chinese_chars", 1, "strip_accents", "lowercase", 1));
        json_object_set_new(root, "pre_tokenizer", json_pack("{s:s}", "type", "BertPreTokenizer"));
        json_object_set_new(root, "post_processor", json_null());
        json_object_set_new(root, "decoder", json_pack("{s:s, s:s, s:b}", "type", "WordPiece", "prefix", "##",
                                                       "cleanup", 1));
        json_t *unk = v.unk >= 0 ? json_object_get(vobj, "[UNK]") ? json_string("[UNK]") : tok_str(&v, (uint64_t)v.unk)
                                 : json_string("[UNK]");
        model_o = json_pack("{s:s, s:o, s:s, s:i, s:O}", "type", "WordPiece", "unk_token", unk,
                            "continuing_subword_prefix", "##", "max_input_chars_per_word", 100, "vocab", vobj);
    }
    if (!model_o) {
        st = cmf__error(CMF_ERR_NOMEM, "%s: building tokenizer.json failed", g->path);
        goto fail;
    }
    json_object_set_new(root, "model", model_o);
    {
        char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!s) {
            st = cmf__error(CMF_ERR_NOMEM, "%s: out of memory (tokenizer.json)", g->path);
            goto fail;
        }
        *json_out = s;
        *len = strlen(s);
    }
    st = CMF_OK;
fail:
    json_decref(pre);
    json_decref(vobj);
    json_decref(merges);
    json_decref(root);
    return st;
}

cmf_status cmf__gguf_chat_bundle(const cmf__gguf *g, json_t **out)
{
    *out = NULL;
    json_t *o = json_object();
    const char *s;
    uint64_t l;
    if (cmf__gguf_find_kv(g, "tokenizer.chat_template") && !cmf__gguf_get_str(g, "tokenizer.chat_template", &s, &l)) {
        json_t *t = json_stringn(s, l);
        if (t) json_object_set_new(o, "chat_template", t);
    }
    json_t *eos = json_array();
    const char *eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
    for (int k = 0; k < 3; k++) {
        int64_t id = opt_id(g, eos_keys[k]);
        bool dup = false;
        for (size_t i = 0; i < json_array_size(eos); i++)
            dup |= json_integer_value(json_array_get(eos, i)) == id;
        if (id >= 0 && !dup) json_array_append_new(eos, json_integer(id));
    }
    json_object_set_new(o, "eos_token_ids", eos);
    int64_t bos = opt_id(g, "tokenizer.ggml.bos_token_id"), pad = opt_id(g, "tokenizer.ggml.padding_token_id");
    json_object_set_new(o, "bos_token_id", bos >= 0 ? json_integer(bos) : json_null());
    json_object_set_new(o, "pad_token_id", pad >= 0 ? json_integer(pad) : json_null());
    bool b;
    if (cmf__gguf_find_kv(g, "tokenizer.ggml.add_bos_token") && !cmf__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
        json_object_set_new(o, "add_bos_token", json_boolean(b));
    if (cmf__gguf_find_kv(g, "tokenizer.ggml.add_eos_token") && !cmf__gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b))
        json_object_set_new(o, "add_eos_token", json_boolean(b));
    *out = o;
    return CMF_OK;
}
