"""Bench-side drivers of :class:`~cad_outlines.generator.CaDGenerator`'s own pieces.

Nothing here copies the decode loop: :class:`CountingGenerator` runs the real loop with a
stand-in forward (to count a program's decode steps and forced runs), :class:`CpuClocked`
adds a CPU-time mark to it, and :func:`regen_baseline` runs baseline (a), "full
autoregressive regeneration with the same forward and no constraint", through the
generator's own unconstrained branch (``CaDGenerator.regenerate``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch

from ..generator import CaDGenerator
from ..program import Copy, Gen, Op


class CountingGenerator(CaDGenerator):
    """The real decode loop with a stand-in forward that records how many ids it got.

    ``widths[0]`` is the prompt; each later entry is one forward of the loop (1 = a plain
    decode step, more = a step carrying a forced run and/or a splice). No model runs.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.widths: list[int] = []

    def _forward(self, ids: Sequence[int], cache: Any) -> torch.Tensor:
        self.widths.append(len(ids))
        return torch.zeros(self._vocab)


class CpuClocked(CaDGenerator):
    """The generator with a process-CPU-time mark at the end of each run's first forward.

    On a shared CPU machine wall time counts the time other processes hold the cores;
    with one intra-op thread, process CPU time measures the run's own work. ``cpu_run``
    returns both clocks' view of a run: total and after the prompt prefill.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.prefill_cpu_end: Optional[float] = None

    def _forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> torch.Tensor:
        # ``rows`` keeps tag drafting on (the generator drafts only through a ``_forward``
        # that can return several rows).
        out = super()._forward(ids, cache, rows)
        if self.prefill_cpu_end is None:
            self.prefill_cpu_end = time.process_time()
        return out


def cpu_run(gen: CpuClocked, call: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """Run ``call()`` (one run of ``gen``); return its result and its CPU seconds."""
    gen.prefill_cpu_end = None
    start = time.process_time()
    result = call()
    end = time.process_time()
    mark = gen.prefill_cpu_end if gen.prefill_cpu_end is not None else start
    return result, {"cpu_total_seconds": end - start, "cpu_gen_seconds": end - mark}


@dataclass(frozen=True)
class TagShape:
    """Decode steps and forced runs that one copy tag adds to a program."""

    tag: str
    decode_steps: int
    forced_runs: int
    forced_tokens: int


def tag_shape(model: Any, n_lines: int = 300, copy: tuple[int, int] = (120, 245)) -> TagShape:
    """Count what ``<copy lines="i-j"/>`` costs in the real loop (fast-forward on).

    Two forced programs on an ``n_lines`` document are run through
    :class:`CountingGenerator` (``splice=False`` so that forward widths are
    ``1 + forced run``): gen, copy, gen and gen, gen; the differences are the tag's.
    """
    doc = "\n".join(f"line {k} = {k} * 2" for k in range(1, n_lines + 1))
    with_copy: list[Op] = [Gen("\nx = 1\n"), Copy(*copy), Gen("\ny = 2\n")]
    without: list[Op] = [Gen("\nx = 1\n"), Gen("\ny = 2\n")]
    counts = []
    for ops in (with_copy, without):
        gen = CountingGenerator(model, doc, splice=False)
        stats = gen.run("edit", force_program=ops).stats
        loop = gen.widths[1:]
        counts.append((stats.decoded_tokens, sum(w > 1 for w in loop), stats.forced_tokens))
    (d1, r1, f1), (d0, r0, f0) = counts
    return TagShape(f'<copy lines="{copy[0]}-{copy[1]}"/>', d1 - d0, r1 - r0, f1 - f0)


def regen_baseline(gen: CpuClocked, instruction: str, gold: str) -> dict[str, Any]:
    """Baseline (a) for one case: the gold teacher-forced through the generator's own
    unconstrained loop (``CaDGenerator.regenerate(instruction, target=gold)``).

    Returns a dict with ``prompt_tokens``, ``tokens``, ``forward_passes``,
    ``prefill_seconds``, ``total_seconds``, ``gen_seconds``, the CPU-time figures of
    :func:`cpu_run` and ``exact``.
    """
    result, cpu = cpu_run(gen, lambda: gen.regenerate(instruction, target=gold))
    st = result.stats
    return {"prompt_tokens": st.prompt_tokens, "tokens": st.decoded_tokens + st.forced_tokens,
            "forward_passes": st.forward_passes, "prefill_seconds": st.prefill_seconds,
            "total_seconds": st.total_seconds, "gen_seconds": st.total_seconds - st.prefill_seconds,
            "constraint_seconds": st.constraint_seconds, **cpu, "exact": result.document == gold,
            "via": "CaDGenerator.regenerate"}
