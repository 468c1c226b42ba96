/* test_grammar_schema.c — JSON Schema to grammar: each supported keyword
 * accepts the values it should and refuses the others (run through the
 * matcher byte by byte); unsupported keywords and bad schemas are errors
 * naming the keyword and its path; the bare JSON-object grammar; regex
 * patterns. */
#include "grammar/grammar.h"
#include "harness.h"

#include <stdlib.h>

static cmf__gram *from_schema(const char *schema)
{
    cmf__buf b = {0};
    cmf__gram *g = NULL;
    cmf_status st = cmf__schema_to_gbnf(schema, strlen(schema), &b);
    if (st) harness_fail(__FILE__, __LINE__, "schema %s: %s", schema, cmf_last_error());
    else if (cmf__gram_parse((const char *)b.data, b.len, "schema.gbnf", &g))
        harness_fail(__FILE__, __LINE__, "grammar of %s does not parse: %s\n%.*s", schema, cmf_last_error(), (int)b.len,
                     (const char *)b.data);
    cmf__buf_free(&b);
    return g;
}

static int run(const cmf__gram *g, const char *s)
{
    cmf__gstate a = {0}, b = {0};
    if (cmf__gstate_init(g, &a)) return -2;
    cmf__gstate *cur = &a, *nx = &b;
    int r = 1;
    for (size_t i = 0; s[i] && r == 1; i++) {
        r = cmf__gstate_byte(g, cur, (uint8_t)s[i], nx);
        cmf__gstate *t = cur;
        cur = nx, nx = t;
    }
    int out = r != 1 ? -1 : cmf__gstate_can_end(cur) ? 1 : 0;
    cmf__gstate_free(&a);
    cmf__gstate_free(&b);
    return out;
}

#define ACCEPT(g, s) do { int r_ = run(g, s); if (r_ != 1) \
    harness_fail(__FILE__, __LINE__, "expected %s accepted, got %d", s, r_); } while (0)
#define REFUSE(g, s) do { int r_ = run(g, s); if (r_ == 1) \
    harness_fail(__FILE__, __LINE__, "expected %s refused", s); } while (0)

TEST(primitives)
{
    cmf__gram *g = from_schema("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}");
    if (g) {
        ACCEPT(g, "\"ab\"");
        ACCEPT(g, "\"a\\n\\u00e9\"");
        ACCEPT(g, "\"\\uD7FF\\uE000\"");
        REFUSE(g, "\"\\ud83d\\ude00\""); /* one character (a surrogate pair), as minLength counts */
        REFUSE(g, "\"\\ud83dx\"");
        REFUSE(g, "\"a\"");
        REFUSE(g, "\"abcd\"");
        REFUSE(g, "12");
        cmf__gram_free(g);
    }
    g = from_schema("{\"type\": [\"number\", \"null\", \"boolean\"]}");
    if (g) {
        ACCEPT(g, "-0.5e10");
        ACCEPT(g, "null");
        ACCEPT(g, "true");
        REFUSE(g, "01");
        REFUSE(g, "\"x\"");
        cmf__gram_free(g);
    }
    g = from_schema("{\"enum\": [\"red\", 7, null, {\"a\": [1]}]}");
    if (g) {
        ACCEPT(g, "\"red\"");
        ACCEPT(g, "7");
        ACCEPT(g, "null");
        ACCEPT(g, "{\"a\":[1]}");
        REFUSE(g, "\"blue\"");
        cmf__gram_free(g);
    }
    g = from_schema("{\"const\": \"x\\\"y\"}");
    if (g) {
        ACCEPT(g, "\"x\\\"y\"");
        REFUSE(g, "\"xy\"");
        cmf__gram_free(g);
    }
}

