/* test_grammar_gbnf.c — the GBNF parser and the matcher: grammars shaped
 * like the examples llama.cpp ships (written here afresh) parse and
 * accept / refuse the strings they should; malformed grammars fail with
 * line and column; the matcher's byte-wise UTF-8 handling. */
#include "grammar/grammar.h"
#include "harness.h"

#include <stdlib.h>

/* Whether g accepts all of s (and may end there); -1 when a prefix is
 * already refused. */
static int run(const cmf__gram *g, const char *s, size_t len)
{
    cmf__gstate a = {0}, b = {0};
    if (cmf__gstate_init(g, &a)) return -2;
    cmf__gstate *cur = &a, *nx = &b;
    int r = 1;
    for (size_t i = 0; i < len && r == 1; i++) {
        r = cmf__gstate_byte(g, cur, (uint8_t)s[i], nx);
        cmf__gstate *t = cur;
        cur = nx, nx = t;
    }
    int out = r != 1 ? -1 : cmf__gstate_can_end(cur) ? 1 : 0;
    cmf__gstate_free(&a);
    cmf__gstate_free(&b);
    return out;
}

static cmf__gram *parse(const char *text)
{
    cmf__gram *g = NULL;
    cmf_status st = cmf__gram_parse(text, strlen(text), "test.gbnf", &g);
    if (st) harness_fail(__FILE__, __LINE__, "parse failed: %s\n%s", cmf_last_error(), text);
    return g;
}

#define ACCEPT(g, s) do { int r_ = run(g, s, strlen(s)); if (r_ != 1) \
    harness_fail(__FILE__, __LINE__, "expected \"%s\" accepted, got %d", s, r_); } while (0)
#define REFUSE(g, s) do { int r_ = run(g, s, strlen(s)); if (r_ == 1) \
    harness_fail(__FILE__, __LINE__, "expected \"%s\" refused", s); } while (0)
#define PREFIX(g, s) do { int r_ = run(g, s, strlen(s)); if (r_ != 0) \
    harness_fail(__FILE__, __LINE__, "expected \"%s\" a live prefix (0), got %d", s, r_); } while (0)

static const char *ARITHMETIC =
    "root  ::= (expr \"=\" ws term \"\\n\")+\n"
    "expr  ::= term ([-+*/] term)*\n"
    "term  ::= ident | num | \"(\" ws expr \")\" ws\n"
    "ident ::= [a-z] [a-z0-9_]* ws\n"
    "num   ::= [0-9]+ ws\n"
    "ws    ::= [ \\t\\n]*\n";

TEST(arithmetic)
{
    cmf__gram *g = parse(ARITHMETIC);
    if (!g) return;
    ACCEPT(g, "1+2=3\n");
    ACCEPT(g, "(a1 *2)/x=y\nb=4\n");
    REFUSE(g, "1+=3\n");
    PREFIX(g, "1+2=3");
    cmf__gram_free(g);
}

static const char *CHESS =
    "# a chess game in algebraic notation\n"
    "root ::= (\n"
    "    \"1. \" move \" \" move \"\\n\"\n"
    "    ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n"
    ")\n"
    "move    ::= (pawn | nonpawn | castle) [+#]?\n"
    "pawn    ::= ([a-h] \"x\")? [a-h] [1-8] (\"=\" [NBKQR])?\n"
    "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\n"
    "castle  ::= \"O-O\" \"-O\"?\n";

TEST(chess)
{
    cmf__gram *g = parse(CHESS);
    if (!g) return;
    ACCEPT(g, "1. e4 e5\n2. Nf3 Nc6\n3. O-O-O exd8=Q#\n");
    REFUSE(g, "1. e9 e5\n2. a3 a6\n");
    REFUSE(g, "1. e4 e5\n");
    cmf__gram_free(g);
}

static const char *JSON_GBNF =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

TEST(json)
{
    cmf__gram *g = parse(JSON_GBNF);
    if (!g) return;
    ACCEPT(g, "{}");
    ACCEPT(g, "{\"a\": [1, -2.5e+3, true, null, {\"b\": \"x\\u00e9\\n\"}]}");
    ACCEPT(g, "{\"k\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}");
    REFUSE(g, "{\"a\": tru}");
    REFUSE(g, "{\"a\" 1}");
    REFUSE(g, "{\"a\": \"\x01\"}");
    PREFIX(g, "{\"a\": [1, 2");
    cmf__gram_free(g);
}

