// tools.mjs URL KEY TEMPLATE — function calling through the official openai
// client on cmf serve running the demo model with a tool-aware template
// (TEMPLATE, tests/server/tools_template.jinja): a conversation with tools,
// a call and its result renders as jinja2 renders it for transformers;
// tool_choice naming a function or "required" gives calls whose
// arguments match the declared parameters (python3-jsonschema checks),
// whole and streamed; "auto" on a model that writes prose gives content;
// a call fed back as history renders and answers; bad tool fields are
// 400s naming the field and the server keeps serving.
import OpenAI from 'openai';
import { execFileSync } from 'node:child_process';
import { check, eq, done, post, validJson } from './common.mjs';

const [url, key, templatePath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: url + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });
const model = 'shk-tools';

const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather now', parameters: {
  type: 'object', properties: { city: { type: 'string', pattern: '^[A-Z][a-z]{0,7}$' }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'], additionalProperties: false } } };
const clock = { type: 'function', function: { name: 'now', parameters: {
  type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'], additionalProperties: false } } };
const tools = [weather, clock];
const paramsOf = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
const ask = [{ role: 'user', content: 'What is the weather in Verona?' }];

async function expectError(what, body, param) {
  const r = await post(url, '/v1/chat/completions', { model, messages: ask, ...body }, key);
  eq(r.status, 400, what + ': status');
  eq(r.json && r.json.error && r.json.error.param, param, what + ': param');
  check(r.json && r.json.error && r.json.error.message.length > 10, what + ': a message', r.text);
}

// jinja2's render of the template for transformers' input (arguments as
// objects, as its apply_chat_template documents), with its tojson
function jinjaRender(messages, toolList) {
  const py = `import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.filters['tojson'] = tojson
t = env.from_string(open(sys.argv[1], encoding='utf-8').read())
sys.stdout.write(t.render(messages=json.loads(sys.argv[2]), tools=json.loads(sys.argv[3]), add_generation_prompt=True))`;
  return execFileSync('python3', ['-c', py, templatePath, JSON.stringify(messages), JSON.stringify(toolList)],
    { encoding: 'utf8' });
}

// A checked call: a declared name, arguments that are JSON matching its parameters.
function checkCall(call, what, name) {
  check(call && call.type === 'function' && /^[0-9A-Za-z]{9}$/.test(call.id), what + ': id and type', call);
  if (name) eq(call && call.function.name, name, what + ': the named function');
  const params = call && paramsOf[call.function.name];
  check(params !== undefined, what + ': a declared function', call && call.function.name);
  check(params && validJson(call.function.arguments, params), what + ': arguments match the parameters',
    call && call.function.arguments);
}

// The calls of a stream, put together from their deltas (by index).
async function streamed(body) {
  const st = await client.chat.completions.create({ ...body, stream: true });
  const calls = [];
  let content = '', finish = null;
  for await (const ch of st) {
    const c = ch.choices[0];
    if (!c) continue;
    content += c.delta?.content ?? '';
    for (const tc of c.delta?.tool_calls ?? []) {
      const slot = calls[tc.index] ??= { id: tc.id, type: tc.type, function: { name: '', arguments: '' } };
      slot.function.name += tc.function?.name ?? '';
      slot.function.arguments += tc.function?.arguments ?? '';
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { calls, content, finish };
}
const nameArgs = (calls) => calls.map((c) => [c.function.name, c.function.arguments]);

// 1. the rendered prompt: tools, an assistant call with its arguments as
// OpenAI sends them (a JSON string) and the tool's result
const history = [
  ...ask,
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
    function: { name: 'get_weather', arguments: JSON.stringify({ city: 'Verona', unit: 'c' }) } }] },
  { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21' },
  { role: 'user', content: 'And Mantua?' },
];
const hfHistory = history.map((m) => m.tool_calls ? { ...m, tool_calls: m.tool_calls.map((c) =>
  ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })) } : m);
const tk = await post(url, '/tokenize', { model, messages: history, tools }, key);
eq(tk.status, 200, '/tokenize with tools');
const dt = await post(url, '/detokenize', { model, tokens: tk.json.tokens }, key);
const want = jinjaRender(hfHistory, tools);
check(want.includes('<tool_call>{"name": "get_weather", "arguments": {"city": "Verona"') && want.includes('"now"'),
  'the reference render holds the tools and the call', want);
eq(dt.json.prompt, want, 'messages with tools, a call and its result render as jinja2 renders them');

// 2. a named function: greedy, whole and streamed
const named = { model, messages: ask, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  temperature: 0, max_tokens: 300 };
const r1 = await client.chat.completions.create(named);
const c1 = r1.choices[0];
eq(c1.finish_reason, 'tool_calls', 'named: finish_reason');
eq(c1.message.content, null, 'named: no content');
eq(c1.message.tool_calls.length, 1, 'named: one call');
checkCall(c1.message.tool_calls[0], 'named', 'get_weather');
const s1 = await streamed(named);
eq(s1.finish, 'tool_calls', 'named streamed: finish_reason');
eq(s1.content, '', 'named streamed: no content');
eq(nameArgs(s1.calls), nameArgs(c1.message.tool_calls), 'named streamed: the same call as whole');

// 3. required: one call (parallel_tool_calls false), seeded sampling; then
// parallel (an array of calls), greedy
for (const seed of [3, 11]) {
  const body = { model, messages: ask, tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed,
    max_tokens: 300 };
  const r = await client.chat.completions.create(body);
  eq(r.choices[0].finish_reason, 'tool_calls', `required seed ${seed}: finish_reason`);
  eq(r.choices[0].message.tool_calls?.length, 1, `required seed ${seed}: one call`);
  checkCall(r.choices[0].message.tool_calls?.[0], `required seed ${seed}`);
  const s = await streamed(body);
  eq(nameArgs(s.calls), nameArgs(r.choices[0].message.tool_calls ?? []), `required seed ${seed}: streamed the same`);
}
const par = { model, messages: ask, tools, tool_choice: 'required', temperature: 0, max_tokens: 300 };
const r3 = await client.chat.completions.create(par);
eq(r3.choices[0].finish_reason, 'tool_calls', 'required parallel: finish_reason');
check((r3.choices[0].message.tool_calls?.length ?? 0) >= 1, 'required parallel: calls', r3.choices[0].message);
(r3.choices[0].message.tool_calls ?? []).forEach((c, i) => checkCall(c, `required parallel call ${i}`));

// 4. auto on a model that writes prose: content, whole and streamed alike
const auto = { model, messages: ask, tools, temperature: 0, max_tokens: 24 };
const r4 = await client.chat.completions.create(auto);
check(typeof r4.choices[0].message.content === 'string' && r4.choices[0].message.content.length > 0, 'auto: content',
  r4.choices[0].message);
check(!r4.choices[0].message.tool_calls, 'auto: no calls from prose', r4.choices[0].message);
eq(r4.choices[0].finish_reason, 'length', 'auto: finish_reason');
const s4 = await streamed(auto);
eq(s4.content, r4.choices[0].message.content, 'auto streamed: the same content');
eq(s4.finish, 'length', 'auto streamed: finish_reason');

// 5. the call fed back with its result: the prompt is the rendered history
const back = [...ask, c1.message, { role: 'tool', tool_call_id: c1.message.tool_calls[0].id, content: 'rain' }];
const r5 = await client.chat.completions.create({ model, messages: back, tools, temperature: 0, max_tokens: 8 });
const tk5 = await post(url, '/tokenize', { model, messages: back, tools }, key);
eq(r5.usage.prompt_tokens, tk5.json.count, 'a call fed back: prompt tokens as /tokenize renders them');
const dt5 = await post(url, '/detokenize', { model, tokens: tk5.json.tokens }, key);
const hfBack = back.map((m) => m.tool_calls ? { ...m, tool_calls: m.tool_calls.map((c) =>
  ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })) } : m);