TEST(integer_ranges)
{
    struct { const char *schema; long lo, hi; } cases[] = {
        {"{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150}", 0, 150},
        {"{\"type\": \"integer\", \"minimum\": -25, \"maximum\": 7}", -25, 7},
        {"{\"type\": \"integer\", \"minimum\": 13, \"maximum\": 1234}", 13, 1234},
        {"{\"type\": \"integer\", \"exclusiveMinimum\": -3, \"exclusiveMaximum\": 99}", -2, 98},
        {"{\"type\": \"integer\", \"maximum\": -10, \"minimum\": -1000}", -1000, -10},
        {"{\"type\": \"integer\", \"minimum\": 95}", 95, 1L << 40},
        {"{\"type\": \"integer\", \"maximum\": 5}", -(1L << 40), 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cmf__gram *g = from_schema(cases[i].schema);
        if (!g) continue;
        for (long v = -1100; v <= 1300; v++) {
            char t[32];
            snprintf(t, sizeof t, "%ld", v);
            int want = v >= cases[i].lo && v <= cases[i].hi;
            if (run(g, t) != (want ? 1 : -1) && !(want == 0 && run(g, t) == 0))
                harness_fail(__FILE__, __LINE__, "%s: %ld %s", cases[i].schema, v, want ? "refused" : "accepted");
        }
        if (cases[i].hi > 100000) ACCEPT(g, "123456789012345");
        if (cases[i].lo < -100000) ACCEPT(g, "-123456789012345");
        REFUSE(g, "007");
        REFUSE(g, "1.5");
        cmf__gram_free(g);
    }
}

TEST(objects)
{
    const char *s = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
                    "\"age\": {\"type\": \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, "
                    "\"required\": [\"name\"]}";
    cmf__gram *g = from_schema(s);
    if (g) {
        ACCEPT(g, "{\"name\": \"x\"}");
        ACCEPT(g, "{\"name\":\"x\",\"age\":3}");
        ACCEPT(g, "{ \"name\": \"x\", \"tags\": [\"a\", \"b\"] }");
        ACCEPT(g, "{\"name\": \"x\", \"age\": 3, \"tags\": []}");
        REFUSE(g, "{\"age\": 3}");
        REFUSE(g, "{\"name\": \"x\", \"other\": 3}");
        REFUSE(g, "{\"name\": \"x\",}");
        REFUSE(g, "{\"age\": 3, \"name\": \"x\"}"); /* schema order */
        cmf__gram_free(g);
    }
    g = from_schema("{\"properties\": {\"a\": {\"type\": \"integer\"}, \"ab\": {}}, \"additionalProperties\": {\"type\": \"boolean\"}}");
    if (g) {
        ACCEPT(g, "{}");
        ACCEPT(g, "{\"a\": 1, \"b\": true, \"abc\": false}");
        ACCEPT(g, "{\"x\": true}");
        REFUSE(g, "{\"a\": 1, \"a\": true}");
        REFUSE(g, "{\"ab\": 1, \"ab\": true}");
        REFUSE(g, "{\"x\": 1}");
        cmf__gram_free(g);
    }
    g = from_schema("{\"type\": \"object\", \"additionalProperties\": false}");
    if (g) {
        ACCEPT(g, "{}");
        REFUSE(g, "{\"a\": 1}");
        cmf__gram_free(g);
    }
    g = from_schema("{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}, "
                    "{\"$ref\": \"#/$defs/b\"}], \"$defs\": {\"b\": {\"type\": \"object\", \"properties\": "
                    "{\"b\": {\"type\": \"string\"}}, \"required\": [\"b\"]}}}");
    if (g) {
        ACCEPT(g, "{\"a\": 1, \"b\": \"x\"}");
        REFUSE(g, "{\"a\": 1}");
        cmf__gram_free(g);
    }
}

TEST(arrays)
{
    cmf__gram *g = from_schema("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 2, \"maxItems\": 3}");
    if (g) {
        ACCEPT(g, "[1, 2]");
        ACCEPT(g, "[1,2,3]");
        REFUSE(g, "[1]");
        REFUSE(g, "[1, 2, 3, 4]");
        REFUSE(g, "[1, \"a\"]");
        cmf__gram_free(g);
    }
    g = from_schema("{\"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"boolean\"}], \"items\": {\"type\": \"null\"}}");
    if (g) {
        ACCEPT(g, "[]");
        ACCEPT(g, "[\"a\"]");
        ACCEPT(g, "[\"a\", true]");
        ACCEPT(g, "[\"a\", true, null, null]");
        REFUSE(g, "[true]");
        REFUSE(g, "[\"a\", true, 1]");
        cmf__gram_free(g);
    }
    g = from_schema("{\"type\": \"array\", \"maxItems\": 0}");
    if (g) {
        ACCEPT(g, "[]");
        REFUSE(g, "[1]");
        cmf__gram_free(g);
    }
}

TEST(recursion_anyof_formats)
{
    cmf__gram *g = from_schema("{\"$ref\": \"#/$defs/node\", \"$defs\": {\"node\": {\"type\": \"object\", "
                               "\"properties\": {\"v\": {\"type\": \"integer\"}, \"kids\": {\"type\": \"array\", "
                               "\"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"]}}}");
    if (g) {
        ACCEPT(g, "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": [{\"v\": 4}]}]}");
        REFUSE(g, "{\"v\": 1, \"kids\": [{\"w\": 2}]}");
        cmf__gram_free(g);
    }
    g = from_schema("{\"anyOf\": [{\"type\": \"string\", \"format\": \"date\"}, {\"type\": \"string\", \"format\": \"uuid\"}, "
                    "{\"type\": \"string\", \"format\": \"date-time\"}, {\"type\": \"string\", \"format\": \"time\"}]}");
    if (g) {
        ACCEPT(g, "\"2024-02-28\"");
        ACCEPT(g, "\"123e4567-e89b-12d3-a456-426614174000\"");
        ACCEPT(g, "\"2024-12-31T23:59:59Z\"");
        ACCEPT(g, "\"08:30:00+02:00\"");
        REFUSE(g, "\"2024-02-30\"");
        REFUSE(g, "\"0000-01-01\""); /* year 0: no date to Python, nor to rfc3339-validator */
        ACCEPT(g, "\"0100-01-01\"");
        REFUSE(g, "\"2024-13-01\"");
        REFUSE(g, "\"24:00:00Z\"");
        cmf__gram_free(g);
    }
    g = from_schema("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"string\", \"maxLength\": 1}]}");
    if (g) {
        ACCEPT(g, "5");
        ACCEPT(g, "\"a\"");
        REFUSE(g, "\"ab\"");
        cmf__gram_free(g);
    }
}

TEST(one_of_disjoint)
{
    /* branches proven disjoint: enforced as their union */
    const char *ok[] = {
        "{\"oneOf\": [{\"const\": \"a\"}, {\"const\": \"b\"}, {\"enum\": [1, 2.5, null]}]}",
        "{\"oneOf\": [{\"type\": \"integer\", \"maximum\": 0}, {\"type\": \"integer\", \"minimum\": 1}]}",
        "{\"oneOf\": [{\"type\": \"string\", \"maxLength\": 2}, {\"type\": \"string\", \"minLength\": 3}]}",
        "{\"oneOf\": [{\"type\": \"array\", \"maxItems\": 1}, {\"type\": \"array\", \"minItems\": 2}]}",
        ("{\"oneOf\": [{\"type\": \"array\", \"prefixItems\": [{\"const\": 0}], \"minItems\": 1}, "
         "{\"type\": \"array\", \"items\": {\"type\": \"string\"}}]}"),
        "{\"$defs\": {\"i\": {\"type\": \"integer\"}}, \"oneOf\": [{\"$ref\": \"#/$defs/i\"}, {\"type\": [\"null\", \"string\"]}]}",
        "{\"oneOf\": [false, {\"type\": \"null\"}, {\"type\": \"boolean\"}]}",
        /* closed objects: one requires a key the other never writes */
        "{\"oneOf\": [{\"properties\": {\"a\": {}}, \"required\": [\"a\"]}, {\"properties\": {\"b\": {}}, \"required\": [\"b\"]}]}",
        /* the other requires a key this one writes only with values it refuses */
        ("{\"oneOf\": [{\"properties\": {\"b\": {\"type\": \"array\"}}, \"additionalProperties\": false}, "
         "{\"properties\": {\"b\": {\"type\": \"integer\"}}, \"required\": [\"b\"]}]}"),
        ("{\"oneOf\": [{\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}, "
         "{\"properties\": {\"x\": {\"type\": \"integer\"}}, \"required\": [\"x\"]}]}"),
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cmf__gram *g = from_schema(ok[i]);
        cmf__gram_free(g);
    }
    /* a discriminator property with distinct consts */
    cmf__gram *g = from_schema("{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"cat\"}, "
                               "\"lives\": {\"type\": \"integer\"}}, \"required\": [\"kind\"], \"additionalProperties\": true}, "
                               "{\"type\": \"object\", \"properties\": {\"kind\": {\"enum\": [\"dog\", \"cow\"]}}, \"required\": [\"kind\"], "
                               "\"additionalProperties\": {\"type\": \"string\"}}]}");
    if (g) {
        ACCEPT(g, "{\"kind\": \"cat\", \"lives\": 9}");
        ACCEPT(g, "{\"kind\": \"cow\", \"name\": \"x\"}");
        REFUSE(g, "{\"kind\": \"cow\", \"lives\": 9}");
        REFUSE(g, "{\"kind\": \"bird\"}");
        cmf__gram_free(g);
    }
}

static void bad(const char *schema, cmf_status want, const char *msg, int line);

TEST(one_of_overlapping)
{
    /* integer is a subset of number */
    bad("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}", CMF_ERR_UNSUPPORTED,
        "json schema: /oneOf: branches 0 and 1 may both match; use anyOf", __LINE__);
    bad("{\"properties\": {\"v\": {\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"object\"}, "
        "{\"type\": \"string\", \"maxLength\": 3}]}}}",
        CMF_ERR_UNSUPPORTED, "json schema: /properties/v/oneOf: branches 0 and 2 may both match", __LINE__);
    /* 1 and 1.0 are the same JSON Schema value */
    bad("{\"oneOf\": [{\"const\": 1}, {\"enum\": [2, 1.0]}]}", CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    bad("{\"oneOf\": [{\"type\": \"number\"}, {\"const\": 3}]}", CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    bad("{\"oneOf\": [true, {\"type\": \"null\"}]}", CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    bad("{\"oneOf\": [{}, {\"type\": \"null\"}]}", CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    /* formats are annotations to a plain validator: both strings may match */
    bad("{\"oneOf\": [{\"type\": \"string\", \"format\": \"date\"}, {\"type\": \"string\", \"format\": \"uuid\"}]}",
        CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    /* {"minimum": 5} also holds for every string */
    bad("{\"oneOf\": [{\"minimum\": 5}, {\"type\": \"string\"}]}", CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    /* the first object may carry "b" as an extra key; the second, "a" */
    bad("{\"oneOf\": [{\"properties\": {\"a\": {}}, \"required\": [\"a\"], \"additionalProperties\": true}, "
        "{\"properties\": {\"b\": {}}, \"required\": [\"b\"]}]}", CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    /* the discriminator overlaps in "dog" */
    bad("{\"oneOf\": [{\"properties\": {\"k\": {\"enum\": [\"cat\", \"dog\"]}}, \"required\": [\"k\"]}, "
        "{\"properties\": {\"k\": {\"const\": \"dog\"}}, \"required\": [\"k\"]}]}",
        CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    bad("{\"oneOf\": [{\"type\": \"integer\", \"maximum\": 1}, {\"type\": \"integer\", \"minimum\": 1}]}",
        CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
    /* recursion does not hang the proof */
    bad("{\"$defs\": {\"n\": {\"oneOf\": [{\"$ref\": \"#/$defs/n\"}, {\"type\": \"null\"}]}}, \"$ref\": \"#/$defs/n\"}",
        CMF_ERR_UNSUPPORTED, "branches 0 and 1", __LINE__);
}

TEST(boolean_schemas)
{
    const char *any[] = {"true", "{}", " true ", "{\"title\": \"anything\"}"};
    for (size_t i = 0; i < sizeof any / sizeof *any; i++) {
        cmf__gram *g = from_schema(any[i]);
        if (!g) continue;
        ACCEPT(g, "1");
        ACCEPT(g, "\"x\"");
        ACCEPT(g, "null");
        ACCEPT(g, "[true, {\"a\": -2.5}]");
        ACCEPT(g, "{}");
        REFUSE(g, "tru");
        cmf__gram_free(g);
    }
    bad("false", CMF_ERR_ARG, "json schema: /: the schema false accepts nothing", __LINE__);
    bad("7", CMF_ERR_ARG, "json schema: /: a schema must be an object or a boolean", __LINE__);
    /* subschemas */
    cmf__gram *g = from_schema("{\"properties\": {\"a\": true, \"b\": false}, \"required\": [\"a\"], "
                               "\"additionalProperties\": {\"type\": \"integer\"}}");
    if (g) {
        ACCEPT(g, "{\"a\": [1]}");
        ACCEPT(g, "{\"a\": 1, \"c\": 2}");
        REFUSE(g, "{\"a\": 1, \"b\": 2}");
        cmf__gram_free(g);
    }
    g = from_schema("{\"anyOf\": [false, {\"type\": \"string\"}]}");
    if (g) {
        ACCEPT(g, "\"s\"");
        REFUSE(g, "1");
        cmf__gram_free(g);
    }
    g = from_schema("{\"type\": \"array\", \"items\": true, \"maxItems\": 2}");
    if (g) {
        ACCEPT(g, "[{}, \"x\"]");
        REFUSE(g, "[1, 2, 3]");
        cmf__gram_free(g);
    }
    g = from_schema("{\"allOf\": [true, {\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"a\"]}]}");
    if (g) {
        ACCEPT(g, "{\"a\": null}");
        REFUSE(g, "{}");
        cmf__gram_free(g);
    }
    g = from_schema("{\"$defs\": {\"t\": true}, \"properties\": {\"x\": {\"$ref\": \"#/$defs/t\"}}}");
    if (g) {
        ACCEPT(g, "{\"x\": [null]}");
        cmf__gram_free(g);
    }
    bad("{\"properties\": {\"b\": false}, \"required\": [\"b\"]}", CMF_ERR_ARG,
        "json schema: /properties/b: property 'b' is required but its schema is false", __LINE__);
    bad("{\"allOf\": [{\"required\": [\"a\"]}, false]}", CMF_ERR_ARG, "json schema: /allOf/1: the schema false accepts nothing", __LINE__);
    bad("{\"allOf\": [{\"required\": [\"a\"]}, 3]}", CMF_ERR_ARG, "json schema: /allOf/1: a schema must be an object or a boolean", __LINE__);
    bad("{\"anyOf\": [false, false]}", CMF_ERR_ARG, "json schema: /anyOf: every branch is false", __LINE__);
    bad("{\"$defs\": {\"no\": false}, \"properties\": {\"x\": {\"$ref\": \"#/$defs/no\"}}}", CMF_ERR_ARG,
        "json schema: /$defs/no: the schema false accepts nothing", __LINE__);
    bad("{\"type\": \"array\", \"prefixItems\": [true, false]}", CMF_ERR_ARG,
        "json schema: /prefixItems/1: the schema false accepts nothing", __LINE__);
    bad("{\"type\": \"array\", \"items\": {\"properties\": {\"q\": false}, \"required\": [\"q\"]}}", CMF_ERR_ARG,
        "json schema: /items/properties/q: property 'q' is required", __LINE__);
}

TEST(refs_and_merges)
{
    /* a $ref to a $ref is the second one's schema */
    cmf__gram *g = from_schema("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"type\": \"integer\"}}, \"$ref\": \"#/$defs/a\"}");
    if (g) {
        ACCEPT(g, "1");
        REFUSE(g, "null");
        cmf__gram_free(g);
    }
    g = from_schema("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"properties\": {\"x\": {\"type\": \"integer\"}}, "
                    "\"required\": [\"x\"]}}, \"allOf\": [{\"$ref\": \"#/$defs/a\"}]}");
    if (g) {
        ACCEPT(g, "{\"x\": 1}");
        REFUSE(g, "{}");
        cmf__gram_free(g);
    }
    bad("{\"$defs\": {\"n\": {\"anyOf\": [{\"$ref\": \"#/$defs/n\"}, {\"type\": \"null\"}]}}, \"$ref\": \"#/$defs/n\"}",
        CMF_ERR_UNSUPPORTED, "json schema: /$defs/n: $ref '#/$defs/n' reaches itself before any value is written", __LINE__);
    bad("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/a\"}}, \"$ref\": \"#/$defs/a\"}", CMF_ERR_UNSUPPORTED,
        "$ref '#/$defs/a' reaches itself", __LINE__);
    bad("{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"null\"}]}", CMF_ERR_UNSUPPORTED, "json schema: /: $ref '#' reaches itself",
        __LINE__);
    /* a required key without a schema takes additionalProperties' */
    g = from_schema("{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"b\"], "
                    "\"additionalProperties\": {\"type\": \"null\"}}");
    if (g) {
        ACCEPT(g, "{\"b\": null}");
        ACCEPT(g, "{\"a\": 1, \"b\": null, \"c\": null}");
        REFUSE(g, "{\"b\": 1}");
        cmf__gram_free(g);
    }
    bad("{\"properties\": {\"a\": {}}, \"required\": [\"b\"], \"additionalProperties\": false}", CMF_ERR_ARG,
        "json schema: /required: 'b' is required, not in properties, and additionalProperties is false", __LINE__);
    /* allOf merges only what holds for every part */
    bad("{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"integer\"}}}, {\"properties\": {\"a\": {\"type\": \"string\"}}}]}",
        CMF_ERR_UNSUPPORTED, "json schema: /allOf/1/properties/a: property 'a' declared by two allOf parts", __LINE__);
    bad("{\"allOf\": [{\"properties\": {\"a\": {}}, \"additionalProperties\": false}, {\"properties\": {\"b\": {}}}]}",
        CMF_ERR_UNSUPPORTED, "json schema: /allOf/0/additionalProperties: additionalProperties in an allOf part that does "
        "not declare 'b'", __LINE__);
    g = from_schema("{\"allOf\": [{\"properties\": {\"a\": {}, \"b\": {}}, \"additionalProperties\": false}, "
                    "{\"properties\": {\"b\": {}}, \"required\": [\"b\"]}]}");
    if (g) {
        ACCEPT(g, "{\"a\": 1, \"b\": 2}");
        REFUSE(g, "{\"a\": 1}");
        REFUSE(g, "{\"b\": 2, \"c\": 3}");
        cmf__gram_free(g);
    }
}

TEST(patterns)
{
    cmf__gram *g = from_schema("{\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d{3,4}(x|yz)?$\"}");
    if (g) {
        ACCEPT(g, "\"AB-123\"");
        ACCEPT(g, "\"AB-1234yz\"");
        REFUSE(g, "\"AB-12\"");
        REFUSE(g, "\"ab-123\"");
        REFUSE(g, "\"AB-123y\"");
        cmf__gram_free(g);
    }
    g = from_schema("{\"type\": \"string\", \"pattern\": \"a\\\"b\"}"); /* unanchored, with a quote */
    if (g) {
        ACCEPT(g, "\"xxa\\\"byy\"");
        ACCEPT(g, "\"a\\\"b\"");
        REFUSE(g, "\"ab\"");
        cmf__gram_free(g);
    }
    g = from_schema("{\"type\": \"string\", \"pattern\": \"^[^a-c]+\\\\.\\\\w*$\"}");
    if (g) {
        ACCEPT(g, "\"xyz.ab_9\"");
        ACCEPT(g, "\"\\\"\\\\.\"");
        REFUSE(g, "\"abc.d\"");
        cmf__gram_free(g);
    }
}

static void bad(const char *schema, cmf_status want, const char *msg, int line)
{
    cmf__buf b = {0};
    cmf_status st = cmf__schema_to_gbnf(schema, strlen(schema), &b);
    if (st != want) harness_fail(__FILE__, line, "%s: got %s, want %s (%s)", schema, cmf_status_name(st),
                                 cmf_status_name(want), cmf_last_error());
    else if (!strstr(cmf_last_error(), msg)) harness_fail(__FILE__, line, "message \"%s\" lacks \"%s\"", cmf_last_error(), msg);
    cmf__buf_free(&b);
}

TEST(unsupported)
{
    bad("{\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\", \"multipleOf\": 3}}}", CMF_ERR_UNSUPPORTED,
        "json schema: /properties/age/multipleOf: keyword 'multipleOf' not supported", __LINE__);
    bad("{\"type\": \"array\", \"uniqueItems\": true}", CMF_ERR_UNSUPPORTED, "/uniqueItems: keyword 'uniqueItems'", __LINE__);
    bad("{\"type\": \"string\", \"format\": \"email\"}", CMF_ERR_UNSUPPORTED, "/format: format 'email' not supported", __LINE__);
    bad("{\"type\": \"number\", \"minimum\": 1.5}", CMF_ERR_UNSUPPORTED, "/minimum: minimum is enforced for integers only", __LINE__);
    bad("{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}", CMF_ERR_UNSUPPORTED, "/pattern: an escape (backreference", __LINE__);
    bad("{\"type\": \"string\", \"pattern\": \"(?=a)\"}", CMF_ERR_UNSUPPORTED,
        "json schema: /pattern: a lookaround or named group at offset 0", __LINE__);
    bad("{\"properties\": {\"c\": {\"type\": \"string\", \"pattern\": \"x(?<!y)\"}}}", CMF_ERR_UNSUPPORTED,
        "json schema: /properties/c/pattern: a lookaround or named group at offset 1", __LINE__);
    bad("{\"$defs\": {\"p\": {\"pattern\": \"[a\"}}, \"$ref\": \"#/$defs/p\"}", CMF_ERR_UNSUPPORTED,
        "json schema: /$defs/p/pattern: an unterminated class", __LINE__);
    bad("{\"$ref\": \"http://x/y.json\"}", CMF_ERR_UNSUPPORTED, "/$ref: remote reference", __LINE__);
    bad("{\"$ref\": \"#/$defs/none\"}", CMF_ERR_ARG, "/$ref: reference '#/$defs/none' names nothing", __LINE__);
    bad("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", CMF_ERR_ARG, "minItems above maxItems", __LINE__);
    bad("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 2}", CMF_ERR_ARG, "minimum above maximum", __LINE__);
    bad("{\"type\": \"strin\"}", CMF_ERR_ARG, "/type: unknown type 'strin'", __LINE__);
    bad("{\"anyOf\": [{\"type\": \"string\"}], \"type\": \"string\"}", CMF_ERR_UNSUPPORTED, "/type: keyword 'type' beside anyOf", __LINE__);
    bad("{\"if\": {}}", CMF_ERR_UNSUPPORTED, "/if: keyword 'if' not supported", __LINE__);
    bad("{\"type\": \"object\", \"patternProperties\": {}}", CMF_ERR_UNSUPPORTED, "/patternProperties", __LINE__);
    bad("{\"type\": ", CMF_ERR_PARSE, "json schema", __LINE__);
    bad("{\"items\": {\"not\": {}}}", CMF_ERR_UNSUPPORTED, "/items/not: keyword 'not'", __LINE__);
}

TEST(json_object_grammar)
{
    const char *t = cmf__gbnf_json_object();
    cmf__gram *g = NULL;
    CHECK_OK(cmf__gram_parse(t, strlen(t), "json_object", &g));
    if (!g) return;
    ACCEPT(g, "{}");
    ACCEPT(g, "{\"a\": {\"b\": [1, 2.5, \"c\", null, false]}}");
    REFUSE(g, "[1]");
    REFUSE(g, "\"x\"");
    REFUSE(g, "{\"a\": 1}}");
    cmf__gram_free(g);
}

int main(void)
{
    RUN(primitives);
    RUN(integer_ranges);
    RUN(objects);
    RUN(arrays);
    RUN(recursion_anyof_formats);
    RUN(one_of_disjoint);
    RUN(one_of_overlapping);
    RUN(boolean_schemas);
    RUN(refs_and_merges);
    RUN(patterns);
    RUN(unsupported);
    RUN(json_object_grammar);
    return harness_done();
}
