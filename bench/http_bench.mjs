#!/usr/bin/env node
// http_bench.mjs — streaming clients against an OpenAI-compatible server
// (`cmf serve`, llama.cpp's llama-server, vLLM, ...). CLIENTS clients run at
// once, each sending REQUESTS streamed POST /v1/completions one after the
// other: a prompt of PROMPT tokens (English words in a per-request order,
// so no two prompts share a prefix; cut to PROMPT tokens with the server's
// own POST /tokenize before the clock starts), max_tokens GEN, temperature
// 0, ignore_eos, stream_options.include_usage. Per request: time to first
// token (first chunk with text), the gaps between chunks with text
// (inter-token latency) and the end-to-end time. Prints one JSON line:
// aggregate generated tokens/s (completion tokens from usage, else chunks
// with text, over the wall time of the whole run), TTFT / ITL / e2e p50 and
// p99 (nearest rank), the prompt and completion tokens the server reported.
// Exits 1 (after the line, its errors counted) on any HTTP error, error
// event, or a stream with no text or no [DONE]; 2 on a usage error.
// Node 18+ (built-in fetch), no packages.
// Usage: node http_bench.mjs --url http://127.0.0.1:8080 [--clients 8]
//   [--requests 1] [--prompt 256] [--gen 128] [--model ID] [--label NAME]
//   [--key KEY] [--timeout-s 900] [--warmup 1]
// --warmup: untimed short requests first (32-token prompt, 8 generated).
// The line also carries the 1/5/15-minute load averages at the start and
// end of the timed part (load_before, load_after), where /proc/loadavg is.
import { readFileSync } from 'node:fs';

const opts = { url: '', clients: 8, requests: 1, prompt: 256, gen: 128, model: '', label: '', key: '', 'timeout-s': 900, warmup: 1 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
  if (!m || !(m[1] in opts)) usage(`unknown argument ${argv[i]}`);
  const v = m[2] !== undefined ? m[2] : argv[++i];
  if (v === undefined) usage(`--${m[1]} needs a value`);
  opts[m[1]] = typeof opts[m[1]] === 'number' ? Number(v) : v;
  if (typeof opts[m[1]] === 'number' && !(Number.isInteger(opts[m[1]]) && opts[m[1]] >= (m[1] === 'warmup' ? 0 : 1))) usage(`--${m[1]}: a whole number`);
}
if (!opts.url) usage('--url is needed');
const base = opts.url.replace(/\/+$/, '');
const headers = { 'Content-Type': 'application/json' };
if (opts.key) headers.Authorization = `Bearer ${opts.key}`;

function usage(msg) {
  process.stderr.write(`http_bench: ${msg}\nusage: node http_bench.mjs --url URL [--clients N] [--requests R] [--prompt TOKENS] [--gen TOKENS] [--model ID] [--label NAME] [--key KEY] [--timeout-s S] [--warmup N]\n`);
  process.exit(2);
}
function fail(msg) {
  throw new Error(msg);
}
function die(msg) {
  process.stderr.write(`http_bench: ${msg}\n`);
  process.exit(1);
}

// Prompts: words from a fixed list in an order drawn from the request's own
// seed (xorshift32), so every request's prompt differs from its first word.
const WORDS = ('the of and to in is was for on that with as by at from his her their this which but not are had were ' +
  'river mountain city market garden winter summer morning evening letter window table bridge harbour forest ' +
  'engine signal number measure paper music story voice light stone water silver copper lantern valley island ' +
  'quiet sudden careful bright narrow ancient gentle heavy simple distant early late open second little great ' +
  'walked carried opened answered followed painted counted gathered noticed crossed wrote built turned kept ' +
  'because although while after before during between under above beyond around through without toward').split(' ');
function words(seed, n) {
  let x = (seed * 2654435761) >>> 0 || 1;
  const out = [];
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out.push(WORDS[x % WORDS.length]);
  }
  return out;
}
async function countTokens(text) {
  // cmf serve answers {"count", "tokens"} to {"prompt"}; llama-server {"tokens"} to {"content"}
  const r = await fetch(`${base}/tokenize`, { method: 'POST', headers, body: JSON.stringify({ prompt: text, content: text }) });
  if (r.status !== 200) die(`POST /tokenize: HTTP ${r.status}: ${(await r.text()).slice(0, 300)}`);
  const j = await r.json();
  const n = typeof j.count === 'number' ? j.count : Array.isArray(j.tokens) ? j.tokens.length : NaN;
  if (!Number.isFinite(n)) die(`POST /tokenize: no token count in ${JSON.stringify(j).slice(0, 200)}`);
  return n;
}
async function makePrompt(seed, target) {
  const w = words(seed, target * 2);
  let lo = 1, hi = w.length; // largest word count whose text is <= target tokens
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((await countTokens(w.slice(0, mid).join(' '))) <= target) lo = mid; else hi = mid - 1;
  }
  return w.slice(0, lo).join(' ');
}

