// page.mjs URL KEY SCREENSHOT — the page of `GET /` in a real browser
// (Debian's chromium, headless, driven by playwright-core): it asks for
// the API key, lists the models and their skills, streams a reply into
// the chat (from its streamed deltas), switches to skill auto and
// shows the routed skill with its scores, and its live panel shows
// tokens/s, running/waiting requests and KV use. Keeps a screenshot.
import { chromium } from 'playwright-core';
import { check, done } from './common.mjs';

const [url, key, shot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CMF_CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  let asked = 0;
  page.on('dialog', async (d) => { asked++; await d.accept(key); });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url + '/');
  await page.waitForFunction(() => document.querySelectorAll('#model option').length >= 2, null, { timeout: 20000 });
  check(asked >= 1, 'the page asked for the API key');
  await page.selectOption('#model', 'shk-skills');
  const skills = await page.$$eval('#skill option', (o) => o.map((x) => x.value));
  check(skills.includes('prose') && skills.includes('code') && skills.includes('auto'), 'skill list of the model', skills);
  await page.fill('#maxt', '200');
  await page.fill('#temp', '0');
  const send = async (text) => {
    await page.fill('#in', text);
    await page.click('#send');
    await page.waitForFunction(() => !document.getElementById('reply') && !document.getElementById('send').disabled,
      null, { timeout: 60000 });
  };
  await send('Good morrow, fair maid.');
  const first = await page.$$eval('.msg.assistant', (m) => m.map((x) => x.firstChild ? x.firstChild.textContent : ''));
  check(first.length === 1 && first[0].length > 20, 'a reply arrived', first);
  // the demo model writes 200 tokens in well under a second, so the browser
  // may read them in a few reads: count the SSE deltas the page applied
  const deltas = await page.$eval('.msg.assistant', (m) => +(m.dataset.deltas || 0));
  check(deltas >= 50, 'the reply was built from streamed deltas', deltas);
  await page.selectOption('#skill', 'auto');
  await send('the old man walked to the village by the sea');
  const meta = await page.$$eval('.msg.assistant .meta', (m) => m.map((x) => x.textContent));
  const last = meta[meta.length - 1] || '';
  check(/skill: (prose|code) scores prose=[0-9.]+ code=[0-9.]+/.test(last), 'skill auto: the routed skill and scores shown', last);
  await page.waitForFunction(() => /tokens\/s [0-9.]+ .*running [0-9]+ .*waiting [0-9]+ .*KV [0-9.]+%/
    .test(document.getElementById('stats').textContent), null, { timeout: 10000 });
  check(true, 'live panel: tokens/s, running, waiting, KV');
  check(errors.length === 0, 'no script errors on the page', errors);
  await page.screenshot({ path: shot, fullPage: true });
} finally {
  await browser.close();
}
done('serve page');
