"""The same work as `wgtrain bench`, through PyTorch CUDA on the same GPU, plus the device's ceilings.

Writes JSON lines like `wgtrain bench --json`. Run on the GPU machine: python3 bench/torch_bench.py --json out.json
"""
import argparse
import json

import torch
import torch.nn.functional as F


def measure(name, shape, flops, bytes_, fn, out, min_time=0.2):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = start.elapsed_time(end) / 1e3
    reps = max(3, min(200, int(min_time / max(once, 1e-6))))
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / reps
    rate = f"  {flops / seconds * 1e-9:9.1f} GFLOP/s" if flops else ""
    bw = f"  {bytes_ / seconds * 1e-9:8.1f} GB/s" if bytes_ else ""
    print(f"{name:26s} {shape:26s} {seconds * 1e3:10.3f} ms{rate}{bw}", flush=True)
    out.write(json.dumps({"name": name, "shape": shape, "flops": flops, "bytes": bytes_, "seconds": seconds,
                          "reps": reps, "device": torch.cuda.get_device_name(), "backend": "torch " +
                          torch.__version__}) + "\n")


def dequant(codes, scales, group):
    # codes int8 [N, K] in 0..15, scales [K/group, N] -> W [N, K]
    return (codes.float() - 8.0) * scales.t().repeat_interleave(group, dim=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as fp32, like the WebGPU kernels
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    with open(args.json, "w") as out:
        n = 1 << 26
        x = torch.rand(n, device=dev, generator=g)
        measure("copy (torch clone)", str(n), 0, 2.0 * n * 4, lambda: x.clone(), out)
        # The twins of wgtrain's dim-order copy rows (same names and shapes, so report.py sets them side by side):
        # a transpose, and the head-layout permute of attention.
        xt = x.view(n // 1024, 1024).t()
        measure("copy (dim-order)", f"1024x{n // 1024}", 0, 2.0 * n * 4, lambda: xt.contiguous(), out)
        heads = x[: 16 * 512 * 8 * 64].view(16, 512, 8, 64).permute(0, 2, 1, 3)
        measure("copy (permute 0,2,1,3)", "16x512x8x64", 0, 2.0 * heads.numel() * 4, lambda: heads.contiguous(), out)
        del x, xt, heads
        for s in (4096, 8192):
            a = torch.rand(s, s, device=dev, generator=g)
            b = torch.rand(s, s, device=dev, generator=g)
            measure(f"mm fp32 {s}", f"{s}x{s}x{s}", 2.0 * s ** 3, 3.0 * s * s * 4, lambda: a @ b, out)
        del a, b

        M = N = K = 4096
        G = 32
        codes = torch.randint(0, 16, (N, K), device=dev, generator=g, dtype=torch.int8)
        scales = torch.rand(K // G, N, device=dev, generator=g) * 0.02 + 0.001
        w = dequant(codes, scales, G)
        x = torch.rand(M, K, device=dev, generator=g) * 2 - 1
        dy = torch.rand(M, N, device=dev, generator=g) * 2 - 1
        wbytes = N * K / 2.0 + (K // G) * N * 4.0
        shape = f"{M}x{N}x{K} g{G}"
        measure("linear_q4gsw", shape, 2.0 * M * N * K, M * K * 4.0 + wbytes + M * N * 4.0, lambda: x @ w.t(), out)
        measure("linear_q4gsw_backward", shape, 2.0 * M * N * K, M * N * 4.0 + wbytes + M * K * 4.0,
                lambda: dy @ w, out)
        grad = torch.rand(N, K, device=dev, generator=g)
        measure("linear_dW (accumulate)", f"{M}x{N}x{K}", 2.0 * M * N * K, (M * N + M * K + 2.0 * N * K) * 4.0,
                lambda: grad.addmm_(dy.t(), x), out)

        latent = (torch.rand(N, K, device=dev, generator=g) - 0.5) * 0.2
        sc = scales.t().repeat_interleave(G, dim=1)

        def requant(recompute):
            s = sc
            if recompute:
                s = (latent.abs().view(N, K // G, G).amax(dim=2) / 7.0).repeat_interleave(G, dim=1)
            c = torch.where(s == 0, torch.zeros_like(latent), torch.round(latent / s)).clamp_(-8, 7).to(torch.uint8) + 8
            return c[:, 0::2] | (c[:, 1::2] << 4)

        qbytes = N * K * 4.0 + N * K / 2.0 + (K // G) * N * 4.0
        measure("q4gsw_requant", f"{N}x{K} g{G}", 0, qbytes, lambda: requant(False), out)
        measure("q4gsw_requant (+scales)", f"{N}x{K} g{G}", 0, qbytes + N * K * 4.0, lambda: requant(True), out)
        del codes, scales, w, x, dy, grad, latent, sc

        for V in (32000, 128256):
            R = 8192
            logits = (torch.rand(R, V, device=dev, generator=g) * 8 - 4).requires_grad_(True)
            labels = torch.randint(0, V, (R,), device=dev, generator=g)

            def ce():
                logits.grad = None
                F.cross_entropy(logits, labels).backward()

            measure("fused_ce", f"{R}x{V}", 0, 2.0 * R * V * 4, ce, out)
            del logits, labels

        per, count = 1 << 20, 100
        params = [torch.nn.Parameter(torch.rand(per, device=dev, generator=g)) for _ in range(count)]
        for p in params:
            p.grad = torch.rand(per, device=dev, generator=g)
        opt = torch.optim.AdamW(params, lr=1e-3, fused=True)
        measure("adamw_step", f"{count}x{per}", 0, 28.0 * per * count, opt.step, out)


if __name__ == "__main__":
    main()
