"""Bench-side drivers of :class:`~cad_outlines.decoding.generator.CaDGenerator`.

Nothing here copies or subclasses the decode loop: benchmarks count and clock by handing
the generator a runner (:mod:`cad_outlines.decoding.runner`). :class:`CountingRunner` stands in
for the model (to count a program's decode steps and forced runs without one),
:class:`CpuClock` observes the real runner to put a CPU-time mark after each run's
first forward, and :func:`regen_baseline` runs baseline (a), "full autoregressive
regeneration with the same forward and no constraint", through the generator's own
unconstrained branch (``CaDGenerator.regenerate``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch

from ..decoding.generator import CaDGenerator
from ..decoding.options import group_options
from ..language.program import Copy, Gen, Op
from ..language.syntax import copy_tag
from ..decoding.runner import ObservedRunner, TransformersRunner


class CountingRunner:
    """A stand-in model side that records how many ids each forward appends.

    ``widths[0]`` is the prompt; each later entry is one forward of the loop (1 = a plain
    decode step, more = a step carrying a forced run and/or a splice). No model runs: the
    logits are zeros, so only forced programs make sense with it.
    """

    def __init__(self, vocab_size: int):
        self.device = torch.device("cpu")
        self.vocab_size = vocab_size
        self.max_positions = None
        self.widths: list[int] = []

    def new_cache(self) -> Any:
        return None

    def forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> torch.Tensor:
        self.widths.append(len(ids))
        return torch.zeros(self.vocab_size) if rows == 1 else torch.zeros(rows, self.vocab_size)

    def crop(self, cache: Any, n: int) -> None:
        pass


def counting_generator(model: Any, document: str, **options: Any) -> tuple[CaDGenerator, CountingRunner]:
    """A generator over ``document`` whose forwards are counted, not run (drafts off);
    ``options`` are flat keywords (:func:`~cad_outlines.decoding.options.group_options`)."""
    vocab = model.model.get_output_embeddings().weight.shape[0]
    runner = CountingRunner(vocab)
    options = {"draft_tags": False, **options, "runner": runner}
    return CaDGenerator(model, document, **group_options(options, caller="counting_generator")), runner


class CpuClock:
    """Observes a runner: a process-CPU-time mark at the end of each run's first forward;
    and, as :meth:`phase`, the decode loop's phases (wall clock).

    On a shared CPU machine wall time counts the time other processes hold the cores;
    with one intra-op thread, process CPU time measures the run's own work. ``cpu_run``
    returns both clocks' view of a run: total and after the prompt prefill, and the
    loop's time by phase where the generator reported them.
    """

    def __init__(self) -> None:
        self.prefill_cpu_end: Optional[float] = None
        self.phases: dict[str, float] = {}
        self._current: Optional[tuple[str, float]] = None

    def __call__(self, width: int, rows: int, seconds: float) -> None:
        if self.prefill_cpu_end is None:
            self.prefill_cpu_end = time.process_time()

    def phase(self, name: str) -> None:
        """The generator's ``observer``: the loop enters phase ``name``."""
        now = time.perf_counter()
        if self._current is not None:
            done, since = self._current
            self.phases[done] = self.phases.get(done, 0.0) + now - since
        self._current = None if name == "end" else (name, now)

    def reset(self) -> None:
        self.prefill_cpu_end, self.phases, self._current = None, {}, None

    def breakdown(self) -> dict[str, float]:
        """The loop's seconds: ``constraint`` (mask, advance, forced runs and splice
        look-ups), ``forward`` (decode and forced-run forwards), ``splice`` (forwards that
        carried a copy span); empty when no phase was reported."""
        p = self.phases
        if not p:
            return {}
        return {"constraint_seconds": p.get("mask", 0.0) + p.get("advance", 0.0),
                "forward_seconds": p.get("forward", 0.0), "splice_seconds": p.get("splice", 0.0)}


def clocked_generator(model: Any, document: str, **options: Any) -> tuple[CaDGenerator, CpuClock]:
    """A generator over ``document`` whose runner and loop phases a :class:`CpuClock` observes;
    ``options`` are flat keywords (:func:`~cad_outlines.decoding.options.group_options`)."""
    clock = CpuClock()
    runner = ObservedRunner(TransformersRunner(model.model), clock)
    options = {**options, "runner": runner, "observer": clock.phase}
    return CaDGenerator(model, document, **group_options(options, caller="clocked_generator")), clock


