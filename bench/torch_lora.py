# LoRA fine-tuning with Hugging Face transformers + peft on the same model shapes wgtrain fine-tunes, for
# bench/RESULTS.md: tokens/s and peak GPU memory, in fp32 and in bf16 autocast.
#
#   python3 torch_lora.py --make qwen2.5-0.5b --dir /tmp/qwen05     random-weight checkpoint of that shape (bf16)
#   python3 torch_lora.py --dir /tmp/qwen05 --mode fp32 --json out.json
#
# Same recipe as `wgtrain finetune` in the benchmark: rank 16, alpha 32, all seven projections of every layer,
# AdamW on the adapters only, batch 8 x 512 random tokens with every position a target.
import argparse
import json
import os
import time

import torch

SHAPES = {
    # Qwen2.5-0.5B's config.json, weights random.
    "qwen2.5-0.5b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896,
                         intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         vocab_size=151936, max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         tie_word_embeddings=True, use_sliding_window=False, hidden_act="silu"),
    # Llama-3.2-1B's config.json, weights random.
    "llama3.2-1b": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
                        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                        head_dim=64, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                        rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu"),
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make(shape, out):
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = dict(SHAPES[shape])
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out)
    print(f"wrote {shape} ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters) to {out}")


def bench(args):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as wgtrain computes
    torch.backends.cudnn.allow_tf32 = False
    model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32, attn_implementation="sdpa").cuda()
    model.config.use_cache = False
    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0, target_modules=TARGETS,
                      task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1)
    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (args.batch, args.seq), device="cuda", generator=g)
    torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.mode == "bf16"):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.steps
    result = {"runtime": "transformers+peft", "mode": args.mode, "model": os.path.basename(args.dir.rstrip("/")),
              "batch": args.batch, "seq": args.seq, "rank": args.rank, "trainable_parameters": trainable,
              "ms_per_step": dt * 1e3, "tokens_per_second": args.batch * args.seq / dt,
              "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "loss": float(loss)}
    print(json.dumps(result))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--make", choices=sorted(SHAPES))
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    make(a.make, a.dir) if a.make else bench(a)
