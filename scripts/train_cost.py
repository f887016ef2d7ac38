"""CPU seconds per 1,000 tokens of one LoRA training step on a real-weight preset.

One forward + backward + AdamW step on single rows of real code (cad_outlines/decoding/
generator.py, tokenized) of each length, one torch thread, process CPU time. The numbers
in docs/models.md come from this script:

    python scripts/train_cost.py qwen2.5-coder-0.5b-base --dtype float32 --layers 6 --lengths 512 2048 4096
    python scripts/train_cost.py qwen2.5-coder-0.5b-base --dtype bfloat16 --layers 6
    python scripts/train_cost.py qwen2.5-coder-0.5b-base --dtype bfloat16 --layers 0
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("preset")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--layers", type=int, default=6, help="LoRA on the top N layers (0: all)")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    args = parser.parse_args()
    torch.set_num_threads(1)
    from peft import LoraConfig, get_peft_model

    from cad_outlines.tools.weights import load_real

    model, tokenizer = load_real(args.preset, adapter=False, dtype=args.dtype)
    source = (Path(__file__).resolve().parents[1] / "cad_outlines" / "decoding" / "generator.py").read_text()
    ids = tokenizer(source * 8)["input_ids"]
    total = model.config.num_hidden_layers
    layers = list(range(total - args.layers, total)) if args.layers else None
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] if layers else "all-linear"
    model = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules=targets,
                                             layers_to_transform=layers, task_type="CAUSAL_LM"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    print(f"{args.preset} {args.dtype} LoRA r={args.rank} on {'all' if not layers else f'top {args.layers}'} layers")
    for n in args.lengths:
        x = torch.tensor([ids[:n]])
        labels = x.clone()
        labels[:, :n // 2] = -100
        cpu = time.process_time()
        model(input_ids=x, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
        spent = time.process_time() - cpu
        print(f"{n:6d} tokens: {spent:7.1f} CPU s, {spent / n * 1000:5.1f} s per 1,000 tokens", flush=True)


if __name__ == "__main__":
    main()
