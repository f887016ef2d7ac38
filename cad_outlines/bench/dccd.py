"""CD vs DCCD on a model trained from scratch to answer in prose, asked for JSON.

With no network access to download weights, the demonstration builds the smallest
setting where the comparison means something:

* a synthetic task — ``Q: what is three plus four ?`` — that the model learns to answer
  in free text (``the answer is seven .``);
* an output constraint the model never used *for answering*: JSON with a digit,
  ``{"answer": 7}``;
* a projection skill learned on *other* questions: ``Draft: <prose answer>`` followed by
  the question and ``JSON:`` then the JSON. Held-out questions never appear with JSON.

Plain CD must produce the JSON straight from the question, in a format the model never
answered in; DCCD drafts in prose (what the model is good at) and projects the draft.
Both are exactly valid (same constraint, same matcher); the measured difference is
feasible mass (α), projection tax and accuracy.

Everything is seeded: byte-level BPE tokenizer trained with ``tokenizers``, a small
``Qwen2ForCausalLM`` trained with AdamW, evaluation wrapped the Outlines way
(``outlines.from_transformers``) and decoded with
:class:`cad_outlines.decoding.dccd.DraftConditionedGenerator`.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import torch

from ..decoding.dccd import DraftConditionedGenerator, select
from ..training.sft import IGNORE
from ._common import environment
from ._train import Row, byte_level_bpe, optimizer, train_step

__all__ = ["BenchConfig", "PROJECTION_TEMPLATE", "format_table", "run"]

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = {2: "twenty", 3: "thirty", 4: "forty"}
# Prose phrasings of an answer; several, so that drafts are prose, not a fixed string.
_PHRASES = ("the answer is {w} .", "it is {w} .", "that makes {w} .")
EOS, PAD = "<|endoftext|>", "<|pad|>"

PROJECTION_TEMPLATE = "Draft: {draft}\n{prompt}JSON:\n"
"""The bench's projection prompt; the training mix uses the same layout."""
CD_FORMAT_SUFFIX = "JSON:\n"
"""Appended to the question for the "CD, format prompt" baseline."""
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
                 "required": ["answer"], "additionalProperties": False}


def number_word(n: int) -> str:
    """English words of ``0 <= n < 50`` (``twenty one``)."""
    if not 0 <= n < 50:
        raise ValueError(f"number_word covers 0..49, got {n}")
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])


_WORD_TO_NUMBER = {number_word(n): n for n in range(50)}


def parse_prose_answer(text: str) -> int | None:
    """The number a prose draft states (last number phrase in it), or ``None``."""
    words = re.findall(r"[a-z]+", text.lower())
    found = None
    i = 0
    while i < len(words):
        two = " ".join(words[i:i + 2])
        if two in _WORD_TO_NUMBER:
            found, i = _WORD_TO_NUMBER[two], i + 2
        elif words[i] in _WORD_TO_NUMBER:
            found, i = _WORD_TO_NUMBER[words[i]], i + 1
        else:
            i += 1
    return found


@dataclass
class BenchConfig:
    """Everything that determines a run (all of it is reported with the results)."""

    seed: int = 0
    operands: int = 20  # questions a + b with a, b in [0, operands)
    json_fraction: float = 0.5  # share of questions whose JSON projection is trained
    steps: int = 900  # training steps
    batch_size: int = 64
    lr: float = 3e-3
    projection_share: float = 0.35  # share of projection examples in a batch
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    vocab_target: int = 400  # BPE vocabulary size asked of `tokenizers`
    eval_questions: int = 200  # held-out questions evaluated (at most all of them)
    ks: tuple[int, ...] = (1, 3, 5)
    selectors: tuple[str, ...] = ("sum_log_alpha", "vote", "loglik")
    # Drafting temperatures compared: 1 is the model's own distribution; hotter drafts
    # are noisier, which is where selecting among candidates can matter.
    draft_temperatures: tuple[float, ...] = (1.0, 2.0)
    backend: str = "outlines_core"
    threads: int = 1

    @classmethod
    def tiny(cls, **overrides: Any) -> "BenchConfig":
        """A CI-sized run (seconds): small model, few steps, few questions."""
        base = dict(operands=6, steps=60, batch_size=32, hidden_size=48, layers=2, heads=2,
                    vocab_target=300, eval_questions=6, ks=(1, 3))
        base.update(overrides)
        return cls(**base)


