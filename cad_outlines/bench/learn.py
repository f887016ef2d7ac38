"""A model that edits by itself, trained here: CaD programs vs whole-file regeneration.

The run trains two same-size models
from scratch on one synthetic edit family and decodes held-out edits through the real
loop:

* **CaD**: trained on the SFT rows of :mod:`cad_outlines.training.sft` (prompt, oracle program,
  spliced copies, loss on program tokens); decoded by :class:`CaDGenerator.run` —
  model-chosen, constrained, spliced, nothing forced;
* **regeneration**: trained on the same prompts with the whole edited file (then the end
  token) as the target; decoded by :meth:`CaDGenerator.regenerate` — the same loop's
  unconstrained branch, one token per forward — with the same token budget.

Same tokenizer, architecture, initial weights, data, curriculum, steps and optimiser;
only the target differs.

The task
--------
Files of ``min_lines..max_lines`` short, distinct, indented Python-like statements over
a few identifiers; one edit per case, stated with line numbers, as in the prompt's numbered
view: ``delete line k``, ``replace line k with: TEXT``, ``insert after line k: TEXT``.
A warm-up share of *identity* edits (``keep the file unchanged``) teaches both models to
copy first (the curriculum): they are most of the first ``warmup_share`` of the steps
and a small share afterwards. Held-out cases are new files never trained on.

Everything is seeded: byte-level BPE tokenizer trained with ``tokenizers`` (the adapters'
generic family accepts it after its round-trip probes), ``Qwen2ForCausalLM`` from a
config, AdamW; training stops early when the smoothed loss stops improving.
"""

from __future__ import annotations

import math
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import torch

from ..training.corpus import Case
from ..decoding.generator import CaDGenerator
from ..language.program import ProgramParseError, parse
from ..language.syntax import GEN_CLOSE, GEN_OPEN, PROGRAM_CLOSE, PROGRAM_OPEN, copy_tag
from ..language.resolver import ResolveError, resolve
from ..training.sft import IGNORE, RowBuilder
from ._common import environment
from ._train import Row, byte_level_bpe, optimizer, train_step

__all__ = ["LearnConfig", "format_table", "make_cases", "run"]

EOS, PAD = "<|endoftext|>", "<|pad|>"
INDENT = "    "
_NAMES = ("x", "y", "z", "n", "total", "count")
_TEMPLATES = ("{a} = {b} + {k}", "{a} = {b} * {k}", "{a} = {k}", "print({a})", "return {a}",
              "{a} += {k}", "if {a} > {k}:", "del {a}")


@dataclass
class LearnConfig:
    """Everything that determines a run (reported with the results)."""

    seed: int = 0
    train_cases: int = 4000
    eval_cases: int = 100
    min_lines: int = 4
    max_lines: int = 8
    steps: int = 1600  # per model (an upper bound: early stop)
    warmup_share: float = 0.15  # first share of steps: mostly identity edits
    identity_share: float = 0.1  # identity edits after the warm-up
    batch_size: int = 16
    lr: float = 2e-3
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4
    vocab_target: int = 384
    patience: int = 400  # steps without a 2 % better smoothed loss before stopping ...
    min_share: float = 0.5  # ... but never before this share of the steps (a plateau
    # often precedes the drop where a small model learns to copy)
    max_new_tokens: int = 160  # decode budget per edit, both models
    threads: int = 1
    models: tuple[str, ...] = ("cad", "regen")  # which of the two models to train

    @classmethod
    def tiny(cls, **overrides: Any) -> "LearnConfig":
        """A CI-sized run (tens of seconds): smaller model, few steps, few cases."""
        base = dict(train_cases=300, eval_cases=6, steps=150, batch_size=16, hidden_size=64,
                    heads=2, vocab_target=320, patience=10_000, max_new_tokens=96)
        base.update(overrides)
        return cls(**base)


# --- data ----------------------------------------------------------------------------


def _line(rng: random.Random) -> str:
    a, b = rng.sample(_NAMES, 2)
    # Indented, as in a function body: then every word is the same token in the prompt's
    # numbered view ("3|     x = 1") and in the file (" x" after the indent), so copying a
    # line is copying tokens (at a line start "x" and " x" would be different tokens).
    return INDENT + rng.choice(_TEMPLATES).format(a=a, b=b, k=rng.randint(0, 9))