function pct(a, p) {
  if (!a.length) return null;
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
const ms = (x) => (x === null ? null : Math.round(x * 10) / 10);

async function one(prompt, tag, gen = opts.gen) {
  const body = {
    prompt, max_tokens: gen, temperature: 0, stream: true, ignore_eos: true,
    stream_options: { include_usage: true },
  };
  if (opts.model) body.model = opts.model;
  const t0 = performance.now();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), opts['timeout-s'] * 1000);
  timer.unref();
  let r;
  try {
    r = await fetch(`${base}/v1/completions`, { method: 'POST', headers, body: JSON.stringify(body), signal: ac.signal });
  } catch (e) {
    fail(`${tag}: ${e.message}`);
  }
  if (r.status !== 200) fail(`${tag}: HTTP ${r.status}: ${(await r.text()).slice(0, 300)}`);
  const times = [];
  let usage = null, done = false, buf = '';
  const dec = new TextDecoder();
  const line = (l) => {
    if (!l.startsWith('data:')) return; // ": keep-alive" comments, event: lines
    const d = l.slice(5).trim();
    if (d === '[DONE]') { done = true; return; }
    let j;
    try { j = JSON.parse(d); } catch { fail(`${tag}: not JSON in the stream: ${d.slice(0, 200)}`); }
    if (j.error) fail(`${tag}: error event: ${JSON.stringify(j.error).slice(0, 300)}`);
    const text = j.choices?.[0]?.text ?? j.choices?.[0]?.delta?.content ?? '';
    if (text) times.push(performance.now());
    if (j.usage) usage = j.usage;
  };
  try {
    for await (const chunk of r.body) {
      buf += dec.decode(chunk, { stream: true });
      let k;
      while ((k = buf.indexOf('\n')) >= 0) {
        line(buf.slice(0, k).replace(/\r$/, ''));
        buf = buf.slice(k + 1);
      }
    }
  } catch (e) {
    fail(`${tag}: stream broke: ${e.message}`);
  }
  clearTimeout(timer);
  if (buf.trim()) line(buf.trim());
  const t1 = performance.now();
  if (!times.length) fail(`${tag}: the stream carried no text`);
  if (!done) fail(`${tag}: the stream ended without [DONE]`);
  const gaps = [];
  for (let i = 1; i < times.length; i++) gaps.push(times[i] - times[i - 1]);
  return {
    ttft: times[0] - t0, gaps, e2e: t1 - t0, chunks: times.length,
    completion: usage && typeof usage.completion_tokens === 'number' ? usage.completion_tokens : times.length,
    prompt: usage && typeof usage.prompt_tokens === 'number' ? usage.prompt_tokens : null,
    fromUsage: !!(usage && typeof usage.completion_tokens === 'number'),
  };
}

const h = await fetch(`${base}/health`).catch((e) => die(`GET /health: ${e.message}`));
if (h.status !== 200) die(`GET /health: HTTP ${h.status}`);
const prompts = [];
for (let c = 0; c < opts.clients; c++) {
  prompts.push([]);
  for (let q = 0; q < opts.requests; q++) prompts[c].push(await makePrompt(1 + c * 1000 + q, opts.prompt));
}
// untimed: the first pass over the weights (page faults, repacking) and the
// server's first-request set-up are not any client's latency
for (let w = 0; w < opts.warmup; w++) {
  try { await one(await makePrompt(999999 - w, 32), `warm-up ${w}`, 8); } catch (e) { die(e.message); }
}
const loadavg = () => { try { return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number); } catch { return null; } };
const loadBefore = loadavg();
const results = [];
let errors = 0;
const start = performance.now();
await Promise.all(prompts.map(async (list, c) => {
  for (let q = 0; q < list.length; q++) {
    try {
      results.push(await one(list[q], `client ${c} request ${q}`));
    } catch (e) {
      errors++;
      process.stderr.write(`http_bench: ${e.message}\n`);
    }
  }
}));
if (!results.length) die(`all ${errors} requests failed`);
const wall = (performance.now() - start) / 1000;
const gen = results.reduce((s, x) => s + x.completion, 0);
const ptoks = results.map((x) => x.prompt).filter((x) => x !== null);
const comp = results.map((x) => x.completion);
const out = {
  label: opts.label || base, clients: opts.clients, requests_per_client: opts.requests, requests: results.length,
  prompt_tokens: ptoks.length ? [Math.min(...ptoks), Math.max(...ptoks)] : null,
  completion_tokens: [Math.min(...comp), Math.max(...comp)], tokens_from: results.every((x) => x.fromUsage) ? 'usage' : 'chunks',
  chunks_with_text: results.reduce((s, x) => s + x.chunks, 0),
  wall_s: Math.round(wall * 1000) / 1000, gen_tok_s: Math.round((gen / wall) * 100) / 100,
  prompt_tok_s: ptoks.length ? Math.round((ptoks.reduce((s, x) => s + x, 0) / wall) * 100) / 100 : null,
  ttft_ms: [ms(pct(results.map((x) => x.ttft), 50)), ms(pct(results.map((x) => x.ttft), 99))],
  itl_ms: [ms(pct(results.flatMap((x) => x.gaps), 50)), ms(pct(results.flatMap((x) => x.gaps), 99))],
  e2e_ms: [ms(pct(results.map((x) => x.e2e), 50)), ms(pct(results.map((x) => x.e2e), 99))],
  errors, load_before: loadBefore, load_after: loadavg(),
};
console.log(JSON.stringify(out));
if (errors) process.exit(1);