def cpu_run(clock: CpuClock, call: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """Run ``call()`` (one run of a generator ``clock`` observes); return its result, its CPU
    seconds and the loop's seconds by phase (:meth:`CpuClock.breakdown`)."""
    clock.reset()
    start = time.process_time()
    result = call()
    end = time.process_time()
    mark = clock.prefill_cpu_end if clock.prefill_cpu_end is not None else start
    return result, {"cpu_total_seconds": end - start, "cpu_gen_seconds": end - mark, **clock.breakdown()}


class WarmPrefill:
    """The prefill a process pays once the constant head of its prompts is cached.

    A :class:`~cad_outlines.decoding.runner.TransformersRunner` pins ``head`` (the ids every
    prompt of one layout shares, ``Adapter.constant_ids``); each call prefills one prompt
    on top of it, as the product's prefix cache does for every edit after the first.
    The cold prefill is the run's own; the decode after either is the same, so a run's
    warm prompt-included time is its generation time plus this.
    """

    def __init__(self, hf_model: Any, head: Sequence[int]):
        self.runner = TransformersRunner(hf_model)
        self.runner.pin(head)

    def __call__(self, prompt_ids: Sequence[int]) -> dict[str, float]:
        """``cpu_prefill_warm_seconds`` and ``prompt_tokens_cached`` of one prompt."""
        cache = self.runner.new_cache()
        start = time.process_time()
        self.runner.forward(prompt_ids, cache)
        return {"cpu_prefill_warm_seconds": time.process_time() - start,
                "prompt_tokens_cached": self.runner.reused}


def document_prefill(hf_model: Any, prompt_ids: Sequence[int], sibling_ids: Sequence[int]) -> dict[str, float]:
    """The prefill of ``prompt_ids`` with the file cached: what it shares with
    ``sibling_ids`` (the same file version's prompt for another instruction) is pinned
    first, untimed, as an editor's earlier edit of that file leaves it in a kept prefix
    (``TransformersRunner(prefix_cache=True)``). ``cpu_prefill_doc_seconds`` and
    ``prompt_tokens_doc_cached``; a layout with the instruction first caches its head only."""
    shared = os.path.commonprefix([list(prompt_ids), list(sibling_ids)])  # works on any sequences
    timed = WarmPrefill(hf_model, shared)(prompt_ids)
    return {"cpu_prefill_doc_seconds": timed["cpu_prefill_warm_seconds"],
            "prompt_tokens_doc_cached": timed["prompt_tokens_cached"]}


@dataclass(frozen=True)
class TagShape:
    """Decode steps and forced runs that one copy tag adds to a program."""

    tag: str
    decode_steps: int
    forced_runs: int
    forced_tokens: int


def tag_shape(model: Any, n_lines: int = 300, copy: tuple[int, int] = (120, 245)) -> TagShape:
    """Count what ``<copy lines="i-j"/>`` costs in the real loop (fast-forward on).

    Two forced programs on an ``n_lines`` document are run through a
    :class:`CountingRunner` (``splice=False`` so that forward widths are
    ``1 + forced run``): gen, copy, last line, gen and gen, last line, gen; the
    differences are the tag's, written after a gen as in most programs (a program
    never holds two gens in a row, so the last line's copy keeps the two apart).
    """
    doc = "\n".join(f"line {k} = {k} * 2" for k in range(1, n_lines + 1))
    last = Copy(n_lines, n_lines)
    with_copy: list[Op] = [Gen("\nx = 1\n"), Copy(*copy), last, Gen("\ny = 2\n")]
    without: list[Op] = [Gen("\nx = 1\n"), last, Gen("\ny = 2\n")]
    counts = []
    for ops in (with_copy, without):
        gen, runner = counting_generator(model, doc, splice=False)
        stats = gen.run("edit", force_program=ops).stats
        loop = runner.widths[1:]
        counts.append((stats.decoded_tokens, sum(w > 1 for w in loop), stats.forced_tokens))
    (d1, r1, f1), (d0, r0, f0) = counts
    return TagShape(copy_tag("lines", *copy), d1 - d0, r1 - r0, f1 - f0)


def regen_baseline(gen: CaDGenerator, clock: CpuClock, instruction: str, gold: str) -> dict[str, Any]:
    """Baseline (a) for one case: the gold teacher-forced through the generator's own
    unconstrained loop (``CaDGenerator.regenerate(instruction, target=gold)``), with the
    plain prompt (the file as it is, no format statement: what a regenerating user sends).

    Returns a dict with ``prompt_tokens``, ``tokens``, ``forward_passes``,
    ``prefill_seconds``, ``total_seconds``, ``gen_seconds``, the CPU-time figures of
    :func:`cpu_run` and ``exact``.
    """
    result, cpu = cpu_run(clock, lambda: gen.regenerate(instruction, target=gold))
    st = result.stats
    return {"prompt_tokens": st.prompt_tokens, "tokens": st.decoded_tokens + st.forced_tokens,
            "forward_passes": st.forward_passes, "prefill_seconds": st.prefill_seconds,
            "total_seconds": st.total_seconds, "gen_seconds": st.total_seconds - st.prefill_seconds,
            **cpu, "exact": result.document == gold,
            "via": "CaDGenerator.regenerate"}