static const char *JSON_ARR =
    "# an array of JSON objects, one per line\n"
    "root ::= arr\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "arr  ::=\n"
    "  \"[\\n\" ws (\n"
    "            value\n"
    "    (\",\\n\" ws value)*\n"
    "  )? \"]\"\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]*)) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws ::= ([ \\t\\n] ws)?\n";

TEST(json_arr)
{
    cmf__gram *g = parse(JSON_ARR);
    if (!g) return;
    ACCEPT(g, "[\n{\"a\": 1},\n{\"b\": [2, 3]}]");
    REFUSE(g, "[{\"a\": 1}]");
    cmf__gram_free(g);
}

TEST(list_english_japanese)
{
    cmf__gram *g = parse("root ::= item+\n\n# Excludes various line break characters\nitem ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n");
    if (g) {
        ACCEPT(g, "- one\n- two three\n");
        REFUSE(g, "- one\n-\n");
        REFUSE(g, "- a\xe2\x80\xa8" "b\n");
        cmf__gram_free(g);
    }
    g = parse("# A probably incorrect grammar for English\n"
              "root        ::= en-char+ ([ \\t\\n] en-char+)*\n"
              "en-char     ::= letter | digit | punctuation\n"
              "letter      ::= [a-zA-Z]\n"
              "digit       ::= [0-9]\n"
              "punctuation ::= [!\"#$%&'()*+,-./:;<=>?@[\\\\\\]^_`{|}~]\n");
    if (g) {
        ACCEPT(g, "Hello, world! 42 times.");
        REFUSE(g, "caf\xc3\xa9");
        cmf__gram_free(g);
    }
    g = parse("root        ::= jp-char+ ([ \\t\\n] jp-char+)*\n"
              "jp-char     ::= hiragana | katakana | punctuation | cjk\n"
              "hiragana    ::= [ぁ-ゟ]\n"
              "katakana    ::= [ァ-ヿ]\n"
              "punctuation ::= [、-〾]\n"
              "cjk         ::= [一-鿿]\n");
    if (g) {
        ACCEPT(g, "こんにちは、世界");
        ACCEPT(g, "カタカナ ひらがな");
        REFUSE(g, "hello");
        cmf__gram_free(g);
    }
}

static const char *C_GBNF =
    "root ::= (declaration)*\n"
    "declaration ::= dataType identifier \"(\" parameter? \")\" \"{\" statement* \"}\"\n"
    "dataType  ::= \"int\" ws | \"float\" ws | \"char\" ws\n"
    "identifier ::= [a-zA-Z_] [a-zA-Z_0-9]*\n"
    "parameter ::= dataType identifier\n"
    "statement ::=\n"
    "    ( dataType identifier ws \"=\" ws expression \";\" ) |\n"
    "    ( identifier ws \"=\" ws expression \";\" ) |\n"
    "    ( identifier ws \"(\" argList? \")\" \";\" ) |\n"
    "    ( \"return\" ws expression \";\" ) |\n"
    "    ( \"while\" \"(\" condition \")\" \"{\" statement* \"}\" ) |\n"
    "    ( \"for\" \"(\" forInit \";\" ws condition \";\" ws forUpdate \")\" \"{\" statement* \"}\" ) |\n"
    "    ( \"if\" \"(\" condition \")\" \"{\" statement* \"}\" (\"else\" \"{\" statement* \"}\")? ) |\n"
    "    ( singleLineComment ) |\n"
    "    ( multiLineComment )\n"
    "forInit ::= dataType identifier ws \"=\" ws expression | identifier ws \"=\" ws expression\n"
    "forUpdate ::= identifier ws \"=\" ws expression\n"
    "condition ::= expression relationOperator expression\n"
    "relationOperator ::= (\"<=\" | \"<\" | \"==\" | \"!=\" | \">=\" | \">\")\n"
    "expression ::= term ((\"+\" | \"-\") term)*\n"
    "term ::= factor((\"*\" | \"/\") factor)*\n"
    "factor ::= identifier | number | unaryTerm | funcCall | parenExpression\n"
    "unaryTerm ::= \"-\" factor\n"
    "funcCall ::= identifier \"(\" argList? \")\"\n"
    "parenExpression ::= \"(\" ws expression ws \")\"\n"
    "argList ::= expression (\",\" ws expression)*\n"
    "number ::= [0-9]+\n"
    "singleLineComment ::= \"//\" [^\\n]* \"\\n\"\n"
    "multiLineComment ::= \"/*\" ( [^*] | (\"*\" [^/]) )* \"*/\"\n"
    "ws ::= ([ \\t\\n]+)\n";

