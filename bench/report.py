"""Joins `wgtrain bench --json` and bench/torch_bench.py results into the markdown table of bench/RESULTS.md.

Ceilings, both measured in the same run on the same GPU: bandwidth = PyTorch's device-to-device copy (bytes read
plus written per second); compute = PyTorch's fp32 (non-TF32) 8192^3 matmul. A kernel with FLOPs is judged against
the compute ceiling, one without against the bandwidth ceiling. ratio = PyTorch time / WebGPU time (> 1: faster).
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(webgpu_path, torch_path):
    wg, th = load(webgpu_path), load(torch_path)
    by = {(r["name"], r["shape"]): r for r in th}
    copy = next(r for r in th if r["name"].startswith("copy"))
    mm = next(r for r in th if r["name"] == "mm fp32 8192")
    bw = copy["bytes"] / copy["seconds"]
    rate = mm["flops"] / mm["seconds"]
    dev = wg[0]["device"] if wg else "?"
    print(f"Device: {dev}, WebGPU through Dawn ({wg[0]['backend'] if wg else '?'}), against {th[0]['backend']}.")
    print(f"Ceilings measured in this run: copy bandwidth {bw * 1e-9:.0f} GB/s (read + write), "
          f"fp32 matmul {rate * 1e-12:.1f} TFLOP/s (PyTorch, TF32 off, 8192^3).\n")
    print("| kernel | size | WebGPU ms | WebGPU rate | of ceiling | PyTorch ms | PyTorch rate | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in wg:
        key = (r["name"], r["shape"])
        t = by.get(key)
        if r["name"] == "mm fp32":
            t = by.get(("mm fp32 4096", r["shape"]))
        if r["flops"]:
            wr, frac = f"{r['flops'] / r['seconds'] * 1e-9:.0f} GFLOP/s", r["flops"] / r["seconds"] / rate
        else:
            wr, frac = f"{r['bytes'] / r['seconds'] * 1e-9:.0f} GB/s", r["bytes"] / r["seconds"] / bw
        if t:
            tr = (f"{t['flops'] / t['seconds'] * 1e-9:.0f} GFLOP/s" if t["flops"]
                  else f"{t['bytes'] / t['seconds'] * 1e-9:.0f} GB/s")
            tms, ratio = f"{t['seconds'] * 1e3:.3f}", f"{t['seconds'] / r['seconds']:.2f}"
        else:
            tr = tms = ratio = "n/a"
        print(f"| {r['name']} | {r['shape']} | {r['seconds'] * 1e3:.3f} | {wr} | {frac * 100:.0f}% | {tms} | {tr} "
              f"| {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
