#!/usr/bin/env python3
"""gen_template_cases.py — small Jinja snippets rendered by jinja2 with
transformers' chat-template environment (see gen_template_refs.py), for the
interpreter's unit test: whitespace control, expressions, filters, tests,
Python methods, printing, errors.

usage: gen_template_cases.py > tests/data/template_cases.json
"""
import json
import sys

from gen_template_refs import make_env

CTX = {
    "s": "  Hello, World  ", "w": "a-b c(d", "n": 7, "f": 2.5, "neg": -3, "t": True, "z": None,
    "lst": [3, 1, 2], "strs": ["b", "A", "c", "a"], "empty": [],
    "d": {"b": 1, "a": 2, "items": "x"},
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}],
    "u": "héllo wörld ÄÖ 🎉", "nl": "a\nb\r\nc\n", "fl": [1.0, 0.1, 1e-05, 1e16, 123456789.125, -0.0, 3.0e-7, 1e22],
}

CASES = [
    # whitespace control, trim_blocks, lstrip_blocks
    "a\n{% if t %}\nyes\n{% endif %}\nb",
    "a\n  {% if t %}\n  yes\n  {% endif %}\nb",
    "a  {%- if t -%}  yes  {%- endif -%}  b",
    "x {{ n }} \n{{- n -}}\n y",
    "a\n  {#- c -#}\n  b\n  {# c #}\nc",
    "  {%+ if t %}k{% endif %}",
    "{% if t +%}\nk{% endif %}",
    "{% raw %}{{ not }}{% endraw %}\n{%- raw -%}  {% x %}  {%- endraw %}",
    "line\n    {% for i in lst %}\n    {{ i }}\n    {% endfor %}\nend\n",
    "trailing\n\n",
    "{{ 'a' }}\r\n{{ 'b' }}\rc",
    # literals and printing
    "{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 'x' }} {{ \"y\" }} {{ true }} {{ True }} {{ none }} {{ None }}",
    "{{ fl }}", "{% for x in fl %}{{ x }} {% endfor %}",
    "{{ [1, 'a', none, true, 2.5, {'k': 'v'}] }}", "{{ (1, 2) }} {{ (1,) }} {{ () }}",
    "{{ d }} {{ msgs[2] }}", "{{ \"it's\" }}|{{ ['it\\'s', 'q\"q', 'b\\\\s', 'n\\nl'] }}",
    "{{ 'a\\tb\\u00e9\\x41\\101' }}", "{{ 'con' 'cat' }}",
    "{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ** 2 }} {{ -2 ** 2 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }}",
    "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none ~ true }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1,2] == [1,2] }} {{ 'b' > 'a' }}",
    "{{ 'a' in 'cat' }} {{ 2 in lst }} {{ 'a' in d }} {{ 'q' not in d }} {{ 'x' in missing }}",
    "{{ t and 'yes' }} {{ z or 'dflt' }} {{ 0 or '' }} {{ not z }} {{ [] or 'e' }}",
    "{{ 'y' if t else 'n' }} {{ 'y' if z else 'n' }} [{{ 'y' if z }}]",
    # attribute / item access
    "{{ d.a }} {{ d['b'] }} {{ d.items is callable }} {{ d['items'] }} [{{ d.missing }}] {{ msgs[-1].role }} {{ msgs[0]['content'] }}",
    "{{ lst[0] }} {{ lst[-1] }} [{{ lst[10] }}] {{ lst[1:] }} {{ lst[::-1] }} {{ lst[:-1] }} {{ lst[::2] }} {{ u[1:4] }} {{ u[::-1] }}",
    "{{ msgs[2].tool_calls[0].function.arguments }} {{ msgs.0.role }}",
    "{{ missing.attr }}", "{{ missing['x'] }}", "{{ missing() }}", "{{ d.nope.deeper }}",
    # statements
    "{% set x = 5 %}{% set y, z2 = 1, 2 %}{{ x }}{{ y }}{{ z2 }}",
    "{% set ns = namespace(a=1, b='q') %}{% for i in lst %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}",
    "{% set acc = 0 %}{% for i in lst %}{% set acc = acc + i %}{% endfor %}{{ acc }}",
    "{% for i in lst %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
    "{% for i in lst %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }};{% endfor %}",
    "{% for i in empty %}x{% else %}none{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for c in 'abc' %}{{ c }}.{% endfor %}",
    "{% for i in lst if i > 1 %}{{ i }}{{ loop.index }}{{ loop.last }}{% endfor %}",
    "{% for i in lst %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for a in [[1,2],[3,4]] %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}|{% endfor %}",
    "{% if z %}1{% elif n > 5 %}2{% else %}3{% endif %}",
    "{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(b=3, a=4) }}",
    "{% macro outer() %}<{{ caller() }}>{% endmacro %}{% call outer() %}inside {{ n }}{% endcall %}",
    "{% macro li(x) %}{{ caller(x) }}{% endmacro %}{% call(v) li(5) %}v={{ v }}{% endcall %}",
    "{% filter upper %}hello {{ n }}{% endfilter %}",
    "{% set blk %}  Block {{ n }}  {% endset %}[{{ blk }}]{% set b2 | trim %}  x  {% endset %}[{{ b2 }}]",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
    "{% generation %}gen {{ n }}{% endgeneration %}",
    "{% set x = 1 %}{% for i in lst %}{% set x = i %}{% endfor %}{{ x }}",
    "{% set x = 1 %}{% if t %}{% set x = 2 %}{% endif %}{{ x }}",
    # filters
    "{{ s|trim }}|{{ s|length }}|{{ u|length }}|{{ lst|count }}|{{ d|length }}|{{ missing|length }}",
    "{{ lst|first }} {{ lst|last }} {{ 'abc'|first }} [{{ empty|first }}]",
    "{{ lst|join(', ') }} {{ strs|join }} {{ msgs|join('|', attribute='role') }}",
    "{{ s|upper }} {{ s|lower }} {{ w|title }} {{ 'hello WORLD'|capitalize }} {{ u|upper }} {{ u|title }}",
    "{{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }}",
    "{{ missing|default('D') }} {{ ''|default('E') }} {{ ''|default('E', true) }} {{ z|d('N') }} {{ z|default('N', boolean=true) }}",
    "{{ 'abc'|list }} {{ d|list }} {{ 42|string }}{{ none|string }} {{ d|items|list }}",
    "{{ msgs|map(attribute='role')|list }} {{ strs|map('upper')|list }} {{ lst|map('string')|join }}",
    "{{ lst|select('odd')|list }} {{ lst|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='role')|join(',') }}",
    "{{ msgs|selectattr('tool_calls')|list|length }} {{ msgs|selectattr('tool_calls', 'defined')|map(attribute='role')|first }}",
    "{{ strs|unique|list }} {{ strs|unique(case_sensitive=true)|list }} {{ strs|sort }} {{ strs|sort(case_sensitive=true) }} {{ lst|sort(reverse=true) }}",
    "{{ msgs|sort(attribute='role')|map(attribute='role')|join(',') }} {{ d|dictsort }} {{ {'x': 2, 'y': 1}|dictsort(by='value', reverse=true) }}",
    "{{ d|dictsort(by='value') }}", "{{ msgs|sort(attribute='tool_calls.0.function.name')|list|length }}",
    "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(9) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 3|float }} {{ 'q'|float }}",
    "{{ -3|abs }} {{ neg|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 3|round }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x'|indent('>>', first=true) }}",
    "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }} {{ '<i>'|safe }}",
    "{{ lst|batch(2)|list }} {{ lst|batch(2, 0)|list }} {{ 'one two  three'|wordcount }} [{{ 'ab'|center(7) }}] [{{ 'ab'|center(6) }}]",
    "{{ 'hello world foo bar'|truncate(9) }}|{{ 'hello world foo bar'|truncate(9, true) }}|{{ 'hello world foo bar'|truncate(11, false, '..', 0) }}",
    "{{ lst|reverse|list }} {{ 'abc'|reverse }} {{ lst|sum }} {{ lst|min }} {{ lst|max }} {{ strs|max }}",
    "{{ d|tojson }} {{ msgs[2]|tojson }} {{ u|tojson }} {{ [1.0, 0.5, none, true]|tojson }} {{ nl|tojson }}",
    "{{ d|tojson(indent=2) }}|{{ msgs|tojson(indent=4) }}|{{ empty|tojson(indent=2) }}|{{ {}|tojson(indent=2) }}",
    "{{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }} {{ u|tojson(ensure_ascii=true) }}",
    "{{ lst|map(attribute='x')|list }} {{ z|selectattr('a')|list }} {{ z|map('upper')|list }}",
    "{{ lst|select('odd') is iterable }} {{ (lst|map('string'))|join('-') }}",
    "{{ lst|map('string')|tojson }}", "{{ lst|select('odd')|length }}",
    "{{ 'x'|safe + '<y>' }} {{ '<y>' + 'x'|safe }} {{ ('a'|safe + '&')|length }}",
    # tests
    "{{ n is defined }} {{ missing is defined }} {{ missing is undefined }} {{ z is none }} {{ z is not none }}",
    "{{ s is string }} {{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ f is float }} {{ t is boolean }} {{ t is true }} {{ z is false }}",
    "{{ d is mapping }} {{ lst is mapping }} {{ lst is iterable }} {{ s is iterable }} {{ n is iterable }} {{ missing is iterable }} {{ d is sequence }} {{ n is sequence }}",
    "{{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ n is eq 7 }} {{ n is ne 7 }} {{ n is lt 8 }} {{ n is gt 8 }} {{ n is le 7 }} {{ n is ge 8 }}",
    "{{ range is callable }} {{ n is callable }} {{ z is sameas none }} {{ t is sameas true }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 2 is in lst }} {{ n is equalto 7 }}",
    # python methods
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\nq\\n'.lstrip('\\n') }}",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a  b c '.split(none, 1) }} {{ ' a  b c '.rsplit(none, 1) }}",
    "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.replace('b', 'B') }} {{ 'Ab'.upper() }}{{ 'Ab'.lower() }}",
    "{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abcabc'.find('z') }} {{ 'abcabc'.count('bc') }}",
    "{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='N') }} {{ '{{x}}'.format() }}",
    "{{ ', '.join(strs) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'a1'.isalnum() }} {{ ' '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }}",
    "{{ nl.splitlines() }} {{ nl.splitlines(true) }} {{ 'prefix_x'.removeprefix('prefix_') }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}",
    "{{ lst.index(2) }} {{ lst.count(3) }} {{ u.upper() }} {{ msgs[1].content.startswith('h') }}",
    "{{ lst.append(4) }}", "{{ d.update({'q': 1}) }}", "{{ d.pop('a') }}",
    "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ namespace(x=1).x }}",
    "{{ '%s and %s' % (n, 'x') }} {{ '%d%%' % 7.9 }} {{ '%.2f|%f' % (f, 1) }} {{ '%r' % 'q' }} {{ '[%s]' % lst }}",
    "{{ '%s %s' % (1,) }}", "{{ '%s' % (1, 2) }}", "{{ 'x' % 5 }}",
    # errors
    "{{ raise_exception('custom failure') }}", "{% if %}", "{% for x in %}{% endfor %}", "{{ 1 + }}", "{% endif %}",
    "{{ 'a' + 1 }}", "{{ 1 / 0 }}", "{{ n|nosuchfilter }}", "{{ n is nosuchtest }}", "{% unknowntag %}",
    "{{ x.y", "{% for i in lst %}", "{{ 'unterminated }}", "{% set ns2 = 5 %}{% set ns2.a = 1 %}",
    "{{ z.attr }}", "{{ n[0] }}", "{{ z|tojson }}{{ missing|tojson }}", "{{ lst < 'a' }}", "{# unclosed comment",
    "{{ 1 }}{% break %}", "{{ d|tojson(indent=2)|length }}",
]


def main():
    env = make_env()
    out = {"generator": "jinja2 under transformers' chat-template settings (tools/gen_template_cases.py)",
           "context": CTX, "cases": []}
    for src in CASES:
        try:
            r = env.from_string(src).render(**CTX)
            out["cases"].append({"template": src, "render": r})
        except Exception as e:
            out["cases"].append({"template": src, "error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
