"""LoRA fine-tuning of a real model on the project's own rows, checkpointed and resumable.

Two layouts of the same edits, the same base, steps, order and seed:

* ``cad``: the rows of :mod:`cad_outlines.training.sft` (the adapter's prompt, the oracle
  program with each copy's spliced span after its tag, loss on program tokens);
* ``regen``: the plain prompt (``Adapter.plain_prompt_ids``: the file as it is) and the
  whole edited file then the end token, loss on the answer.

The training step (AdamW, warm-up + cosine, right-padded batches, loss on labelled
positions, gradients clipped to norm 1) is the one the small from-scratch benchmarks use.
A checkpoint (adapter, optimizer, scheduler, step, loss log) is written atomically every
``checkpoint_every`` steps; a run started again on the same folder resumes from it.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from ..errors import InputError
from ..files import atomic_write
from .corpus import Case
from .sft import IGNORE, RowBuilder

__all__ = ["TrainConfig", "collate", "optimizer", "regen_row", "rows_for", "train", "train_step"]

#: One training row: input ids and their labels (:data:`IGNORE`: no loss).
Row = tuple[list[int], list[int]]
LAYOUTS = ("cad", "regen")


@dataclass
class TrainConfig:
    """Everything that determines a run (written beside the adapter)."""

    base: str = "smollm2-135m-base"
    layout: str = "cad"
    prompt_style: str = "full"  # the cad layout's prompt (adapters/_view.py)
    steps: int = 600
    batch_size: int = 1
    lr: float = 1e-3
    rank: int = 8
    alpha: int = 16
    seed: int = 0
    max_tokens: int = 1024  # rows longer than this are dropped (and counted)
    checkpoint_every: int = 25
    threads: int = 1
    mix: dict[str, Any] = field(default_factory=dict)  # the data recipe, recorded as given


def optimizer(model: Any, lr: float, steps: int, floor: float = 0.0) -> tuple[Any, Any]:
    """AdamW over the trainable parameters and its warm-up + cosine schedule over ``steps``."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, steps // 20)

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_at)


