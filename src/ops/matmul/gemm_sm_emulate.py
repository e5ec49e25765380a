#!/usr/bin/env python3
# A line-for-line Python emulation of gemm_sm.wgsl's indexing (staging, fragments as plain 16 x 16 products, the
# epilogue), checked against a plain product: every form of B, vec4 or element loads, strides, batches, split-K, bias,
# accumulation and the power-of-two scaling. Values are small integers times powers of two, so every step is exact
# (f16 rounding is not emulated). For checking edits to the kernel where no GPU has subgroup matrices:
#   python3 src/ops/matmul/gemm_sm_emulate.py   (about a minute; prints "bad 0 of ..." per case)
# staging, fragments, epilogue, strides, q4 modes, split-K, bias and accumulate against a plain product. The kernel's
# fast paths for tiles wholly inside (a_full, b_full) load the same elements without the bounds selects: emulated by
# the checked path.
import random, struct, sys
BAD = [0]  # wrong outputs over every case: the exit status
FULLS = [0]  # k-tiles wholly inside, whose fast-path indices were compared
BM=BN=128; BK=32; SA=BK+8; SB=BN+8; SAT=BM+8; SBT=BK+8; WM=64; WN=32
def f32bits(x): return struct.unpack('<I', struct.pack('<f', x))[0]
def bitsf(b): return struct.unpack('<f', struct.pack('<I', b))[0]
def pow2_of(bits):
    e = bits >> 23
    if bits == 0 or e >= 255: return 1.0
    return bitsf(min(max(e+1,1),252) << 23)
