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
//   node web/tests/run.mjs finetune --dir build/wasm/web --wgtrain build/wgtrain --model tests/fixtures/hf/llama
//                          [--steps N] [--tolerance T]
// finetune: the page's fine-tuning against the native CLI's: the same Hugging Face directory and JSONL data,
// `wgtrain finetune` (LoRA) natively and in the page with the same seed and settings; every training and
// validation loss must agree within the tolerance (absolute, nats; default 1e-5, as the CLI's loss.csv has 6
// decimals; measured 2026-12-04, lavapipe against the native build on llvmpipe: 4.7e-7 at most, the rounding). The
// page's adapter, downloaded as a zip and unpacked, must make the native `wgtrain generate` write the page's greedy
// text; the CLI's adapter, loaded into the page, must make the page write the CLI's; the run's zip must hold its
// checkpoint, loss.csv and a loss.png that inflates. Then `full` fine-tuning, 2 steps: losses as the CLI's, the
// page's run directory (downloaded) generates with the CLI what it generated in the page, and the CLI's full run
// directory, picked as the page's model, generates in the page what it generates with the CLI.
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
const opt = {dir: null, filter: null, adapter: 'lavapipe', native: null, steps: '4', tolerance: null,
             timeout: '900', screenshot: null, wgtrain: null, model: null};
for (let i = 0; i < argv.length; i += 2) {
  const k = argv[i].replace(/^--/, '');
  if (!(k in opt) || i + 1 >= argv.length) fail('unknown or incomplete option ' + argv[i]);
  opt[k] = argv[i + 1];
}
if (!['ops', 'parity', 'page', 'tokenizer', 'finetune'].includes(mode))
  fail('first argument: ops, parity, page, tokenizer or finetune');
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

