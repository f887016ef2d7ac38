"""``bench fuzz``: free sampling on adversarial documents, checking every guarantee.

Each run builds an adversarial document (:func:`adversarial_document`), draws the
sampling options (temperature 0.7-3, ``top_p`` < 1 or = 1, line or token granularity,
drafts on or off) and samples one program with :class:`~cad_outlines.CaDGenerator`
(the one decode loop; nothing here decodes). :func:`check_result` then checks what the
project guarantees for a sampled program:

* ``run()`` returns a :class:`~cad_outlines.decoding.generator.CaDResult` (no exception escapes);
* a complete program parses back to ``result.ops``, resolves strictly to
  ``result.document``, and every copy satisfies ``lo <= i <= j <= hi`` (lines
  ``1..n``, tokens ``0..T-1``);
* an incomplete program has ``document is None`` and ``ops`` that the program text
  completes, each copy again within bounds.

Random weights rarely close a gen body; :class:`ClosingBias` adds a logit bias to the
tokens of ``</gen>`` (ids from the adapter) inside gen bodies, so that a good share of
programs complete and hold gen bodies. It is the only change to
sampling and lives in one small subclass (:class:`BiasedGenerator`).

Every run is reproducible from ``(preset, seed, index)``: its document and options come
from ``random.Random(f"{seed}:{index}")`` (string seeds hash with SHA-512, independent
of ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import math
import random
import time
import traceback
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

import torch

from ..language import program, syntax
from ..decoding.generator import CaDGenerator, CaDResult
from ..decoding.options import group_options
from ..language.program import Copy, CopyTokens, Gen
from . import _common

__all__ = ["BiasedGenerator", "ClosingBias", "FuzzCase", "adversarial_document", "check_result",
           "draw_case", "format_fuzz", "run_case", "run_fuzz"]

#: Text that must stay ordinary document text: program literals, chat and special-token
#: spellings, the escape characters.
HOSTILE_LINES: tuple[str, ...] = (
    syntax.copy_tag("lines", 1, 2), syntax.copy_tag("tokens", 0, 3), syntax.GEN_CLOSE, syntax.GEN_OPEN,
    syntax.PROGRAM_CLOSE, syntax.PROGRAM_OPEN,
    "<|im_end|>", "<|im_start|>assistant", "<|endoftext|>", "</s>", "<s>", "<unk>",
    "<｜end▁of▁sentence｜>", "[INST] x [/INST]", "\u27e8gen\u27e9 \u27e8/gen\u27e9 \u27e8\u27e9",
    "a \u27e8 b \u27e9 c", syntax.TAG_START, syntax.TAG_START + "/", syntax.COPY_START,
    syntax.COPY_CLOSE, "-->",
)
#: Non-ASCII text: accents, CJK, emoji (astral), combining marks, RTL, zero-width.
UNICODE_LINES: tuple[str, ...] = (
    "héllo 😀 中文", "naïve café — “quotes” ✓", "日本語のテキスト", "🎉🎉🎉 🇫🇷", "e\u0301 A\u030a",
    "مرحبا بالعالم", "zero\u200bwidth\u00a0nbsp", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "tab\tand\u2028sep",
)
CODE_LINES: tuple[str, ...] = (
    "def add(a, b):", "    return a + b", "", "class Foo:", "    x = 1  # comment", "}",
    "for (int i = 0; i < n; i++) {", "import os", "    if x < 3 and y > 2:", "print('done')",
)


def adversarial_document(rng: random.Random, min_lines: int = 10, max_lines: int = 300) -> str:
    """A document built to break things: hostile literals, odd endings, long lines.

    Lines mix code, the program's own literals and special-token spellings, escape
    characters, non-ASCII text, runs of blank lines and long lines; the document may use
    CRLF endings and may lack a final newline.
    """
    count = rng.randint(min_lines, max_lines)
    lines: list[str] = []
    while len(lines) < count:
        kind = rng.random()
        if kind < 0.35:
            lines.append(rng.choice(CODE_LINES))
        elif kind < 0.55:
            lines.append(rng.choice(HOSTILE_LINES))
        elif kind < 0.7:
            lines.append(rng.choice(UNICODE_LINES))
        elif kind < 0.8:
            lines.extend([""] * rng.randint(2, 6))  # a blank run
        elif kind < 0.82:
            lines.append("".join(rng.choice("ab <>/\u27e8é中 ") for _ in range(rng.randint(120, 400))))
        else:
            lines.append(f"line {len(lines) + 1}: " + rng.choice(CODE_LINES + UNICODE_LINES))
    lines = lines[:count]
    newline = "\r\n" if rng.random() < 0.25 else "\n"
    text = newline.join(lines)
    return text + newline if rng.random() < 0.6 else text


@dataclass(frozen=True)
class FuzzCase:
    """One sampled run: where it comes from and the options it was drawn."""

    preset: str
    seed: int
    index: int
    granularity: str
    temperature: float
    top_p: float
    draft_tags: bool
    document: str


def draw_case(preset: str, seed: int, index: int, min_lines: int = 10, max_lines: int = 300) -> FuzzCase:
    """The document and options of run ``index`` (reproducible from its arguments)."""
    rng = random.Random(f"{seed}:{index}")
    document = adversarial_document(rng, min_lines, max_lines)
    return FuzzCase(
        preset=preset, seed=seed, index=index,
        granularity=rng.choice(["lines", "tokens"]),
        temperature=round(rng.uniform(0.7, 3.0), 3),
        top_p=1.0 if rng.random() < 0.5 else round(rng.uniform(0.5, 0.99), 3),
        draft_tags=rng.random() < 0.5,
        document=document)


# -- the sampling hook ----------------------------------------------------------------


class ClosingBias:
    """A logit bias towards closing the gen body being written (``</gen>``).

    Inside a gen body the grammar allows almost every token, and random weights spread
    their mass over all of them, so a body would run to the token budget; outside one
    only a few program tokens are allowed (``<copy``, ``<gen>``, ``</program>``) and the
    program ends by itself. A body is recognised by its mask: more than half the
    vocabulary allowed. The bias goes to the adapter's first id of what is left of
    ``</gen>`` after the text chosen so far (``</`` already written: the id of
    ``gen>``), so tokenizers that split the literal into several pieces close it in
    order. Only allowed tokens can be chosen: the bias changes which allowed token is
    likely, never what is allowed.

    The bias is set from the allowed set's size ``m`` so that, for near-uniform logits,
    the favoured token has the given log-odds against all the others together:
    ``bias = (log(m) + odds) * temperature`` (the sampler divides by the temperature).

    Parameters
    ----------
    adapter
        The generator's adapter (ids come from its encoder, never typed in).
    temperature
        The generator's sampling temperature (the bias is scaled by it).
    start_odds
        Log-odds of starting ``</gen>`` (about ``1 / (1 + e**-start_odds)`` per token:
        the default -2 gives bodies of about 8 tokens).
    finish_odds
        Log-odds of continuing a ``</gen>`` already started.
    """

    def __init__(self, adapter: Any, temperature: float, start_odds: float = -2.0,
                 finish_odds: float = 3.0):
        self.adapter, self.temperature = adapter, temperature
        self.start_odds, self.finish_odds = start_odds, finish_odds
        close = syntax.GEN_CLOSE
        # next_id[k]: the first id of close[k:], the rest of the literal after k bytes.
        self.next_id = [adapter.encode(close[k:])[0] for k in range(len(close))]
        self._close = close.encode()

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """A transformers logits processor: ``scores`` are masked (disallowed: ``-inf``)."""
        allowed = torch.isfinite(scores[0])
        count = int(allowed.sum())
        if count * 2 < allowed.numel():
            return scores  # not inside a gen body
        tail = b"".join(self.adapter.token_bytes(int(t)) for t in input_ids[0, -len(self._close):])
        typed = next((k for k in range(len(self._close) - 1, 0, -1) if tail.endswith(self._close[:k])), 0)
        odds = self.finish_odds if typed else self.start_odds
        biased = scores.clone()
        biased[0, self.next_id[typed]] += (math.log(count) + odds) * max(self.temperature, 1e-6)
        return biased


class BiasedGenerator(CaDGenerator):
    """:class:`CaDGenerator` with a :class:`ClosingBias` among its logits processors.

    The decode loop is the parent's; the bias enters through the public
    ``LoopSwitches.logits_processors`` option. ``options`` are flat keywords
    (:func:`~cad_outlines.decoding.options.group_options`).
    """

    def __init__(self, model: Any, document: str, *, bias: bool = True, **options: Any):
        super().__init__(model, document, **group_options(options, caller="BiasedGenerator"))
        if bias:
            processors = (*self.loop.logits_processors, ClosingBias(self.adapter, self.sampling.temperature))
            self.loop = replace(self.loop, logits_processors=processors)


# -- checking one result ----------------------------------------------------------------


def check_result(result: Any, gen: CaDGenerator) -> list[str]:
    """Every guarantee a sampled run must meet; returns the violations (empty: all hold)."""
    if not isinstance(result, CaDResult):
        return [f"run() returned {type(result).__name__}, not CaDResult"]
    problems: list[str] = []
    lo, hi = (1, gen.view.upper) if gen.granularity == "lines" else (0, gen.view.upper - 1)
    copy_cls = Copy if gen.granularity == "lines" else CopyTokens
    for k, op in enumerate(result.ops):
        if isinstance(op, Gen):
            continue
        if not isinstance(op, copy_cls):
            problems.append(f"op {k} {op!r} has the wrong granularity")
        elif not lo <= op.start <= op.end <= hi:
            problems.append(f"op {k} {op!r} is reversed or out of range {lo}..{hi}")
    if result.complete:
        try:
            parsed = program.parse(result.program, gen.granularity)
        except Exception as err:  # noqa: BLE001 - any failure is a finding
            return problems + [f"complete program does not parse: {err}"]
        if parsed != result.ops:
            problems.append("parse(program) differs from result.ops")
        try:
            document = gen.view.resolve(parsed, "strict")
        except Exception as err:  # noqa: BLE001
            return problems + [f"complete program does not resolve strictly: {err}"]
        if document != result.document:
            problems.append("strict resolve differs from result.document")
    else:
        if result.document is not None:
            problems.append("incomplete program has a document")
        ops, _ = program.scan_ops(result.program, 0, gen.granularity)
        if ops != result.ops:
            problems.append("result.ops are not the complete ops of the program text")
    return problems


@dataclass
class Outcome:
    """What one run gave."""

    complete: bool = False
    gens: int = 0
    copies: int = 0
    program_tokens: int = 0
    seconds: float = 0.0
    problems: tuple[str, ...] = ()
    error: str | None = None


def run_case(model: Any, case: FuzzCase, *, max_new_tokens: int, bias: bool,
             instruction: str = "Edit this file.") -> Outcome:
    """Sample one program for ``case`` and check it; exceptions are recorded, not raised."""
    start = time.perf_counter()
    try:
        gen = BiasedGenerator(model, case.document, granularity=case.granularity,
                              temperature=case.temperature, top_p=case.top_p, seed=case.index,
                              draft_tags=case.draft_tags, max_new_tokens=max_new_tokens,
                              bias=bias)
        result = gen.run(instruction)
        problems = check_result(result, gen)
    except Exception as err:  # noqa: BLE001 - an escaping exception is the finding
        return Outcome(seconds=time.perf_counter() - start,
                       error="".join(traceback.format_exception_only(type(err), err)).strip()
                       + "\n" + traceback.format_exc(limit=-3))
    return Outcome(
        complete=result.complete, gens=sum(isinstance(op, Gen) for op in result.ops),
        copies=sum(not isinstance(op, Gen) for op in result.ops),
        program_tokens=result.stats.program_tokens, seconds=time.perf_counter() - start,
        problems=tuple(problems))


def run_fuzz(presets: Sequence[str], runs: int, *, seed: int = 0, max_new_tokens: int = 48,
             bias: bool = True, min_lines: int = 10, max_lines: int = 300,
             threads: int | None = 1, progress: Callable[[str], None] | None = None,
             checkpoint: Callable[[dict[str, Any]], None] | None = None,
             load_model: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Run ``runs`` sampled programs per preset and count what happened.

    ``progress`` gets a line and ``checkpoint`` the report so far (``finished`` False)
    every 50 runs, so a long campaign that is stopped keeps its counts.

    Returns
    -------
    dict
        ``environment``, ``config``, ``finished`` and, per preset, the counts (``tried``,
        ``complete``, ``incomplete``, ``failures``: exceptions + guarantee violations,
        ``with_gen``: complete programs holding a gen body, ``bad_copies``: reversed or
        out-of-range copies) and up to 20 failing cases with their options.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if load_model is None:
        from ..tools.models import load as load_model
    config = dict(presets=list(presets), runs=runs, seed=seed, max_new_tokens=max_new_tokens,
                  bias=bias, min_lines=min_lines, max_lines=max_lines,
                  threads=threads)
    families: dict[str, Any] = {}
    environment = _common.environment()  # recorded before the runs: the code that ran
    report = dict(environment=environment, config=config, finished=False, families=families)
    with _common.torch_threads(threads):
        for preset in presets:
            model = load_model(preset)
            counts: dict[str, Any] = dict(tried=0, complete=0, incomplete=0, failures=0, exceptions=0,
                          with_gen=0, bad_copies=0, copies=0, gens=0, program_tokens=0,
                          by_granularity={"lines": 0, "tokens": 0}, drafts_on=0)
            failing: list[dict[str, Any]] = []
            clock = time.perf_counter()
            families[preset] = dict(counts=counts, failing=failing)
            for index in range(runs):
                case = draw_case(preset, seed, index, min_lines, max_lines)
                outcome = run_case(model, case, max_new_tokens=max_new_tokens,
                                   bias=bias)
                counts["tried"] += 1
                counts["by_granularity"][case.granularity] += 1
                counts["drafts_on"] += case.draft_tags
                counts["program_tokens"] += outcome.program_tokens
                counts["copies"] += outcome.copies
                counts["gens"] += outcome.gens
                counts["bad_copies"] += sum("reversed or out of range" in p for p in outcome.problems)
                if outcome.error is not None:
                    counts["exceptions"] += 1
                if outcome.error is not None or outcome.problems:
                    counts["failures"] += 1
                    if len(failing) < 20:
                        info = asdict(case)
                        info["document"] = info["document"][:2000]
                        failing.append(dict(case=info, error=outcome.error, problems=list(outcome.problems)))
                elif outcome.complete:
                    counts["complete"] += 1
                    counts["with_gen"] += outcome.gens > 0
                else:
                    counts["incomplete"] += 1
                counts["seconds"] = round(time.perf_counter() - clock, 1)
                if (index + 1) % 50 == 0:
                    if progress is not None:
                        progress(f"{preset}: {index + 1}/{runs} runs, {counts['complete']} complete, "
                                 f"{counts['failures']} failures, {counts['seconds']:.0f} s")
                    if checkpoint is not None:
                        checkpoint(report)
    report["finished"] = True
    report["finished_utc"] = _common.environment()["date_utc"]
    return report


def format_fuzz(report: dict[str, Any]) -> str:
    """A table of the counts per preset."""
    head = (f"{'preset':<22}{'tried':>7}{'complete':>10}{'incompl.':>10}{'failures':>10}"
            f"{'bad copies':>12}{'with gen':>10}{'seconds':>9}")
    rows = [head]
    for preset, family in report["families"].items():
        c = family["counts"]
        share = f"{c['with_gen'] / c['complete']:.0%}" if c["complete"] else "-"
        rows.append(f"{preset:<22}{c['tried']:>7}{c['complete']:>10}{c['incomplete']:>10}"
                    f"{c['failures']:>10}{c['bad_copies']:>12}{share:>10}{c['seconds']:>9}")
        for fail in family["failing"][:3]:
            case = fail["case"]
            rows.append(f"  failing: seed {case['seed']} index {case['index']} "
                        f"({case['granularity']}): {fail['error'] or '; '.join(fail['problems'])}")
    return "\n".join(rows)
