"""The training step of `wgtrain bench --only train_step`, in PyTorch CUDA, from the same weights and batch.

`wgtrain bench --only train_step --dump DIR` writes the model's initial checkpoint (train_init.safetensors), the
batch (train_inputs.i32, train_targets.i32) and the first five losses with the optimizer settings
(train_losses.json). This script builds the same Llama model in PyTorch, float32 throughout (TF32 off), with
fake-quantised q4gsw linears: the forward multiplies by the dequantised 4-bit weight, the weight gradient goes
straight through to the float32 latent, and after each AdamW step the latents are re-quantised (scale = max|w| / 7
per group of 32, code = clamp(round_half_even(w / scale), -8, 7)). It then

  1. repeats the first five steps and compares each loss with wgtrain's (the same model, on another runtime);
  2. times the step: the same math as wgtrain (explicit attention scores, masked, softmax), and with PyTorch's
     fused scaled_dot_product_attention, each with fused AdamW and the re-quantisation.

Writes JSON lines like torch_bench.py. Run on the GPU machine:
    python3 bench/torch_llama.py --dump DIR --json out.json
"""
import argparse
import json
import math
import struct

import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": torch.float32, "U8": torch.uint8, "I32": torch.int32}
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + a:base + b]), dtype=dtypes[info["dtype"]])
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


def read_i32(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.int32).clone()


def dequant_bytes(qbytes, scales, k, group):
    """Exchange layout [N, ceil(K/2)] (even k in the low nibble) and scales [ceil(K/group), N] -> W [N, K]."""
    lo, hi = (qbytes & 15).to(torch.int32), (qbytes >> 4).to(torch.int32)
    codes = torch.stack([lo, hi], dim=2).reshape(qbytes.shape[0], -1)[:, :k] - 8
    s = scales.t().repeat_interleave(group, dim=1)[:, :k]
    return codes.float() * s


def requant(latent, group):
    """Fake quantisation with scales recomputed from the latent: max|w| / 7 per group; 0 where the scale is 0."""
    n, k = latent.shape
    g = math.ceil(k / group)
    w = F.pad(latent, (0, g * group - k)).view(n, g, group)
    scale = w.abs().amax(dim=2, keepdim=True) / 7.0
    code = torch.where(scale > 0, torch.round(w / scale).clamp_(-8, 7), torch.zeros_like(w))
    return (code * scale).view(n, g * group)[:, :k]


