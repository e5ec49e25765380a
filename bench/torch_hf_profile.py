"""Where the `transformers` training step's time goes: the GPU's work, or the host feeding it.

bench/torch_hf_llama.py's bf16 autocast row moved between 26 and 50 ms on H100s with the same versions while its
fp32 rows held within 1% (bench/RESULTS.md, run y). This script takes the same model, weights, batch and optimizer
(from the same --dump directory) and, for each mode (fp32 SDPA, bf16 autocast SDPA), measures:

  wall     ms a step between CUDA events over --steps steps, three times in a row;
  host     ms a step the Python loop takes to enqueue those steps (perf_counter, no synchronisation inside);
  kernels  from torch.profiler over 5 steps: the kernels launched a step, the sum of their durations, and the time
           the GPU had at least one kernel running (the union of their intervals), a step; the sum by category
           (GEMM, attention, optimizer, other: by kernel name);
  graph    ms a step of the whole step (forward, backward, fused AdamW) captured once in a CUDA graph and replayed:
           the same kernels with the host taken out (or why the capture failed).

A step whose kernels' union is well under its wall time waits on the host. Prints a table and writes JSON lines.
    python3 bench/torch_hf_profile.py --dump DIR --json out.json [--trace-dir DIR]
"""
import argparse
import json
import platform
import time

import torch
import torch.nn.functional as F

from torch_hf_llama import hf_model
from torch_llama import read_i32, read_safetensors


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# Kernel names by what they do, for a breakdown beside wgtrain's profile (first match wins).
CATEGORIES = (("GEMM", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_")),
              ("attention", ("flash", "fmha", "attention", "efficient")),
              ("optimizer", ("adam", "multi_tensor", "foreach")))


def category(name):
    low = name.lower()
    for label, keys in CATEGORIES:
        if any(k in low for k in keys):
            return label
    return "other"


def kernel_stats(trace_path, steps):
    """Kernels a step, their summed duration and the union of their intervals (ms a step) from a Chrome trace, and
    the summed durations by category (ms a step)."""
    events = json.load(open(trace_path))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    by_category = {}
    for e in kernels:
        c = category(e.get("name", ""))
        by_category[c] = by_category.get(c, 0.0) + e["dur"] / 1e3 / steps
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    total = sum(b - a for a, b in spans)
    union, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            union += b - a
            end = b
        elif b > end:
            union += b - end
            end = b
    first, last = (spans[0][0], max(b for _, b in spans)) if spans else (0, 0)
    return len(spans) / steps, total / 1e3 / steps, union / 1e3 / steps, (last - first) / 1e3 / steps, by_category


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--trace-dir", default="/tmp")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    tensors, _ = read_safetensors(f"{args.dump}/train_init.safetensors")
    info = json.load(open(f"{args.dump}/train_losses.json"))
    cfg = info["config"]
    b, t = info["batch"], info["seq"]
    tokens = read_i32(f"{args.dump}/train_inputs.i32").view(b, t).long().cuda()
    targets = read_i32(f"{args.dump}/train_targets.i32").long().cuda()
    print(f"cpu: {cpu_model()}, {torch.get_num_threads()} torch threads; gpu: {torch.cuda.get_device_name()}; "
          f"torch {torch.__version__}", flush=True)
    rows = []
    with open(args.json, "w") as out:
        for label, autocast in (("fp32 SDPA", False), ("bf16 autocast SDPA", True)):
            model = hf_model(cfg, tensors, "sdpa")
            decay = [p for n, p in model.named_parameters() if p.dim() == 2]
            no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]

            def adamw(capturable):
                # capturable: the step count lives on the GPU, so the optimizer can run inside a CUDA graph.
                return torch.optim.AdamW([{"params": decay, "weight_decay": info["weight_decay"]},
                                          {"params": no_decay, "weight_decay": 0.0}],
                                         lr=info["lr"], betas=(info["beta1"], info["beta2"]), eps=info["eps"],
                                         fused=True, capturable=capturable)

            opt = adamw(False)  # as torch_hf_llama.py times it

            def step(zero=True):
                if zero:
                    opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                    logits = model(input_ids=tokens).logits
                loss = F.cross_entropy(logits.float().view(b * t, -1), targets)
                loss.backward()
                opt.step()
                return loss

            for _ in range(3):
                step()
            torch.cuda.synchronize()
            walls, hosts = [], []
            for _ in range(3):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                h0 = time.perf_counter()
                for _ in range(args.steps):
                    step()
                h1 = time.perf_counter()
                end.record()
                torch.cuda.synchronize()
                walls.append(start.elapsed_time(end) / args.steps)
                hosts.append((h1 - h0) * 1e3 / args.steps)

            trace = f"{args.trace_dir}/hf_trace_{'bf16' if autocast else 'fp32'}.json"
            prof_steps = 5
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                    torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(prof_steps):
                    step()
                torch.cuda.synchronize()
            prof.export_chrome_trace(trace)
            launches, kernel_sum, busy, span, by_category = kernel_stats(trace, prof_steps)

            graph_ms, graph_note = None, ""
            try:
                opt = adamw(True)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        step()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                # Gradients set to None before the capture are allocated from the graph's pool, and each replay's
                # backward writes them afresh (PyTorch's whole-network capture).
                opt.zero_grad(set_to_none=True)
                with torch.cuda.graph(graph):
                    static_loss = step(zero=False)
                graph.replay()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.steps):
                    graph.replay()
                end.record()
                torch.cuda.synchronize()
                graph_ms = start.elapsed_time(end) / args.steps
                graph_note = f"loss after replays {static_loss.item():.4f}"
            except Exception as e:  # the capture is an experiment; its failure is a result to report
                graph_note = f"capture failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"

            row = {"mode": label, "wall_ms": walls, "host_ms": hosts, "kernels_per_step": launches,
                   "kernel_sum_ms": kernel_sum, "gpu_busy_ms": busy, "profiled_span_ms": span,
                   "kernel_ms_by_category": by_category, "graph_ms": graph_ms, "graph_note": graph_note, "cpu": cpu_model(),
                   "device": torch.cuda.get_device_name(), "torch": torch.__version__}
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            print(f"{label}: wall {' '.join(f'{w:.2f}' for w in walls)} ms, host {' '.join(f'{h:.2f}' for h in hosts)}"
                  f" ms; {launches:.0f} kernels a step, sum {kernel_sum:.2f} ms, GPU busy {busy:.2f} of "
                  f"{span:.2f} ms profiled; graph {graph_ms if graph_ms is None else f'{graph_ms:.2f}'} ms "
                  f"({graph_note})", flush=True)
            print("  kernels by category, ms a step: " +
                  ", ".join(f"{k} {v:.2f}" for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])), flush=True)
            del model, opt
            torch.cuda.empty_cache()

    print(f"\n{'mode':20s} {'wall ms':>8s} {'host ms':>8s} {'kernels':>8s} {'busy ms':>8s} {'graph ms':>9s}")
    for r in rows:
        g = "-" if r["graph_ms"] is None else f"{r['graph_ms']:.2f}"
        print(f"{r['mode']:20s} {min(r['wall_ms']):8.2f} {min(r['host_ms']):8.2f} {r['kernels_per_step']:8.0f} "
              f"{r['gpu_busy_ms']:8.2f} {g:>9s}")


if __name__ == "__main__":
    main()
