// contract.mjs URL KEY REF_JSON — the official openai client against cmf
// serve running the demo model (bf16): models, chat and text completions
// (greedy equal to transformers' reference continuation), streaming with
// usage, logprobs, seeded sampling, stop strings, prefix reuse in
// usage.prompt_tokens_details.cached_tokens, skills, tokenize/detokenize,
// errors and keys.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { check, eq, done, post, get, metric, isOaiError, validJson } from './common.mjs';

const [url, key, refPath] = process.argv.slice(2);
const ref = JSON.parse(readFileSync(refPath, 'utf8'));
const client = new OpenAI({ baseURL: url + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });
const model = 'shk';

async function expectError(what, fn, status, param) {
  try {
    await fn();
    check(false, what, 'no error');
  } catch (e) {
    check(e instanceof OpenAI.APIError, what + ': an APIError', String(e));
    eq(e.status, status, what + ': status');
    if (param !== undefined) eq(e.param, param, what + ': param');
    check(typeof e.message === 'string' && e.message.length > 10, what + ': a message', e.message);
  }
}

// models
const models = await client.models.list();
eq(models.data.map((m) => m.id), [model, 'shk-skills'], 'models.list ids (two files, one process)');
eq(models.data[1].skills, ['prose', 'code'], 'models.list skills');
const one = await client.models.retrieve(model);
eq(one.id, model, 'models.retrieve');
await expectError('models.retrieve unknown', () => client.models.retrieve('nope'), 404);

// text completion: greedy from the reference prompt ids equals transformers
const det = await post(url, '/detokenize', { tokens: ref.greedy }, key);
eq(det.status, 200, '/detokenize status');
const wantText = det.json.prompt;
check(wantText.length > 50, 'reference text decoded', wantText);
const c1 = await client.completions.create({ model, prompt: ref.input_ids, max_tokens: 64, temperature: 0 });
eq(c1.choices[0].text, wantText, 'greedy completion equals the transformers reference (64 tokens)');
eq(c1.choices[0].finish_reason, 'length', 'completion finish_reason');
eq(c1.usage.prompt_tokens, ref.input_ids.length, 'completion usage.prompt_tokens');
eq(c1.usage.completion_tokens, 64, 'completion usage.completion_tokens');
eq(c1.object, 'text_completion', 'completion object');
// the same prompt as text gives the same ids and text
const c2 = await client.completions.create({ model, prompt: ref.prompt, max_tokens: 64, temperature: 0 });
eq(c2.choices[0].text, wantText, 'greedy completion from the prompt text');
// the prefix cache keeps whole blocks of 16 positions: a prompt of several blocks, twice
const longPrompt = ref.prompt + wantText;
const c3 = await client.completions.create({ model, prompt: longPrompt, max_tokens: 4, temperature: 0 });
const c4 = await client.completions.create({ model, prompt: longPrompt, max_tokens: 4, temperature: 0 });
check(c3.usage.prompt_tokens >= 33, 'a prompt of more than two blocks', c3.usage);
eq(c4.choices[0].text, c3.choices[0].text, 'a repeated prompt answers the same');
check(c4.usage.prompt_tokens_details.cached_tokens >= 16 &&
  c4.usage.prompt_tokens_details.cached_tokens <= c4.usage.prompt_tokens - 1 &&
  c4.usage.prompt_tokens_details.cached_tokens % 16 === 0,
  'a repeated prompt reuses whole blocks of the prefix cache (16 <= cached_tokens < prompt_tokens)', c4.usage);

// tokenize round trip
const tok = await post(url, '/tokenize', { model, prompt: ref.prompt }, key);
eq(tok.json.tokens, ref.input_ids, '/tokenize ids');
eq(tok.json.count, ref.input_ids.length, '/tokenize count');

// chat: usage.prompt_tokens equals /tokenize of the rendered messages
const messages = [{ role: 'system', content: 'Verona. A street.' }, { role: 'user', content: 'Good morrow, fair maid.' }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0 });
const ct = await post(url, '/tokenize', { model, messages }, key);
eq(chat.usage.prompt_tokens, ct.json.count, 'chat usage.prompt_tokens = tokens of the rendered template');
eq(chat.choices[0].message.role, 'assistant', 'chat message role');
check(chat.choices[0].message.content.length > 0, 'chat content non-empty', chat.choices[0].message.content);
eq(chat.object, 'chat.completion', 'chat object');
check(/^chatcmpl-/.test(chat.id), 'chat id', chat.id);
eq(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens, 'chat usage total');
// content parts and the developer role render as text and system
const parts = await client.chat.completions.create({ model, max_tokens: 32, temperature: 0,
  messages: [{ role: 'developer', content: [{ type: 'text', text: 'Verona. ' }, { type: 'text', text: 'A street.' }] },
    { role: 'user', content: [{ type: 'text', text: 'Good morrow, fair maid.' }] }] });
