#!/usr/bin/env node
// Runs the browser build's checks in headless Chromium (Debian's, driven by playwright-core; no browser download).
//
//   node web/tests/run.mjs ops    --dir build/wasm/web [--filter GTEST_FILTER] [--adapter lavapipe|swiftshader]
//   node web/tests/run.mjs parity --dir build/wasm/web --native build/wgtrain_parity [--steps N] [--tolerance T]
//
// ops: the GoogleTest op tests (wgtrain_web_tests) in a Worker of web/tests/tests.html; passes when they all pass.
// parity: the same training steps natively and in the page (web/tests/parity.cpp); passes when every loss agrees
// within the tolerance (absolute, in nats; default 1e-5). Measured on 2026-12-03 against the native build on
// llvmpipe: 0 on lavapipe (equal to the 9 digits printed), 9.5e-7 at most on SwiftShader (4 steps).
//
//   node web/tests/run.mjs tokenizer --dir build/wasm/web [--native build/wgtrain_tests] [--filter GTEST_FILTER]
// tokenizer: the tokenizer tests (tests/tokenizer_test.cpp, tokenizer_train_test.cpp, with their files preloaded:
// wgtrain_web_tokenizer_tests) in a Worker; passes when they all pass and, with --native, when the native build's
// tests of the same filter end the same way (every test passed or skipped on both).
//
//   node web/tests/run.mjs page   --dir build/wasm/web [--steps N] [--screenshot FILE.png]
// page: the page's flow (web/index.html): the bundled sample, N training steps, generation, the download, and the
// downloaded file loaded back; checked from the page's state (window.wgtrainPage), with a screenshot.
//
// The adapter: lavapipe (Mesa's Vulkan through ANGLE, a compatibility-mode adapter; the default, as its pipelines
// build about 15x faster than SwiftShader's) or swiftshader (Chromium's own Vulkan, a core adapter limited to 256
// invocations per workgroup). Missing pieces (chromium, playwright-core, the build) are failures, never skips.
import {execFileSync} from 'node:child_process';
import {createRequire} from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');

function fail(message) {
  console.error('run.mjs: ' + message);
  process.exit(1);
}

const argv = process.argv.slice(2);
const mode = argv.shift();
const opt = {dir: null, filter: null, adapter: 'lavapipe', native: null, steps: '4', tolerance: '1e-5',
             timeout: '900', screenshot: null};
for (let i = 0; i < argv.length; i += 2) {
  const k = argv[i].replace(/^--/, '');
  if (!(k in opt) || i + 1 >= argv.length) fail('unknown or incomplete option ' + argv[i]);
  opt[k] = argv[i + 1];
}
if (!['ops', 'parity', 'page', 'tokenizer'].includes(mode)) fail('first argument: ops, parity, page or tokenizer');
if (!opt.dir || !fs.existsSync(path.join(opt.dir, 'tests.html')))
  fail('--dir must be the browser build\'s web/ directory (with tests.html); build it first (README, "In a browser")');

const chromiumPath = process.env.WGTRAIN_CHROMIUM || '/usr/lib/chromium/chromium';
if (!fs.existsSync(chromiumPath)) fail(`no Chromium at ${chromiumPath}: run scripts/setup.sh (Debian's chromium)`);
const playwrightDir = process.env.WGTRAIN_PLAYWRIGHT || path.join(repo, '.deps', 'playwright-core');
if (!fs.existsSync(path.join(playwrightDir, 'package.json')))
  fail(`no playwright-core at ${playwrightDir}: run scripts/setup.sh`);
const {chromium} = createRequire(import.meta.url)(playwrightDir);

const adapterFlags = {
  lavapipe: ['--use-webgpu-adapter=opengles', '--use-angle=vulkan'],
  swiftshader: [],
};
if (!adapterFlags[opt.adapter]) fail('--adapter: lavapipe or swiftshader');

// A static server for the build's web/ directory.
const types = {'.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm'};
function serve(dir) {
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '');
    const file = path.join(dir, rel || 'tests.html');
    if (!file.startsWith(path.resolve(dir)) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, {'Content-Type': types[path.extname(file)] || 'application/octet-stream'});
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function launch() {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu', ...adapterFlags[opt.adapter]],
  });
}

