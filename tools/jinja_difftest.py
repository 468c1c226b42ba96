#!/usr/bin/env python3
"""jinja_difftest.py — differential test of `cmf template` against jinja2:
random templates (expressions, filters, tests, methods; and whitespace-
control structure) rendered by both, mismatches printed. jinja2 runs with
transformers' chat-template settings (gen_template_refs.make_env). Known,
documented differences (range()/dict views printing, % formatting, lazy
generators) show up as mismatches too.

usage: jinja_difftest.py CMF_BIN TOKENIZER_DIR [SEED] [N]
"""
import copy
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_template_cases import CTX  # noqa: E402
from gen_template_refs import make_env  # noqa: E402

R = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)

ATOMS = ["n", "f", "neg", "t", "z", "s", "w", "u", "lst", "strs", "empty", "d", "msgs", "msgs[1]", "msgs[2].tool_calls",
         "1", "0", "-2", "2.5", "0.1", "'ab'", "'A b'", "''", "' x '", "[1, 2]", "[]", "{'k': 1}", "none", "true", "false",
         "missing", "d.a", "msgs[0].role", "lst[0]", "u[1:3]", "'a\\nb'", "(1, 'x')", "range(3)", "1e3", "3.0"]
BIN = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or", "**"]
FILTERS = ["trim", "length", "first", "last", "join", "join(', ')", "upper", "lower", "title", "capitalize", "list", "string",
           "items", "tojson", "tojson(indent=2)", "default('D')", "default('D', true)", "unique|list", "sort", "sort(reverse=true)",
           "reverse|list", "int", "float", "abs", "round", "round(1)", "indent(2)", "e", "safe", "wordcount", "center(9)",
           "map('string')|list", "select|list", "reject|list", "batch(2)|list", "sum", "min", "max", "dictsort", "count",
           "replace('a', 'b')", "map(attribute='role')|list", "selectattr('role')|list", "truncate(5, true, '..', 0)"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
         "boolean", "true", "false", "odd", "even", "divisibleby 2", "eq 1", "lt 3", "in lst", "lower", "upper", "callable"]
METHODS = ["strip()", "upper()", "split()", "split(',')", "startswith('a')", "endswith('b')", "replace('a','x')",
           "lstrip('a')", "title()", "find('a')", "count('a')", "splitlines()", "items()", "keys()", "values()",
           "get('a')", "get('zz', 1)", "index(1)", "format(1, 2)", "isdigit()", "rsplit(' ', 1)", "join(['a', 'b'])"]
def expr(d=0):
    r = R.random()
    if d > 3 or r < 0.3: return R.choice(ATOMS)
    if r < 0.5: return "(%s %s %s)" % (expr(d+1), R.choice(BIN), expr(d+1))
    if r < 0.65: return "%s|%s" % (expr(d+1), R.choice(FILTERS))
    if r < 0.75: return "(%s is %s%s)" % (expr(d+1), R.choice(["", "not "]), R.choice(TESTS))
    if r < 0.85: return "%s.%s" % (R.choice(["s", "w", "u", "d", "lst", "'a,b c'", "msgs[1]", "strs", "'{} {}'"]), R.choice(METHODS))
    if r < 0.92: return "(%s if %s else %s)" % (expr(d+1), expr(d+1), expr(d+1))
    if r < 0.96: return "[%s, %s]" % (expr(d+1), expr(d+1))
    return "not %s" % expr(d+1)
def stmt(d=0):
    r = R.random()
    ws = lambda: R.choice(["", "-", "", "+"]) if R.random() < 0.3 else ""
    sp = lambda: R.choice(["", " ", "\n", "  \n  ", "\n\n", "\t"])
    if d > 2 or r < 0.35: return sp() + "{{%s %s %s}}" % (R.choice(["", "-"]), expr(), R.choice(["", "-"])) + sp()
    if r < 0.5: return sp() + "{%% if %s %%}%s{%% else %%}%s{%% endif %%}" % (expr(), stmt(d+1), stmt(d+1)) + sp()
    if r < 0.65: return sp() + "{%%%s for x in %s %s%%}%s{{ loop.index }}{{ x }}{%%%s endfor %s%%}" % (R.choice(["","-"]), R.choice(["lst","strs","msgs","d","'ab'","empty","range(2)","u"]), R.choice(["","-"]), stmt(d+1), R.choice(["","-"]), R.choice(["","-"])) + sp()
    if r < 0.75: return sp() + "{%% set v = %s %%}{{ v }}" % expr() + sp()
    if r < 0.82: return "  {# c #}" + sp()
    if r < 0.9: return stmt(d+1) + stmt(d+1)
    return sp() + "{%% set ns = namespace(a=%s) %%}{%% for i in lst %%}{%% set ns.a = ns.a ~ i %%}{%% endfor %%}{{ ns.a }}" % expr()