eq(parts.choices[0].message.content, chat.choices[0].message.content, 'content parts + developer = string + system');

// streaming with usage: the same text as the whole answer
const stream = await client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0, stream: true,
  stream_options: { include_usage: true } });
let text = '', finish = null, usage = null, chunks = 0, roleSeen = false;
for await (const ch of stream) {
  chunks++;
  if (ch.usage) usage = ch.usage;
  const c = ch.choices[0];
  if (!c) continue;
  if (c.delta.role === 'assistant') roleSeen = true;
  if (c.delta.content) text += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
}
eq(text, chat.choices[0].message.content, 'streamed text = whole answer');
eq(finish, chat.choices[0].finish_reason, 'streamed finish_reason');
check(roleSeen, 'stream: first delta has the role');
check(usage && usage.completion_tokens === chat.usage.completion_tokens, 'stream usage chunk', usage);
check(chunks >= chat.usage.completion_tokens / 2, 'stream: about one chunk per token', { chunks, tokens: chat.usage.completion_tokens });

// logprobs: greedy picks the top alternative; counts match
const lp = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, logprobs: true,
  top_logprobs: 3 });
const content = lp.choices[0].logprobs.content;
eq(content.length, lp.usage.completion_tokens, 'one logprobs entry per token');
let lpOk = true;
for (const t of content) {
  lpOk &&= t.logprob <= 0 && t.top_logprobs.length === 3 && t.top_logprobs[0].token === t.token &&
    Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6 && t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob &&
    Array.isArray(t.bytes);
}
check(lpOk, 'greedy token = top_logprobs[0], sorted, logprob <= 0', content.slice(0, 2));
eq(content.map((t) => Buffer.from(t.bytes).toString('utf8')).join(''), lp.choices[0].message.content,
  'logprobs bytes spell the content');
