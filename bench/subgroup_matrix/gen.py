#!/usr/bin/env python3
"""Subgroup-matrix GEMM C[n,n] = A[n,n] B[n,n] (row-major), tiles staged in workgroup memory as f16."""
import sys, itertools
def gen(n, BM, BN, BK, SGM, SGN, fm, fn, fk, f32in, pad, uni):
    T = 'f32' if f32in else 'f16'
    threads = SGM * SGN * 32
    WM, WN = BM // SGM, BN // SGN          # per-subgroup tile
    RM, RN = WM // fm, WN // fn             # fragments per subgroup
    SA, SB = BK + pad, BN + pad
    assert BM * BK % (4 * threads) == 0 and BK * BN % (4 * threads) == 0
    la, lb = BM * BK // (4 * threads), BK * BN // (4 * threads)
    o = []
    o.append('enable f16;\nenable chromium_experimental_subgroup_matrix;')
    if uni == 'diag': o.append('enable chromium_disable_uniformity_analysis;')
    o.append(f'const N = {n}u; const K = {n}u;')
    o.append(f'@group(0) @binding(0) var<storage, read> a: array<vec4<{T}>>;')
    o.append(f'@group(0) @binding(1) var<storage, read> b: array<vec4<{T}>>;')
    o.append('@group(0) @binding(2) var<storage, read_write> c: array<f32>;')
    o.append(f'var<workgroup> sa: array<f16, {BM * SA}>;')
    o.append(f'var<workgroup> sb: array<f16, {BK * SB}>;')
    o.append(f'@compute @workgroup_size({threads}) fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {{')
    o.append(f'  let row0 = wg.y * {BM}u; let col0 = wg.x * {BN}u;')
    o.append(f'  let sg = li / 32u; let sm = sg / {SGN}u; let sn = sg % {SGN}u;')
    o.append(f'  let wr = sm * {WM}u; let wc = sn * {WN}u;')
    for i, j in itertools.product(range(RM), range(RN)):
        o.append(f'  var c{i}_{j} = subgroup_matrix_result<f32, {fn}, {fm}>();')
    o.append(f'  for (var kk = 0u; kk < K; kk += {BK}u) {{')
    o.append('    workgroupBarrier();')
    for t in range(la):
        o.append(f'    {{ let e = li + {t * threads}u; let r = e / {BK // 4}u; let q = e % {BK // 4}u;')
        o.append(f'      let v = vec4<f16>(a[((row0 + r) * K + kk) / 4u + q]);')
        o.append(f'      let s = r * {SA}u + q * 4u; sa[s] = v.x; sa[s + 1u] = v.y; sa[s + 2u] = v.z; sa[s + 3u] = v.w; }}')
    for t in range(lb):
        o.append(f'    {{ let e = li + {t * threads}u; let r = e / {BN // 4}u; let q = e % {BN // 4}u;')
        o.append(f'      let v = vec4<f16>(b[((kk + r) * N + col0) / 4u + q]);')
        o.append(f'      let s = r * {SB}u + q * 4u; sb[s] = v.x; sb[s + 1u] = v.y; sb[s + 2u] = v.z; sb[s + 3u] = v.w; }}')
    o.append('    workgroupBarrier();')
    o.append(f'    for (var k = 0u; k < {BK}u; k += {fk}u) {{')
    for i in range(RM):
        o.append(f'      let l{i} = subgroupMatrixLoad<subgroup_matrix_left<f16, {fk}, {fm}>>(&sa, (wr + {i * fm}u) * {SA}u + k, false, {SA}u);')
    for j in range(RN):
        o.append(f'      let r{j} = subgroupMatrixLoad<subgroup_matrix_right<f16, {fn}, {fk}>>(&sb, k * {SB}u + wc + {j * fn}u, false, {SB}u);')
    for i, j in itertools.product(range(RM), range(RN)):
        o.append(f'      c{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, c{i}_{j});')
    o.append('    }')
    o.append('  }')
    for i, j in itertools.product(range(RM), range(RN)):
        o.append(f'  subgroupMatrixStore(&c, (row0 + wr + {i * fm}u) * N + col0 + wc + {j * fn}u, c{i}_{j}, false, N);')
    o.append('}')
    return '\n'.join(o) + '\n', n // BN, n // BM
if __name__ == '__main__':
    n = 4096
    cfgs = []
    for (BM, BN, BK, SGM, SGN, fm, fn, fk) in [
        (128, 128, 32, 2, 4, 16, 8, 8), (128, 128, 32, 2, 4, 16, 8, 16), (128, 128, 32, 2, 4, 16, 16, 16),
        (128, 128, 16, 2, 4, 16, 8, 8), (128, 64, 32, 2, 2, 16, 8, 8), (64, 128, 32, 2, 2, 16, 8, 8),
        (128, 256, 32, 2, 4, 16, 8, 8), (256, 128, 32, 4, 2, 16, 8, 8), (128, 128, 64, 2, 4, 16, 8, 8), (64, 64, 32, 1, 1, 16, 8, 8), (32, 128, 32, 1, 1, 16, 8, 8), (128, 128, 32, 4, 2, 16, 8, 8), (128, 128, 32, 2, 2, 16, 8, 8)]:
        for f32in in (0, 1):
            for pad in (8,):
                name = f'k/sm_{BM}x{BN}x{BK}_{SGM}x{SGN}_{fm}x{fn}x{fk}_{"f32in" if f32in else "f16in"}_p{pad}.wgsl'
                src, gx, gy = gen(n, BM, BN, BK, SGM, SGN, fm, fn, fk, f32in, pad, 'diag')
                open(name, 'w').write(src)
                print(name, gx, gy, f32in)