// Runs a program of the build in the page; returns {exit, lines, seconds}.
async function runInPage(program, args) {
  const server = await serve(path.resolve(opt.dir));
  const browser = await launch();
  try {
    const page = await browser.newPage();
    page.on('console', (m) => { if (m.type() === 'error') console.error('[page] ' + m.text()); });
    const url = `http://127.0.0.1:${server.address().port}/tests.html?program=${program}&args=` +
                encodeURIComponent(args.join(' '));
    await page.goto(url);
    let printed = 0;
    const deadline = Date.now() + Number(opt.timeout) * 1000;
    for (;;) {
      const state = await page.evaluate(() => ({
        lines: [...document.querySelectorAll('#out span')].map((s) => s.textContent.replace(/\n$/, '')),
        result: window.wgtrainResult || null,
      }));
      for (; printed < state.lines.length; ++printed) console.log(state.lines[printed]);
      if (state.result) {
        if (opt.screenshot) await page.screenshot({path: opt.screenshot, fullPage: true});
        return state.result;
      }
      if (Date.now() > deadline) fail(`${program} did not finish in ${opt.timeout} s`);
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    await browser.close();
    server.close();
  }
}

function parityLine(lines, where) {
  const line = lines.find((l) => l.startsWith('WGTRAIN_PARITY '));
  if (!line) fail(`${where}: no WGTRAIN_PARITY line in its output`);
  return JSON.parse(line.slice('WGTRAIN_PARITY '.length));
}

// Waits until fn(page state) is true; fails on a page error or after the timeout.
async function until(page, what, fn) {
  const deadline = Date.now() + Number(opt.timeout) * 1000;
  for (;;) {
    const st = await page.evaluate(() => window.wgtrainPage);
    if (st && st.error) fail(`page error while waiting for ${what}: ${st.error}`);
    if (st && fn(st)) return st;
    if (Date.now() > deadline) fail(`timed out waiting for ${what} (status: ${st && st.status})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function pageFlow() {
  const server = await serve(path.resolve(opt.dir));
  const browser = await launch();
  const steps = Number(opt.steps);
  try {
    const page = await browser.newPage({acceptDownloads: true});
    page.on('pageerror', (e) => fail('page exception: ' + e.message));
    await page.goto(`http://127.0.0.1:${server.address().port}/index.html`);
    let st = await until(page, 'the device', (s) => s.device);
    console.log(`device: ${JSON.stringify(st.device)}`);
    // A JSONL file: each line's text, one example per line.
    const jsonl = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'wgtrain-web-')), 'data.jsonl');
    const rows = [{text: 'caf\u00e9 one'}, {prompt: 'Q: two? ', completion: 'A: 2'},
                  {messages: [{role: 'user', content: 'three'}, {role: 'assistant', content: '3'}]}];
    fs.writeFileSync(jsonl, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    await page.setInputFiles('#file', jsonl);
    const want = Buffer.byteLength('caf\u00e9 one\nQ: two? A: 2\nthree\n3');
    st = await until(page, 'the JSONL file', (s) => s.bytes > 0);
    if (st.bytes !== want) fail(`the JSONL file gave ${st.bytes} bytes of text, expected ${want}`);
    console.log(`JSONL: ${st.bytes} bytes of text from ${rows.length} lines`);
    await page.evaluate(() => { window.wgtrainPage.bytes = 0; });
    await page.click('#sample');
    st = await until(page, 'the sample', (s) => s.bytes > 0);
    console.log(`sample: ${st.bytes} bytes`);
    await page.fill('#steps', String(steps));
    await page.fill('#batch', '4');
    await page.fill('#seq', '32');
    // The page's thread must stay free while the Worker trains: a timer on it keeps ticking.
    await page.evaluate(() => { window.ticks = 0; window.tickTimer = setInterval(() => ++window.ticks, 50); });
    const t1 = Date.now();
    await page.click('#train');
    st = await until(page, 'training', (s) => s.status === 'trained');
    const trainSeconds = (Date.now() - t1) / 1000;
    const ticks = await page.evaluate(() => window.ticks);
    const losses = st.losses.map((l) => l.loss);
    console.log(`trained ${losses.length} steps in ${trainSeconds.toFixed(1)} s: loss ${losses[0].toFixed(4)} -> ` +
                `${losses[losses.length - 1].toFixed(4)}, ${Math.round(st.tokens_per_second)} tokens/s at the end; ` +
                `${ticks} ticks of a 50 ms timer on the page meanwhile`);
    if (losses.length !== steps) fail(`expected ${steps} losses, got ${losses.length}`);
    if (!losses.every(Number.isFinite)) fail('a loss is not finite');
    // Bytes start near ln 256 = 5.55 nats; 4-step means guard against one noisy batch.
    const mean = (a) => a.reduce((x, y) => x + y, 0) / a.length;
    if (!(mean(losses.slice(-4)) < mean(losses.slice(0, 4)) - 0.5))
      fail('the loss did not fall by 0.5 nats over the run');
    if (ticks < trainSeconds * 1000 / 50 / 4) fail('the page\'s thread was blocked during training');
    await page.fill('#temperature', '0');
    await page.click('#generate');
    st = await until(page, 'generation', (s) => s.generated !== null);
    const greedy = st.generated;
    console.log(`generated (greedy): ${JSON.stringify(greedy)}`);
    if (!greedy.length) fail('nothing generated');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download')]);
    const file = await download.path();
    const bytes = fs.readFileSync(file);
    const headerLen = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + headerLen).toString('utf8'));
    const names = Object.keys(header).filter((k) => k !== '__metadata__');
    console.log(`download: ${download.suggestedFilename()}, ${bytes.length} bytes, ${names.length} tensors ` +
                `(${names.slice(0, 3).join(', ')}, ...)`);
    if (!names.includes('model.embed_tokens.weight')) fail('the download lacks model.embed_tokens.weight');
    // The downloaded file loads back into the page and generates the same greedy text.
    await page.evaluate(() => { window.wgtrainPage.generated = null; });
    await page.setInputFiles('#load', file);
    await until(page, 'loading', (s) => s.status === 'model loaded');
    await page.click('#generate');
    st = await until(page, 'generation after loading', (s) => s.generated !== null);
    if (st.generated !== greedy) fail(`after loading, greedy text ${JSON.stringify(st.generated)} differs`);
    console.log('the downloaded model, loaded back, generates the same greedy text');
    if (opt.screenshot) await page.screenshot({path: opt.screenshot, fullPage: true});
  } finally {
    await browser.close();
    server.close();
  }
}

