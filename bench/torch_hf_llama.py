"""The training step of `wgtrain bench --only train_step` as a Hugging Face `transformers` user would run it.

From the same --dump directory as torch_llama.py (initial weights, batch, optimizer settings, wgtrain's first losses
and its FLOP count), this builds `LlamaForCausalLM` with the model's config, loads the weights (a q4gsw linear as
its dequantised 4-bit weight, so that the first step's loss is wgtrain's), and trains it plainly: nn.Linear in
float32 (TF32 off), AdamW (fused) with the same settings, no re-quantisation. Three rows:

  fp32, eager attention;  fp32, SDPA;  bf16 autocast, SDPA

each timed over --steps steps after 3 warm-up steps (CUDA events), with torch.cuda.max_memory_allocated over those
steps (reset per row), beside wgtrain's own peak in its train_step row. The loss is cross-entropy of the logits
against the dumped targets (already shifted), as wgtrain computes it. Writes JSON lines like torch_llama.py.
Run on the GPU machine:
    python3 bench/torch_hf_llama.py --dump DIR --json out.json
"""
import argparse
import json

import torch
import torch.nn.functional as F

from torch_llama import dequant_bytes, read_i32, read_safetensors


def hf_model(cfg, tensors, attn):
    from transformers import LlamaConfig, LlamaForCausalLM
    hd = cfg.get("head_dim_override") or cfg["dim"] // cfg["n_heads"]
    config = LlamaConfig(vocab_size=cfg["vocab_size"], hidden_size=cfg["dim"], intermediate_size=cfg["ffn_dim"],
                         num_hidden_layers=cfg["n_layers"], num_attention_heads=cfg["n_heads"],
                         num_key_value_heads=cfg["n_kv_heads"], head_dim=hd, max_position_embeddings=cfg["max_seq_len"],
                         rms_norm_eps=cfg["norm_eps"], rope_theta=cfg["rope_theta"],
                         tie_word_embeddings=cfg["tie_embeddings"], attention_bias=False, mlp_bias=False,
                         hidden_act="silu", use_cache=False, attn_implementation=attn)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).float()
    state = {}
    for name, t in tensors.items():
        if name.endswith(".qweight") or name.endswith(".scales"):
            continue
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if base is not None and base + ".qweight" in tensors:
            t = dequant_bytes(tensors[base + ".qweight"], tensors[base + ".scales"], t.shape[1], cfg["group_size"])
        state[name] = t
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A tied head has no lm_head.weight of its own; nothing else may be missing.
    missing = [m for m in missing if not (cfg["tie_embeddings"] and m == "lm_head.weight")]
    if missing or unexpected:
        raise SystemExit(f"weights do not fit LlamaForCausalLM: missing {missing}, unexpected {unexpected}")
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import transformers

    tensors, _ = read_safetensors(f"{args.dump}/train_init.safetensors")
    info = json.load(open(f"{args.dump}/train_losses.json"))
    cfg = info["config"]
    b, t = info["batch"], info["seq"]
    tokens = read_i32(f"{args.dump}/train_inputs.i32").view(b, t).long().cuda()
    targets = read_i32(f"{args.dump}/train_targets.i32").long().cuda()
    flops = info["flops"]  # wgtrain's one count for every runtime's row (train_step_flops in src/cli/bench.cpp)
    preset = {640: "base", 384: "small", 128: "tiny"}.get(cfg["dim"], "model")
    shape = f"{preset} {b}x{t}"
    rows = (("fp32 eager", "eager", False), ("fp32 SDPA", "sdpa", False), ("bf16 autocast SDPA", "sdpa", True))
    with open(args.json, "w") as out:
        for label, attn, autocast in rows:
            model = hf_model(cfg, tensors, attn)
            decay = [p for n, p in model.named_parameters() if p.dim() == 2]
            no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": info["weight_decay"]},
                                     {"params": no_decay, "weight_decay": 0.0}],
                                    lr=info["lr"], betas=(info["beta1"], info["beta2"]), eps=info["eps"], fused=True)

            def step():
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                    logits = model(input_ids=tokens).logits
                loss = F.cross_entropy(logits.float().view(b * t, -1), targets)
                loss.backward()
                opt.step()
                return loss

            first = step().item()
            for _ in range(2):
                step()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.steps):
                step()
            end.record()
            torch.cuda.synchronize()
            seconds = start.elapsed_time(end) / 1e3 / args.steps
            peak = torch.cuda.max_memory_allocated()
            name = f"train_step (transformers {label})"
            print(f"{name:40s} {shape:14s} {seconds * 1e3:9.2f} ms  {b * t / seconds:9.0f} tokens/s  "
                  f"{flops / seconds * 1e-12:6.2f} TFLOP/s  peak memory {peak / 2**30:.2f} GiB  "
                  f"first loss {first:.6f} (wgtrain {info['losses'][0]:.6f})", flush=True)
            out.write(json.dumps({"name": name, "shape": shape, "flops": flops, "bytes": 0, "seconds": seconds,
                                  "reps": args.steps, "peak_bytes": peak, "first_loss": first,
                                  "wgtrain_first_loss": info["losses"][0], "device": torch.cuda.get_device_name(),
                                  "backend": f"transformers {transformers.__version__}, torch {torch.__version__}"})
                      + "\n")
            del model, opt
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
