// The page's Worker: holds the wasm module (wgtrain_app.js, from web/src/app.cpp) so that training and generation
// never hold the page's thread. Messages in: {cmd: 'open' | 'create' | 'data' | 'train' | 'stop' | 'generate' |
// 'save' | 'load', ...}; out: {type: 'device' | 'ready' | 'step' | 'trained' | 'generated' | 'saved' | 'error', ...}.
// Fine-tuning: {cmd: 'files' (File objects into the module's file system) | 'finetune' | 'ft_generate' | 'zip'};
// out: {type: 'files' | 'ft_log' | 'ft_ready' | 'ft_step' | 'ft_done' | 'ft_generated' | 'zipped'}.
importScripts('wgtrain_app.js');

let mod = null;
let stopping = false;
const post = (m, transfer) => self.postMessage(m, transfer || []);

async function call(name, args, types) {
  const r = await mod.ccall(name, 'number', types || args.map(() => 'number'), args, {async: true});
  return r;
}
function fail(what) {
  post({type: 'error', message: what + ': ' + mod.UTF8ToString(mod.ccall('app_error', 'number', [], []))});
}
// Bytes into the module's memory (freed by the caller).
function toHeap(bytes) {
  const p = mod._malloc(Math.max(bytes.length, 1));
  mod.HEAPU8.set(bytes, p);
  return p;
}
function text() {
  const p = mod.ccall('app_text', 'number', [], []);
  const n = mod.ccall('app_text_size', 'number', [], []);
  return mod.HEAPU8.slice(p, p + n);
}

// Files the page picked, copied into the module's in-memory file system under `dir` (emptied first) a slice at a
// time through FileReaderSync (this Worker's own thread: the page never waits), so a model is never a single
// JavaScript string or buffer.
function writeFile(file, path) {
  const FS = mod.FS, reader = new FileReaderSync(), chunk = 16 << 20;
  const stream = FS.open(path, 'w');
  try {
    for (let at = 0; at < file.size; at += chunk) {
      const bytes = new Uint8Array(reader.readAsArrayBuffer(file.slice(at, at + chunk)));
      FS.write(stream, bytes, 0, bytes.length);
    }
  } finally {
    FS.close(stream);
  }
}
function emptyDir(dir) {
  const FS = mod.FS;
  if (!FS.analyzePath(dir).exists) return FS.mkdirTree(dir);
  for (const name of FS.readdir(dir)) {
    if (name === '.' || name === '..') continue;
    const p = dir + '/' + name;
    if (FS.isDir(FS.stat(p).mode)) {
      emptyDir(p);
      FS.rmdir(p);
    } else {
      FS.unlink(p);
    }
  }
}
function listFiles(dir) {
  const FS = mod.FS;
  if (!FS.analyzePath(dir).exists) return [];
  return FS.readdir(dir).filter((n) => n !== '.' && n !== '..' && !n.startsWith('.') &&
                                      FS.isFile(FS.stat(dir + '/' + n).mode)).sort();
}
self.wgtrainOnStep = (json) => post({type: 'ft_step', ...JSON.parse(json)});
self.wgtrainOnLog = (line) => post({type: 'ft_log', line});
self.wgtrainStopRequested = false;