# --- data ----------------------------------------------------------------------------


def question(a: int, b: int) -> str:
    """The task prompt ``x`` for ``a + b`` (ends with a newline: answers start a line)."""
    return f"Q: what is {number_word(a)} plus {number_word(b)} ?\nA:\n"


def json_answer(a: int, b: int) -> str:
    return json.dumps({"answer": a + b})


@dataclass
class _Split:
    all_pairs: list[tuple[int, int]]
    json_pairs: list[tuple[int, int]]
    held_out: list[tuple[int, int]]


def _split(cfg: BenchConfig) -> _Split:
    rng = random.Random(cfg.seed)
    pairs = [(a, b) for a in range(cfg.operands) for b in range(cfg.operands)]
    rng.shuffle(pairs)
    n_json = max(1, int(len(pairs) * cfg.json_fraction))
    return _Split(pairs, pairs[:n_json], pairs[n_json:])


def _corpus_for_tokenizer(split: _Split) -> list[str]:
    texts = []
    for a, b in split.all_pairs:
        for p in _PHRASES:
            ans = p.format(w=number_word(a + b))
            texts.append(question(a, b) + ans)
            texts.append(PROJECTION_TEMPLATE.format(draft=ans, prompt=question(a, b))
                         + json_answer(a, b))
    return texts


def build_tokenizer(texts: Sequence[str], vocab_size: int):
    """Byte-level BPE trained on ``texts``, as a ``PreTrainedTokenizerFast``."""
    from transformers import PreTrainedTokenizerFast

    tk = byte_level_bpe(texts, vocab_size, [EOS, PAD])
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token=EOS, pad_token=PAD)


