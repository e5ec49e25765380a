#!/usr/bin/env python3
# Tint's check of every gemm_sm.wgsl variant where no GPU has subgroup matrices: each variant rendered as gemm_sm.cpp
# picks it, f16 taken as f32, the tiles halved (f32 doubles them past llvmpipe's 32 KiB) and the subgroup-matrix
# builtins replaced by plain functions of the same arguments, then compiled into a pipeline by Dawn (npm webgpu's,
# .deps/webgpu) on Mesa's llvmpipe: types, indexing expressions, constant-index bounds. Not checked: the builtins.
#   EGL_PLATFORM=surfaceless python3 src/ops/matmul/gemm_sm_tint_check.py   (prints "ok" per variant; exit 1 if any not)
import os, re, subprocess, sys, tempfile
here = os.path.dirname(os.path.abspath(__file__))
ops = os.path.dirname(here)
def expand(s):  # {{>family/name}}: the embedded kernel src/ops/family/name.wgsl, as the runtime inserts it
    return re.sub(r'\{\{>([\w/]+)\}\}', lambda m: expand(open(os.path.join(ops, m.group(1) + '.wgsl')).read()), s)
src = expand(open(os.path.join(here, 'gemm_sm.wgsl')).read())
def render(s, d):
    def sec(m):
        kind, key, body = m.group(1), m.group(2), m.group(3)
        return body if (d[key] == 'true') == (kind == '#') else ''
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r'\{\{([#^])(\w+)\}\}\n?(.*?)\{\{/\2\}\}\n?', sec, s, flags=re.S)
    return re.sub(r'\{\{(\w+)\}\}', lambda m: d[m.group(1)], s)
stubs = '''
struct SML { v: f32 }
struct SMR { v: f32 }
struct SMC { v: f32 }
fn sml_load(off: u32, cm: bool, stride: u32) -> SML { return SML(sa[off] + sa[off + 15u * stride + 15u]); }
fn smr_load(off: u32, cm: bool, stride: u32) -> SMR { return SMR(sb[off] + sb[off + 15u * stride + 15u]); }
fn sm_mma(l: SML, r: SMR, c: SMC) -> SMC { return SMC(c.v + l.v * r.v); }
fn sm_store(off: u32, r: SMC, cm: bool, stride: u32) { c[off] = r.v; c[off + 15u * stride + 15u] = r.v; }
'''
def stub(s):
    s = s.replace('enable f16;\n', '').replace('enable chromium_experimental_subgroup_matrix;\n', '')
    s = s.replace('enable chromium_disable_uniformity_analysis;\n', '')
    s = s.replace('subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&sa, ', 'sml_load(')
    s = s.replace('subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&sb, ', 'smr_load(')
    s = s.replace('subgroup_matrix_result<f32, 16, 16>()', 'SMC()')
    s = s.replace('subgroupMatrixMultiplyAccumulate(', 'sm_mma(').replace('subgroupMatrixStore(&c, ', 'sm_store(')
    s = re.sub(r'//.*', '', s); assert 'subgroup' not in s, [l for l in s.split('\n') if 'subgroup' in l]
    # f32 doubles the tiles beyond llvmpipe's 32 KiB: halved (only types and uniformity are checked here).
    s = re.sub(r'var<workgroup> (\w+): array<(f16|f32), (\w+)>', r'var<workgroup> \1: array<\2, \3 / 2u>', s)
    s = re.sub(r'\bf16\b', 'f32', s)
    return s + stubs
JS = r"""
const {create, globals} = require(process.env.WEBGPU);
Object.assign(globalThis, globals);
const fs = require('fs');
(async () => {
  const gpu = create(['backend=opengles']);
  const ad = await gpu.requestAdapter({featureLevel: 'compatibility'});
  const dev = await ad.requestDevice({requiredLimits: {maxComputeWorkgroupSizeX: 256, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupStorageSize: ad.limits.maxComputeWorkgroupStorageSize, maxStorageBuffersPerShaderStage: Math.min(8, ad.limits.maxStorageBuffersPerShaderStage)}});
  let bad = 0;
  for (const f of process.argv.slice(2)) {
    const code = fs.readFileSync(f, 'utf8');
    const m = dev.createShaderModule({code});
    const info = await m.getCompilationInfo();
    const errs = info.messages.filter(x => x.type === 'error');
    dev.pushErrorScope('validation');
    dev.createComputePipeline({layout: 'auto', compute: {module: m, entryPoint: 'main'}});
    const e = await dev.popErrorScope();
    if (errs.length || e) { bad++; console.log(f, errs.map(x => x.lineNum + ': ' + x.message).join('\n'), e ? e.message : ''); }
    else console.log(f, 'ok');
  }
  process.exit(bad ? 1 : 0);
})();
"""
d = tempfile.mkdtemp()
files = []
for mode in range(3):
    for am in range(3):  # 0: element-wise, 1: A_VEC, 2: A_T
        for bm in range(3 if mode == 0 else 1):  # 0: element-wise, 1: B_VEC, 2: B_T (f32 B only)
            defs = dict(A_T='true' if am == 2 else 'false', A_TYPE='vec4<f32>' if am else 'f32',
                        A_V4='true' if am else 'false', A_VEC='true' if am == 1 else 'false', B_MODE=str(mode),
                        B_T='true' if bm == 2 else 'false', B_TYPE='u32' if mode else ('vec4<f32>' if bm else 'f32'),
                        B_V4='true' if bm else 'false', B_VEC='true' if bm == 1 else 'false')
            files.append(os.path.join(d, f'gemm_sm_mode{mode}_a{am}_b{bm}.wgsl'))
            open(files[-1], 'w').write(stub(render(src, defs)))
open(os.path.join(d, 'check.js'), 'w').write(JS)
env = dict(os.environ, WEBGPU=os.environ.get('WEBGPU', os.path.join(here, '../../../.deps/webgpu')))
env.setdefault('EGL_PLATFORM', 'surfaceless')
sys.exit(subprocess.call(['node', os.path.join(d, 'check.js')] + files, env=env))