eq(dt5.json.prompt, jinjaRender(hfBack, tools), 'a call fed back renders as jinja2 renders it');

// 6. errors name the field; the server keeps serving
await expectError('tools not an array', { tools: { a: 1 } }, 'tools');
await expectError('a tool without a name', { tools: [{ type: 'function', function: {} }] }, 'tools');
await expectError('tool_choice required without tools', { tool_choice: 'required' }, 'tool_choice');
await expectError('tool_choice with response_format', { tools, tool_choice: 'required',
  response_format: { type: 'json_object' } }, 'tool_choice');
await expectError('a forced call whose parameters cannot be enforced', { tools: [{ type: 'function', function: {
  name: 'n', parameters: { type: 'object', properties: { k: { type: 'integer', multipleOf: 3 } } } } }],
  tool_choice: 'required' }, 'tools');
await expectError('history arguments that are not JSON', { messages: [...ask, { role: 'assistant', content: null,
  tool_calls: [{ id: 'x', type: 'function', function: { name: 'now', arguments: '{tz' } }] }] }, 'messages');
const rc = await post(url, '/v1/completions', { model, prompt: 'ROMEO:', tools }, key);
eq([rc.status, rc.json?.error?.param], [400, 'tools'], 'tools on /v1/completions');
const after = await client.chat.completions.create({ model, messages: ask, max_tokens: 4 });
check(after.choices[0].message.content.length > 0, 'still serving after the bad requests', after);
done('serve tools');