const clp = await client.completions.create({ model, prompt: ref.prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
eq(clp.choices[0].logprobs.tokens.length, 8, 'completion logprobs: 8 tokens');
eq(clp.choices[0].logprobs.tokens.join(''), clp.choices[0].text, 'completion logprobs tokens spell the text');

// seeded sampling is reproducible
const seeded = (seed) => client.completions.create({ model, prompt: ref.prompt, max_tokens: 40, temperature: 1.0,
  top_p: 0.95, seed });
const s1 = await seeded(7), s2 = await seeded(7);
eq(s1.choices[0].text, s2.choices[0].text, 'seed 7 twice: the same text');
const others = await Promise.all([seeded(8), seeded(9), seeded(10)]);
check(others.some((o) => o.choices[0].text !== s1.choices[0].text), 'other seeds give other texts');

// stop strings: cut before the stop, finish_reason stop
const st = await client.completions.create({ model, prompt: ref.prompt, max_tokens: 64, temperature: 0, stop: ['\n'] });
eq(st.choices[0].text, wantText.split('\n')[0], 'stop "\\n": the text up to the first newline');
eq(st.choices[0].finish_reason, 'stop', 'stop finish_reason');

// ignore_eos: the answer runs to max_tokens, the plain greedy answer its prefix
const plainAns = await client.completions.create({ model, prompt: ref.prompt, max_tokens: 48, temperature: 0 });
const noEos = await client.completions.create({ model, prompt: ref.prompt, max_tokens: 48, temperature: 0,
  ignore_eos: true });
eq([noEos.usage.completion_tokens, noEos.choices[0].finish_reason], [48, 'length'], 'ignore_eos: 48 tokens, length');
check(noEos.choices[0].text.startsWith(plainAns.choices[0].text) && noEos.choices[0].text.length > 0,
  'ignore_eos: the plain answer is its prefix', { plain: plainAns.choices[0].text, noEos: noEos.choices[0].text });
await expectError('ignore_eos with response_format', () => client.chat.completions.create({ model, messages,
  ignore_eos: true, response_format: { type: 'json_object' } }), 400, 'ignore_eos');
await expectError('ignore_eos as a string', () => client.completions.create({ model, prompt: 'x',
  ignore_eos: 'yes' }), 400, 'ignore_eos');

// skills: the second model has two (prose, code), made by `cmf skill add`
const sm = 'shk-skills';
const route = async (prompt) => (await client.completions.create({ model: sm, prompt, max_tokens: 4, temperature: 0,
  skill: 'auto', logprobs: 1 }));
const rc = await route('x = [1, 2, 3]; y = {4: 5, 6: 7} # 0x1F');
const rp = await route('the old man walked to the village by the sea');
eq([rc.skill && rc.skill.id, rc.skill && rc.skill.auto], ['code', true], 'skill auto: a code prompt routes to code');
eq(rp.skill && rp.skill.id, 'prose', 'skill auto: a prose prompt routes to prose');
check(rc.skill && rc.skill.scores.code < rc.skill.scores.prose && rc.skill.scores.code >= 0, 'routing scores reported (E, lower wins)', rc.skill);
const named = await client.completions.create({ model: sm, prompt: ref.prompt, max_tokens: 4, temperature: 0, skill: 'code', logprobs: 1 });
const backbone = await client.completions.create({ model: sm, prompt: ref.prompt, max_tokens: 4, temperature: 0, skill: '', logprobs: 1 });
eq([named.skill.id, named.skill.auto], ['code', false], 'skill by id reported');
eq(backbone.skill.id, null, 'skill "": the backbone');
check(named.choices[0].logprobs.token_logprobs[0] !== backbone.choices[0].logprobs.token_logprobs[0],
  'the skill changes the logits', [named.choices[0].logprobs.token_logprobs[0], backbone.choices[0].logprobs.token_logprobs[0]]);
const plain = await client.completions.create({ model: sm, prompt: ref.prompt, max_tokens: 4, temperature: 0 });
eq(plain.skill, undefined, 'no skill asked: none reported');
const sst = await client.chat.completions.create({ model: sm, messages, max_tokens: 4, temperature: 0, skill: 'auto', stream: true });
let streamedSkill = null;
for await (const ch of sst) if (ch.skill) streamedSkill = ch.skill;
check(streamedSkill && ['prose', 'code'].includes(streamedSkill.id) && streamedSkill.auto, 'stream: the skill in the last chunk', streamedSkill);
await expectError('skill auto on a model without skills', () => client.chat.completions.create({ model, messages, skill: 'auto' }), 400, 'skill');
await expectError('unknown skill', () => client.chat.completions.create({ model, messages, skill: 'nope' }), 400, 'skill');

// errors
await expectError('temperature as a string', () => client.chat.completions.create({ model, messages, temperature: 'hot' }), 400, 'temperature');
await expectError('temperature 5', () => client.chat.completions.create({ model, messages, temperature: 5 }), 400, 'temperature');
await expectError('unknown model', () => client.chat.completions.create({ model: 'gpt-nope', messages }), 404, 'model');
await expectError('n = 2', () => client.chat.completions.create({ model, messages, n: 2 }), 400, 'n');
await expectError('no messages', () => client.chat.completions.create({ model, messages: [] }), 400, 'messages');
await expectError('bad role', () => client.chat.completions.create({ model, messages: [{ role: 'wizard', content: 'x' }] }), 400, 'messages');
await expectError('image part', () => client.chat.completions.create({ model,
  messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] }), 400, 'messages');
await expectError('max_tokens over the context', () => client.chat.completions.create({ model, messages, max_tokens: 100000 }), 400, 'max_tokens');
await expectError('prompt longer than the context', () => client.completions.create({ model, prompt: 'ROMEO: '.repeat(600), max_tokens: 4 }), 400, 'prompt');
await expectError('json_schema with a keyword it cannot enforce', () => client.chat.completions.create({ model, messages,
  response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', multipleOf: 3 } } } }), 400,
  'response_format.json_schema.schema');
await expectError('json_schema without a schema', () => client.chat.completions.create({ model, messages,
  response_format: { type: 'json_schema', json_schema: { name: 'x' } } }), 400, 'response_format.json_schema.schema');
await expectError('tool_choice naming an undeclared function', () => client.chat.completions.create({ model, messages,
  tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  tool_choice: { type: 'function', function: { name: 'g' } } }), 400, 'tool_choice');
await expectError('task', () => client.chat.completions.create({ model, messages, task: 'code' }), 400, 'task');
await expectError('lora', () => client.chat.completions.create({ model, messages, lora: 'a.safetensors' }), 400, 'lora');
// a streaming request refused before the stream starts is a plain error
await expectError('stream with a bad field', () => client.chat.completions.create({ model, messages, stream: true, top_p: 2 }), 400, 'top_p');

// response_format: the output parses, and matches the schema (checked by
// python3-jsonschema, an independent validator), greedy and sampled,
// whole and streamed
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    mood: { enum: ['merry', 'sad', 'wroth'] },
    lines: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 1, maxItems: 2 },
  },
  required: ['name', 'age', 'mood', 'lines'],
  additionalProperties: false,
};
const fmt = { type: 'json_schema', json_schema: { name: 'speaker', schema, strict: true } };
for (const [what, extra] of [['greedy', { temperature: 0 }], ['seeded', { temperature: 1, seed: 7 }]]) {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 400, response_format: fmt, ...extra });
  const text = r.choices[0].message.content;
  eq(r.choices[0].finish_reason, 'stop', `json_schema ${what}: ends by itself`);
  check(validJson(text, schema), `json_schema ${what}: the output matches the schema`, text);
  let acc = '';
  const st = await client.chat.completions.create({ model, messages, max_tokens: 400, response_format: fmt, stream: true, ...extra });
  for await (const ch of st) acc += ch.choices[0]?.delta?.content ?? '';
  eq(acc, text, `json_schema ${what}: the stream is the whole answer`);
}
const jo = await client.chat.completions.create({ model, messages, max_tokens: 400, temperature: 0,
  response_format: { type: 'json_object' } });