def run(p, a, b, scales, bias, c, absmax, B_MODE, grid, A_VEC=False, B_VEC=False, A_T=False, B_T=False):
    gx, gy, gz = grid
    for wz in range(gz):
     for wy in range(gy):
      for wx in range(gx):
        out_bat = wz + p['batch0']; bat = 0 if p['k_chunk'] else out_bat
        m0 = wy*BM; n0 = wx*BN
        a_base = p['a_off'] + bat*p['a_sb']; b_base = p['b_off'] + bat*p['b_sb']
        akf = p['flags'] & 4 != 0; bnf = p['flags'] & 8 != 0
        k_begin, k_end = 0, p['k']
        if p['k_chunk']: k_begin = wz*p['k_chunk']; k_end = min(p['k'], k_begin + p['k_chunk'])
        ainv = {}; binv = {}
        for li in range(256):
            for t in range(16):
                e = li + t*256
                gm = m0 + ((e//BK) if akf else (e % BM))
                if A_VEC: gm = m0 + li//2
                if A_T: gm = m0 + (li % (BM//4))*4 + t % 4
                ainv[li,t] = 1.0
                if (p['flags'] & 16) and gm < p['m']: ainv[li,t] = 1.0/pow2_of(absmax[p['sa_off'] + bat*p['m'] + gm])
                gn = n0 + ((e % BN) if bnf else (e // BK))
                if B_VEC: gn = n0 + (li % (BN//4))*4 + t % 4
                if B_T: gn = n0 + (li + (t % 4)*256)//(BK//4)
                binv[li,t] = 1.0
                if B_MODE == 0 and (p['flags'] & 32) and gn < p['n']: binv[li,t] = 1.0/pow2_of(absmax[p['sb_off'] + bat*p['n'] + gn])
        acc = [[0.0]*BN for _ in range(BM)]  # the 8 subgroups' fragments together
        k0 = k_begin
        while k0 < k_end:
            sa = [None]*(BM*SA); sb = [None]*max(BK*SB, BN*SBT)
            a_full = m0 + BM <= p['m'] and k0 + BK <= k_end; b_full = n0 + BN <= p['n'] and k0 + BK <= k_end
            FULLS[0] += a_full + b_full
            for li in range(256):
                for t in range(4 if A_T else 0):
                    e = li + t*256; ak = e//(BM//4); am = (e % (BM//4))*4; gm, gk = m0+am, k0+ak
                    assert (a_base + gk*p['a_sk'] + gm) % 4 == 0 or not (gm < p['m'] and gk < k_end)
                    if a_full:  # the kernel's unchecked vec4 index
                        assert (a_base + (k0 + e//(BM//4))*p['a_sk'] + m0 + (e % (BM//4))*4)//4 == (a_base + gk*p['a_sk'] + gm)//4
                    for q in range(4):
                        v = 0.0
                        if gm < p['m'] and gk < k_end: v = a[a_base + gk*p['a_sk'] + gm + q] * ainv[li,q]
                        sa[ak*SAT+am+q] = v
                for t in range(4 if A_VEC else 0):
                    am = li//2; ak = ((li % 2)*4 + t)*4; gm, gk = m0+am, k0+ak
                    assert (a_base + gm*p['a_sm'] + gk) % 4 == 0 or not (gm < p['m'] and gk < k_end)
                    if a_full:
                        assert (a_base + (m0 + li//2)*p['a_sm'] + k0 + ((li % 2)*4 + t)*4)//4 == (a_base + gm*p['a_sm'] + gk)//4
                    for q in range(4):
                        v = 0.0
                        if gm < p['m'] and gk < k_end: v = a[a_base + gm*p['a_sm'] + gk + q] * ainv[li,0]
                        sa[(ak+q)*SAT+am] = v  # A_VEC's tile is [k][m], as A_T's
                for t in range(0 if A_VEC or A_T else 16):
                    e = li + t*256
                    am = (e//BK) if akf else (e % BM); ak = (e % BK) if akf else (e // BM)
                    gm, gk = m0+am, k0+ak
                    v = 0.0
                    if gm < p['m'] and gk < k_end: v = a[a_base + gm*p['a_sm'] + gk*p['a_sk']] * ainv[li,t]
                    sa[am*SA+ak] = v
                if B_MODE == 0 and B_T:
                    for t in range(4):
                        e = li + t*256; bn = e//(BK//4); bk = (e % (BK//4))*4; gn, gk = n0+bn, k0+bk
                        assert (b_base + gn*p['b_sn'] + gk) % 4 == 0 or not (gn < p['n'] and gk < k_end)
                        if b_full:
                            assert (b_base + (n0 + e//(BK//4))*p['b_sn'] + k0 + (e % (BK//4))*4)//4 == (b_base + gn*p['b_sn'] + gk)//4
                        for q in range(4):
                            v = 0.0
                            if gn < p['n'] and gk < k_end: v = b[b_base + gn*p['b_sn'] + gk + q] * binv[li,t]
                            sb[bn*SBT+bk+q] = v
                elif B_MODE == 0 and B_VEC:
                    for t in range(4):
                        e = li + t*256; bk = e//(BN//4); bn = (e % (BN//4))*4; gn, gk = n0+bn, k0+bk
                        if b_full:
                            assert (b_base + (k0 + e//(BN//4))*p['b_sk'] + n0 + (e % (BN//4))*4)//4 == (b_base + gk*p['b_sk'] + gn)//4
                        for q in range(4):
                            v = 0.0
                            if gn < p['n'] and gk < k_end: v = b[b_base + gk*p['b_sk'] + gn + q] * binv[li,q]
                            sb[bk*SB+bn+q] = v
                elif B_MODE == 0:
                    for t in range(16):
                        e = li + t*256
                        bn = (e % BN) if bnf else (e // BK); bk = (e // BN) if bnf else (e % BK)
                        gn, gk = n0+bn, k0+bk
                        v = 0.0
                        if gn < p['n'] and gk < k_end: v = b[b_base + gk*p['b_sk'] + gn*p['b_sn']] * binv[li,t]
                        sb[bk*SB+bn] = v
                elif B_MODE == 1:
                    for t in range(2):
                        i = li + t*256; bn = i // (BK//8); wq = i % (BK//8)
                        gn = n0+bn; gk = k0 + wq*8; w = 0x88888888; s = 0.0
                        if gn < p['n'] and gk < k_end:
                            w = b[gn*p['q_words'] + gk//8]; s = scales[(gk//p['group_size'])*p['q_rows'] + gn]
                        for j in range(8): sb[bn*SBT + wq*8 + j] = (((w >> (4*j)) & 15) - 8.0)*s  # [n][k] (B_NK)
                else:
                    for t in range(2):
                        i = li + t*256; bk = i // (BN//8); wq = i % (BN//8)
                        gr = k0+bk; gj = n0 + wq*8; w = 0x88888888; s = 0.0
                        if gr < k_end and gj < p['n']:
                            w = b[gr*p['q_words'] + gj//8]; s = scales[(gj//p['group_size'])*p['q_rows'] + gr]
                        for j in range(8): sb[bk*SB + wq*8 + j] = (((w >> (4*j)) & 15) - 8.0)*s
            # fragments: subgroup sg's (i, j) = left rows wr+16i.., right cols wc+16j..
            for sg in range(8):
                wr = (sg//4)*WM; wc = (sg%4)*WN
                for kk in range(0, BK, 16):
                    for fi in range(4):
                        for fj in range(2):
                            for r in range(16):
                                for cc in range(16):
                                    s_ = 0.0
                                    for q in range(16):
                                        # A_T, A_VEC: a column-major fragment at k*SAT + row, stride SAT
                                        l = sa[kk*SAT + wr+16*fi + q*SAT + r] if (A_T or A_VEC) else sa[(wr+16*fi)*SA + kk + r*SA + q]
                                        # B_NK (B_T, q4 mode 1): a column-major fragment at col*SBT + k, stride SBT
                                        rr = sb[(wc+16*fj)*SBT + kk + cc*SBT + q] if (B_T or B_MODE == 1) else sb[kk*SB + wc + 16*fj + q*SB + cc]
                                        s_ += l*rr
                                    acc[wr+16*fi+r][wc+16*fj+cc] += s_
            k0 += BK
        # epilogue as the kernel: 1. the fragments stored as they are, at rb + row * r_sn + column: in c, those wholly
        # outside M or N left out (none straddles an edge there); 2. the block read back and finished in place
        rb = p['c_off'] + out_bat*p['r_sb'] + m0*p['r_sn'] + n0; pad = p['padded'] != 0
        for sg in range(8):
            wr = (sg//4)*WM; wc = (sg%4)*WN
            for fi in range(4):
                for fj in range(2):
                    if not (pad or (m0+wr+16*fi < p['m'] and n0+wc+16*fj < p['n'])): continue
                    assert pad or (m0+wr+16*fi+15 < p['m'] and n0+wc+16*fj+15 < p['n'])
                    for r in range(16):
                        for cc in range(16): c[rb + (wr+16*fi+r)*p['r_sn'] + wc+16*fj+cc] = acc[wr+16*fi+r][wc+16*fj+cc]
def finish(p, c, absmax, bias, raw, M, N, batch, splits, acc, cols_p, block, B_MODE):
    """sm_finish.wgsl: the chunks summed (from raw, or c itself when raw is None), the scales undone, bias, accumulate."""
    for o in range(batch*M*N):
        bb, i, j = o//(M*N), (o % (M*N))//N, o % N
        at = p['c_off'] + o
        if raw is None: v = c[at]
        else:
            v = 0.0
            for z in range(splits): v += raw[(bb + z)*block + i*cols_p + j]
        if p['flags'] & 16: v *= pow2_of(absmax[p['sa_off'] + bb*M + i])
        if B_MODE == 0 and p['flags'] & 32: v *= pow2_of(absmax[p['sb_off'] + bb*N + j])
        if p['bias']: v += bias[p['bias_off'] + j]
        if acc: v += c[at]
        c[at] = v
def launch(p, a, b, scales, bias, c, absmax, B_MODE, M, N, batch, gx, gy, splits, acc, A_VEC=False, B_VEC=False,
           A_T=False, B_T=False):
    """gemm_sm.cpp's choice: straight into c, or through a padded buffer; then sm_finish.wgsl."""
    c_off = p['c_off']
    direct = splits == 1 and not acc and M % 16 == 0 and N % 16 == 0 and c_off % 4 == 0
    p['bias'] = p['flags'] & 1; p['flags'] &= ~3
    if direct:
        p.update(r_sn=N, r_sb=M*N, padded=0)
        run(p, a, b, scales, bias, c, absmax, B_MODE, (gx, gy, batch), A_VEC, B_VEC, A_T, B_T)
        finish(p, c, absmax, bias, None, M, N, batch, 1, False, 0, 0, B_MODE)
        return direct
    rows_p, cols_p = gy*BM, gx*BN; blocks = splits if splits > 1 else batch
    buf = [float('nan')]*(blocks*rows_p*cols_p)
    pp = dict(p, r_sn=cols_p, r_sb=rows_p*cols_p, padded=1, c_off=0)
    run(pp, a, b, scales, bias, buf, absmax, B_MODE, (gx, gy, blocks), A_VEC, B_VEC, A_T, B_T)
    finish(p, c, absmax, bias, buf, M, N, batch, splits, acc, cols_p, rows_p*cols_p, B_MODE)
    return direct
random.seed(1)
def absmax_of(buf, off, batch, rows, length, sb, sr, sl):
    out = []
    for bb in range(batch):
        for r in range(rows):
            m = 0.0
            for l in range(length): m = max(m, abs(buf[off + bb*sb + r*sr + l*sl]))
            out.append(f32bits(m))
    return out
def check(name, M, N, K, batch=1, a_t=False, b_t=False, bias=False, acc=False, split=0, a_off=3, b_off=5, c_off=1):
    # A [batch, M, K] in a buffer with an offset, transposed storage if a_t
    if a_t: a_sb, a_sm, a_sk = M*K, 1, M
    else: a_sb, a_sm, a_sk = M*K, K, 1
    if b_t: b_sb, b_sk, b_sn = K*N, 1, K
    else: b_sb, b_sk, b_sn = K*N, N, 1
    a = [float(random.randint(-3,3)) * 2.0**random.randint(-20,20) for _ in range(a_off + batch*M*K)]
    # scale rows so each row has a different magnitude (exact powers of two)
    b = [float(random.randint(-3,3)) for _ in range(b_off + batch*K*N)]
    A = lambda bb, i, k: a[a_off + bb*a_sb + i*a_sm + k*a_sk]
    Bf = lambda bb, k, j: b[b_off + bb*b_sb + k*b_sk + j*b_sn]
    biasv = [float(random.randint(-5,5)) for _ in range(N + 2)]
    c0 = [float(random.randint(-5,5)) for _ in range(batch*M*N + c_off)]
    c = list(c0)
    amax = absmax_of(a, a_off, batch, M, K, a_sb, a_sm, a_sk) + absmax_of(b, b_off, batch, N, K, b_sb, b_sn, b_sk)
    flags = (1 if bias else 0) | (2 if acc else 0) | (4 if (K == 1 or a_sk == 1) else 0) | (8 if (N == 1 or b_sn == 1) else 0) | 16 | 32
    p = dict(m=M, n=N, k=K, batch0=0, a_off=a_off, a_sb=a_sb, a_sm=a_sm, a_sk=a_sk, b_off=b_off, b_sb=b_sb, b_sk=b_sk,
             b_sn=b_sn, bias_off=2 if bias else 0, flags=flags, q_words=0, q_rows=0, group_size=0, c_off=c_off, k_chunk=0,
             sa_off=0, sb_off=batch*M)
    gx, gy = (N + 127)//128, (M + 127)//128
    av = K % 4 == 0 and a_sk == 1 and a_off % 4 == 0 and a_sm % 4 == 0 and a_sb % 4 == 0
    bv = N % 4 == 0 and b_sn == 1 and b_off % 4 == 0 and b_sk % 4 == 0 and b_sb % 4 == 0
    bt = not bv and K % 4 == 0 and b_sk == 1 and b_off % 4 == 0 and b_sn % 4 == 0 and b_sb % 4 == 0
    at = not av and M % 4 == 0 and a_sm == 1 and a_off % 4 == 0 and a_sk % 4 == 0 and a_sb % 4 == 0
    print(name, "a_vec", av, "a_t", at, "b_vec", bv, "b_t", bt, end=" ")
    splits = 1
    if split:
        splits = (K + split - 1)//split
        p['k_chunk'] = split
    d = launch(p, a, b, None, biasv, c, amax, 0, M, N, batch, gx, gy, splits, acc, av, bv, at, bt)
    print("direct" if d else "padded", end=" ")
    bad = 0
    for bb in range(batch):
        for i in range(M):
            for j in range(N):
                want = sum(A(bb,i,k)*Bf(bb,k,j) for k in range(K))
                if bias: want += biasv[2 + j]
                if acc: want += c0[c_off + (bb*M + i)*N + j]
                got = c[c_off + (bb*M + i)*N + j]
                if abs(got - want) > 1e-9*max(1, abs(want)): bad += 1
    BAD[0] += bad
    print(name, "bad", bad, "of", batch*M*N)
check("plain 17x31x13", 17, 13, 31)
check("edges 130x70x150 bias acc", 130, 150, 70, bias=True, acc=True)
check("transposed A,B batch 2", 40, 35, 45, batch=2, a_t=True, b_t=True)
check("split-K 64 acc", 20, 30, 150, acc=True, split=64)
check("vec 132x40x136 bias", 132, 136, 40, bias=True, a_off=4, b_off=8)
check("vec batch 2 acc", 20, 36, 44, batch=2, acc=True, a_off=0, b_off=4)
check("vec split-K 64", 12, 20, 200, split=64, a_off=0, b_off=0)
check("vec A, B transposed", 30, 33, 20, b_t=True, a_off=0)
check("A_T 132x36x140 bias, vec B", 132, 140, 36, a_t=True, bias=True, a_off=4, b_off=8)
check("A_T batch 2 acc, B transposed", 20, 30, 44, batch=2, a_t=True, b_t=True, acc=True, a_off=0)
check("A_T split-K 64", 12, 20, 200, a_t=True, split=64, a_off=0, b_off=0)
check("B_T 33x76x130 bias", 33, 130, 76, b_t=True, bias=True, a_off=4, b_off=0)
check("A_T, B_T batch 2 acc", 132, 20, 44, batch=2, a_t=True, b_t=True, acc=True, a_off=0, b_off=4)
check("B_T split-K 64", 12, 20, 200, b_t=True, split=64, a_off=0, b_off=0)
check("direct 144x40x160 bias", 144, 160, 40, bias=True, a_off=4, b_off=8, c_off=4)
check("direct A_T, B_T batch 2", 32, 48, 36, batch=2, a_t=True, b_t=True, a_off=0, b_off=4, c_off=0)
check("direct 16x20x272, element loads", 16, 272, 20, a_off=3, b_off=5, c_off=8)
random.seed(2)
def q4(nw, kw, g):
    words = (kw + 7)//8
    codes = [[random.randint(0,15) if k < kw else 8 for k in range(words*8)] for _ in range(nw)]
    buf = []
    for r in range(nw):
        for w in range(words):
            v = 0
            for j in range(8): v |= codes[r][w*8+j] << (4*j)
            buf.append(v)
    ng = (kw + g - 1)//g
    sc = [2.0**random.randint(-6,0) for _ in range(ng*nw)]
    W = lambda r, k: (codes[r][k]-8)*sc[(k//g)*nw + r]
    return buf, sc, W, words
def check_q4(mode, M, Nw, Kw, g):
    buf, sc, W, words = q4(Nw, Kw, g)
    if mode == 1: N, K = Nw, Kw     # y = x W^T: B[k][n] = W[n][k]
    else: N, K = Kw, Nw             # dx = dy W: B[r][j] = W[r][j]
    a = [float(random.randint(-3,3)) * 2.0**random.randint(-20,0) for _ in range(M*K)]
    amax = []
    for i in range(M):
        m = max(abs(a[i*K+k]) for k in range(K)); amax.append(f32bits(m))
    p = dict(m=M, n=N, k=K, batch0=0, a_off=0, a_sb=M*K, a_sm=K, a_sk=1, b_off=0, b_sb=0, b_sk=0, b_sn=0, bias_off=0,
             flags=4|16, q_words=words, q_rows=Nw, group_size=g, c_off=0, k_chunk=0, sa_off=0, sb_off=M)
    c = [float('nan')]*(M*N)
    launch(p, a, buf, sc, None, c, amax, mode, M, N, 1, (N+127)//128, (M+127)//128, 1, False, K % 4 == 0)
    bad = 0
    for i in range(M):
        for j in range(N):
            want = sum(a[i*K+k]*(W(j,k) if mode == 1 else W(k,j)) for k in range(K))
            if not abs(c[i*N+j]-want) <= 1e-9*max(1,abs(want)): bad += 1
    BAD[0] += bad
    print("mode", mode, M, N, K, "g", g, "bad", bad, "of", M*N)
check_q4(1, 5, 13, 37, 8)
check_q4(2, 5, 37, 13, 8)
check_q4(1, 33, 140, 70, 32)
check_q4(2, 33, 70, 140, 32)
check_q4(1, 48, 144, 64, 32)
check_q4(2, 32, 64, 144, 32)
print('interior k-tile loads checked:', FULLS[0])
sys.exit(1 if BAD[0] or not FULLS[0] else 0)
