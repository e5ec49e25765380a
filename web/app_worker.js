// The page's Worker: holds the wasm module (wgtrain_app.js, from web/src/app.cpp) so that training and generation
// never hold the page's thread. Messages in: {cmd: 'open' | 'create' | 'data' | 'train' | 'stop' | 'generate' |
// 'save' | 'load', ...}; out: {type: 'device' | 'ready' | 'step' | 'trained' | 'generated' | 'saved' | 'error', ...}.
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
  stop() { stopping = true; },
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