def wsp(): return R.choice(["", " ", "\n", "  \n  ", "\n\n", "\t", "\n  ", " \n", "x", "\r\n", "  "])
def wm(): return R.choice(["", "", "-", "+"])
def wme(): return R.choice(["", "", "-", "+"])
def wnode(d=0):
    r = R.random()
    if d > 3 or r < 0.25: return wsp() + "{{%s %s %s}}" % (R.choice(["", "-"]), R.choice(["n", "'a'", "x", "loop.index", "s|trim", "caller() if caller is defined"]), R.choice(["", "-"])) + wsp()
    if r < 0.4: return wsp() + "{%%%s if %s %s%%}%s{%%%s elif n %s%%}%s{%%%s else %s%%}%s{%%%s endif %s%%}" % (wm(), R.choice(["t", "z"]), wme(), wnode(d+1), wm(), wme(), wnode(d+1), wm(), wme(), wnode(d+1), wm(), wme()) + wsp()
    if r < 0.5: return wsp() + "{%%%s for x in lst %s%%}%s{%%%s endfor %s%%}" % (wm(), wme(), wnode(d+1), wm(), wme()) + wsp()
    if r < 0.58: return wsp() + "{#%s c %s#}" % (wm(), wme()) + wsp()
    if r < 0.64: return wsp() + "{%%%s set v %s%%}%s{%%%s endset %s%%}{{ v }}" % (wm(), wme(), wnode(d+1), wm(), wme()) + wsp()
    if r < 0.7: return wsp() + "{%%%s macro mm(a) %s%%}%s{%%%s endmacro %s%%}{{ mm(1) }}" % (wm(), wme(), wnode(d+1), wm(), wme()) + wsp()
    if r < 0.76: return wsp() + "{%%%s raw %s%%}%s{%%%s endraw %s%%}" % (R.choice(["", "-"]), R.choice(["", "-"]), wsp() + "{{ x }}" + wsp(), R.choice(["", "-"]), R.choice(["", "-"])) + wsp()
    if r < 0.82: return wsp() + "{%%%s filter upper %s%%}%s{%%%s endfilter %s%%}" % (wm(), wme(), wnode(d+1), wm(), wme()) + wsp()
    if r < 0.87: return wsp() + "{%%%s generation %s%%}%s{%%%s endgeneration %s%%}" % (wm(), wme(), wnode(d+1), wm(), wme()) + wsp()
    return wnode(d+1) + wnode(d+1)


def main():
    cmf, tokdir = sys.argv[1], sys.argv[2]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    env = make_env()
    cfg = json.load(open(os.path.join(tokdir, "tokenizer_config.json")))
    special = {}
    for k in ("bos_token", "eos_token"):
        v = cfg.get(k)
        v = v.get("content") if isinstance(v, dict) else v
        if v is not None:
            special[k] = v
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        msgs, kw, tpl = (os.path.join(tmp, x) for x in ("m.json", "k.json", "t.jinja"))
        json.dump([], open(msgs, "w"))
        json.dump(CTX, open(kw, "w"))
        for i in range(n):
            src = stmt() if i % 2 == 0 else wnode()
            open(tpl, "w", newline="").write(src)
            try:
                want = env.from_string(src).render(messages=[], tools=None, documents=None,
                                                   add_generation_prompt=False, **special, **copy.deepcopy(CTX))
            except Exception as e:
                want = None
                why = "%s: %s" % (type(e).__name__, e)
            p = subprocess.run([cmf, "template", tokdir, "--messages", msgs, "--kwargs", kw, "--template", tpl],
                               capture_output=True)
            got = p.stdout.decode("utf-8", "replace") if p.returncode == 0 else None
            if (want is None) != (got is None) or (want is not None and want != got):
                bad += 1
                print("TEMPLATE:", repr(src))
                print("  jinja2:", repr(want) if want is not None else "raises " + why)
                print("  cmf   :", repr(got) if got is not None else p.stderr.decode("utf-8", "replace").strip())
    print("mismatches: %d of %d" % (bad, n))


if __name__ == "__main__":
    main()