const handlers = {
  async open() {
    mod = await createWgtrainApp({print: (t) => console.log(t), printErr: (t) => console.warn(t)});
    if (await call('app_open', [])) return fail('no WebGPU device');
    post({type: 'device', device: JSON.parse(new TextDecoder().decode(text()))});
  },
  async create(m) {
    const c = m.config;
    if (await call('app_create', [c.dim, c.layers, c.heads, c.kv_heads, c.seq, c.batch, c.lr, c.steps, c.seed]))
      return fail('could not create the model');
    post({type: 'ready', parameters: c});
  },
  async data(m) {
    const p = toHeap(m.bytes);
    const rc = await call('app_set_data', [p, m.bytes.length]);
    mod._free(p);
    if (rc) return fail('bad training text');
    post({type: 'ready', bytes: m.bytes.length});
  },
  async train(m) {
    stopping = false;
    for (let s = m.from; s <= m.to && !stopping; ++s) {
      const t0 = performance.now();
      const loss = await call('app_step', [s]);
      if (!Number.isFinite(loss)) return fail('training step ' + s);
      const seconds = (performance.now() - t0) / 1000;
      post({type: 'step', step: s, loss, tokens_per_second: m.tokens_per_step / seconds});
    }
    post({type: 'trained'});
  },
  stop() { stopping = true; self.wgtrainStopRequested = true; },
  // {dir, files: [File], names: [string] (the names to give them, default their own)}
  files(m) {
    emptyDir(m.dir);
    let bytes = 0;
    m.files.forEach((f, i) => {
      writeFile(f, m.dir + '/' + (m.names ? m.names[i] : f.name));
      bytes += f.size;
    });
    post({type: 'files', dir: m.dir, names: listFiles(m.dir), bytes});
  },
  // {options}: app_ft_start's JSON; then trains to the end (or 'stop') and posts each step.
  async finetune(m) {
    self.wgtrainStopRequested = false;
    const json = JSON.stringify(m.options);
    if (await call('app_ft_start', [json], ['string'])) return fail('could not start the fine-tune');
    post({type: 'ft_ready', run: JSON.parse(new TextDecoder().decode(text()))});
    if (await call('app_ft_run', [])) return fail('fine-tuning');
    post({type: 'ft_done', outcome: new TextDecoder().decode(text()), files: listFiles(m.options.out || '/run')});
  },
  async ft_generate(m) {
    if (await call('app_ft_generate', [JSON.stringify(m.options)], ['string'])) return fail('generation');
    post({type: 'ft_generated', prompt: m.options.prompt, text: new TextDecoder().decode(text())});
  },
  // {dir, names: the files of dir to pack (default all), file: the download's name}
  async zip(m) {
    const names = m.names || listFiles(m.dir);
    for (const n of names) {
      if (!mod.FS.analyzePath(m.dir + '/' + n).exists) return post({type: 'error', message: `no ${n} to download yet`});
    }
    const entries = JSON.stringify(names.map((n) => [n, m.dir + '/' + n]));
    const p = await call('app_zip', [entries], ['string']);
    if (!p) return fail('making the zip');
    const n = mod.ccall('app_bytes_size', 'number', [], []);
    const bytes = mod.HEAPU8.slice(p, p + n);
    post({type: 'zipped', file: m.file, names, bytes}, [bytes.buffer]);
  },
  async generate(m) {
    const bytes = new TextEncoder().encode(m.prompt);
    const p = toHeap(bytes);
    const rc = await call('app_generate', [p, bytes.length, m.max_new, m.temperature, m.seed]);
    mod._free(p);
    if (rc) return fail('generation');
    post({type: 'generated', prompt: m.prompt, text: new TextDecoder().decode(text())});
  },
  async save() {
    const p = await call('app_save', []);
    if (!p) return fail('saving');
    const n = Number(new TextDecoder().decode(text()));
    const bytes = mod.HEAPU8.slice(p, p + n);
    post({type: 'saved', bytes}, [bytes.buffer]);
  },
  async load(m) {
    const p = toHeap(m.bytes);
    const c = m.config;
    const rc = await call('app_load', [p, m.bytes.length, c.seq, c.batch, c.lr, c.steps, c.seed]);
    mod._free(p);
    if (rc) return fail('loading the model');
    post({type: 'ready', loaded: true});
  },
};

// One command at a time, in order; 'stop' acts at once (the loop checks it between steps).
let queue = Promise.resolve();
self.onmessage = (e) => {
  if (e.data.cmd === 'stop') return handlers.stop();
  queue = queue.then(() => handlers[e.data.cmd](e.data)).catch((err) => post({type: 'error', message: String(err)}));
};
