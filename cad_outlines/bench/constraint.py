"""``bench constraint``: llguidance's CFG matcher vs outlines_core's token FSM.

The program language of one document is regular, so it can be compiled two ways
through Outlines' own backends:

* **llguidance** (the default): the specialised grammar through
  :func:`cad_outlines.decoding.constraint.compile_grammar` (``LLGuidanceBackend``), driven by
  :class:`~cad_outlines.decoding.constraint.ProgramConstraint`;
* **outlines_core**: :func:`cad_outlines.language.grammar.program_regex` through
  ``OutlinesCoreBackend(model).get_regex_logits_processor`` (an ``outlines_core.Index``
  over the whole vocabulary), walked with an ``outlines_core.Guide``.

For each tokenizer family (the random-weight ``tiny-*`` preset of its fixture tokenizer)
and document size ``n`` it measures:

* **setup** (once per tokenizer, the first use in a fresh process): llguidance's
  ``tokenizer_setup_seconds`` (llguidance tokenizer + the constraint's token table) and,
  rebuilt alone, the llguidance tokenizer; outlines_core's ``Vocabulary`` (the
  ``OutlinesCoreBackend`` constructor);
* **per document** (median of ``repeats``): llguidance ``compile_seconds`` (specialise +
  ``get_cfg_logits_processor``), the matcher's construction and its first mask (the
  grammar is compiled lazily, so part of the work lands there); outlines_core's
  ``get_regex_logits_processor(program_regex(n))`` (the ``Index`` build) and the resident
  memory the index holds;
* **per step**, at every token of a realistic forced program (the oracle program of a
  corpus case, tokenized one segment at a time like the generator does, each segment
  ending at a copy tag's end), with a fresh matcher / guide per pass: llguidance's
  ``ProgramConstraint.allowed`` (what the decode loop pays: bitmask + the composed
  automata) and its raw ``fill_next_token_bitmask``; outlines_core's
  ``fill_next_token_bitmask`` (what Outlines' processor calls) and ``Guide.get_tokens``
  (the Python list of allowed ids); each backend's advance;
* **agreement**: at every step, whether the two backends allow the same token set
  (untimed).

Each tokenizer runs in its own spawned process, so its setup is a true first use and
the parent can stop an ``Index`` build that runs past ``index_timeout_s`` or a process
whose resident memory passes ``memory_limit_gib``; what was measured before that is kept
and the stop is reported.
"""

from __future__ import annotations

import multiprocessing
import pickle
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import InputError
from ..language.syntax import GEN_CLOSE, GEN_OPEN, split_lines
from . import _common

__all__ = ["ConstraintConfig", "FAMILIES", "format_constraint", "run_constraint"]

#: Tokenizer family -> the random-weight preset that carries its fixture tokenizer.
FAMILIES: dict[str, str] = {"qwen": "tiny-qwen", "deepseek-coder": "tiny-deepseek-coder",
                            "codellama": "tiny-codellama"}
DEFAULT_CASE = "commits_c-0026"  # 34 lines, 17 ops: the sample's longest code program


@dataclass(frozen=True)
class ConstraintConfig:
    """What ``bench constraint`` measures."""

    tokenizers: tuple[str, ...] = tuple(FAMILIES)
    sizes: tuple[int, ...] = (50, 500, 5000)
    case: str = DEFAULT_CASE
    repeats: int = 3
    index_timeout_s: float = 120.0
    memory_limit_gib: float = 12.0
    process_timeout_s: float = 1800.0
    tokenizer_root: Optional[str] = None

    def __post_init__(self) -> None:
        unknown = [t for t in self.tokenizers if t not in FAMILIES]
        if unknown or not self.tokenizers:
            raise InputError(f"tokenizers must be among {', '.join(FAMILIES)}, got {list(self.tokenizers)}")
        if not self.sizes or min(self.sizes) < 1:
            raise InputError(f"sizes must be >= 1, got {list(self.sizes)}")
        if self.repeats < 1:
            raise InputError(f"repeats must be >= 1, got {self.repeats}")
        if self.index_timeout_s <= 0 or self.memory_limit_gib <= 0:
            raise InputError("index_timeout_s and memory_limit_gib must be > 0")

    @classmethod
    def tiny(cls, **overrides: Any) -> "ConstraintConfig":
        """CI-sized: one small-vocabulary tokenizer, two small documents, one repeat."""
        base = dict(tokenizers=("codellama",), sizes=(40, 400), repeats=1)
        base.update(overrides)
        return cls(**base)