def _lines(rng: random.Random, n: int, avoid: set[str] = frozenset()) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        line = _line(rng)
        if line not in out and line not in avoid:  # distinct lines: copies are unambiguous
            out.append(line)
    return out


def make_case(rng: random.Random, cfg: LearnConfig, kind: str, case_id: str) -> Case:
    """One edit of ``kind`` (``identity``, ``delete``, ``replace``, ``insert``)."""
    lines = _lines(rng, rng.randint(cfg.min_lines, cfg.max_lines))
    doc = "\n".join(lines) + "\n"
    k = rng.randint(1, len(lines))
    new = _lines(rng, 1, set(lines))[0]
    if kind == "identity":
        gold_lines, instruction = lines, "keep the file unchanged"
    elif kind == "delete":
        gold_lines, instruction = lines[:k - 1] + lines[k:], f"delete line {k}"
    elif kind == "replace":
        gold_lines, instruction = lines[:k - 1] + [new] + lines[k:], f"replace line {k} with: {new.strip()}"
    elif kind == "insert":
        gold_lines, instruction = lines[:k] + [new] + lines[k:], f"insert after line {k}: {new.strip()}"
    else:
        raise ValueError(f"unknown edit kind {kind!r}")
    return Case(case_id, doc, "\n".join(gold_lines) + "\n", {"instruction": instruction, "kind": kind})


def make_cases(cfg: LearnConfig) -> tuple[list[Case], list[Case]]:
    """Seeded train and held-out cases; held-out documents never occur in training."""
    rng = random.Random(cfg.seed)
    kinds = ("delete", "replace", "insert")
    train = [make_case(rng, cfg, "identity" if i % 4 == 0 else kinds[i % 3], f"train-{i}")
             for i in range(cfg.train_cases)]
    seen = {c.doc for c in train}
    held: list[Case] = []
    while len(held) < cfg.eval_cases:
        case = make_case(rng, cfg, kinds[len(held) % 3], f"eval-{len(held)}")
        if case.doc not in seen:
            held.append(case)
    return train, held


# --- tokenizer, model ----------------------------------------------------------------


def build_tokenizer(cases: Sequence[Case], vocab_size: int) -> Any:
    """Byte-level BPE trained on the cases' prompts and targets, as a fast tokenizer."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    from ..adapters._view import format_statement, number_lines

    texts = [format_statement("lines"), PROGRAM_OPEN + PROGRAM_CLOSE, copy_tag("lines", 1, 2),
             GEN_OPEN + GEN_CLOSE]
    for case in cases:
        texts += [case.meta["instruction"], number_lines(case.doc), case.gold]
    tk = byte_level_bpe(texts, vocab_size, [EOS, PAD])
    # The prompt's format statement is the same in every row: one added (non-special)
    # token holds it, which cuts ~170 byte-level pieces from every sequence. The adapter
    # keeps non-special added tokens, so it is still ordinary text to the loop.
    tk.add_tokens([AddedToken(format_statement("lines"), normalized=False, special=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=EOS, pad_token=PAD)


def build_model(tok: Any, cfg: LearnConfig, max_positions: int) -> Any:
    """A small ``Qwen2ForCausalLM`` with seeded random weights."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(cfg.seed)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=cfg.hidden_size,
                         intermediate_size=cfg.hidden_size * 4, num_hidden_layers=cfg.layers,
                         num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads,
                         max_position_embeddings=max_positions, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         bos_token_id=None)
    return Qwen2ForCausalLM(config)


# --- training rows ---------------------------------------------------------------------


@dataclass
class _Rows:
    identity: list[Row] = field(default_factory=list)
    edits: list[Row] = field(default_factory=list)

    def add(self, case: Case, ids: list[int], labels: list[int]) -> None:
        (self.identity if case.meta["kind"] == "identity" else self.edits).append((ids, labels))

    @property
    def longest(self) -> int:
        return max(len(ids) for ids, _ in self.identity + self.edits)


