// shutdown.mjs URL KEY PID — graceful shutdown: four streams are under
// way when the server gets SIGTERM; each must still end with [DONE], and
// after the server is gone new connections are refused.
import { check, done } from './common.mjs';

const [url, key, pid] = process.argv.slice(2);
const body = { model: 'shk', prompt: 'ROMEO:\n', max_tokens: 400, temperature: 0.8, seed: 3, stream: true };
let signalled = 0;
async function stream() {
  const r = await fetch(url + '/v1/completions', { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + key } });
  const rd = r.body.getReader(), dec = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done: end } = await rd.read();
    if (end) break;
    text += dec.decode(value, { stream: true });
    if (++signalled === 4) process.kill(+pid, 'SIGTERM');
  }
  return text;
}
const streams = await Promise.all([stream(), stream(), stream(), stream()]);
check(signalled >= 4, 'SIGTERM was sent while the streams ran');
check(streams.every((t) => t.endsWith('data: [DONE]\n\n')), 'every stream in flight ended with [DONE]',
  streams.map((t) => t.slice(-40)));
check(streams.every((t) => /"finish_reason":"(length|stop)"/.test(t)), 'and with a finish reason');
await new Promise((r) => setTimeout(r, 3000));
let refused = false;
try { await fetch(url + '/health'); } catch { refused = true; }
check(refused, 'after shutdown, connections are refused');
done('serve shutdown');
