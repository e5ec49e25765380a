// The page: its controls, the loss chart, and messages to and from the Worker (app_worker.js). Its state is in
// window.wgtrainPage, which the browser test (web/tests/page.mjs) reads.
const $ = (id) => document.getElementById(id);
const state = window.wgtrainPage = {device: null, status: 'opening', bytes: 0, losses: [], tokens_per_second: 0,
                                    generated: null, saved: 0, error: null, step: 0};
const worker = new Worker('app_worker.js');
let data = null;        // the training text, as bytes
let created = false;    // a model exists in the Worker
let busy = false;

function setStatus(s, error) {
  state.status = s;
  $('status').textContent = s;
  $('status').className = error ? 'error' : '';
}
function controls() {
  $('train').disabled = busy || !data || !state.device;
  $('stop').disabled = !busy;
  $('generate').disabled = busy || !created;
  $('download').disabled = busy || !created;
}
function config() {
  const dim = Number($('dim').value);
  const heads = Math.max(1, Math.round(dim / 16));
  return {dim, layers: Number($('layers').value), heads, kv_heads: heads % 2 ? heads : heads / 2,
          seq: Number($('seq').value), batch: Number($('batch').value), lr: Number($('lr').value),
          steps: Number($('steps').value), seed: 1};
}

// Text from a .txt file as it is; from JSONL, each line's "text", or "prompt" + "completion", or its "messages"'
// contents, one example per line.
function textOf(name, raw) {
  if (!/\.jsonl?$/i.test(name)) return raw;
  const out = [];
  raw.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let o;
    try { o = JSON.parse(line); } catch (e) { throw new Error(`${name} line ${i + 1}: not JSON (${e.message})`); }
    if (typeof o.text === 'string') out.push(o.text);
    else if (typeof o.prompt === 'string') out.push(o.prompt + (o.completion || ''));
    else if (Array.isArray(o.messages)) out.push(o.messages.map((m) => m.content).join('\n'));
    else throw new Error(`${name} line ${i + 1}: no "text", "prompt" or "messages"`);
  });
  return out.join('\n');
}
function useText(name, raw) {
  try {
    data = new TextEncoder().encode(textOf(name, raw));
  } catch (e) {
    setStatus(e.message, true);
    return;
  }
  state.bytes = data.length;
  $('data').textContent = `${name}: ${data.length.toLocaleString()} bytes`;
  controls();
}
$('file').onchange = async () => {
  const f = $('file').files[0];
  if (f) useText(f.name, await f.text());
};
$('sample').onclick = async () => useText('sample.txt', await (await fetch('sample.txt')).text());

function drawChart() {
  const c = $('chart'), g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  const ls = state.losses;
  if (!ls.length) return;
  const total = Math.max(Number($('steps').value), ls[ls.length - 1].step);
  const hi = Math.max(...ls.map((l) => l.loss)), lo = Math.min(...ls.map((l) => l.loss));
  const x = (s) => 40 + (c.width - 50) * (s / total), y = (v) => 10 + (c.height - 30) * (hi - v) / (hi - lo || 1);
  g.strokeStyle = '#888';
  g.strokeRect(40, 10, c.width - 50, c.height - 30);
  g.fillStyle = '#333';
  g.font = '11px sans-serif';
  g.fillText(hi.toFixed(2), 2, 16);
  g.fillText(lo.toFixed(2), 2, c.height - 22);
  g.fillText('step ' + total, c.width - 60, c.height - 6);
  g.strokeStyle = '#1565c0';
  g.beginPath();
  ls.forEach((l, i) => (i ? g.lineTo(x(l.step), y(l.loss)) : g.moveTo(x(l.step), y(l.loss))));
  g.stroke();
}

$('train').onclick = () => {
  const c = config();
  busy = true;
  controls();
  state.losses = [];
  if (!state.loaded) worker.postMessage({cmd: 'create', config: c});
  worker.postMessage({cmd: 'data', bytes: data});
  worker.postMessage({cmd: 'train', from: 1, to: c.steps, tokens_per_step: c.batch * c.seq});
  setStatus('building the kernels…');
};
$('stop').onclick = () => worker.postMessage({cmd: 'stop'});
$('generate').onclick = () => {
  busy = true;
  controls();
  worker.postMessage({cmd: 'generate', prompt: $('prompt').value, max_new: Number($('max_new').value),
                      temperature: Number($('temperature').value), seed: Date.now() % 100000});
};
$('download').onclick = () => {
  busy = true;
  controls();
  worker.postMessage({cmd: 'save'});
};
$('load').onchange = async () => {
  const f = $('load').files[0];
  if (!f) return;
  worker.postMessage({cmd: 'load', bytes: new Uint8Array(await f.arrayBuffer()), config: config()});
  setStatus('loading ' + f.name + '…');
};

worker.onmessage = (e) => {
  const m = e.data;
  if (m.type === 'device') {
    state.device = m.device;
    $('device').textContent = `WebGPU adapter: ${m.device.name}${m.device.software ? ' (a CPU rasteriser)' : ''}, ` +
                              `${m.device.invocations} invocations per workgroup.`;
    setStatus('idle');
  } else if (m.type === 'ready') {
    if (m.parameters) created = true;
    if (m.loaded) {
      created = state.loaded = true;
      setStatus('model loaded');
    }
  } else if (m.type === 'step') {
    state.losses.push({step: m.step, loss: m.loss});
    state.step = m.step;
    state.tokens_per_second = m.tokens_per_second;
    setStatus(`step ${m.step}: loss ${m.loss.toFixed(4)} nats/byte, ${Math.round(m.tokens_per_second)} tokens/s`);
    drawChart();
  } else if (m.type === 'trained') {
    busy = false;
    state.status = 'trained';
    $('status').textContent += ' (done)';
  } else if (m.type === 'generated') {
    busy = false;
    state.generated = m.text;
    $('generated').textContent = m.prompt + m.text;
  } else if (m.type === 'saved') {
    busy = false;
    state.saved = m.bytes.length;
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([m.bytes], {type: 'application/octet-stream'}));
    a.download = 'wgtrain-model.safetensors';
    a.click();
  } else if (m.type === 'error') {
    busy = false;
    state.error = m.message;
    setStatus(m.message, true);
  }
  controls();
};
worker.postMessage({cmd: 'open'});