class Q4Linear(torch.autograd.Function):
    """y = x Wq^T with the dequantised weight; the weight's gradient goes to the latent unchanged."""

    @staticmethod
    def forward(ctx, x, latent, wq):
        ctx.save_for_backward(x, wq)
        return F.linear(x, wq)

    @staticmethod
    def backward(ctx, g):
        x, wq = ctx.saved_tensors
        gx = g @ wq
        gl = g.reshape(-1, g.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
        return gx, gl, None


class Llama(torch.nn.Module):
    def __init__(self, cfg, tensors, device):
        super().__init__()
        self.cfg = cfg
        self.params = torch.nn.ParameterDict()
        self.wq = {}  # dequantised weights of the q4 linears, refreshed after each step
        for name, t in tensors.items():
            if name.endswith(".qweight") or name.endswith(".scales"):
                continue
            self.params[name.replace(".", "__")] = torch.nn.Parameter(t.to(device))
        for name, t in tensors.items():
            if name.endswith(".qweight"):
                base = name[: -len(".qweight")]
                k = tensors[base + ".weight"].shape[1]
                self.wq[base] = dequant_bytes(t, tensors[base + ".scales"], k, cfg["group_size"]).to(device)
        hd = cfg["dim"] // cfg["n_heads"]
        half = hd // 2
        # As Hugging Face (and wgtrain's rope_tables): float32 inverse frequencies and angles.
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        angle = torch.arange(cfg["max_seq_len"]).float()[:, None] * inv[None, :]
        self.cos = torch.cos(angle.double()).float().to(device)
        self.sin = torch.sin(angle.double()).float().to(device)

    def p(self, name):
        return self.params[name.replace(".", "__")]

    def linear(self, x, base):
        if base in self.wq:
            return Q4Linear.apply(x, self.p(base + ".weight"), self.wq[base])
        return F.linear(x, self.p(base + ".weight"))

    def norm(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg["norm_eps"]) * self.p(name)

    def rope(self, x, t):
        half = x.shape[-1] // 2
        c, s = self.cos[:t].view(1, t, 1, half), self.sin[:t].view(1, t, 1, half)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def forward(self, tokens, targets, sdpa):
        c = self.cfg
        b, t = tokens.shape
        h, kvh, hd = c["n_heads"], c["n_kv_heads"], c["dim"] // c["n_heads"]
        emb = self.p("model.embed_tokens.weight")
        x = F.embedding(tokens, emb)
        mask = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)
        for l in range(c["n_layers"]):
            pre = f"model.layers.{l}."
            y = self.norm(x, pre + "input_layernorm.weight")
            q = self.rope(self.linear(y, pre + "self_attn.q_proj").view(b, t, h, hd), t) * (1.0 / math.sqrt(hd))
            k = self.rope(self.linear(y, pre + "self_attn.k_proj").view(b, t, kvh, hd), t)
            v = self.linear(y, pre + "self_attn.v_proj").view(b, t, kvh, hd)
            q = q.transpose(1, 2)
            k = k.transpose(1, 2).repeat_interleave(h // kvh, dim=1)
            v = v.transpose(1, 2).repeat_interleave(h // kvh, dim=1)
            if sdpa:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
            else:
                s = (q @ k.transpose(-1, -2)).masked_fill(mask, float("-inf"))
                o = torch.softmax(s, dim=-1) @ v
            x = x + self.linear(o.transpose(1, 2).reshape(b, t, h * hd), pre + "self_attn.o_proj")
            y = self.norm(x, pre + "post_attention_layernorm.weight")
            x = x + self.linear(F.silu(self.linear(y, pre + "mlp.gate_proj")) * self.linear(y, pre + "mlp.up_proj"),
                                pre + "mlp.down_proj")
        x = self.norm(x, "model.norm.weight")
        head = emb if c["tie_embeddings"] else self.p("lm_head.weight")
        logits = x @ head.t()
        return F.cross_entropy(logits.view(b * t, -1), targets)

    @torch.no_grad()
    def requantize(self):
        for base in self.wq:
            self.wq[base] = requant(self.p(base + ".weight"), self.cfg["group_size"])


def make(dump, device):
    tensors, _ = read_safetensors(f"{dump}/train_init.safetensors")
    info = json.load(open(f"{dump}/train_losses.json"))
    cfg = info["config"]
    model = Llama(cfg, tensors, device)
    decay = [p for n, p in model.params.items() if p.dim() == 2]
    no_decay = [p for n, p in model.params.items() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": info["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=info["lr"], betas=(info["beta1"], info["beta2"]), eps=info["eps"], fused=True)
    b, t = info["batch"], info["seq"]
    tokens = read_i32(f"{dump}/train_inputs.i32").view(b, t).long().to(device)
    targets = read_i32(f"{dump}/train_targets.i32").long().to(device)
    return model, opt, tokens, targets, info


def step(model, opt, tokens, targets, sdpa):
    opt.zero_grad(set_to_none=True)
    loss = model(tokens, targets, sdpa)
    loss.backward()
    opt.step()
    model.requantize()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"

    model, opt, tokens, targets, info = make(args.dump, dev)
    cfg = info["config"]
    losses = [step(model, opt, tokens, targets, False).item() for _ in range(len(info["losses"]))]
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, info["losses"]))
    print("losses, wgtrain: " + " ".join(f"{x:.6f}" for x in info["losses"]))
    print("losses, PyTorch: " + " ".join(f"{x:.6f}" for x in losses))
    print(f"largest relative difference over {len(losses)} steps: {worst:.2e}", flush=True)

    b, t = info["batch"], info["seq"]
    d = cfg["dim"]
    flops = info["flops"]  # wgtrain's one count for every runtime's row (train_step_flops in src/cli/bench.cpp)
    preset = {640: "base", 384: "small", 128: "tiny"}.get(d, "model")
    shape = f"{preset} {b}x{t}"
    with open(args.json, "w") as out:
        out.write(json.dumps({"name": "train_step loss check", "shape": shape, "wgtrain": info["losses"],
                              "torch": losses, "max_rel_diff": worst}) + "\n")
        for sdpa, name in ((False, "train_step"), (True, "train_step (torch SDPA)")):
            model, opt, tokens, targets, info = make(args.dump, dev)
            for _ in range(3):
                step(model, opt, tokens, targets, sdpa)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.steps):
                step(model, opt, tokens, targets, sdpa)
            end.record()
            torch.cuda.synchronize()
            seconds = start.elapsed_time(end) / 1e3 / args.steps
            mem = torch.cuda.max_memory_allocated() / 2**30
            print(f"{name:26s} {shape:14s} {seconds * 1e3:9.2f} ms  {b * t / seconds:9.0f} tokens/s  "
                  f"{flops / seconds * 1e-12:6.2f} TFLOP/s  peak memory {mem:.1f} GiB", flush=True)
            out.write(json.dumps({"name": name, "shape": shape, "flops": flops, "bytes": 0, "seconds": seconds,
                                  "reps": args.steps, "device": torch.cuda.get_device_name(),
                                  "backend": "torch " + torch.__version__}) + "\n")
            del model, opt
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