eq(jo.choices[0].finish_reason, 'stop', 'json_object: ends by itself');
check(validJson(jo.choices[0].message.content, { type: 'object' }), 'json_object: an object', jo.choices[0].message.content);
const jc = await client.completions.create({ model, prompt: 'ROMEO:', max_tokens: 400, temperature: 0, response_format: fmt });
check(jc.choices[0].finish_reason === 'stop' && validJson(jc.choices[0].text, schema), 'json_schema on /v1/completions',
  jc.choices[0].text);

// keys
const bad = new OpenAI({ baseURL: url + '/v1', apiKey: 'wrong-key', maxRetries: 0 });
await expectError('wrong key', () => bad.models.list(), 401);
const nokey = await get(url, '/v1/models');
eq(nokey.status, 401, 'no key: 401');
check(isOaiError(nokey.json), 'no key: OpenAI-shaped error', nokey.text);
eq(nokey.headers.get('www-authenticate'), 'Bearer', 'no key: WWW-Authenticate');
const second = new OpenAI({ baseURL: url + '/v1', apiKey: process.env.SECOND_KEY, maxRetries: 0 });
eq((await second.models.list()).data.length, 2, 'the second key (--api-key-file) works');
const health = await get(url, '/health');
eq([health.status, health.json && health.json.status], [200, 'ok'], '/health without a key');
eq((await get(url, '/healthz')).status, 200, '/healthz');
eq((await get(url, '/metrics')).status, 401, '/metrics needs the key');
const page = await get(url, '/');
check(page.status === 200 && page.text.includes('<title>cmf serve</title>'), 'GET / serves the page');
eq((await get(url, '/v1/nothing', key)).status, 404, 'unknown endpoint: 404');
eq((await get(url, '/v1/chat/completions', key)).status, 405, 'GET on a POST endpoint: 405');

// metrics agree with what was sent
const m = (await get(url, '/metrics', key)).text;
for (const name of ['cmf:num_requests_waiting', 'cmf:num_requests_running', 'cmf:kv_cache_usage_perc'])
  check(Number.isFinite(metric(m, name)), `metric ${name} present`);
eq(metric(m, 'cmf:num_requests_running'), 0, 'nothing running at the end');
check(metric(m, 'cmf:http_requests_total', 'endpoint="/v1/chat/completions",status="200"') === 10, 'chat 200s counted (10 sent: 5, then 5 with response_format)');
check(metric(m, 'cmf:http_requests_total', 'status="400"') >= 12, '400s counted');
check(metric(m, 'cmf:generation_tokens_total') >= 64 * 2 + 32, 'generated tokens counted', metric(m, 'cmf:generation_tokens_total'));
check(metric(m, 'cmf:prefix_cache_hits_total') >= 1, 'prefix cache hits counted');
check(metric(m, 'cmf:time_to_first_token_seconds_count') >= 10, 'TTFT histogram filled');
done('serve contract');