# --- parent: one spawned worker per tokenizer -------------------------------------------


def run_constraint(cases: Sequence[Any], cfg: ConstraintConfig, progress: bool = True) -> dict[str, Any]:
    """Measure both backends for every tokenizer and size of ``cfg``.

    Parameters
    ----------
    cases
        Corpus cases (:func:`cad_outlines.training.corpus.load_corpus`); ``cfg.case`` names the one
        whose oracle program is forced.
    cfg
        What to measure.
    progress
        Print one line per finished measurement on stderr.

    Returns
    -------
    dict
        ``config``, ``case``, ``environment`` and ``tokenizers``: per family its
        ``setup``, per size its ``llguidance``, ``outlines_core`` and ``agreement``
        records, and ``stopped`` when a limit ended the worker.
    """
    from ..language.oracle import oracle_program
    from ..language.program import render

    by_id = {case.id: case for case in cases}
    if cfg.case not in by_id:
        raise InputError(f"case {cfg.case!r} is not in the corpus ({len(cases)} cases)")
    case = by_id[cfg.case]
    doc_lines = len(split_lines(case.doc))
    if doc_lines > min(cfg.sizes):
        raise InputError(f"case {cfg.case!r} has {doc_lines} lines: its program does not fit a "
                         f"{min(cfg.sizes)}-line document (use sizes >= {doc_lines})")
    ops = oracle_program(case.doc, case.gold)
    text = render(ops)
    report: dict[str, Any] = {
        "kind": "bench-constraint",
        "config": asdict(cfg),
        "case": {"id": case.id, "doc_lines": doc_lines, "ops": len(ops), "program_chars": len(text)},
        "environment": _common.environment(),
        "tokenizers": {},
    }
    for family in cfg.tokenizers:
        report["tokenizers"][family] = _run_worker(family, text, cfg, progress)
    report["environment"]["loadavg_end"] = _common._loadavg()
    return report


