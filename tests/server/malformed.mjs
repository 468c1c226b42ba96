// malformed.mjs URL KEY — bad input against cmf serve, each answered with
// its status and an OpenAI-shaped error, and the server still serving
// after every one: broken JSON, wrong types, invalid UTF-8, NUL escapes,
// deep nesting, huge bodies (declared and chunked), unknown model and
// endpoint, a garbage request line, a slowloris client (408 after
// --request-timeout) and an idle one (closed after --idle-timeout),
// more connections than --max-connections.
import net from 'node:net';
import { check, eq, done, post, get, isOaiError } from './common.mjs';

const [url, key] = process.argv.slice(2);
const port = +new URL(url).port;
const good = { model: 'shk', prompt: 'ROMEO:\n', max_tokens: 8, temperature: 0 };
const want = (await post(url, '/v1/completions', good, key)).json.choices[0].text;
check(want.length > 0, 'a good request answers', want);

async function stillServing(what) {
  const h = await get(url, '/health');
  const r = await post(url, '/v1/completions', good, key);
  check(h.status === 200 && r.status === 200 && r.json.choices[0].text === want, `still serving after ${what}`,
    { health: h.status, status: r.status });
}

async function bad(what, path, body, status, param, raw = true) {
  const r = await post(url, path, body, key, raw);
  eq(r.status, status, `${what}: status`);
  check(isOaiError(r.json), `${what}: OpenAI-shaped error`, r.text.slice(0, 200));
  if (param !== undefined) eq(r.json && r.json.error.param, param, `${what}: param`);
  await stillServing(what);
}

// raw HTTP over a socket: writes `chunks` (strings or Buffers, with delays), returns what came back
function rawHttp(chunks, { delay = 0, timeout = 15000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let data = '', t0 = Date.now(), i = 0, closed = false;
    const finish = () => { if (!closed) { closed = true; s.destroy(); resolve({ data, ms: Date.now() - t0 }); } };
    s.on('data', (d) => { data += d.toString('latin1'); });
    s.on('close', finish);
    s.on('error', finish);
    const next = () => {
      if (closed || i >= chunks.length) return;
      s.write(chunks[i++], () => setTimeout(next, delay));
    };
    s.on('connect', next);
    setTimeout(finish, timeout);
  });
}

const C = '/v1/chat/completions';
await bad('broken JSON', C, '{"model": "shk", "messages": [', 400);
await bad('not JSON at all', C, 'hello', 400);
await bad('empty body', C, '', 400);
await bad('an array body', C, '[1,2,3]', 400);
await bad('messages as a string', C, JSON.stringify({ model: 'shk', messages: 'hi' }), 400, 'messages');
await bad('max_tokens as a string', '/v1/completions', JSON.stringify({ ...good, max_tokens: '10' }), 400, 'max_tokens');
await bad('max_tokens negative', '/v1/completions', JSON.stringify({ ...good, max_tokens: -1 }), 400, 'max_tokens');
await bad('stop as a number', '/v1/completions', JSON.stringify({ ...good, stop: 5 }), 400, 'stop');
await bad('stream as a string', '/v1/completions', JSON.stringify({ ...good, stream: 'yes' }), 400, 'stream');
await bad('seed as a float', '/v1/completions', JSON.stringify({ ...good, seed: 1.5 }), 400, 'seed');
await bad('prompt token out of range', '/v1/completions', JSON.stringify({ ...good, prompt: [1, 99999] }), 400, 'prompt');
await bad('message content as a number', C, JSON.stringify({ model: 'shk', messages: [{ role: 'user', content: 7 }] }), 400, 'messages');
await bad('invalid UTF-8', C, Buffer.concat([Buffer.from('{"model":"shk","messages":[{"role":"user","content":"'),
  Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}]}')]), 400);
