/* test_text_template_unit.c — the Jinja interpreter piece by piece: 127
 * snippets (whitespace control, expressions, statements, filters, tests,
 * Python methods, printing, errors) against jinja2's renders under
 * transformers' settings (tests/data/template_cases.json, made by
 * tools/gen_template_cases.py); error messages with line and column;
 * Python float repr; the ChatML fallback; limits on runaway templates,
 * generated templates nested past the depth limits included. */
#include "harness.h"
#include "text/jinja.h"
#include "text/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cmf_status render_src(const char *src, const json_t *vars, char **out)
{
    cmf__template *t;
    *out = NULL;
    cmf_status st = cmf__template_compile(src, strlen(src), &t);
    if (st) return st;
    st = cmf__template_render(t, vars, out, NULL);
    cmf__template_free(t);
    return st;
}

TEST(jinja2_snippets)
{
    const char *srcdir = getenv("CMF_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/template_cases.json", srcdir && *srcdir ? srcdir : ".");
    json_error_t e;
    json_t *doc = json_load_file(path, 0, &e);
    if (!doc) SKIP("tests/data/template_cases.json not found (set CMF_SOURCE_DIR)");
    const json_t *ctx = json_object_get(doc, "context");
    size_t i, pass = 0, total = 0;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *src = json_string_value(json_object_get(c, "template"));
        const json_t *want = json_object_get(c, "render");
        char *out = NULL;
        cmf_status st = render_src(src, ctx, &out);
        total++;
        if (want) {
            if (st) harness_fail(__FILE__, __LINE__, "case %zu %s: failed: %s", i, src, cmf_last_error());
            else if (strcmp(out, json_string_value(want)) != 0)
                harness_fail(__FILE__, __LINE__, "case %zu %s:\n  got  [%s]\n  want [%s]", i, src, out, json_string_value(want));
            else pass++;
        } else {
            if (st != CMF_ERR_TEMPLATE)
                harness_fail(__FILE__, __LINE__, "case %zu %s: expected a template error (%s), got %s [%s]", i, src,
                             json_string_value(json_object_get(c, "error")), cmf_status_name(st), out ? out : "");
            else pass++;
        }
        free(out);
    }
    fprintf(stderr, "template_cases.json: %zu/%zu as jinja2\n", pass, total);
    CHECK(total >= 100);
    json_decref(doc);
}

static void check_err(const char *src, const char *substr, int line)
{
    char *out = NULL;
    cmf_status st = render_src(src, NULL, &out);
    if (st != CMF_ERR_TEMPLATE)
        harness_fail(__FILE__, line, "%s: returned %s, expected ERR_TEMPLATE", src, cmf_status_name(st));
    else if (!strstr(cmf_last_error(), substr))
        harness_fail(__FILE__, line, "%s: message \"%s\" lacks \"%s\"", src, cmf_last_error(), substr);
    CHECK(out == NULL);
    free(out);
}

TEST(errors_name_line_and_column)
{
    check_err("ok\n{% if x %}\n  {{ 1 + }}\n{% endif %}", "line 3 column 10: unexpected end of print statement", __LINE__);
    check_err("{% for m in ms %}\nabc", "line 1 column 4: unexpected end of template: the 'for' tag is not closed, expected 'endfor'", __LINE__);
    check_err("a\n\n   {{ raise_exception('Only user and assistant roles') }}", "line 3 column 7: Only user and assistant roles", __LINE__);
    check_err("{{ nothing() }}", "line 1 column 4: 'nothing' is undefined", __LINE__);
    check_err("{{ nothing.x }}", "'nothing' is undefined", __LINE__);
    check_err("{% set d = {} %}{{ d.a.b }}", "'dict object' has no attribute 'a'", __LINE__);
    check_err("{{ [1].append(2) }}", "access to attribute 'append' of 'list' object is unsafe", __LINE__);
    check_err("{% endfor %}", "line 1 column 4: Encountered unknown tag 'endfor'", __LINE__);
    check_err("{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str", __LINE__);
    check_err("{{ 1 // 0 }}", "integer division or modulo by zero", __LINE__);
    check_err("{{ x | nofilter }}", "No filter named 'nofilter'", __LINE__);
    check_err("{{ 'abc", "line 1 column 4: unexpected char", __LINE__);
    check_err("{# open", "line 1 column 1: missing end of comment tag", __LINE__);
    check_err("{% raw %}never closed", "missing end of raw directive", __LINE__);
    check_err("{% break %}", "'break' outside of a loop", __LINE__);
    check_err("{% include 'x' %}", "Encountered unknown tag 'include'", __LINE__);
    check_err("{{ 9223372036854775807 + 1 }}", "integer overflow", __LINE__);
    check_err("{{ 99999999999999999999 }}", "integer literal out of range", __LINE__);
    check_err("{% if false %}{{ x|nosuch }}{% endif %}", "line 1 column 20: No filter named 'nosuch'", __LINE__);
    check_err("{% if false %}{{ x is nosuch }}{% endif %}", "No test named 'nosuch'", __LINE__);
}

