// common.mjs — what the cmf serve test clients share: a tiny check
// harness (every failure printed with what was expected and found; the
// process exits 1 when any failed), raw HTTP helpers on fetch, and a JSON
// Schema check by an independent validator.
import { execFileSync } from 'node:child_process';

export let failures = 0;
export let passes = 0;
export function check(ok, what, detail) {
  if (ok) passes++;
  else {
    failures++;
    console.log(`FAIL: ${what}${detail !== undefined ? ': ' + (typeof detail === 'string' ? detail : JSON.stringify(detail)) : ''}`);
  }
  return ok;
}
export function eq(got, want, what) {
  return check(JSON.stringify(got) === JSON.stringify(want), what, { want, got });
}
export function done(name) {
  console.log(`${name}: ${passes} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}
export async function post(url, path, body, key, raw) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = 'Bearer ' + key;
  const r = await fetch(url + path, { method: 'POST', headers, body: raw ? body : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}
export async function get(url, path, key) {
  const headers = {};
  if (key) headers.Authorization = 'Bearer ' + key;
  const r = await fetch(url + path, { headers });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}
// Value of a Prometheus sample (the sum over label sets matching `labels`).
export function metric(text, name, labels = '') {
  let v = 0, seen = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    const key = line.slice(0, sp);
    if (key === name || (key.startsWith(name + '{') && key.includes(labels))) {
      v += parseFloat(line.slice(sp + 1));
      seen = true;
    }
  }
  return seen ? v : NaN;
}
// An OpenAI-shaped error body: {error: {message, type, param, code}}.
export function isOaiError(j) {
  return j && j.error && typeof j.error.message === 'string' && j.error.message.length > 0 && typeof j.error.type === 'string';
}
// Whether `text` is JSON matching `schema`, by python3's jsonschema (not by
// the grammar engine under test).
export function validJson(text, schema) {
  if (typeof text !== 'string' || !text.length) return false;
  const py = 'import json,sys,jsonschema\nd=json.loads(sys.argv[2])\njsonschema.validate(d, json.loads(sys.argv[1]))';
  try {
    execFileSync('python3', ['-c', py, JSON.stringify(schema), text], { stdio: ['ignore', 'ignore', 'pipe'] });
    return true;
  } catch (e) {
    console.error(String(e.stderr || e).split('\n').slice(-3).join(' '));
    return false;
  }
}