def cad_rows(cases: Sequence[Case], builder: RowBuilder) -> _Rows:
    """The SFT rows of :mod:`cad_outlines.training.sft` (oracle program, splice layout)."""
    rows = _Rows()
    for case in cases:
        row = builder.row(case.doc, builder.oracle(case.doc, case.gold), case.meta["instruction"], case.id)
        rows.add(case, row.input_ids, row.labels)
    return rows


def regen_rows(cases: Sequence[Case], builder: RowBuilder) -> _Rows:
    """Same prompt ids; target = the whole edited file, then the end token."""
    adapter = builder.adapter
    rows = _Rows()
    for case in cases:
        prompt = adapter.prompt_ids(case.doc, case.meta["instruction"])
        target = adapter.encode(case.gold) + [adapter.eos_token_id]
        rows.add(case, prompt + target, [IGNORE] * len(prompt) + target)
    return rows


def train(model: Any, rows: _Rows, pad_id: int, cfg: LearnConfig, name: str,
          progress: bool = True) -> dict[str, Any]:
    """AdamW, warm-up + cosine; identity-heavy warm-up; early stop on a stalled loss."""
    from tqdm.auto import tqdm

    rng = random.Random(cfg.seed + 1)  # the same batches' composition for both models
    opt, sched = optimizer(model, cfg.lr, cfg.steps, floor=0.1)
    warmup_steps = int(cfg.steps * cfg.warmup_share)
    losses: list[float] = []
    ema, best, best_step = None, math.inf, 0
    stopped_at = cfg.steps
    start = time.perf_counter()
    model.train()
    bar = tqdm(range(cfg.steps), desc=f"train {name}", disable=not progress, file=sys.stderr)
    for step in bar:
        share = 0.75 if step < warmup_steps else cfg.identity_share
        n_id = min(len(rows.identity), round(cfg.batch_size * share))
        batch = rng.sample(rows.identity, n_id) + rng.sample(rows.edits, cfg.batch_size - n_id)
        value = train_step(model, opt, sched, batch, pad_id)
        losses.append(value)
        ema = value if ema is None else 0.95 * ema + 0.05 * value
        if step >= warmup_steps:
            if ema < best * 0.98:
                best, best_step = ema, step
            elif step - best_step >= cfg.patience and step >= cfg.steps * cfg.min_share:
                stopped_at = step + 1
                break
        if step % 20 == 0:
            bar.set_postfix(loss=f"{ema:.3f}")
    model.eval()
    return {"steps": stopped_at, "seconds": time.perf_counter() - start,
            "final_loss": statistics.fmean(losses[-50:]),
            "loss_curve": [round(statistics.fmean(losses[i:i + 50]), 4) for i in range(0, len(losses), 50)]}


# --- evaluation ------------------------------------------------------------------------


@dataclass
class _Tally:
    exact: list[bool] = field(default_factory=list)
    complete: list[bool] = field(default_factory=list)
    parses: list[bool] = field(default_factory=list)
    resolve_failures: int = 0
    program_tokens: list[int] = field(default_factory=list)
    forwards: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        n = len(self.exact)
        return {"n": n, "exact": sum(self.exact), "exact_rate": sum(self.exact) / n,
                "complete_rate": sum(self.complete) / n,
                "parse_rate": sum(self.parses) / n if self.parses else None,
                "strict_resolve_failures": self.resolve_failures,
                "program_tokens_per_edit": statistics.fmean(self.program_tokens),
                "forwards_per_edit": statistics.fmean(self.forwards),
                "seconds_per_edit": statistics.fmean(self.seconds),
                "seconds_total": sum(self.seconds)}


