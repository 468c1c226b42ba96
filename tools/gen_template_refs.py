#!/usr/bin/env python3
"""gen_template_refs.py — reference renders of chat templates by jinja2,
with transformers' apply_chat_template environment replicated:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[generation tag, loopcontrols]), tojson = json.dumps(ensure_ascii=
False, indent, separators, sort_keys), raise_exception, strftime_now, and the
render variables messages, tools, documents, add_generation_prompt, the
special tokens, then the conversation's kwargs.

usage: gen_template_refs.py FIXTURES_DIR > tests/data/template_refs.json
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """{% generation %}...{% endgeneration %} renders its body (HF's AssistantTracker, tracker off)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_passthrough"), [], [], body).set_lineno(lineno)

    def _passthrough(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}

EXTRA_CONVERSATIONS = [
    {"id": "tool_call_round", "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21.5}"},
        {"role": "assistant", "content": "It is 21.5 °C in Paris."},
        {"role": "user", "content": "Thanks!"}],
     "tools": [WEATHER_TOOL],
     "kwargs": {"add_generation_prompt": True, "date_string": "26 Jul 2024"}},
    {"id": "tool_call_str", "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather", "content": "-3"},
        {"role": "assistant", "content": "It is -3 degrees."}],
     "tools": [WEATHER_TOOL],
     "kwargs": {"add_generation_prompt": False, "date_string": "26 Jul 2024"}},
    {"id": "think_history", "messages": [
        {"role": "user", "content": "What is 2*3?"},
        {"role": "assistant", "content": "<think>\nsimple product\n</think>\n\n6"},
        {"role": "user", "content": "And 3*4?"}],
     "kwargs": {"add_generation_prompt": True, "enable_thinking": True, "date_string": "26 Jul 2024"}},
    {"id": "unicode_ws", "messages": [
        {"role": "system", "content": "  Réponds en français, s'il te plaît.\n"},
        {"role": "user", "content": "  Привет, 世界! \"quotes\" and \\ backslash\t\n"},
        {"role": "assistant", "content": " ok 👍 "},
        {"role": "user", "content": "emoji 🎉 line1\nline2"}],
     "kwargs": {"add_generation_prompt": True, "date_string": "1 Jan 2025"}},
    {"id": "multimodal_parts", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What is this? "}]}],
     "kwargs": {"add_generation_prompt": True, "date_string": "26 Jul 2024"}},
    {"id": "reasoning_field_two_calls", "messages": [
        {"role": "user", "content": "Compare weather in A and B"},
        {"role": "assistant", "content": "", "reasoning_content": "Need two lookups.",
         "tool_calls": [
             {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"A\"}"}},
             {"id": "call00002", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"B\"}"}}]},
        {"role": "tool", "tool_call_id": "call00001", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call00002", "content": "rain"}],
     "tools": [WEATHER_TOOL],
     "kwargs": {"add_generation_prompt": True, "enable_thinking": True, "date_string": "26 Jul 2024"}},
    {"id": "empty", "messages": [],
     "kwargs": {"add_generation_prompt": True, "date_string": "26 Jul 2024"}},
    {"id": "alternation_error", "messages": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"}],
     "kwargs": {"add_generation_prompt": False, "date_string": "26 Jul 2024"}},
]


def render(env, src, conv, bos, eos):
    kwargs = dict(conv.get("kwargs", {}))
    agp = kwargs.pop("add_generation_prompt", False)
    special = {}
    if bos is not None:
        special["bos_token"] = bos
    if eos is not None:
        special["eos_token"] = eos
    try:
        tpl = env.from_string(src)
        out = tpl.render(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                         add_generation_prompt=agp, **special, **kwargs)
        return {"id": conv["id"], "render": out}
    except Exception as e:  # what transformers would raise
        return {"id": conv["id"], "error": "%s: %s" % (type(e).__name__, e)}


def token(cfg, key):
    v = cfg.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    return v


def main():
    fx = sys.argv[1]
    env = make_env()
    convs = json.load(open(os.path.join(fx, "tokenizers", "conversations.json"))) + EXTRA_CONVERSATIONS
    llama3 = json.load(open(os.path.join(fx, "tokenizers", "llama3", "tokenizer_config.json")))
    lbos, leos = token(llama3, "bos_token"), token(llama3, "eos_token")
    sources = []
    for f in sorted(os.listdir(os.path.join(fx, "templates"))):
        if f.endswith(".jinja"):
            sources.append(("templates/" + f, open(os.path.join(fx, "templates", f)).read(), lbos, leos))
    for f in ("qwen3_chat_template.jinja", "nanbeige42_chat_template.jinja"):
        sources.append(("tokenizers/" + f, open(os.path.join(fx, "tokenizers", f)).read(), lbos, leos))
    for d in sorted(os.listdir(os.path.join(fx, "tokenizers"))):
        p = os.path.join(fx, "tokenizers", d, "tokenizer_config.json")
        if os.path.isfile(p):
            cfg = json.load(open(p))
            if isinstance(cfg.get("chat_template"), str):
                sources.append(("tokenizers/%s/tokenizer_config.json" % d, cfg["chat_template"],
                                token(cfg, "bos_token"), token(cfg, "eos_token")))
    out = {"generator": "jinja2 %s, transformers apply_chat_template settings replicated" % jinja2.__version__,
           "conversations": convs, "templates": {}}
    for key, src, bos, eos in sources:
        out["templates"][key] = {"bos_token": bos, "eos_token": eos,
                                 "cases": [render(env, src, c, bos, eos) for c in convs]}
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