TEST(c_like)
{
    cmf__gram *g = parse(C_GBNF);
    if (!g) return;
    ACCEPT(g, "int main(){int x = 1;while(x<10){x = x+1;}return x;}");
    REFUSE(g, "int main(){x = ;}");
    cmf__gram_free(g);
}

TEST(repetition_bounds)
{
    cmf__gram *g = parse("root ::= \"a\"{2,4} \"b\"{3} (\"c\" | \"d\"){,2} \"e\"{1,}\n");
    if (!g) return;
    ACCEPT(g, "aabbbe");
    ACCEPT(g, "aaaabbbcdeee");
    REFUSE(g, "abbbe");
    REFUSE(g, "aaaaabbbe");
    REFUSE(g, "aabbe");
    REFUSE(g, "aabbbccde");
    REFUSE(g, "aabbb");
    cmf__gram_free(g);
    g = parse("root ::= [^a-c\\u00e9] \"x\"? . \"\\x41\\u00e9\\U0001F600\\t\\\"\"\n");
    if (!g) return;
    ACCEPT(g, "dxzA\xc3\xa9\xf0\x9f\x98\x80\t\"");
    ACCEPT(g, "\xe2\x82\xac\xe2\x82\xac" "A\xc3\xa9\xf0\x9f\x98\x80\t\"");
    REFUSE(g, "bxzA\xc3\xa9\xf0\x9f\x98\x80\t\"");
    REFUSE(g, "\xc3\xa9xzA\xc3\xa9\xf0\x9f\x98\x80\t\"");
    cmf__gram_free(g);
}

/* UTF-8 read a byte at a time: partial characters survive only while some
 * class can still match; invalid sequences are refused. */
TEST(utf8_partial)
{
    cmf__gram *g = parse("root ::= [\\u00e0-\\u00ef] [a]\n");
    if (!g) return;
    ACCEPT(g, "\xc3\xa9" "a");
    REFUSE(g, "\xc3\xb0" "a");
    PREFIX(g, "\xc3");
    REFUSE(g, "\xc2");       /* U+0080..U+00BF: none in range */
    REFUSE(g, "\xe0\xa0");   /* three-byte: past the range */
    REFUSE(g, "\xc0\x80");   /* overlong */
    REFUSE(g, "\x80");
    cmf__gram_free(g);
    g = parse("root ::= [^x]+\n");
    if (!g) return;
    ACCEPT(g, "\xf0\x9f\x98\x80");
    REFUSE(g, "\xed\xa0\x80"); /* a surrogate */
    REFUSE(g, "\xf4\x90\x80\x80"); /* past U+10FFFF */
    REFUSE(g, "\xff");
    cmf__gram_free(g);
}

TEST(state_key_equal_after_loop)
{
    cmf__gram *g = parse("root ::= \"\\\"\" [a-z]* \"\\\"\"\n");
    if (!g) return;
    cmf__gstate s0 = {0}, s1 = {0}, s2 = {0};
    cmf__buf k1 = {0}, k2 = {0};
    CHECK_OK(cmf__gstate_init(g, &s0));
    CHECK_EQ_INT(cmf__gstate_byte(g, &s0, '"', &s1), 1);
    CHECK_EQ_INT(cmf__gstate_byte(g, &s1, 'q', &s2), 1);
    CHECK_OK(cmf__gstate_key(&s1, &k1));
    CHECK_OK(cmf__gstate_key(&s2, &k2));
    CHECK(k1.len == k2.len && !memcmp(k1.data, k2.data, k1.len));
    cmf__buf_free(&k1);
    cmf__buf_free(&k2);
    cmf__gstate_free(&s0);
    cmf__gstate_free(&s1);
    cmf__gstate_free(&s2);
    cmf__gram_free(g);
}