def evaluate(model: Any, cases: Sequence[Case], cfg: LearnConfig, kind: str,
             progress: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decode every held-out case; ``kind`` is ``"cad"`` or ``"regen"``."""
    from tqdm.auto import tqdm

    tally = _Tally()
    examples = []
    for case in tqdm(cases, desc=f"eval {kind}", disable=not progress, file=sys.stderr):
        gen = CaDGenerator(model, case.doc, max_new_tokens=cfg.max_new_tokens)
        instruction = case.meta["instruction"]
        start = time.perf_counter()
        try:
            result = gen.run(instruction) if kind == "cad" else gen.regenerate(instruction, layout="program")
            error = None
        except ResolveError as err:  # strict resolve of a complete program failed
            result, error = None, str(err)
        tally.seconds.append(time.perf_counter() - start)
        if result is None:
            tally.resolve_failures += 1
            tally.exact.append(False)
            tally.complete.append(True)
            tally.parses.append(True)
            tally.program_tokens.append(0)
            tally.forwards.append(0)
            examples.append({"id": case.id, "error": error})
            continue
        tally.exact.append(result.document == case.gold)
        tally.complete.append(result.complete)
        if kind == "cad" and result.complete:
            tally.parses.append(_parses(result.program, case.doc))
        elif kind == "cad":
            tally.parses.append(False)
        tally.program_tokens.append(result.stats.program_tokens)
        tally.forwards.append(result.stats.forward_passes)
        if len(examples) < 8:
            examples.append({"id": case.id, "instruction": instruction, "exact": tally.exact[-1],
                             "output": result.program})
    return tally.summary(), examples


def _parses(text: str, doc: str) -> bool:
    """The program parses with the lark grammar and resolves strictly against ``doc``."""
    try:
        resolve(parse(text), doc, "strict")
    except (ProgramParseError, ResolveError):
        return False
    return True


# --- the run ---------------------------------------------------------------------------


def run(cfg: LearnConfig, progress: bool = True) -> dict[str, Any]:
    """Build data, tokenizer, both models; train each; decode the held-out split."""
    from ._common import torch_threads

    with torch_threads(cfg.threads):
        return _run(cfg, progress)


def _run(cfg: LearnConfig, progress: bool) -> dict[str, Any]:
    import outlines

    env = environment(config="bench learn")
    t0 = time.perf_counter()
    train_cases, held = make_cases(cfg)
    tok = build_tokenizer(train_cases, cfg.vocab_target)
    builder = RowBuilder(tok)
    unknown = set(cfg.models) - {"cad", "regen"}
    if unknown:
        raise ValueError(f"unknown model kind(s) {sorted(unknown)}; choose from 'cad', 'regen'")
    makers = {"cad": cad_rows, "regen": regen_rows}
    sets = {kind: makers[kind](train_cases, builder) for kind in cfg.models}
    data_seconds = time.perf_counter() - t0
    longest = max(rows.longest for rows in sets.values()) + cfg.max_new_tokens
    report: dict[str, Any] = {
        "config": asdict(cfg), "environment": env,
        "data": {"train_cases": len(train_cases), "eval_cases": len(held),
                 "tokenizer_vocab": len(tok), "adapter": builder.adapter.name,
                 "prompt_tokens_mean": statistics.fmean(
                     len(builder.adapter.prompt_ids(c.doc, c.meta["instruction"])) for c in held),
                 "seconds": data_seconds},
        "models": {},
    }
    for kind, rows in sets.items():
        model = build_model(tok, cfg, max_positions=2 * longest)
        trained = train(model, rows, tok.pad_token_id, cfg, kind, progress)
        summary, examples = evaluate(outlines.from_transformers(model, tok), held, cfg, kind, progress)
        report["models"][kind] = {"parameters": sum(p.numel() for p in model.parameters()),
                                  "train": trained, "eval": summary, "examples": examples}
    return report


_LABELS = {"cad": "CaD (model-chosen program, constrained, spliced)",
           "regen": "regeneration (same loop, unconstrained)"}


def format_table(report: dict[str, Any]) -> str:
    """Markdown table: one row per model."""
    lines = ["| model | exact | parse | strict-resolve failures | program tokens / edit | "
             "forwards / edit | s / edit | train steps | train s | final loss |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, m in report["models"].items():
        e, t = m["eval"], m["train"]
        parse_rate = f"{e['parse_rate']:.0%}" if e["parse_rate"] is not None else "—"
        lines.append(f"| {_LABELS[kind]} | {e['exact']}/{e['n']} | {parse_rate} | "
                     f"{e['strict_resolve_failures']} | {e['program_tokens_per_edit']:.1f} | "
                     f"{e['forwards_per_edit']:.1f} | {e['seconds_per_edit']:.3f} | {t['steps']} | "
                     f"{t['seconds']:.0f} | {t['final_loss']:.3f} |")
    return "\n".join(lines)
