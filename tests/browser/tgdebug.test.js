// tgdebug serve's page in headless Debian chromium (playwright-core): paused
// at --break scaled, the value shown on the page is sc = x * k (checked
// against the numbers worked out by hand), Step pauses after the next node,
// Continue reaches the breakpoint op and the next call (k = 10), the run
// finishes; no request leaves the server; screenshots go to ARTIFACTS_DIR.
//   node tgdebug.test.js URL_WITH_TOKEN ARTIFACTS_DIR
// The server runs tests/data/debug/bp.json with x = [[1, -2, 3], [-4, 5, -6]],
// --calls 2 --break scaled.
'use strict';
const { chromium } = require('playwright-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [url, artDir] = process.argv.slice(2);
const origin = new URL(url).origin;
let fails = 0;
function check(ok, what, detail) {
  if (ok) console.log('ok: ' + what);
  else { fails++; console.log('FAIL: ' + what + (detail !== undefined ? ' (' + detail + ')' : '')); }
}

(async () => {
  const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tgdebug-chromium-'));
  const ctx = await chromium.launchPersistentContext(userDir, {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const outside = [], errors = [];
  const page = await ctx.newPage();
  page.on('request', (r) => { if (!r.url().startsWith(origin + '/')) outside.push(r.url()); });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const state = () => page.evaluate(() => window.tgdebug && window.tgdebug.state);
  // Wait until the page shows `st` (at `node`, after `pauses` pauses).
  async function until(st, node, minPauses) {
    await page.waitForFunction(([st, node, p]) => {
      const s = window.tgdebug && window.tgdebug.state;
      return s && s.state === st && (!node || (s.node && s.node.key === node)) && (!p || s.pauses >= p);
    }, [st, node, minPauses || 0], { timeout: 30000 });
    return state();
  }
  const cell = (i, j) => page.$eval(`#value-data td[data-i="${i}"][data-j="${j}"]`, (e) => e.textContent).catch(() => null);
  const shot = async (name) => {
    const p = path.join(artDir, name);
    await page.screenshot({ path: p, fullPage: true });
    console.log('screenshot: ' + p);
  };
  try {
    await page.goto(url);
    await page.waitForFunction(() => window.tgdebugReady === true, null, { timeout: 30000 });
    let s = await until('paused', 'sc');
    check(s.call === 1 && s.reason === '--break scaled', 'paused at sc in call 1 by --break scaled', JSON.stringify([s.call, s.reason]));
    check((await page.textContent('#state')).startsWith('paused'), 'the badge says paused');
    check((await page.textContent('#node')).startsWith('sc (mul)'), 'the page names the node', await page.textContent('#node'));
    check(await page.textContent('#trace') === 'at model.py:5 in build: sc = x * k', 'the page shows the creation trace', await page.textContent('#trace'));
    // The first monitored value (x0 = sc) is shown: x * 1.
    await page.waitForSelector('#value-data td[data-i="1"][data-j="2"]', { timeout: 10000 });
    check(await cell(1, 2) === '-6' && await cell(0, 0) === '1' && await cell(1, 1) === '5', 'the page shows sc[1, 2] = -6, sc[0, 0] = 1, sc[1, 1] = 5',
      [await cell(0, 0), await cell(1, 1), await cell(1, 2)].join(' '));
    // Ctrl+C (copying a value) and Ctrl+S leave the run where it is: only
    // the bare keys continue and step (they did both).
    const pausesBefore = (await state()).pauses;
    await page.click('#value-data td[data-i="0"][data-j="0"]');
    await page.keyboard.press('Control+c');
    await page.keyboard.press('Control+s');
    await page.waitForTimeout(1000);
    s = await state();
    check(s.state === 'paused' && s.node.key === 'sc' && s.pauses === pausesBefore, 'Ctrl+C and Ctrl+S neither continue nor step',
      JSON.stringify([s.state, s.node && s.node.key, s.pauses, pausesBefore]));
    // int64 past 2^53 as written (JSON.parse alone gave ...992), others as numbers.
    const big = await page.evaluate(() => tgdebug.parse('{"data":[9007199254740993,-9007199254740993,1,2.5,1e300]}').data);
    check(JSON.stringify(big) === '["9007199254740993","-9007199254740993",1,2.5,1e+300]', 'values past 2^53 keep every digit', JSON.stringify(big));
    // A value whose elements are all equal still draws its bar.
    const bars = await page.evaluate(() => {
      tgdebug.drawHist([0, 0, 0]);
      return Array.from(document.querySelectorAll('#hist rect.bar')).map((r) => +r.getAttribute('width'));
    });
    check(bars.some((w) => w > 0), 'the histogram of equal values has a bar', JSON.stringify(bars));
    // The viewer's download link: the whole value as a .npy, fetched as the page would.
    const npy = await page.evaluate(async () => {
      const a = document.getElementById('value-npy');
      const r = await fetch(a.href, { credentials: 'same-origin' });
      const b = new Uint8Array(await r.arrayBuffer());
      const hlen = b[8] | (b[9] << 8);
      const header = new TextDecoder().decode(b.slice(10, 10 + hlen));
      const data = new Float64Array(b.slice(10 + hlen).buffer);
      return { status: r.status, download: a.hasAttribute('download'), magic: new TextDecoder().decode(b.slice(1, 6)), header, data: Array.from(data) };
    });
    check(npy.status === 200 && npy.download && npy.magic === 'NUMPY' && npy.header.includes("'descr': '<f8'") && npy.header.includes("'shape': (2, 3)") &&
      npy.data.length === 6 && npy.data[5] === -6 && npy.data[0] === 1 && npy.data[4] === 5,
    'the download link gives sc as a .npy: float64 (2, 3), sc[1, 2] = -6', JSON.stringify(npy));
    const row = await page.$$eval('#values tbody tr[data-name="x0"] td', (l) => l.map((e) => e.textContent));
    check(row[4] === '-6' && row[5] === '5' && row[6] === '-0.5', 'x0 row: min -6, max 5, mean -0.5', row.join(' '));
    // A slice typed in the box: row 1 reversed.
    await page.fill('#slice', '1,::-1');
    await page.click('#btn-slice');
    await page.waitForFunction(() => { const t = document.querySelector('#value-data td[data-i="0"][data-j="0"]'); return t && t.textContent === '-6'; }, null, { timeout: 10000 });
    check(await cell(0, 1) === '5' && await cell(0, 2) === '-4', 'slice 1,::-1 on the page: -6 5 -4');
    // Two slices asked for one after the other, the first answer held back
    // until after the second: the page shows the one asked for last.
    const held = (u) => u.pathname === '/api/value' && u.searchParams.get('slice') === '0';
    await page.route(held, async (route) => { await new Promise((r) => setTimeout(r, 600)); await route.continue(); });
    const valueAnswer = (sl) => page.waitForResponse((r) => { const u = new URL(r.url()); return u.pathname === '/api/value' && u.searchParams.get('slice') === sl; });
    const answered = Promise.all([valueAnswer('0'), valueAnswer('1')]);
    await page.fill('#slice', '0');
    await page.click('#btn-slice');
    await page.fill('#slice', '1');
    await page.click('#btn-slice');
    await answered;
    // both answers are in: give the page time to handle the late one
    await page.waitForFunction(() => { const t = document.querySelector('#value-data td[data-i="0"][data-j="2"]'); return t && t.textContent === '-6'; }, null, { timeout: 10000 }).catch(() => {});
    await page.evaluate(() => new Promise((r) => setTimeout(r, 300)));
    check(await cell(0, 0) === '-4' && await cell(0, 1) === '5' && await cell(0, 2) === '-6',
      'two slices in flight: the last asked for (1: -4 5 -6) is shown, not the late answer for 0',
      [await cell(0, 0), await cell(0, 1), await cell(0, 2)].join(' '));
    await page.unroute(held);
    await shot('tgdebug-paused.png');
    // Step: the next node is the breakpoint op, whose own hit pauses
    // before it runs; m1 = sq.
    const p0 = s.pauses;
    await page.click('#btn-step');
    s = await until('paused', 'bsq', p0 + 1);
    check(s.when === 'before' && /condition 'cond' is true/.test(s.reason), 'Step reaches the breakpoint op, paused before it', s.reason);
    // The viewer follows to the new node's output 0 (m1, another value):
    // the slice typed for sc gives way to m1's default.
    await page.waitForFunction(() => document.getElementById('viewing').textContent === 'm1 of bsq', null, { timeout: 10000 });
    check(await page.inputValue('#slice') === ':,:' && await cell(1, 2) === '36', 'at the new pause the viewer shows m1 whole (slice :,:, [1, 2] = 36)',
      await page.inputValue('#slice') + ' ' + await cell(1, 2));
    await page.click('#values tbody tr[data-name="m1"]');
    await page.waitForFunction(() => { const t = document.querySelector('#value-data td[data-i="1"][data-j="2"]'); return t && t.textContent === '36'; }, null, { timeout: 10000 });
    check(await cell(0, 1) === '4', 'm1 = sq on the page: [0, 1] = 4, [1, 2] = 36');
    // Step again: after the op ran.
    await page.click('#btn-step');
    s = await until('paused', 'bsq', p0 + 2);
    check(s.reason === 'step' && s.when === 'after', 'Step pauses after the node', s.when + ' ' + s.reason);
    check((await page.textContent('#reason')) === 'step', 'the page shows the reason: step');
    // Call 2: k = 10.
    await page.click('#btn-continue');
    s = await until('paused', 'sc', p0 + 3);
    check(s.call === 2, 'Continue: call 2, paused at sc again');
    await page.click('#values tbody tr[data-name="x0"]');
    await page.fill('#slice', '1');
    await page.click('#btn-slice');
    await page.waitForFunction(() => { const t = document.querySelector('#value-data td[data-i="0"][data-j="2"]'); return t && t.textContent === '-60'; }, null, { timeout: 10000 });
    check(await cell(0, 0) === '-40' && await cell(0, 1) === '50', 'sc[1] at call 2 on the page: -40 50 -60');
    await page.click('#btn-continue');
    await until('paused', 'bsq', p0 + 4);
    await page.click('#btn-continue');
    s = await until('finished');
    check(s.calls_done === 2 && !s.stopped, 'the run finishes its 2 calls', JSON.stringify([s.calls_done, s.stopped]));
    check((await page.textContent('#state')).startsWith('finished'), 'the badge says finished');
    check(await page.isDisabled('#btn-continue') && await page.isDisabled('#btn-step'), 'Continue and Step are disabled once finished');
    await page.waitForFunction(() => document.querySelectorAll('#outputs tbody tr').length > 0, null, { timeout: 10000 });
    const out = await page.$$eval('#outputs tbody tr:first-child td', (l) => l.map((e) => e.textContent));
    check(out[0] === 'm' && out[3] === '91', 'the outputs table: m = 91', out.join(' '));
    await page.waitForFunction(() => document.querySelectorAll('#prof-bars g.row').length > 0, null, { timeout: 10000 });
    check(true, 'the profile bars are drawn');
    await shot('tgdebug-finished.png');
  } catch (e) {
    check(false, 'the page test ran to its end', e.message);
    await shot('tgdebug-failure.png').catch(() => {});
  }
  check(outside.length === 0, 'no request left the server', outside.join(', '));
  check(errors.length === 0, 'no error on the page', errors.join(' | '));
  await ctx.close();
  fs.rmSync(userDir, { recursive: true, force: true });
  console.log(fails + ' failed');
  process.exit(fails ? 1 : 0);
})();