/* Nullable alternatives under a repeat multiply the paths a step expands
 * (here 64^5 to one stack): refused within the expansion budget, fast,
 * naming the cause; the same choice without the repeat still runs. */
TEST(ambiguous_refused)
{
    char text[512] = "root ::= (";
    for (int i = 0; i < 64; i++) strcat(text, "|");
    strcat(text, "\"a\"){5}\n");
    cmf__gram *g = parse(text);
    if (!g) return;
    cmf__gstate s = {0};
    CHECK_ERR(cmf__gstate_init(g, &s), CMF_ERR_UNSUPPORTED, "highly ambiguous grammar");
    cmf__gstate_free(&s);
    cmf__gram_free(g);
    text[strlen(text) - 4] = '\n', text[strlen(text) - 3] = 0;
    if ((g = parse(text))) {
        ACCEPT(g, "a");
        ACCEPT(g, "");
        cmf__gram_free(g);
    }
}

static void bad(const char *text, const char *want, int line)
{
    cmf__gram *g = NULL;
    cmf_status st = cmf__gram_parse(text, strlen(text), "bad.gbnf", &g);
    if (st != CMF_ERR_PARSE) harness_fail(__FILE__, line, "expected ERR_PARSE for %s, got %s", text, cmf_status_name(st));
    else if (!strstr(cmf_last_error(), want))
        harness_fail(__FILE__, line, "message \"%s\" lacks \"%s\"", cmf_last_error(), want);
    CHECK(g == NULL);
    cmf__gram_free(g);
}

TEST(malformed)
{
    bad("root ::= \"abc\n", "bad.gbnf: line 1, column 10: unterminated literal", __LINE__);
    bad("root ::= a\na ::= [a-z\n", "line 2, column 7: unterminated character class", __LINE__);
    bad("root ::= b\n", "line 1, column 10: undefined rule 'b'", __LINE__);
    bad("x ::= \"a\"\n", "no rule named 'root'", __LINE__);
    bad("root ::= (\"a\" | \"b\"\n", "line 1, column 10: '(' without a matching ')'", __LINE__);
    bad("root ::= \"a\")\n", "line 1, column 13: ')' without a matching '('", __LINE__);
    bad("root \"a\"\n", "line 1, column 6: expected '::=' after rule name 'root'", __LINE__);
    bad("root ::= * \"a\"\n", "line 1, column 10: '*' follows no symbol", __LINE__);
    bad("root ::= \"a\"{3,1}\n", "line 1, column 13: repetition {3,1}: max below min", __LINE__);
    bad("root ::= \"a\"{2\n", "line 1, column 13: expected '}' closing '{'", __LINE__);
    bad("root ::= [z-a]\n", "line 1, column 12: range end U+0061 below its start U+007A", __LINE__);
    bad("root ::= \"\\q\"\n", "line 1, column 11: unknown escape '\\q'", __LINE__);
    bad("root ::= \"\\x4\"\n", "escape '\\x' needs 2 hex digits", __LINE__);
    bad("root ::= []\n", "line 1, column 10: empty character class", __LINE__);
    bad("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n", "rule 'expr' is left-recursive", __LINE__);
    bad("root ::= a\na ::= b? a \"x\"\nb ::= \"y\"\n", "left-recursive", __LINE__);
    bad("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' defined twice (first on line 1)", __LINE__);
    bad("root ::= \"a\" @\n", "line 1, column 14: unexpected '@'", __LINE__);
    bad("root ::= \"a\"{20000}\n", "repetition count past", __LINE__);
}

int main(void)
{
    RUN(arithmetic);
    RUN(chess);
    RUN(json);
    RUN(json_arr);
    RUN(list_english_japanese);
    RUN(c_like);
    RUN(repetition_bounds);
    RUN(utf8_partial);
    RUN(state_key_equal_after_loop);
    RUN(malformed);
    RUN(ambiguous_refused);
    return harness_done();
}