def build_model(tok: Any, cfg: BenchConfig):
    """A small ``Qwen2ForCausalLM``; its vocabulary is padded past the tokenizer's (to a
    multiple of 64, like real checkpoints) so the α code's size alignment is exercised."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(cfg.seed)
    vocab = -(-len(tok) // 64) * 64
    config = Qwen2Config(vocab_size=vocab, hidden_size=cfg.hidden_size,
                         intermediate_size=cfg.hidden_size * 3, num_hidden_layers=cfg.layers,
                         num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         bos_token_id=None)
    return Qwen2ForCausalLM(config)


def _example(tok: Any, prompt: str, completion: str) -> Row:
    # Prompt and completion tokenised apart, as at inference (prompt encoded, completion
    # emitted token by token); the loss covers the completion and the end token only.
    p = tok(prompt)["input_ids"]
    c = tok(completion)["input_ids"] + [tok.eos_token_id]
    return p + c, [IGNORE] * len(p) + c


def _training_examples(tok: Any, split: _Split, rng: random.Random):
    prose = []
    for a, b in split.all_pairs:
        for p in _PHRASES:
            prose.append(_example(tok, question(a, b), p.format(w=number_word(a + b))))
    proj = []
    for a, b in split.json_pairs:
        for p in _PHRASES:
            draft = p.format(w=number_word(a + b))
            proj.append(_example(tok, PROJECTION_TEMPLATE.format(draft=draft, prompt=question(a, b)),
                                 json_answer(a, b)))
    rng.shuffle(prose)
    rng.shuffle(proj)
    return prose, proj


def train(model: Any, tok: Any, split: _Split, cfg: BenchConfig, progress: bool = True) -> list[float]:
    """AdamW with warm-up and cosine decay on the prose + projection mix; returns losses."""
    from tqdm.auto import tqdm

    rng = random.Random(cfg.seed + 1)
    prose, proj = _training_examples(tok, split, rng)
    opt, sched = optimizer(model, cfg.lr, cfg.steps)
    model.train()
    losses = []
    n_proj = round(cfg.batch_size * cfg.projection_share)
    bar = tqdm(range(cfg.steps), desc="train", disable=not progress, file=sys.stderr)
    for _ in bar:
        batch = rng.sample(prose, cfg.batch_size - n_proj) + rng.sample(proj, min(n_proj, len(proj)))
        losses.append(train_step(model, opt, sched, batch, tok.pad_token_id))
        if len(losses) % 20 == 0:
            bar.set_postfix(loss=f"{statistics.fmean(losses[-20:]):.3f}")
    model.eval()
    return losses


# --- evaluation ----------------------------------------------------------------------


def _answer_of(value: Any) -> int | None:
    if isinstance(value, dict) and isinstance(value.get("answer"), int):
        return value["answer"]
    return None


@dataclass
class _Stat:
    correct: list[bool] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    mean_alpha: list[float] = field(default_factory=list)
    min_alpha: list[float] = field(default_factory=list)
    tax: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    oracle: list[bool] = field(default_factory=list)
    faithful: list[bool] = field(default_factory=list)

    def add(self, cand: Any, truth: int, seconds: float, oracle: bool | None = None) -> None:
        self.correct.append(_answer_of(cand.value) == truth)
        if cand.draft is not None:
            # Does the projection say what its draft said? Separates drafting errors
            # from projection errors.
            self.faithful.append(_answer_of(cand.value) == parse_prose_answer(cand.draft))
        self.valid.append(cand.complete and cand.parse_error is None)
        self.mean_alpha.append(cand.trace.mean_alpha)
        self.min_alpha.append(cand.trace.min_alpha)
        self.tax.append(cand.trace.projection_tax)
        self.seconds.append(seconds)
        if oracle is not None:
            self.oracle.append(oracle)

    def summary(self) -> dict:
        out = {
            "n": len(self.correct),
            "accuracy": statistics.fmean(self.correct),
            "valid": statistics.fmean(self.valid),
            "mean_alpha": statistics.fmean(self.mean_alpha),
            "min_alpha": statistics.fmean(self.min_alpha),
            "projection_tax": statistics.fmean(self.tax),
            "seconds_per_prompt": statistics.fmean(self.seconds),
        }
        if self.oracle:
            out["oracle_at_k"] = statistics.fmean(self.oracle)
        if self.faithful:
            out["faithful_to_draft"] = statistics.fmean(self.faithful)
        return out


def _method(temperature: float, k: int, selector: str) -> str:
    return f"dccd_t{temperature:g}_k{k}_{selector}"


def evaluate(model: Any, split: _Split, cfg: BenchConfig, progress: bool = True) -> dict:
    """CD (two prompts) and DCCD (every draft temperature, K and selector) on the
    held-out questions.

    For each draft temperature DCCD draws ``max(ks)`` drafts once per question and
    evaluates each K on the first K candidates (nested subsets of one draw), so the K
    rows share their randomness.
    """
    from outlines.types import JsonSchema
    from tqdm.auto import tqdm

    output_type = JsonSchema(ANSWER_SCHEMA, whitespace_pattern="[ ]?")
    gen = DraftConditionedGenerator(
        model, output_type, k=max(cfg.ks), projection_template=PROJECTION_TEMPLATE,
        backend=cfg.backend, max_new_tokens=16, draft_max_tokens=16)
    questions = split.held_out[:cfg.eval_questions]
    stats: dict[str, _Stat] = {"cd": _Stat(), "cd_format_prompt": _Stat()}
    for t in cfg.draft_temperatures:
        for k in cfg.ks:
            for s in cfg.selectors:
                stats[_method(t, k, s)] = _Stat()
    draft_correct: dict[float, list[bool]] = {t: [] for t in cfg.draft_temperatures}
    examples = []
    bar = tqdm(questions, desc="eval", disable=not progress, file=sys.stderr)
    for qi, (a, b) in enumerate(bar):
        truth, x = a + b, question(a, b)
        t0 = time.perf_counter()
        cd = gen.cd(x, seed=cfg.seed + qi)
        t1 = time.perf_counter()
        cdf = gen.cd(x + CD_FORMAT_SUFFIX, seed=cfg.seed + qi)
        t2 = time.perf_counter()
        stats["cd"].add(cd.chosen, truth, t1 - t0)
        stats["cd_format_prompt"].add(cdf.chosen, truth, t2 - t1)
        shown = None  # candidates at the first temperature, for the examples
        for t in cfg.draft_temperatures:
            gen.draft_temperature = t
            t3 = time.perf_counter()
            cands = gen.run(x, seed=cfg.seed + qi).candidates
            dccd_seconds = time.perf_counter() - t3
            shown = cands if shown is None else shown
            draft_correct[t].extend(parse_prose_answer(c.draft) == truth for c in cands)
            for k in cfg.ks:
                sub = cands[:k]
                oracle = any(_answer_of(c.value) == truth for c in sub)
                for s in cfg.selectors:
                    best = sub[select(sub, s, x)]
                    # Time of a K run ≈ the K-candidate share of the shared batched run.
                    stats[_method(t, k, s)].add(best, truth, dccd_seconds * k / len(cands),
                                                oracle)
        cands = shown
        if len(examples) < 3:
            examples.append({
                "question": x, "truth": truth, "cd": cd.text, "cd_format_prompt": cdf.text,
                "drafts": [c.draft for c in cands], "projections": [c.text for c in cands],
                "cd_alphas": [round(v, 4) for v in cd.trace.alphas],
                "dccd_alphas": [round(v, 4) for v in cands[0].trace.alphas]})
    return {
        "methods": {name: st.summary() for name, st in stats.items()},
        "draft_accuracy": {str(t): statistics.fmean(v) for t, v in draft_correct.items() if v},
        "examples": examples,
    }


def run(cfg: BenchConfig, progress: bool = True) -> dict:
    """Build data, tokenizer and model, train, evaluate; return everything measured."""
    threads = torch.get_num_threads()
    # One thread by default: on a shared 2-core machine a second thread mostly waits
    # (measured: 0.27 s/step with one thread, 1.2 s/step with two under load).
    torch.set_num_threads(cfg.threads)
    try:
        return _run(cfg, progress)
    finally:
        torch.set_num_threads(threads)


def _run(cfg: BenchConfig, progress: bool) -> dict:
    import outlines

    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    t0 = time.perf_counter()
    split = _split(cfg)
    tok = build_tokenizer(_corpus_for_tokenizer(split), cfg.vocab_target)
    model = build_model(tok, cfg)
    losses = train(model, tok, split, cfg, progress)
    t_train = time.perf_counter() - t0
    wrapped = outlines.from_transformers(model, tok)
    results = evaluate(wrapped, split, cfg, progress)
    return {
        "config": asdict(cfg),
        "data": {"questions": len(split.all_pairs), "json_trained": len(split.json_pairs),
                 "held_out": len(split.held_out),
                 "evaluated": min(cfg.eval_questions, len(split.held_out))},
        "model": {"parameters": sum(p.numel() for p in model.parameters()),
                  "tokenizer_vocab": len(tok), "model_vocab": model.config.vocab_size},
        "train": {"seconds": t_train, "final_loss": statistics.fmean(losses[-20:])},
        "eval_seconds": time.perf_counter() - t0 - t_train,
        "environment": environment(),
        **results,
    }


_LABELS = {"cd": "CD (question prompt)", "cd_format_prompt": "CD (question + 'JSON:')"}


def _fmt_alpha(a: float) -> str:
    # Four decimals unless tiny: 0.9996 must not print as "1", 1e-5 not as "0.0000".
    return f"{a:.4f}" if a >= 1e-3 else f"{a:.1e}"


def format_table(results: dict) -> str:
    """Markdown table of the methods, then the draft accuracy line."""
    lines = ["| method | accuracy | valid | mean α | min α | tax (nats) | oracle@K | "
             "faithful | s/prompt |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, m in results["methods"].items():
        label = _LABELS.get(name)
        if label is None:
            t, k, sel = re.fullmatch(r"dccd_t([^_]+)_k(\d+)_(.+)", name).groups()
            label = f"DCCD T={t} K={k} ({sel})"
        oracle = f"{m['oracle_at_k']:.3f}" if "oracle_at_k" in m else "—"
        faithful = f"{m['faithful_to_draft']:.3f}" if "faithful_to_draft" in m else "—"
        lines.append(f"| {label} | {m['accuracy']:.3f} | {m['valid']:.3f} | "
                     f"{_fmt_alpha(m['mean_alpha'])} | {_fmt_alpha(m['min_alpha'])} | "
                     f"{m['projection_tax']:.3f} | {oracle} | {faithful} | "
                     f"{m['seconds_per_prompt']:.3f} |")
    lines.append("")
    drafts = ", ".join(f"T={t}: {a:.3f}" for t, a in results["draft_accuracy"].items())
    lines.append(f"draft accuracy (prose drafts stating the right number): {drafts}; "
                 f"held-out questions evaluated: {results['data']['evaluated']} "
                 f"(JSON never trained on them)")
    return "\n".join(lines)
