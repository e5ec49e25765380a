// The page: its controls, the loss chart, and messages to and from the Worker (app_worker.js). Its state is in
// window.wgtrainPage, which the browser test (web/tests/page.mjs) reads.
const $ = (id) => document.getElementById(id);
const state = window.wgtrainPage = {device: null, status: 'opening', bytes: 0, losses: [], tokens_per_second: 0,
                                    generated: null, saved: 0, error: null, step: 0,
                                    // fine-tuning: the files in the Worker's /model, /data, /adapter; the run
                                    model: null, data: null, adapter: null, ft_status: 'idle', ft_run: null,
                                    ft_losses: [], ft_generated: null, ft_files: [], zipped: null};
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

// ---- fine-tuning ---------------------------------------------------------------------------------------------------
let ftBusy = false;
let ftDone = null;     // what the last run left in /run: 'lora' or 'full'
let genWith = 'model';  // what Generate uses: 'model' (as picked), 'run' (the last run) or 'adapter' (one picked)
function ftControls() {
  $('finetune').disabled = ftBusy || busy || !state.device || !state.model || !state.data;
  $('ft_stop').disabled = !ftBusy;
  $('ft_generate').disabled = ftBusy || !state.model;
  $('dl_adapter').disabled = ftBusy || ftDone !== 'lora';
  $('dl_run').disabled = ftBusy || !ftDone;
}
function ftStatus(s, error) {
  state.ft_status = s;
  $('ft_status').textContent = s;
  $('ft_status').className = error ? 'error' : '';
}
// Files into the Worker's file system; the File objects travel, their bytes are read there.
function sendFiles(dir, files, names) {
  if (!files.length) return;
  ftBusy = true;
  ftControls();
  worker.postMessage({cmd: 'files', dir, files, names});
}
// A directory pick: its top-level files (a model directory has no subdirectories that matter).
function topLevel(list) {
  return [...list].filter((f) => !f.webkitRelativePath || f.webkitRelativePath.split('/').length === 2);
}
$('model_dir').onchange = () => sendFiles('/model', topLevel($('model_dir').files));
$('model_files').onchange = () => sendFiles('/model', [...$('model_files').files]);
$('ft_data').onchange = () => sendFiles('/data', [...$('ft_data').files]);
$('ft_sample').onclick = async () => {
  const blob = await (await fetch('sample.txt')).blob();
  sendFiles('/data', [new File([blob], 'sample.txt')]);
};
$('adapter_files').onchange = () => sendFiles('/adapter', topLevel($('adapter_files').files));

// The data as the trainer takes it: one file itself, several (train.jsonl and valid.jsonl) as their directory.
function dataPath() {
  return state.data.length === 1 ? '/data/' + state.data[0] : '/data';
}
function ftOptions() {
  const n = (id) => Number($(id).value);
  return {model: '/model', data: dataPath(), out: '/run', fine_tune: $('ft_type').value, steps: n('ft_steps'),
          batch_size: n('ft_batch'), seq_len: n('ft_seq'), lr: n('ft_lr'), seed: n('ft_seed'),
          lora_rank: n('ft_rank'), lora_alpha: n('ft_alpha'), lora_layers: n('ft_layers'),
          targets: $('ft_targets').value.split(',').map((t) => t.trim()).filter((t) => t),
          mask_prompt: $('ft_mask').checked, eval_every: n('ft_eval'), eval_batches: n('ft_eval_batches')};
}
$('finetune').onclick = () => {
  ftBusy = true;
  ftDone = null;
  state.ft_losses = [];
  state.ft_run = null;
  $('ft_log').textContent = '';
  ftControls();
  ftStatus('loading the model and the data, building the kernels…');
  worker.postMessage({cmd: 'finetune', options: ftOptions()});
};
$('ft_stop').onclick = () => worker.postMessage({cmd: 'stop'});
$('ft_generate').onclick = () => {
  ftBusy = true;
  ftControls();
  state.ft_generated = null;
  // The run just made, else an adapter picked, else the model as it is.
  let model = '/model', adapter = '';
  if (genWith === 'run' && ftDone === 'full') model = '/run';
  else if (genWith === 'run' && ftDone === 'lora') adapter = '/run';
  else if (genWith === 'adapter') adapter = '/adapter';
  worker.postMessage({cmd: 'ft_generate', options: {model, adapter, prompt: $('ft_prompt').value,
                      max_tokens: Number($('ft_max_new').value), temperature: Number($('ft_temperature').value),
                      chat: $('ft_chat').checked, seed: 1}});
};
function download(bytes, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], {type: 'application/zip'}));
  a.download = name;
  a.click();
}
$('dl_adapter').onclick = () => worker.postMessage({cmd: 'zip', dir: '/run', file: 'wgtrain-adapter.zip',
                                                    names: ['adapter_config.json', 'adapter_model.safetensors']});
