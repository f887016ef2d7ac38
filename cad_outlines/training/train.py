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

import contextlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch

from ..errors import InputError
from ..files import atomic_write
from .corpus import Case
from .sft import IGNORE, RowBuilder

__all__ = ["TrainConfig", "case_rows", "collate", "optimizer", "regen_row", "rows_digest", "rows_for", "train",
           "train_step", "training_order"]

#: One training row: input ids and their labels (:data:`IGNORE`: no loss).
Row = tuple[list[int], list[int]]
LAYOUTS = ("cad", "regen")


@dataclass
class TrainConfig:
    """Everything that determines a run (written beside the adapter)."""

    base: str = "smollm2-135m-base"
    layout: str = "cad"
    prompt_style: str = "full"  # the prompt layout, program or plain (adapters/_view.py)
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
    # The v2 recipe's cost cuts (defaults keep the first adapters' runs exactly as they were):
    dtype: str = "float32"  # the frozen base's dtype; "bfloat16" halves a CPU step where AVX512-BF16 exists
    lora_layers: int = 0  # LoRA on the top N decoder layers only (0: every layer)
    sparse_logits: bool = False  # the output layer only at labelled positions (same loss)
    long_tokens: int = 0  # curriculum: no row over this many ids in the first third of the steps (0: off)
    init_adapter: str = ""  # start from this adapter's weights (a shipped adapter's name or a folder; "": fresh LoRA)


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


def train_step(model: Any, opt: Any, sched: Any, batch: Sequence[Row], pad_id: int,
               sparse_logits: bool = False) -> float:
    """One optimiser step on ``batch``; its loss.

    ``sparse_logits``: run the output layer only where a label is predicted (the mean
    cross-entropy over labelled tokens, as transformers computes it). A CaD row labels
    ~50 of ~1,800 ids and Qwen2.5's output layer is a fifth of its forward, so this cuts
    a step by about that much (docs/learn.md).
    """
    ids, attn, labels = collate(batch, pad_id)
    with _recompute_if_long(model, ids.numel()):
        loss = _loss(model, ids, attn, labels, sparse_logits)
        opt.zero_grad(set_to_none=True)
        loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    sched.step()
    return float(loss.detach())


#: Batches of more tokens than this keep only each layer's input in the forward and
#: recompute the rest in the backward (gradient checkpointing).
RECOMPUTE_TOKENS = 6144


@contextlib.contextmanager
def _recompute_if_long(model: Any, tokens: int) -> Iterator[None]:
    """Gradient checkpointing for this step when it is long. A 12K-token row kept ~12 GB of
    activations in the LoRA layers and, with the model, reached 20.5 GB: OOM on a 24 GB
    machine. Short steps (most of them) keep the faster path."""
    if tokens <= RECOMPUTE_TOKENS:
        yield
        return
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    try:
        yield
    finally:
        base.gradient_checkpointing_disable()


def _loss(model: Any, ids: torch.Tensor, attn: torch.Tensor, labels: torch.Tensor,
          sparse_logits: bool) -> torch.Tensor:
    if sparse_logits:
        # position p predicts id p+1: keep the positions whose next id is labelled
        keep = (labels[:, 1:] != IGNORE).any(dim=0).nonzero().flatten()
        return _chunked_loss(model, ids, attn, keep, labels[:, keep + 1])
    return model(input_ids=ids, attention_mask=attn, labels=labels).loss


#: Labelled positions whose logits exist at once in :func:`_chunked_loss`.
LOSS_CHUNK = 1024