await bad('a lone surrogate escape', C, '{"model":"shk","messages":[{"role":"user","content":"\\ud800"}]}', 400);
await bad('a NUL escape', C, '{"model":"shk","messages":[{"role":"user","content":"a\\u0000b"}]}', 400);
await bad('nesting 60000 deep', C, '['.repeat(60000), 400);
await bad('unknown model', C, JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), 404, 'model');
await bad('a body past --max-body', C, JSON.stringify({ model: 'shk', messages: [{ role: 'user', content: 'x'.repeat(70000) }] }), 413);
const r404 = await get(url, '/nope', key);
eq(r404.status, 404, 'unknown endpoint');
check(isOaiError(r404.json), 'unknown endpoint: OpenAI-shaped error');

// a declared 10 MB body: refused from the headers, before it is sent
const big = await rawHttp([`POST ${C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{`]);
check(/^HTTP\/1\.1 413/.test(big.data), 'Content-Length 10 MB: 413 at once', big.data.slice(0, 60));
await stillServing('a declared huge body');
// a chunked body that grows past the limit
const piece = '1000\r\n' + 'x'.repeat(0x1000) + '\r\n';
const chunked = await rawHttp([`POST ${C} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`, ...Array(40).fill(piece), '0\r\n\r\n']);
check(/^HTTP\/1\.1 413/.test(chunked.data), 'chunked body past the limit: 413', chunked.data.slice(0, 60));
await stillServing('a chunked huge body');
// garbage request line
const garbage = await rawHttp(['HELLO THERE\r\n\r\n']);
check(!/^HTTP\/1\.1 200/.test(garbage.data), 'garbage request line: no 200', garbage.data.slice(0, 60));
await stillServing('a garbage request line');
// a header line of 64 KiB
const longHeader = await rawHttp([`GET /health HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(65536)}\r\n\r\n`]);
check(/^HTTP\/1\.1 4\d\d/.test(longHeader.data), 'a 64 KiB header: a 4xx', longHeader.data.slice(0, 60));
await stillServing('a huge header');

// slowloris: one header byte every 200 ms; the server must cut it after
// --request-timeout (2 s) with 408, and serve others meanwhile
// (the request line at once, then the headers byte by byte; a request line
// itself dribbled is cut by the idle rule below)
const head = `Host: x\r\nX-Slow: ${'s'.repeat(60)}\r\n`;
const slowP = rawHttp([`POST ${C} HTTP/1.1\r\n`, ...head], { delay: 200, timeout: 20000 });
await new Promise((r) => setTimeout(r, 500));
await stillServing('(during) a slowloris client');
const slow = await slowP;
check(/^HTTP\/1\.1 408/.test(slow.data), 'slowloris: 408', slow.data.slice(0, 80));
check(slow.ms >= 1800 && slow.ms < 6000, 'slowloris: cut after about 2 s', slow.ms);
// a slow body: headers complete, body dribbled
const body = JSON.stringify(good);
const slowBody = await rawHttp([`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`, ...body],
  { delay: 200, timeout: 20000 });
check(/^HTTP\/1\.1 408/.test(slowBody.data), 'slow body: 408', slowBody.data.slice(0, 80));
await stillServing('a slow body');
// idle: a connection that sends nothing is closed after --idle-timeout (3 s)
const idle = await rawHttp([''], { timeout: 15000 });
check(idle.ms >= 2500 && idle.ms < 8000 && idle.data === '', 'an idle connection is closed after about 3 s', idle.ms);
const dribble = await rawHttp([...`POST ${C} HTTP/1.1\r\n`], { delay: 300, timeout: 15000 });
check(dribble.ms >= 2500 && dribble.ms < 8000, 'a request line dribbled: closed after about 3 s', dribble.ms);
await stillServing('idle connections');

// more connections than --max-connections (16): the extra ones are refused, the server lives
const socks = await Promise.all([...Array(24).keys()].map(() => new Promise((resolve) => {
  const s = net.connect(port, '127.0.0.1');
  s.on('connect', () => resolve(s));
  s.on('error', () => resolve(s));
})));
await new Promise((r) => setTimeout(r, 300));
const closedEarly = socks.filter((s) => s.destroyed || s.readyState !== 'open').length;
socks.forEach((s) => s.destroy());
await new Promise((r) => setTimeout(r, 300));
check(closedEarly >= 1, 'connections past --max-connections are refused', closedEarly);
await stillServing('too many connections');
done('serve malformed');