def _run_worker(family: str, program_text: str, cfg: ConstraintConfig, progress: bool) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(family, program_text, cfg, child), daemon=True)
    out: dict[str, Any] = {"preset": FAMILIES[family], "sizes": {}}
    start = time.monotonic()
    phase: tuple[str, float] = ("start", start)
    peak_rss = 0
    proc.start()
    child.close()
    try:
        while True:
            if parent.poll(0.2):
                try:
                    msg = parent.recv()
                except EOFError:  # the worker died without a word (e.g. killed for memory)
                    proc.join(5)
                    out["stopped"] = f"the worker exited with status {proc.exitcode} during {phase[0]}"
                    break
                kind = msg["type"]
                if kind == "phase":
                    phase = (msg["what"], time.monotonic())
                elif kind == "setup":
                    out.update(msg["data"])
                elif kind == "size":
                    out["sizes"][str(msg["n"])] = msg["data"]
                    if progress:
                        print(f"bench constraint: {family} n={msg['n']} done "
                              f"({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
                elif kind == "error":
                    raise RuntimeError(f"bench constraint worker ({family}) failed:\n{msg['traceback']}")
                elif kind == "done":
                    break
                continue
            rss = _rss_bytes(proc.pid)
            peak_rss = max(peak_rss, rss)
            now = time.monotonic()
            what, since = phase
            stop = None
            if rss > cfg.memory_limit_gib * 2**30:
                stop = f"resident memory passed {cfg.memory_limit_gib:g} GiB during {what}"
            elif what.startswith("outlines_core index") and now - since > cfg.index_timeout_s:
                stop = f"{what} ran past {cfg.index_timeout_s:g} s"
            elif now - start > cfg.process_timeout_s:
                stop = f"the worker ran past {cfg.process_timeout_s:g} s (during {what})"
            elif not proc.is_alive():
                stop = f"the worker exited with status {proc.exitcode} during {what}"
            if stop:
                out["stopped"] = stop
                if progress:
                    print(f"bench constraint: {family}: stopped: {stop}", file=sys.stderr, flush=True)
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        parent.close()
    out["worker_peak_rss_mib"] = round(peak_rss / 2**20, 1)
    return out


def _rss_bytes(pid: int | str | None) -> int:
    """Resident memory of a process (``"self"``: this one) from /proc; 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


# --- worker ------------------------------------------------------------------------------


def _worker(family: str, program_text: str, cfg: ConstraintConfig, conn: Any) -> None:
    try:
        _measure_family(family, program_text, cfg, conn.send)
        conn.send({"type": "done"})
    except BaseException:  # the parent turns it into an error naming the family
        conn.send({"type": "error", "traceback": traceback.format_exc()})
    finally:
        conn.close()


def _measure_family(family: str, program_text: str, cfg: ConstraintConfig, send: Any) -> None:
    from outlines.backends.llguidance import LLGuidanceBackend
    from outlines.backends.outlines_core import OutlinesCoreBackend

    from ..tools import models
    from ..adapters import get_adapter
    from ..decoding.compiling import compile_grammar, tokenizer_setup_seconds
    from ..decoding.constraint import ProgramConstraint
    from ..decoding.forcing import forced_ids

    send({"type": "phase", "what": "model load"})
    started = time.perf_counter()
    model = models.load(FAMILIES[family], tokenizer_root=cfg.tokenizer_root)
    load_seconds = time.perf_counter() - started
    # Both mask kernels import torch's compiler stack (~1 s, paid once by whichever comes
    # first): import them before any timing so that neither backend is charged for it.
    started = time.perf_counter()
    import llguidance.torch  # noqa: F401
    import outlines_core.kernels.torch  # noqa: F401
    imports_seconds = time.perf_counter() - started
    ids = forced_ids(get_adapter(model.hf_tokenizer), program_text)

    send({"type": "phase", "what": "llguidance setup"})
    first = compile_grammar(model, cfg.sizes[0])  # first use: the tokenizer work is cached here
    llg_setup = tokenizer_setup_seconds(model)
    started = time.perf_counter()
    LLGuidanceBackend(model)  # the llguidance tokenizer alone, rebuilt
    llg_tokenizer_seconds = time.perf_counter() - started
    # The first document of a process also pays one-time matcher work: time it apart,
    # so that the per-size figures below are those of any later document.
    started = time.perf_counter()
    ProgramConstraint(first).allowed(first.table.vocab_size)
    llg_first_document = first.compile_seconds + time.perf_counter() - started
    texts = _prefixes(first.llg_tokenizer, ids)
    regions = [_region(t) for t in texts]
    # Outlines' processors size the mask by the logits' width (the model's vocabulary).
    vocab = max(first.table.vocab_size, int(getattr(model.model.config, "vocab_size", 0) or 0))

    send({"type": "phase", "what": "outlines_core vocabulary"})
    started = time.perf_counter()
    oc_backend = OutlinesCoreBackend(model)
    oc_vocab_seconds = time.perf_counter() - started

    send({"type": "setup", "data": {
        "vocab_size": first.table.vocab_size,
        "program_tokens": len(ids),
        "model_load_seconds": load_seconds,
        "kernel_imports_seconds": imports_seconds,
        "llguidance_first_document_seconds": llg_first_document,
        "setup": {"llguidance_tokenizer_setup_seconds": llg_setup,
                  "llguidance_tokenizer_seconds": llg_tokenizer_seconds,
                  "outlines_core_vocabulary_seconds": oc_vocab_seconds,
                  "outlines_core_vocabulary_serialized_mib": len(pickle.dumps(oc_backend.vocabulary)) / 2**20}}})

    for n in cfg.sizes:
        send({"type": "phase", "what": f"llguidance n={n}"})
        llg, compiled = _llguidance_size(model, n, ids, regions, cfg.repeats)
        oc, index = _outlines_core_size(oc_backend, n, ids, regions, vocab, cfg.repeats, send)
        send({"type": "phase", "what": f"agreement n={n}"})
        agreement = _agreement(compiled, index, ids, texts, vocab)
        send({"type": "size", "n": n, "data": {"llguidance": llg, "outlines_core": oc, "agreement": agreement}})


def _llguidance_size(model: Any, n: int, ids: Sequence[int], regions: Sequence[str],
                     repeats: int) -> tuple[dict[str, Any], Any]:
    import llguidance
    import llguidance.torch

    from ..decoding.compiling import compile_grammar
    from ..decoding.constraint import ProgramConstraint

    compile_s, matcher_s, first_mask_s = [], [], []
    for _ in range(repeats):
        compiled = compile_grammar(model, n)
        compile_s.append(compiled.compile_seconds)
        started = time.perf_counter()
        constraint = ProgramConstraint(compiled)
        matcher_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        constraint.allowed(compiled.table.vocab_size)
        first_mask_s.append(time.perf_counter() - started)
    vocab = compiled.table.vocab_size
    allowed_us: list[float] = []
    advance_us: list[float] = []
    fill_us: list[float] = []
    bitmask = llguidance.torch.allocate_token_bitmask(1, vocab)
    for _ in range(repeats):
        constraint = ProgramConstraint(compiled)  # fresh: the real loop builds one per document
        for tid in ids:
            started = time.perf_counter_ns()
            constraint.allowed(vocab)
            allowed_us.append((time.perf_counter_ns() - started) / 1e3)
            started = time.perf_counter_ns()
            constraint.advance([tid])
            advance_us.append((time.perf_counter_ns() - started) / 1e3)
        matcher = llguidance.LLMatcher(compiled.llg_tokenizer, compiled.grammar_spec)
        for tid in ids:
            started = time.perf_counter_ns()
            llguidance.torch.fill_next_token_bitmask(matcher, bitmask, 0)
            fill_us.append((time.perf_counter_ns() - started) / 1e3)
            if not matcher.consume_token(int(tid)):
                raise RuntimeError(f"llguidance rejected token {tid}: {matcher.get_error()}")
    regions = list(regions) * repeats
    return {
        "compile_seconds": statistics.median(compile_s),
        "matcher_seconds": statistics.median(matcher_s),
        "first_mask_seconds": statistics.median(first_mask_s),
        "per_document_seconds": statistics.median(
            [a + b + c for a, b, c in zip(compile_s, matcher_s, first_mask_s)]),
        "compile_seconds_all": compile_s,
        "matcher_seconds_all": matcher_s,
        "first_mask_seconds_all": first_mask_s,
        "steps": len(ids),
        "allowed_us": _stats(allowed_us, regions),
        "fill_bitmask_us": _stats(fill_us, regions),
        "advance_us": _stats(advance_us, regions),
    }, compiled


def _outlines_core_size(backend: Any, n: int, ids: Sequence[int], regions: Sequence[str],
                        vocab: int, repeats: int, send: Any) -> tuple[dict[str, Any], Any]:
    from outlines_core import Guide
    from outlines_core.kernels.torch import allocate_token_bitmask, fill_next_token_bitmask

    from ..language.grammar import program_regex

    build_s: list[float] = []
    processor = None
    for attempt in range(repeats):
        send({"type": "phase", "what": f"outlines_core index n={n} (build {attempt + 1})"})
        processor = None  # one index alive at a time
        started = time.perf_counter()
        processor = backend.get_regex_logits_processor(program_regex(n))
        build_s.append(time.perf_counter() - started)
    index = processor.index
    # Size of the index: its transition table (the resident size is not separable from
    # the allocator's reuse in one process) and its serialized (pickled) bytes.
    transitions = index.get_transitions()
    size = {"index_states": len(transitions),
            "index_transitions": sum(len(out) for out in transitions.values()),
            "index_serialized_mib": len(pickle.dumps(index)) / 2**20}
    del transitions
    send({"type": "phase", "what": f"outlines_core steps n={n}"})
    started = time.perf_counter()
    Guide(index)
    guide_s = time.perf_counter() - started
    bitmask = allocate_token_bitmask(vocab)
    fill_us: list[float] = []
    advance_us: list[float] = []
    tokens_us: list[float] = []
    for _ in range(repeats):
        guide = Guide(index)  # fresh, like a new generation
        for tid in ids:
            started = time.perf_counter_ns()
            fill_next_token_bitmask(guide, bitmask)
            fill_us.append((time.perf_counter_ns() - started) / 1e3)
            started = time.perf_counter_ns()
            guide.advance(int(tid), return_tokens=False)
            advance_us.append((time.perf_counter_ns() - started) / 1e3)
        guide = Guide(index)
        for tid in ids:
            started = time.perf_counter_ns()
            guide.get_tokens()
            tokens_us.append((time.perf_counter_ns() - started) / 1e3)
            guide.advance(int(tid), return_tokens=False)
        if not guide.is_finished():
            raise RuntimeError("outlines_core's guide is not in a final state after the program")
    regions = list(regions) * repeats
    return {
        "index_seconds": statistics.median(build_s),
        "index_seconds_all": build_s,
        **size,
        "guide_seconds": guide_s,
        "per_document_seconds": statistics.median(build_s) + guide_s,
        "steps": len(ids),
        "fill_bitmask_us": _stats(fill_us, regions),
        "get_tokens_us": _stats(tokens_us, regions),
        "advance_us": _stats(advance_us, regions),
    }, index


def _agreement(compiled: Any, index: Any, ids: Sequence[int], texts: Sequence[str],
               vocab: int, examples: int = 2) -> dict[str, Any]:
    """Compare the two backends' allowed sets at every step of the program (untimed).

    Tokens allowed by one backend only are counted per region (``body``: inside a gen
    body; ``structure``: elsewhere) and per kind: ``special`` (a special token),
    ``invalid_utf8`` (its bytes are not valid UTF-8 on their own, e.g. a lone
    continuation byte) or ``other``; ``token_steps`` sums over steps, ``distinct``
    counts ids.
    """
    import llguidance
    import llguidance.torch
    import numpy as np
    from outlines_core import Guide
    from outlines_core.kernels.torch import allocate_token_bitmask, fill_next_token_bitmask

    from ..decoding.constraint import bitmask_to_mask

    tok = compiled.llg_tokenizer
    width = tok.vocab_size
    matcher = llguidance.LLMatcher(tok, compiled.grammar_spec)
    guide = Guide(index)
    llg_bits = llguidance.torch.allocate_token_bitmask(1, width)
    oc_bits = allocate_token_bitmask(vocab)
    kinds: dict[int, str] = {}
    regions = ("body", "structure")
    differing = {r: 0 for r in regions}
    seen: dict[str, dict[str, dict[str, set]]] = {
        side: {r: {} for r in regions} for side in ("only_llguidance", "only_outlines_core")}
    steps_sum: dict[str, dict[str, dict[str, int]]] = {
        side: {r: {} for r in regions} for side in seen}
    shown: list[dict[str, Any]] = []
    for step, tid in enumerate(ids):
        region = _region(texts[step])
        llguidance.torch.fill_next_token_bitmask(matcher, llg_bits, 0)
        fill_next_token_bitmask(guide, oc_bits)
        a = bitmask_to_mask(llg_bits[0], width).numpy()
        b = bitmask_to_mask(oc_bits[0], width).numpy()
        sides = {"only_llguidance": np.flatnonzero(a & ~b), "only_outlines_core": np.flatnonzero(b & ~a)}
        if any(len(v) for v in sides.values()):
            differing[region] += 1
            for side, found in sides.items():
                for t in found.tolist():
                    kind = kinds.get(t) or kinds.setdefault(t, _kind(tok, t))
                    seen[side][region].setdefault(kind, set()).add(t)
                    steps_sum[side][region][kind] = steps_sum[side][region].get(kind, 0) + 1
            if sum(1 for e in shown if e["region"] == region) < examples:
                shown.append({"step": step, "region": region, "after": texts[step][-40:],
                              **{side: len(v) for side, v in sides.items()},
                              **{side + "_ex": [_show(tok, t) for t in v[:6]] for side, v in sides.items()}})
        matcher.consume_token(int(tid))
        guide.advance(int(tid), return_tokens=False)
    return {"steps": len(ids), "steps_differing": sum(differing.values()), "by_region": differing,
            **{side: {r: {k: {"distinct": len(ids_), "token_steps": steps_sum[side][r][k]}
                          for k, ids_ in sorted(seen[side][r].items())} for r in regions}
               for side in seen},
            "examples": shown}


def _kind(tok: Any, tid: int) -> str:
    if tok.is_special_token(tid):
        return "special"
    try:
        tok.decode_bytes([tid]).decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8"
    return "other"


def _show(tok: Any, tid: int) -> str:
    data = tok.decode_bytes([int(tid)])
    special = " (special)" if tok.is_special_token(int(tid)) else ""
    return f"{int(tid)}:{data.decode('utf-8', 'replace')!r}{special}"


def _prefixes(tok: Any, ids: Sequence[int]) -> list[str]:
    """The program text before each step."""
    out, data = [], b""
    for tid in ids:
        out.append(data.decode("utf-8", "replace"))
        data += tok.decode_bytes([int(tid)])
    return out


def _region(text: str) -> str:
    """``body`` inside a gen body, ``structure`` elsewhere (tags, program open/close)."""
    return "body" if text.rfind(GEN_OPEN) > text.rfind(GEN_CLOSE) else "structure"


def _stats(values: Sequence[float], regions: Sequence[str]) -> dict[str, Any]:
    out = _summary(values)
    for name in ("body", "structure"):
        part = [v for v, r in zip(values, regions) if r == name]
        out[name] = _summary(part)
    return out


def _summary(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean": statistics.fmean(values), "p50": _common.percentile(list(values), 50),
            "p95": _common.percentile(list(values), 95), "max": max(values)}


# --- table -------------------------------------------------------------------------------


def format_constraint(report: dict[str, Any]) -> str:
    """Two tables: per-tokenizer setup; per tokenizer and size, compile and step costs."""
    env = report["environment"]
    case = report["case"]
    lines = [f"bench constraint: llguidance (CFG) vs outlines_core (token FSM); forced program: oracle of "
             f"{case['id']} ({case['ops']} ops, {case['program_chars']} chars); repeats "
             f"{report['config']['repeats']}",
             f"{env['cpu']} x{env['cpus']}, load {env['loadavg_1_5_15']} -> {env.get('loadavg_end')}; "
             f"outlines {env['outlines']}, llguidance {env['llguidance']}, outlines_core "
             f"{env['outlines_core']}, torch {env['torch']}; {env['date_utc']} UTC", ""]
    lines.append("setup (first use of a tokenizer), seconds")
    head = (f"{'tokenizer':<15}{'vocab':>8}{'llg setup':>11}{'(llg tok)':>11}{'llg 1st doc':>13}"
            f"{'oc vocab':>10}{'oc vocab MiB':>14}")
    lines += [head, "-" * len(head)]
    for family, rec in report["tokenizers"].items():
        setup = rec.get("setup")
        if not setup:
            lines.append(f"{family:<15}  stopped: {rec.get('stopped', '?')}")
            continue
        lines.append(f"{family:<15}{rec['vocab_size']:>8}{setup['llguidance_tokenizer_setup_seconds']:>11.3f}"
                     f"{setup['llguidance_tokenizer_seconds']:>11.3f}{rec['llguidance_first_document_seconds']:>13.3f}"
                     f"{setup['outlines_core_vocabulary_seconds']:>10.3f}"
                     f"{setup['outlines_core_vocabulary_serialized_mib']:>14.1f}")
    lines += ["", "per document (median) and per step (mean / p95 over every token of the program, us)"]
    head = (f"{'tokenizer':<15}{'n':>6}{'llg doc ms':>11}{'oc index s':>11}{'oc MiB':>8}{'oc states':>10}"
            f"{'llg allowed':>14}{'llg fill':>12}{'oc fill':>12}{'oc get_tokens':>15}{'differ b/s/all':>16}")
    lines += [head, "-" * len(head)]
    for family, rec in report["tokenizers"].items():
        for n, row in rec["sizes"].items():
            llg, oc, agree = row["llguidance"], row["outlines_core"], row["agreement"]
            lines.append(
                f"{family:<15}{n:>6}{1e3 * llg['per_document_seconds']:>11.2f}{oc['index_seconds']:>11.3f}"
                f"{oc['index_serialized_mib']:>8.1f}{oc['index_states']:>10}"
                f"{_ms(llg['allowed_us']):>14}{_ms(llg['fill_bitmask_us']):>12}{_ms(oc['fill_bitmask_us']):>12}"
                f"{_ms(oc['get_tokens_us']):>15}{_differ(agree):>16}")
        if "stopped" in rec:
            lines.append(f"{family:<15}  stopped: {rec['stopped']}")
    lines += ["", "llg doc ms = compile_grammar + matcher construction + first mask; oc index s = "
                  "get_regex_logits_processor(program_regex(n)); oc MiB = the index pickled;",
              "llg allowed = ProgramConstraint.allowed (bitmask + index order + tag boundary); fill = each "
              "backend's fill_next_token_bitmask; differ = steps whose allowed sets differ (in gen bodies / "
              "elsewhere / of all steps)."]
    return "\n".join(lines)


def _differ(agree: dict[str, Any]) -> str:
    regions = agree["by_region"]
    return f"{regions['body']}/{regions['structure']}/{agree['steps']}"


def _ms(stats: dict[str, Any]) -> str:
    return f"{stats['mean']:.0f}/{stats['p95']:.0f}" if stats.get("n") else "-"