def _chunked_loss(model: Any, ids: torch.Tensor, attn: torch.Tensor, keep: torch.Tensor,
                  target: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy at positions ``keep``, the output layer run ``LOSS_CHUNK``
    positions at a time and recomputed in the backward pass.

    A regeneration row labels every token of the edited file: at 6,000 labelled tokens
    Qwen2.5's 151,936-way logits, their float copy, softmax and gradients took ~14 GB,
    and the step OOM-killed the run on a 24 GB machine. Chunked, they take one chunk's.
    """
    from torch.utils.checkpoint import checkpoint

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = base.get_decoder()(input_ids=ids, attention_mask=attn).last_hidden_state[:, keep]
    head = base.get_output_embeddings()
    total = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, hidden.shape[1], LOSS_CHUNK):
        total = total + checkpoint(_loss_sum, head, hidden[:, start:start + LOSS_CHUNK],
                                   target[:, start:start + LOSS_CHUNK], use_reentrant=False)
    return total / (target != IGNORE).sum().clamp(min=1)


def _loss_sum(head: Any, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    logits = head(hidden).float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                             ignore_index=IGNORE, reduction="sum")


def regen_row(adapter: Any, case: Case, prompt_style: str = "full") -> Row:
    """The regeneration row of ``case``: plain prompt (in ``prompt_style``), then the edited
    file and the end token."""
    prompt = adapter.plain_prompt_ids(case.doc, case.meta["instruction"], prompt_style)
    answer = adapter.encode(case.gold) + [adapter.eos_token_id]
    return prompt + answer, [IGNORE] * len(prompt) + answer


def case_rows(cases: Iterable[Case], tokenizer: Any, layout: str, max_tokens: int,
              prompt_style: str = "full") -> tuple[list[tuple[Case, Row]], int]:
    """Each kept case with its row in ``layout`` (prompts in ``prompt_style``), in order;
    and how many were dropped for ``max_tokens``."""
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    builder = RowBuilder(tokenizer, prompt_style=prompt_style)
    kept, dropped = [], 0
    for case in cases:
        if layout == "cad":
            row = builder.row(case.doc, builder.oracle(case.doc, case.gold), case.meta["instruction"], case.id)
            ids, labels = row.input_ids, row.labels
        else:
            ids, labels = regen_row(builder.adapter, case, prompt_style)
        if len(ids) > max_tokens:
            dropped += 1
            continue
        kept.append((case, (ids, labels)))
    return kept, dropped


def rows_for(cases: Iterable[Case], tokenizer: Any, layout: str, max_tokens: int,
             prompt_style: str = "full") -> tuple[list[Row], int]:
    """Rows of ``cases`` in ``layout`` (prompts in ``prompt_style``); and how many
    were dropped for ``max_tokens``."""
    kept, dropped = case_rows(cases, tokenizer, layout, max_tokens, prompt_style)
    return [row for _, row in kept], dropped


def training_order(rows: Sequence[Row], seed: int, long_tokens: int, early: int) -> list[int]:
    """The order a run takes ``rows`` in: shuffled by ``seed``, then, with ``long_tokens``,
    no row longer than that among the first ``early`` (:func:`curriculum`)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    if long_tokens:
        order = curriculum(order, [len(ids) for ids, _ in rows], long_tokens, early)
    return order


def _lora(model: Any, cfg: TrainConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    layers = None
    if cfg.lora_layers:
        total = model.config.num_hidden_layers
        layers = list(range(max(0, total - cfg.lora_layers), total))
    # layers_to_transform needs named modules; these are "all-linear" of the decoder blocks.
    targets = ("all-linear" if layers is None else
               ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    config = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=0.0, target_modules=targets,
                        layers_to_transform=layers, task_type="CAUSAL_LM")
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
    model, tokenizer = build(cfg.base, dtype=cfg.dtype)
    rows, dropped = rows_for(cases, tokenizer, cfg.layout, cfg.max_tokens, cfg.prompt_style)
    if not rows:
        raise InputError("no training row fits --max-tokens")
    checkpoint = out / "checkpoint"
    state = torch.load(checkpoint / "state.pt", weights_only=False) if (checkpoint / "state.pt").is_file() else None
    # The curriculum's early share is a third of the steps the run was *started* with, so
    # a run resumed with more steps keeps the order (and the rows' digest) it began with.
    order_steps = cfg.steps if state is None else state.get("order_steps", state["config"]["steps"])
    order = training_order(rows, cfg.seed, cfg.long_tokens, order_steps * cfg.batch_size // 3)
    model = _lora(model, cfg)
    model.train()
    opt, sched = optimizer(model, cfg.lr, cfg.steps, floor=0.1)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    step, losses = 0, []
    data = rows_digest(rows, order)
    init_sha256 = _init_from(model, cfg) if cfg.init_adapter and state is None else None
    if state is not None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        # more steps (a longer run) and other thread counts resume; anything else would
        # silently train a different recipe
        kept = {k: v for k, v in state.get("config", {}).items() if k not in ("threads", "steps")}
        now = {k: v for k, v in asdict(cfg).items() if k not in ("threads", "steps")}
        if state.get("data", data) != data:
            raise InputError(f"{checkpoint}: the checkpoint was trained on other rows (the mix or the "
                             "tokenizer changed since); use another --output")
        changed = settings_changed(kept, now) if kept else []
        if changed:
            raise InputError(f"{checkpoint}: the checkpoint was made with other settings ({', '.join(changed)}); "
                             "resume with the same command or use another --output")
        init_sha256 = state.get("init_sha256")
        set_peft_model_state_dict(model, {k: v.float() for k, v in
                                          load_file(str(checkpoint / "adapter" / "adapter_model.safetensors")).items()})
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step, losses = state["step"], state["losses"]
    log_path = out / "log.jsonl"
    if log_path.is_file():
        # steps logged after the last checkpoint are trained again; keep one row per step
        kept_rows = [line for line in log_path.read_text(encoding="utf-8").splitlines(keepends=True)
                     if line.strip() and json.loads(line)["step"] <= step]
        atomic_write(log_path, "".join(kept_rows))
    cpu0 = time.process_time()
    with open(log_path, "a", encoding="utf-8") as log_file:
        while step < cfg.steps:
            batch = [rows[order[(step * cfg.batch_size + b) % len(rows)]] for b in range(cfg.batch_size)]
            lr = sched.get_last_lr()[0]  # this step's; logged, since a resumed longer run changes the schedule
            loss = train_step(model, opt, sched, batch, pad, cfg.sparse_logits)
            losses.append(loss)
            step += 1
            record = {"step": step, "loss": round(loss, 5), "lr": float(f"{lr:.4g}"),
                      "tokens": sum(len(ids) for ids, _ in batch),
                      "cpu_s": round(time.process_time() - cpu0, 2)}
            log_file.write(json.dumps(record) + "\n")
            log_file.flush()
            if log is not None:
                log(record)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                _save_adapter(model, checkpoint / "adapter", half=False)
                staging = checkpoint / "state.pt.tmp"
                torch.save({"opt": opt.state_dict(), "sched": sched.state_dict(), "step": step,
                            "losses": losses, "config": asdict(cfg), "data": data,
                            "order_steps": order_steps, "init_sha256": init_sha256}, staging)
                staging.replace(checkpoint / "state.pt")
    _save_adapter(model, out / "adapter")
    window = max(1, len(losses) // 10)
    record = {"config": asdict(cfg), "order_steps": order_steps, "rows": len(rows), "data_sha256": data, "dropped_over_max_tokens": dropped,
              "row_tokens_mean": round(sum(len(r[0]) for r in rows) / len(rows), 1),
              "loss_first_10pct": round(sum(losses[:window]) / window, 4),
              "loss_last_10pct": round(sum(losses[-window:]) / window, 4),
              "loss_curve": [round(sum(losses[i:i + window]) / len(losses[i:i + window]), 4)
                             for i in range(0, len(losses), window)],
              "torch": torch.__version__}
    if init_sha256:
        record["init_adapter_sha256"] = init_sha256
    atomic_write(out / "record.json", json.dumps(record, indent=1) + "\n")
    return record


def settings_changed(kept: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``"key: old -> new"`` for each setting of ``now`` that differs from the checkpoint's
    ``kept`` (nested in ``mix`` too). A setting added after the checkpoint was made, absent
    from ``kept``, matches while ``now`` leaves it empty (its default then changes nothing)."""
    changed = []
    for key in sorted(now):
        if key not in kept and not now[key]:
            continue
        old, new = kept.get(key), now[key]
        if isinstance(old, dict) and isinstance(new, dict):
            changed += [f"{key}.{c}" for c in settings_changed(old, new)]
        elif old != new:
            changed.append(f"{key}: {old!r} -> {new!r}")
    return changed


def adapter_folder(name_or_dir: str) -> Path:
    """An adapter's folder: ``name_or_dir`` itself when it is a folder (a run's
    ``adapter/``), else the shipped adapter of that name (:class:`InputError` when none)."""
    from ..tools.weights import adapter_dir

    return Path(name_or_dir) if Path(name_or_dir).is_dir() else adapter_dir(name_or_dir)


def _init_from(model: Any, cfg: TrainConfig) -> str:
    """Load ``cfg.init_adapter``'s weights into the fresh LoRA ``model``; their SHA-256.

    The adapter must have the run's shape (rank, alpha, layers), or the run would silently
    train another one; a warm start continues a shipped model on a new mix."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    from ..tools.weights import adapter_sha256

    folder = adapter_folder(cfg.init_adapter)
    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        weights = folder / "adapter_model.safetensors"
        digest = adapter_sha256(folder)
    except (OSError, ValueError) as err:
        raise InputError(f"--init-adapter {cfg.init_adapter}: cannot read the adapter: {err}") from None
    total = model.get_base_model().config.num_hidden_layers
    layers = list(range(total - cfg.lora_layers, total)) if cfg.lora_layers else None
    theirs = (config.get("r"), config.get("lora_alpha"), config.get("layers_to_transform"))
    if theirs != (cfg.rank, cfg.alpha, layers):
        raise InputError(f"--init-adapter {cfg.init_adapter}: rank {theirs[0]}, alpha {theirs[1]}, layers "
                         f"{theirs[2]} differ from this run's {cfg.rank}, {cfg.alpha}, {layers}")
    result = set_peft_model_state_dict(model, {k: v.float() for k, v in load_file(str(weights)).items()})
    missing = [k for k in getattr(result, "missing_keys", ()) if "lora_" in k]
    if missing:
        raise InputError(f"--init-adapter {cfg.init_adapter}: the adapter lacks {len(missing)} LoRA weights "
                         f"of this model (first: {missing[0]})")
    return digest


def rows_digest(rows: Sequence[Row], order: Sequence[int]) -> str:
    """A digest of the rows in training order (a resumed run must see the same data)."""
    import hashlib

    digest = hashlib.sha256()
    for i in order:
        digest.update(repr(rows[i]).encode())
    return digest.hexdigest()


def curriculum(order: list[int], lengths: Sequence[int], long_tokens: int, early: int) -> list[int]:
    """``order`` with no row longer than ``long_tokens`` among its first ``early`` items
    (short rows first teach the format cheaply; the long ones follow, still shuffled)."""
    short = [i for i in order if lengths[i] <= long_tokens]
    long = [i for i in order if lengths[i] > long_tokens]
    head = short[:early]
    rest = short[early:] + long
    random.Random(len(order)).shuffle(rest)
    return head + rest


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
                       out: str | os.PathLike, *, log: Any = None, mix_version: int = 1,
                       mix_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The shipped adapters' recipe: the corpora's train split made into ``cases`` edits
    (``cfg.seed``) by :func:`~cad_outlines.training.edits.make_mix` (``mix_version=1``:
    8-24-line windows, one sentence per kind) or :func:`~cad_outlines.training.edits.make_mix_v2`
    (2: whole files, a person's words, lazy snippets, real commits; ``mix_settings``: other
    values of :class:`~cad_outlines.training.edits.MixV2Config`'s ``buckets``, ``forms``,
    ``commit_share``, ``kinds``), then :func:`train`."""
    from .edits import MixConfig, MixV2Config, make_mix, make_mix_v2

    if mix_version not in (1, 2):
        raise InputError(f"mix version must be 1 or 2, got {mix_version!r}")
    if mix_settings and mix_version != 2:
        raise InputError("buckets, forms, commit share and kinds are settings of the v2 mix (--mix 2)")
    if mix_version == 1:
        mix = MixConfig(seed=cfg.seed, cases=cases, split="train")
    else:
        mix = MixV2Config(seed=cfg.seed, cases=cases, split="train", **(mix_settings or {}))
    cfg.mix = {**asdict(mix), "corpora": [Path(p).name for p in paths]}
    make = make_mix if mix_version == 1 else make_mix_v2
    return train(make(load_records(paths), mix), cfg, out, log=log)