def collate(batch: Sequence[Row], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad ``batch``: ``(input_ids, attention_mask, labels)``."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    attn = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (seq, lab) in enumerate(batch):
        ids[i, :len(seq)] = torch.tensor(seq)
        labels[i, :len(seq)] = torch.tensor(lab)
        attn[i, :len(seq)] = 1
    return ids, attn, labels


def train_step(model: Any, opt: Any, sched: Any, batch: Sequence[Row], pad_id: int) -> float:
    """One optimiser step on ``batch``; its loss."""
    ids, attn, labels = collate(batch, pad_id)
    loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    sched.step()
    return float(loss.detach())


def regen_row(adapter: Any, case: Case) -> Row:
    """The regeneration row of ``case``: plain prompt, then the edited file and the end token."""
    prompt = adapter.plain_prompt_ids(case.doc, case.meta["instruction"])
    answer = adapter.encode(case.gold) + [adapter.eos_token_id]
    return prompt + answer, [IGNORE] * len(prompt) + answer


def rows_for(cases: Iterable[Case], tokenizer: Any, layout: str, max_tokens: int,
             prompt_style: str = "full") -> tuple[list[Row], int]:
    """Rows of ``cases`` in ``layout`` (``cad`` prompts in ``prompt_style``); and how many
    were dropped for ``max_tokens``."""
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    builder = RowBuilder(tokenizer, prompt_style=prompt_style)
    rows, dropped = [], 0
    for case in cases:
        if layout == "cad":
            row = builder.row(case.doc, builder.oracle(case.doc, case.gold), case.meta["instruction"], case.id)
            ids, labels = row.input_ids, row.labels
        else:
            ids, labels = regen_row(builder.adapter, case)
        if len(ids) > max_tokens:
            dropped += 1
            continue
        rows.append((ids, labels))
    return rows, dropped


def _lora(model: Any, cfg: TrainConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=0.0, target_modules="all-linear",
                        task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def _save_adapter(model: Any, folder: Path, half: bool = True) -> None:
    """The adapter; ``half``: its weights as float16 (half the size; merged into fp32 at
    load). Checkpoints keep float32, so a resumed run continues exactly."""
    from safetensors.torch import load_file, save_file

    staging = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(str(staging))
    weights = staging / "adapter_model.safetensors"
    if half:
        save_file({k: v.to(torch.float16) for k, v in load_file(str(weights)).items()}, str(weights))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


def train(cases: Sequence[Case], cfg: TrainConfig, out: str | os.PathLike, *,
          log: Any = None) -> dict[str, Any]:
    """Fine-tune ``cfg.base`` on ``cases`` in ``cfg.layout``; write ``out/adapter``.

    ``out`` holds ``checkpoint/`` while the run goes on (resumed from when present),
    ``log.jsonl`` (step, loss, tokens, CPU seconds) and, at the end, ``adapter/`` and
    ``record.json`` (config, data, loss curve summary). Returns the record.
    """
    from ..tools.models import build

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    model, tokenizer = build(cfg.base)
    rows, dropped = rows_for(cases, tokenizer, cfg.layout, cfg.max_tokens, cfg.prompt_style)
    if not rows:
        raise InputError("no training row fits --max-tokens")
    order = list(range(len(rows)))
    random.Random(cfg.seed).shuffle(order)
    model = _lora(model, cfg)
    model.train()
    opt, sched = optimizer(model, cfg.lr, cfg.steps, floor=0.1)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    checkpoint = out / "checkpoint"
    step, losses = 0, []
    if (checkpoint / "state.pt").is_file():
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        state = torch.load(checkpoint / "state.pt", weights_only=False)
        set_peft_model_state_dict(model, {k: v.float() for k, v in
                                          load_file(str(checkpoint / "adapter" / "adapter_model.safetensors")).items()})
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step, losses = state["step"], state["losses"]
    log_path = out / "log.jsonl"
    cpu0 = time.process_time()
    with open(log_path, "a", encoding="utf-8") as log_file:
        while step < cfg.steps:
            batch = [rows[order[(step * cfg.batch_size + b) % len(rows)]] for b in range(cfg.batch_size)]
            loss = train_step(model, opt, sched, batch, pad)
            losses.append(loss)
            step += 1
            record = {"step": step, "loss": round(loss, 5), "tokens": sum(len(ids) for ids, _ in batch),
                      "cpu_s": round(time.process_time() - cpu0, 2)}
            log_file.write(json.dumps(record) + "\n")
            log_file.flush()
            if log is not None:
                log(record)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                _save_adapter(model, checkpoint / "adapter", half=False)
                staging = checkpoint / "state.pt.tmp"
                torch.save({"opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                            "losses": losses}, staging)
                staging.replace(checkpoint / "state.pt")
    _save_adapter(model, out / "adapter")
    window = max(1, len(losses) // 10)
    record = {"config": asdict(cfg), "rows": len(rows), "dropped_over_max_tokens": dropped,
              "row_tokens_mean": round(sum(len(r[0]) for r in rows) / len(rows), 1),
              "loss_first_10pct": round(sum(losses[:window]) / window, 4),
              "loss_last_10pct": round(sum(losses[-window:]) / window, 4),
              "loss_curve": [round(sum(losses[i:i + window]) / len(losses[i:i + window]), 4)
                             for i in range(0, len(losses), window)],
              "torch": torch.__version__}
    atomic_write(out / "record.json", json.dumps(record, indent=1) + "\n")
    return record


def load_records(paths: Sequence[str | os.PathLike]) -> dict[str, list[dict]]:
    """Corpus records by corpus name (``commits_python.jsonl`` -> ``"python"``)."""
    out: dict[str, list[dict]] = {}
    for path in paths:
        name = Path(path).stem.removeprefix("commits_")
        try:
            with open(path, encoding="utf-8") as fh:
                out[name] = [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read the corpus: {err}") from None
    return out


def train_from_corpora(paths: Sequence[str | os.PathLike], cfg: TrainConfig, cases: int,
                       out: str | os.PathLike, *, log: Any = None) -> dict[str, Any]:
    """The shipped adapters' recipe: :func:`~cad_outlines.training.edits.make_mix` over the
    corpora's train split (``cases`` edits, ``cfg.seed``), then :func:`train`."""
    from .edits import MixConfig, make_mix

    mix = MixConfig(seed=cfg.seed, cases=cases, split="train")
    cfg.mix = {**asdict(mix), "corpora": [Path(p).name for p in paths]}
    return train(make_mix(load_records(paths), mix), cfg, out, log=log)
