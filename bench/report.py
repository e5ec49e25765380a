"""Joins `wgtrain bench --json` results (WebGPU, and optionally the native Vulkan backend's) and
bench/torch_bench.py's into the markdown table of bench/RESULTS.md.

Ceilings, both measured in the same run on the same GPU: bandwidth = PyTorch's device-to-device copy (bytes read
plus written per second); compute = PyTorch's fp32 (non-TF32) 8192^3 matmul. A kernel with FLOPs is judged against
the compute ceiling, one without against the bandwidth ceiling. ratio = PyTorch time / our time (> 1: faster).

    python3 bench/report.py webgpu.json torch.json [vulkan.json]
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rate(r):
    if r["flops"]:
        return f"{r['flops'] / r['seconds'] * 1e-9:.0f} GFLOP/s"
    return f"{r['bytes'] / r['seconds'] * 1e-9:.0f} GB/s"


def main(webgpu_path, torch_path, vulkan_path=None):
    wg, th = load(webgpu_path), load(torch_path)
    vk = load(vulkan_path) if vulkan_path else []
    by = {(r["name"], r["shape"]): r for r in th}
    vk_by = {(r["name"], r["shape"]): r for r in vk}
    copy = next(r for r in th if r["name"].startswith("copy"))
    mm = next(r for r in th if r["name"] == "mm fp32 8192")
    bw = copy["bytes"] / copy["seconds"]
    peak = mm["flops"] / mm["seconds"]
    dev = wg[0]["device"] if wg else "?"
    print(f"Device: {dev}, WebGPU through Dawn ({wg[0]['backend'] if wg else '?'})"
          + (", the native Vulkan backend" if vk else "") + f", against {th[0]['backend']}.")
    print(f"Ceilings measured in this run: copy bandwidth {bw * 1e-9:.0f} GB/s (read + write), "
          f"fp32 matmul {peak * 1e-12:.1f} TFLOP/s (PyTorch, TF32 off, 8192^3).\n")

    def frac(r):
        return (r["flops"] / r["seconds"] / peak) if r["flops"] else (r["bytes"] / r["seconds"] / bw)

    head = "| kernel | size | WebGPU ms | WebGPU rate | of ceiling |"
    rule = "|---|---|---:|---:|---:|"
    if vk:
        head += " Vulkan ms | Vulkan rate | of ceiling |"
        rule += "---:|---:|---:|"
    head += " PyTorch ms | PyTorch rate | ratio (WebGPU) |" + (" ratio (Vulkan) |" if vk else "")
    rule += "---:|---:|---:|" + ("---:|" if vk else "")
    print(head)
    print(rule)
    for r in wg:
        key = (r["name"], r["shape"])
        t = by.get(key)
        if r["name"] == "mm fp32":
            t = by.get(("mm fp32 4096", r["shape"]))
        row = f"| {r['name']} | {r['shape']} | {r['seconds'] * 1e3:.3f} | {rate(r)} | {frac(r) * 100:.0f}% |"
        v = vk_by.get(key)
        if vk:
            row += (f" {v['seconds'] * 1e3:.3f} | {rate(v)} | {frac(v) * 100:.0f}% |" if v else " n/a | n/a | n/a |")
        if t:
            row += f" {t['seconds'] * 1e3:.3f} | {rate(t)} | {t['seconds'] / r['seconds']:.2f} |"
            if vk:
                row += f" {t['seconds'] / v['seconds']:.2f} |" if v else " n/a |"
        else:
            row += " n/a | n/a | n/a |" + (" n/a |" if vk else "")
        print(row)
    for v in vk:  # rows only the Vulkan backend has (its own copy)
        if not any((r["name"], r["shape"]) == (v["name"], v["shape"]) for r in wg):
            cells = " n/a | n/a | n/a |" + f" {v['seconds'] * 1e3:.3f} | {rate(v)} | {frac(v) * 100:.0f}% |"
            print(f"| {v['name']} | {v['shape']} |{cells} n/a | n/a | n/a | n/a |")


if __name__ == "__main__":
    main(*sys.argv[1:4])