$('dl_run').onclick = () => worker.postMessage({cmd: 'zip', dir: '/run', file: 'wgtrain-run.zip'});

function drawFtChart() {
  const c = $('ft_chart'), g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  const ls = state.ft_losses;
  if (!ls.length) return;
  const all = ls.flatMap((l) => (l.val_loss === undefined ? [l.loss] : [l.loss, l.val_loss]));
  const total = Math.max(ls[ls.length - 1].steps || 1, ls[ls.length - 1].step);
  const hi = Math.max(...all), lo = Math.min(...all);
  const x = (s) => 40 + (c.width - 50) * (s / total), y = (v) => 10 + (c.height - 30) * (hi - v) / (hi - lo || 1);
  g.strokeStyle = '#888';
  g.strokeRect(40, 10, c.width - 50, c.height - 30);
  g.fillStyle = '#333';
  g.font = '11px sans-serif';
  g.fillText(hi.toFixed(2), 2, 16);
  g.fillText(lo.toFixed(2), 2, c.height - 22);
  g.fillText('step ' + total, c.width - 60, c.height - 6);
  g.fillStyle = '#1565c0';
  g.fillText('training', 50, c.height - 6);
  g.fillStyle = '#e65100';
  g.fillText('validation', 110, c.height - 6);
  g.strokeStyle = '#1565c0';
  g.beginPath();
  ls.forEach((l, i) => (i ? g.lineTo(x(l.step), y(l.loss)) : g.moveTo(x(l.step), y(l.loss))));
  g.stroke();
  const val = ls.filter((l) => l.val_loss !== undefined);
  g.strokeStyle = g.fillStyle = '#e65100';
  g.beginPath();
  val.forEach((l, i) => (i ? g.lineTo(x(l.step), y(l.val_loss)) : g.moveTo(x(l.step), y(l.val_loss))));
  g.stroke();
  val.forEach((l) => g.fillRect(x(l.step) - 2, y(l.val_loss) - 2, 5, 5));
}

function ftMessage(m) {
  if (m.type === 'files') {
    ftBusy = false;
    const mb = (m.bytes / 1e6).toFixed(1) + ' MB';
    if (m.dir === '/model') {
      state.model = m.names;
      genWith = 'model';  // a new model: Generate uses it as it is until a run or an adapter
      $('model').textContent = `${m.names.length} files, ${mb}: ${m.names.join(', ')}`;
    } else if (m.dir === '/data') {
      state.data = m.names;
      $('ft_data_name').textContent = `${m.names.join(', ')} (${mb})`;
    } else if (m.dir === '/adapter') {
      state.adapter = m.names;
      genWith = 'adapter';
      $('adapter').textContent = m.names.join(', ');
    }
  } else if (m.type === 'ft_log') {
    $('ft_log').textContent += m.line + '\n';
  } else if (m.type === 'ft_ready') {
    state.ft_run = m.run;
    const r = m.run;
    ftStatus(`${r.architecture}, ${r.parameters.toLocaleString()} parameters` +
             (r.adapters ? `, ${r.adapters} LoRA adapters` : '') +
             (r.train_tokens ? `: ${r.train_tokens} training tokens, ${r.val_tokens} validation` : '') +
             `; batch ${r.batch_size} x ${r.seq_len}, steps ${r.step + 1} to ${r.steps}`);
  } else if (m.type === 'ft_step') {
    state.ft_losses.push(m);
    ftStatus(`step ${m.step} of ${m.steps}: loss ${m.loss.toFixed(4)}` +
             (m.val_loss !== undefined ? `, validation ${m.val_loss.toFixed(4)}` : '') +
             `, ${Math.round(m.tokens_per_second)} tokens/s`);
    drawFtChart();
  } else if (m.type === 'ft_done') {
    ftBusy = false;
    ftDone = $('ft_type').value;
    genWith = 'run';
    state.ft_files = m.files;
    ftStatus(`${m.outcome}: ${$('ft_status').textContent.replace(/^(finished|stopped): /, '')}`);
    state.ft_status = 'finetuned';
  } else if (m.type === 'ft_generated') {
    ftBusy = false;
    state.ft_generated = m.text;
    $('ft_generated').textContent = m.prompt + m.text;
  } else if (m.type === 'zipped') {
    state.zipped = {file: m.file, names: m.names, size: m.bytes.length};
    download(m.bytes, m.file);
  } else {
    return false;
  }
  ftControls();
  return true;
}

worker.onmessage = (e) => {
  const m = e.data;
  if (ftMessage(m)) return;
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
    if (ftBusy) {
      ftBusy = false;
      ftStatus(m.message, true);
    }
  }
  controls();
  ftControls();
};
worker.postMessage({cmd: 'open'});