// Rows of loss.csv as {step, train, val} (empty fields: undefined).
function lossCsv(file) {
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
  if (lines[0] !== 'step,tokens,lr,train_loss,val_loss,seconds') fail(`${file}: unexpected header ${lines[0]}`);
  return lines.slice(1).map((l) => {
    const f = l.split(',');
    const num = (x) => (x === '' ? undefined : Number(x));
    return {step: Number(f[0]), train: num(f[3]), val: num(f[4])};
  });
}
function unzip(file, dir) {
  execFileSync('python3', ['-m', 'zipfile', '-e', file, dir]);
  return fs.readdirSync(dir).sort();
}
// The image data of a PNG, inflated (checks the stream the browser build's zlib stand-in wrote).
async function pngPixels(file) {
  const zlib = await import('node:zlib');
  const b = fs.readFileSync(file);
  if (b.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') fail(`${file}: not a PNG`);
  const idat = [];
  let width = 0, height = 0;
  for (let at = 8; at < b.length;) {
    const len = b.readUInt32BE(at), type = b.subarray(at + 4, at + 8).toString('latin1');
    if (type === 'IHDR') [width, height] = [b.readUInt32BE(at + 8), b.readUInt32BE(at + 12)];
    if (type === 'IDAT') idat.push(b.subarray(at + 8, at + 8 + len));
    at += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  if (raw.length !== height * (1 + 3 * width)) fail(`${file}: ${raw.length} bytes of pixels for ${width} x ${height}`);
  return {width, height};
}

async function finetuneFlow() {
  if (!opt.wgtrain || !fs.existsSync(opt.wgtrain)) fail('--wgtrain must be the native build\'s wgtrain');
  if (!opt.model || !fs.existsSync(path.join(opt.model, 'config.json'))) fail('--model: a Hugging Face directory');
  const steps = Number(opt.steps), tol = Number(opt.tolerance);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'wgtrain-ft-'));
  // The model's files, as a person would pick them (and the same directory for the CLI).
  const modelDir = path.join(tmp, 'model');
  fs.mkdirSync(modelDir);
  const modelFiles = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json',
                      'generation_config.json'].filter((f) => fs.existsSync(path.join(opt.model, f)));
  for (const f of modelFiles) fs.copyFileSync(path.join(opt.model, f), path.join(modelDir, f));
  // JSONL data: 5% of its 60 rows held out for validation by the trainer.
  const words = ['red', 'fox', 'jumps', 'over', 'the', 'lazy', 'dog', 'and', 'cat', 'runs', 'far', 'away'];
  const rows = [];
  for (let i = 0; i < 60; ++i) {
    const w = (k) => words[(i * 7 + k * 5) % words.length];
    rows.push({text: `${w(0)} ${w(1)} ${w(2)} ${w(3)}, ${w(4)} ${w(5)} ${w(6)}. Row ${i}.`});
  }
  const data = path.join(tmp, 'data.jsonl');
  fs.writeFileSync(data, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const settings = {batch: '2', seq: '32', lr: '0.01', seed: '3', eval: '2', evalBatches: '2'};
  const prompt = 'the red fox', maxNew = '12';

  // The CLI.
  const t1 = Date.now();
  const nativeRun = path.join(tmp, 'native');
  execFileSync(opt.wgtrain, ['finetune', '--model', modelDir, '--data', data, '--iters', String(steps),
                             '--batch-size', settings.batch, '--seq-len', settings.seq, '--lr', settings.lr,
                             '--seed', settings.seed, '--eval-every', settings.eval, '--eval-batches',
                             settings.evalBatches, '--adapter-path', nativeRun], {encoding: 'utf8'});
  const native = lossCsv(path.join(nativeRun, 'loss.csv'));
  console.log(`native finetune: ${steps} steps in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
  const generate = (adapter) => execFileSync(opt.wgtrain, ['generate', '--model', modelDir, '--adapter', adapter,
                                                           '--prompt', prompt, '--temperature', '0',
                                                           '--max-tokens', maxNew], {encoding: 'utf8'});
  const nativeText = generate(nativeRun);

  const server = await serve(path.resolve(opt.dir));
  const browser = await launch();
  try {
    const page = await browser.newPage({acceptDownloads: true});
    page.on('pageerror', (e) => fail('page exception: ' + e.message));
    await page.goto(`http://127.0.0.1:${server.address().port}/index.html`);
    await until(page, 'the device', (s) => s.device);
    await page.setInputFiles('#model_files', modelFiles.map((f) => path.join(modelDir, f)));
    let st = await until(page, 'the model files', (s) => s.model);
    console.log(`page: model files ${st.model.join(', ')}`);
    await page.setInputFiles('#ft_data', data);
    await until(page, 'the data', (s) => s.data);
    const fill = {ft_steps: String(steps), ft_batch: settings.batch, ft_seq: settings.seq, ft_lr: settings.lr,
                  ft_seed: settings.seed, ft_eval: settings.eval, ft_eval_batches: settings.evalBatches};
    for (const [id, v] of Object.entries(fill)) await page.fill('#' + id, v);
    const t2 = Date.now();
    await page.click('#finetune');
    st = await until(page, 'fine-tuning', (s) => s.ft_status === 'finetuned');
    console.log(`page finetune: ${st.ft_losses.length} steps in ${((Date.now() - t2) / 1000).toFixed(1)} s ` +
                `(${JSON.stringify(st.ft_run)})`);

    // Losses: the page's against the CLI's loss.csv.
    let worst = 0, compared = 0;
    console.log('step  native train  page train    native val  page val');
    for (const n of native.filter((r) => r.step > 0)) {
      const w = st.ft_losses.find((l) => l.step === n.step);
      if (!w) fail(`the page has no step ${n.step}`);
      const pairs = [[n.train, w.loss], [n.val, w.val_loss]].filter(([a]) => a !== undefined);
      for (const [a, b] of pairs) {
        if (b === undefined) fail(`step ${n.step}: the page has no validation loss where the CLI has one`);
        worst = Math.max(worst, Math.abs(a - b));
        ++compared;
      }
      console.log(`${String(n.step).padStart(4)}  ${n.train.toFixed(6)}  ${w.loss.toFixed(6)}  ` +
                  `${n.val === undefined ? '' : n.val.toFixed(6) + '  ' + w.val_loss.toFixed(6)}`);
    }
    if (st.ft_losses.length !== steps) fail(`the page trained ${st.ft_losses.length} steps, not ${steps}`);
    console.log(`losses: ${compared} compared, largest difference ${worst.toExponential(2)} (tolerance ${tol})`);
    if (!(worst <= tol)) fail('the page\'s losses differ from the CLI\'s');

    // Greedy generation with the page's adapter, in the page and (from the downloaded zip) natively.
    await page.fill('#ft_prompt', prompt);
    await page.fill('#ft_max_new', maxNew);
    await page.fill('#ft_temperature', '0');
    await page.click('#ft_generate');
    st = await until(page, 'generation', (s) => s.ft_generated !== null);
    const pageText = st.ft_generated;
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#dl_adapter')]);
    const adapterDir = path.join(tmp, 'page-adapter');
    const names = unzip(await dl.path(), adapterDir);
    console.log(`adapter zip ${dl.suggestedFilename()}: ${names.join(', ')}`);
    if (names.join() !== 'adapter_config.json,adapter_model.safetensors') fail('the adapter zip holds ' + names);
    const fromPageAdapter = generate(adapterDir);
    console.log(`page greedy:                     ${JSON.stringify(prompt + pageText)}`);
    console.log(`CLI with the page's adapter:     ${JSON.stringify(fromPageAdapter.replace(/\n$/, ''))}`);
    console.log(`CLI with its own adapter:        ${JSON.stringify(nativeText.replace(/\n$/, ''))}`);
    if (fromPageAdapter !== prompt + pageText + '\n') fail('the CLI, with the page\'s adapter, writes other text');

    // The other way: the CLI's adapter in the page.
    await page.evaluate(() => { window.wgtrainPage.ft_generated = null; window.wgtrainPage.adapter = null; });
    await page.setInputFiles('#adapter_files', ['adapter_config.json', 'adapter_model.safetensors']
      .map((f) => path.join(nativeRun, f)));
    await until(page, 'the CLI\'s adapter', (s) => s.adapter);
    await page.click('#ft_generate');
    st = await until(page, 'generation with the CLI\'s adapter', (s) => s.ft_generated !== null);
    console.log(`page with the CLI's adapter:     ${JSON.stringify(prompt + st.ft_generated)}`);
    if (prompt + st.ft_generated + '\n' !== nativeText) fail('the page, with the CLI\'s adapter, writes other text');

    // The run directory.
    const [dr] = await Promise.all([page.waitForEvent('download'), page.click('#dl_run')]);
    const runDir = path.join(tmp, 'page-run');
    const runNames = unzip(await dr.path(), runDir);
    console.log(`run zip ${dr.suggestedFilename()}: ${runNames.join(', ')}`);
    for (const f of ['adapter_config.json', 'adapter_model.safetensors', 'checkpoint.safetensors', 'loss.csv',
                     'loss.png'])
      if (!runNames.includes(f)) fail('the run zip lacks ' + f);
    const rowsPage = lossCsv(path.join(runDir, 'loss.csv'));
    if (rowsPage.length !== native.length)
      fail(`the page's loss.csv has ${rowsPage.length} rows, the CLI's ${native.length}`);
    const png = await pngPixels(path.join(runDir, 'loss.png'));
    console.log(`the page's loss.csv: ${rowsPage.length} rows like the CLI's; loss.png ${png.width} x ${png.height}`);

    // Full fine-tuning, 2 steps: losses against the CLI's; the page's run directory, downloaded, generates natively
    // what the page generated.
    const fullSteps = 2;
    const nativeFull = path.join(tmp, 'native-full');
    execFileSync(opt.wgtrain, ['finetune', '--model', modelDir, '--data', data, '--fine-tune-type', 'full',
                               '--iters', String(fullSteps), '--batch-size', settings.batch, '--seq-len', settings.seq,
                               '--lr', settings.lr, '--seed', settings.seed, '--eval-every', settings.eval,
                               '--eval-batches', settings.evalBatches, '--adapter-path', nativeFull],
                 {encoding: 'utf8'});
    const nativeFullRows = lossCsv(path.join(nativeFull, 'loss.csv')).filter((r) => r.step > 0);
    await page.evaluate(() => { window.wgtrainPage.ft_status = 'idle'; window.wgtrainPage.ft_generated = null; });
    await page.selectOption('#ft_type', 'full');
    await page.fill('#ft_steps', String(fullSteps));
    await page.click('#finetune');
    st = await until(page, 'full fine-tuning', (s) => s.ft_status === 'finetuned');
    for (const n of nativeFullRows) {
      const w = st.ft_losses.find((l) => l.step === n.step);
      const d = Math.max(Math.abs(n.train - w.loss), n.val === undefined ? 0 : Math.abs(n.val - w.val_loss));
      console.log(`full, step ${n.step}: native ${n.train.toFixed(6)} page ${w.loss.toFixed(6)} ` +
                  `(difference ${d.toExponential(2)})`);
      if (!(d <= tol)) fail('full fine-tuning: the page\'s losses differ from the CLI\'s');
    }
    await page.click('#ft_generate');
    st = await until(page, 'generation after full fine-tuning', (s) => s.ft_generated !== null);
    const fullText = st.ft_generated;
    const [df] = await Promise.all([page.waitForEvent('download'), page.click('#dl_run')]);
    const fullDir = path.join(tmp, 'page-full');
    console.log(`full run zip: ${unzip(await df.path(), fullDir).join(', ')}`);
    const genModel = (dir) => execFileSync(opt.wgtrain, ['generate', '--model', dir, '--prompt', prompt,
                                                         '--temperature', '0', '--max-tokens', maxNew],
                                           {encoding: 'utf8'});
    const cliFromPageRun = genModel(fullDir);
    console.log(`page, full run:                  ${JSON.stringify(prompt + fullText)}`);
    console.log(`CLI with the page's run:         ${JSON.stringify(cliFromPageRun.replace(/\n$/, ''))}`);
    if (cliFromPageRun !== prompt + fullText + '\n') fail('the CLI, from the page\'s full run, writes other text');
    // The CLI's full run directory as the page's model.
    const runFiles = fs.readdirSync(nativeFull).filter((f) => /\.(json|safetensors)$/.test(f));
    await page.evaluate(() => { window.wgtrainPage.model = null; window.wgtrainPage.ft_generated = null; });
    await page.setInputFiles('#model_files', runFiles.map((f) => path.join(nativeFull, f)));
    await until(page, 'the CLI\'s run as the model', (s) => s.model);
    await page.click('#ft_generate');
    st = await until(page, 'generation from the CLI\'s run', (s) => s.ft_generated !== null);
    const cliFull = genModel(nativeFull);
    console.log(`page with the CLI's run:         ${JSON.stringify(prompt + st.ft_generated)}`);
    console.log(`CLI with its run:                ${JSON.stringify(cliFull.replace(/\n$/, ''))}`);
    if (prompt + st.ft_generated + '\n' !== cliFull) fail('the page, from the CLI\'s full run, writes other text');
    fs.rmSync(tmp, {recursive: true, force: true});  // kept when a check fails, for a look
    if (opt.screenshot) await page.screenshot({path: opt.screenshot, fullPage: true});
  } finally {
    await browser.close();
    server.close();
  }
}

const t0 = Date.now();
if (mode === 'finetune') {
  opt.tolerance = opt.tolerance || '1e-5';
  await finetuneFlow();
  console.log(`run.mjs: fine-tune flow passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(0);
} else if (mode === 'page') {
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
  const tol = Number(opt.tolerance || '1e-5');
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