TEST(runaway_templates_stop)
{
    check_err("{% set r = range(10000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", "steps", __LINE__);
    check_err("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "nested deeper", __LINE__);
    check_err("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{% set s = s ~ s %}{% endfor %}", "bytes", __LINE__);
    char deep[2100];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 600; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 600; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    check_err(deep, "nested too deeply", __LINE__);
    static char elifs[40000];
    k = (size_t)snprintf(elifs, sizeof elifs, "{%% if x %%}");
    while (k + 40 < sizeof elifs) k += (size_t)snprintf(elifs + k, sizeof elifs - k, "{%% elif x %%}");
    snprintf(elifs + k, sizeof elifs - k, "{%% endif %%}");
    check_err(elifs, "nested too deeply", __LINE__);
}

TEST(float_repr_like_python)
{
    static const struct { double v; const char *want; } cases[] = {
        {1.0, "1.0"}, {0.1, "0.1"}, {1e-05, "1e-05"}, {0.0001, "0.0001"}, {1e16, "1e+16"},
        {1e15, "1000000000000000.0"}, {123456789.125, "123456789.125"}, {-0.0, "-0.0"}, {3e-07, "3e-07"},
        {0.30000000000000004, "0.30000000000000004"}, {1.5e300, "1.5e+300"}, {2.5, "2.5"},
        {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {100.0, "100.0"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cmf__jx_float_repr(cases[i].v, buf, sizeof buf);
        CHECK_EQ_STR(buf, cases[i].want);
    }
}

TEST(chatml_fallback_and_chat_params)
{
    json_t *msgs = json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"U\"}]", 0, NULL);
    json_t *kw = json_loads("{\"flag\": true}", 0, NULL);
    cmf__chat_params p = {0};
    p.messages = msgs;
    p.add_generation_prompt = true;
    char *out;
    size_t len;
    CHECK_OK(cmf__template_apply(NULL, &p, &out, &len));
    CHECK_EQ_STR(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    CHECK_EQ_INT(len, strlen(out));
    free(out);
    /* bos unset stays undefined; tools default to none; kwargs are variables */
    p.kwargs = kw;
    p.eos_token = "</s>";
    CHECK_OK(cmf__template_apply("{{ bos_token is defined }}|{{ tools }}|{{ eos_token }}|{{ flag }}|{{ add_generation_prompt }}",
                                 &p, &out, NULL));
    CHECK_EQ_STR(out, "False|None|</s>|True|True");
    free(out);
    p.messages = kw; /* not an array */
    CHECK_ERR(cmf__template_apply(NULL, &p, &out, NULL), CMF_ERR_ARG, "messages must be a JSON array");
    CHECK(out == NULL);
    json_decref(msgs);
    json_decref(kw);
}

TEST(compile_once_render_many)
{
    cmf__template *t;
    const char *src = "{% for m in messages %}{{ m.content|upper }}{% endfor %}";
    CHECK_OK(cmf__template_compile(src, strlen(src), &t));
    for (int i = 0; i < 3; i++) {
        json_t *vars = json_pack("{s:[{s:s}]}", "messages", "content", i ? "b" : "a");
        char *out;
        CHECK_OK(cmf__template_render(t, vars, &out, NULL));
        CHECK_EQ_STR(out, i ? "B" : "A");
        free(out);
        json_decref(vars);
    }
    cmf__template_free(t);
    cmf__template_free(NULL);
    CHECK_ERR(cmf__template_compile("{% if %}", 8, &t), CMF_ERR_TEMPLATE, "line 1 column 7");
    CHECK(t == NULL);
}

/* "{{ " head (piece x n) tail " }}" in a malloc'd string. */
static char *repeat_src(const char *head, const char *piece, int n, const char *tail)
{
    size_t hl = strlen(head), pl = strlen(piece), tl = strlen(tail);
    char *s = malloc(hl + pl * (size_t)n + tl + 1);
    if (!s) return NULL;
    memcpy(s, head, hl);
    for (int i = 0; i < n; i++) memcpy(s + hl + pl * (size_t)i, piece, pl);
    memcpy(s + hl + pl * (size_t)n, tail, tl + 1);
    return s;
}

/* Chains the parser reads with loops build trees as deep as the chain is
 * long; 10,000 links used to overflow the C stack when rendering. Each now
 * fails to compile, naming the place and the limit; a chain within the
 * limit still renders. */
TEST(deep_templates_fail_cleanly)
{
    static const struct { const char *head, *piece, *tail; } chains[] = {
        {"{{ 1", "+1", " }}"},
        {"{{ 'a'", "|upper", " }}"},
        {"{% set d = {} %}{{ d", ".x", " }}"},
        {"{{ [[0]]", "[0]", " }}"},
        {"{{ 1", " and 1", " }}"},
        {"{{ 0", " or 0", " }}"},
        {"{{ 2", "*2", " }}"},
        {"{{ 2", "**1", " }}"},
        {"{{ 1", " if 1 else 0", " }}"},
        {"{% set s = 'a' %}{{ s", ".strip()", " }}"},
        {"{% filter upper", "|lower", " %}x{% endfilter %}"},
        {"{% set x %}", "{% if 1 %}", ""},
    };
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
        char *src = repeat_src(chains[i].head, chains[i].piece, 10000, chains[i].tail);
        CHECK(src != NULL);
        if (!src) return;
        check_err(src, "nested too deeply", __LINE__);
        free(src);
    }
    /* within the limit: 900 links compile and render */
    char *ok = repeat_src("{{ 0", "+1", 900, " }}"), *out = NULL;
    CHECK_OK(render_src(ok, NULL, &out));
    CHECK_EQ_STR(out, "900");
    free(out);
    free(ok);
    /* the message names where the tree got too deep and the limit */
    char *deep = repeat_src("\n{{ 1", "+1", 2000, " }}");
    check_err(deep, "line 2 column", __LINE__);
    check_err(deep, "more than 1000 levels", __LINE__);
    free(deep);
}

/* Macro calls stack expression trees on top of each other: the evaluator's
 * own count stops them before the stack runs out. Values a loop nests
 * 5,000 deep stop comparing, sorting and printing at their limit. */
TEST(deep_evaluation_fails_cleanly)
{
    /* the recursive call sits at the bottom of a 900-deep tree */
    char *src = repeat_src("{% macro r(n) %}{{ r(n + 1)", "+0", 900, " }}{% endmacro %}{{ r(0) }}");
    check_err(src, "expressions nested deeper than 3000", __LINE__);
    free(src);
    static const char nest[] = "{% set ns = namespace(a=[], b=[]) %}{% for i in range(5000) %}"
                               "{% set ns.a = [ns.a] %}{% set ns.b = [ns.b] %}{% endfor %}";
    static const struct { const char *use, *want; } uses[] = {
        {"{{ ns.a == ns.b }}", "values nested too deeply to compare"},
        {"{{ ns.a in [ns.b] }}", "values nested too deeply to compare"},
        {"{{ [ns.a, ns.b]|sort }}", "values nested too deeply to compare"},
        {"{{ ns.a }}", "value nested too deeply to print"},
        {"{{ ns.a|tojson }}", "value nested too deeply for tojson"},
    };
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s%s", nest, uses[i].use);
        check_err(buf, uses[i].want, __LINE__);
    }
}

int main(void)
{
    RUN(jinja2_snippets);
    RUN(errors_name_line_and_column);
    RUN(runaway_templates_stop);
    RUN(float_repr_like_python);
    RUN(chatml_fallback_and_chat_params);
    RUN(compile_once_render_many);
    RUN(deep_templates_fail_cleanly);
    RUN(deep_evaluation_fails_cleanly);
    return harness_done();
}