const t0 = Date.now();
if (mode === 'page') {
  await pageFlow();
  console.log(`run.mjs: page flow passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(0);
} else if (mode === 'tokenizer') {
  // Not in the browser: the CLI (a subprocess) and encoding from several threads (no pthreads in this build).
  const filter = opt.filter || 'Tokenizer*-TokenizerCli.*:*SeveralThreads*:TokenizerUnicode.TablesEqualIcu*';
  const outcomes = (lines) => {
    const m = new Map();
    for (const l of lines) {
      const r = /^\[\s*(OK|SKIPPED|FAILED)\s*\] (\S+) \(/.exec(l);
      if (r) m.set(r[2], r[1]);
    }
    return m;
  };
  const r = await runInPage('wgtrain_web_tokenizer_tests', ['--gtest_filter=' + filter]);
  console.log(`run.mjs: tokenizer tests in Chromium: exit ${r.exit} after ${r.seconds.toFixed(1)} s`);
  const web = outcomes(r.lines);
  if (r.exit !== 0) process.exit(1);
  if (web.size === 0) fail('the tests reported success but no test outcome lines');
  if (opt.native) {
    let out;
    try {
      out = execFileSync(opt.native, ['--gtest_filter=' + filter], {encoding: 'utf8', maxBuffer: 1 << 26});
    } catch (e) {
      fail('the native tokenizer tests failed:\n' + e.stdout);
    }
    for (const l of out.split('\n')) if (/^(load|encode) /.test(l)) console.log('native: ' + l);
    const native = outcomes(out.split('\n'));
    const diff = [...new Set([...native.keys(), ...web.keys()])].filter((k) => native.get(k) !== web.get(k));
    for (const k of diff)
      console.log(`differs: ${k}: native ${native.get(k) || 'absent'}, browser ${web.get(k) || 'absent'}`);
    if (diff.length) fail(`${diff.length} tests end differently in the browser and natively`);
    const passed = [...web.values()].filter((v) => v === 'OK').length;
    console.log(`run.mjs: the ${web.size} tokenizer tests end as natively (${passed} passed)`);
  }
  process.exit(0);
} else if (mode === 'ops') {
  // By default all but the native backend's cooperative-matrix tests (the browser build has no native backend).
  const args = ['--gtest_filter=' + (opt.filter || '-*CoopMat*')];
  const r = await runInPage('wgtrain_web_tests', args);
  console.log(`run.mjs: op tests in ${opt.adapter} Chromium: exit ${r.exit} after ${r.seconds.toFixed(1)} s`);
  const ran = r.lines.find((l) => /^\[==========\] \d+ tests? from .* ran\./.test(l));
  if (r.exit === 0 && !ran) fail('the tests reported success but no "[==========] N tests ... ran" line');
  process.exit(r.exit === 0 ? 0 : 1);
} else {
  if (!opt.native || !fs.existsSync(opt.native)) fail('--native must be the native build\'s wgtrain_parity');
  const nativeOut = execFileSync(opt.native, [opt.steps], {encoding: 'utf8', env: {...process.env}});
  const native = parityLine(nativeOut.split('\n'), 'native');
  const r = await runInPage('wgtrain_parity', [opt.steps]);
  if (r.exit !== 0) fail('the browser run failed (exit ' + r.exit + ')');
  const web = parityLine(r.lines, 'browser');
  const tol = Number(opt.tolerance);
  let worst = 0;
  console.log(`step  native (${native.adapter})  browser (${web.adapter})  |difference|`);
  native.losses.forEach((n, i) => {
    const w = web.losses[i];
    const d = Math.abs(n - w);
    worst = Math.max(worst, Number.isFinite(d) ? d : Infinity);
    console.log(`${String(i + 1).padStart(4)}  ${n.toFixed(7)}  ${w.toFixed(7)}  ${d.toExponential(2)}`);
  });
  const ok = web.losses.length === native.losses.length && worst <= tol;
  console.log(`run.mjs: parity ${ok ? 'passed' : 'FAILED'}: largest difference ${worst.toExponential(2)} ` +
              `(tolerance ${tol}) after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(ok ? 0 : 1);
}
