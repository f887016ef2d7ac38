"""Speed-up bounds of Copy-as-Decode from a measured kernel curve (model-free, no torch).

Notation (all times in seconds, token counts per corpus or per case):

* ``T``: tokens of the gold text; full regeneration costs ``T`` decode steps;
* ``T_gen``: gold tokens the oracle program generates; ``N_k``: tokens of copy ``k``
  (:mod:`cad_outlines.training.ceiling`: ``T = T_gen + sum(N_k)``);
* ``tau``: one decode step (a one-token forward after the prefix);
* ``s(N) = T_AR(N) / T_PP(N)``: the kernel speed-up of ONE ``N``-token forward over
  ``N`` one-token decode forwards on the same cache (``bench kernel``). Copying ``N``
  tokens in one forward therefore costs ``N * tau / s(N)``.

Bounds (speed-up of the generation phase over full regeneration; prompt prefill is
common to both and left out):

* ``bnd_exact = T / (T_gen + sum_k N_k / s(N_k))``, with ``s`` interpolated
  log-linearly (linear in ``log N``) between measured points and clamped to the
  end points outside the measured range;
* ``bnd_m8``: every span at ``s(8)``; ``bnd_mean``: every span at ``s(mean span)``;
* ``bnd_fixed``: ``bnd_exact`` with a fixed cost ``c`` per copy:
  ``T / (T_gen + sum_k (N_k / s(N_k) + c / tau))``;
* ``bnd_policy``: ``bnd_fixed`` when only spans of at least ``m*`` tokens are copied
  (shorter ones are generated).

The per-copy fixed cost ``c`` (:class:`FixedCosts`) is what a copy pays besides its
splice forward: the decode steps of its tag, each a forward (``tau``), a mask
(``c_mask_tag``: the constraint's ``allowed()`` + masked argmax inside a copy tag) and
a device->host sync of the logits (``c_sync``); plus, per grammar-forced run inside the
tag, the widening of one forward from 1 token to the run (``c_forced - tau``, where
``c_forced`` is one forward over a 3-5-token forced run)::

    c = d_tag * (tau + c_mask_tag + c_sync) + r_tag * max(0, c_forced - tau)

The minimum-span policy copies a span only when ``s(N) > 1 + c / (N * tau)``:
``m* = min{N : s(N) > 1 + c / (N tau)}``. This is the first-order form of the exact
break-even ``N tau > N tau / s(N) + c`` (i.e. ``s(N) > 1 / (1 - c / (N tau))``), which
:func:`m_star_exact` gives; the two differ only when ``c`` is comparable to ``N tau``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

from ..errors import InputError

__all__ = [
    "Bounds", "FixedCosts", "Kernel", "KernelCurve", "bnd_exact", "bnd_fixed", "bnd_m8",
    "bnd_mean", "bnd_policy", "compute_bounds", "load_kernel", "m_star", "m_star_exact",
    "speedup",
]

KERNEL_KIND = "cad-outlines.kernel"


@dataclass(frozen=True)
class KernelCurve:
    """Measured kernel speed-up ``s(N)`` at increasing ``N``.

    Parameters
    ----------
    n
        Strictly increasing token counts, each ``>= 1``.
    s
        ``s(N)`` at each ``n`` (``> 0``).
    """

    n: tuple[int, ...]
    s: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.n) != len(self.s) or not self.n:
            raise ValueError(f"a kernel curve needs as many s values as N values (>= 1), "
                             f"got {len(self.n)} N and {len(self.s)} s")
        if any(b <= a for a, b in zip(self.n, self.n[1:])) or self.n[0] < 1:
            raise ValueError(f"kernel curve N values must be >= 1 and strictly increasing, got {self.n}")
        if any(not (v > 0 and math.isfinite(v)) for v in self.s):
            raise ValueError(f"kernel curve s values must be finite and > 0, got {self.s}")

    def __call__(self, n: float) -> float:
        """``s(n)``: linear in ``log n`` between measured points, clamped outside them."""
        if n <= self.n[0]:
            return self.s[0]
        if n >= self.n[-1]:
            return self.s[-1]
        hi = next(i for i, v in enumerate(self.n) if v >= n)
        lo = hi - 1
        if self.n[hi] == n:
            return self.s[hi]
        x0, x1 = math.log(self.n[lo]), math.log(self.n[hi])
        w = (math.log(n) - x0) / (x1 - x0)
        return self.s[lo] + w * (self.s[hi] - self.s[lo])


@dataclass(frozen=True)
class FixedCosts:
    """Per-op fixed costs measured by ``bench kernel`` (seconds) and the tag's shape.

    Attributes
    ----------
    tau
        One decode step: a one-token forward after the prefix.
    c_mask
        The constraint's ``allowed()`` + masked argmax inside a gen body.
    c_mask_tag
        The same inside a copy tag (the index-order automaton runs there).
    c_sync
        Copying the next-token logits from the device to the host.
    c_forced
        One forward over a 3-5-token grammar-forced run.
    tag_decode_steps
        Decode steps (chosen tokens) of one copy tag.
    tag_forced_runs
        Grammar-forced runs inside one copy tag.
    """

    tau: float
    c_mask: float
    c_mask_tag: float
    c_sync: float
    c_forced: float
    tag_decode_steps: float
    tag_forced_runs: float

    @property
    def per_copy(self) -> float:
        """``c``: what one copy costs besides its splice forward (module docstring)."""
        return (self.tag_decode_steps * (self.tau + self.c_mask_tag + self.c_sync)
                + self.tag_forced_runs * max(0.0, self.c_forced - self.tau))

    @property
    def loop_overhead_fraction(self) -> float:
        """``(c_mask + c_sync) / tau``: the decode loop's cost per token over a bare step."""
        return (self.c_mask + self.c_sync) / self.tau


def speedup(T: int, T_gen: int, spans: Iterable[int], s: Callable[[float], float],
            per_copy_steps: float = 0.0, min_span: int = 1) -> float:
    """``T / (T_gen + sum_k cost_k)`` in units of decode steps.

    A span ``N >= min_span`` costs ``N / s(N) + per_copy_steps``; a shorter one is
    generated and costs ``N``.
    """
    denom = float(T_gen)
    for n in spans:
        if n < 0:  # 0 is possible: a copied empty line has no tokens of its own
            raise ValueError(f"a copy span has no negative token count, got {n}")
        denom += n / s(n) + per_copy_steps if n >= min_span else n
    if denom <= 0:
        raise ValueError("nothing to decode: T_gen = 0 and no spans")
    return T / denom


def bnd_exact(T: int, T_gen: int, spans: Sequence[int], curve: KernelCurve) -> float:
    """``T / (T_gen + sum_k N_k / s(N_k))``."""
    return speedup(T, T_gen, spans, curve)


def bnd_m8(T: int, T_gen: int, spans: Sequence[int], curve: KernelCurve) -> float:
    """Every span at ``s(8)``."""
    s8 = curve(8)
    return speedup(T, T_gen, spans, lambda _: s8)


def bnd_mean(T: int, T_gen: int, spans: Sequence[int], curve: KernelCurve) -> float:
    """Every span at ``s(mean span)``."""
    if not spans:
        return speedup(T, T_gen, spans, curve)
    s_mean = curve(sum(spans) / len(spans))
    return speedup(T, T_gen, spans, lambda _: s_mean)


def bnd_fixed(T: int, T_gen: int, spans: Sequence[int], curve: KernelCurve,
              costs: FixedCosts) -> float:
    """``bnd_exact`` with the fixed cost ``c`` of every copy (``c / tau`` steps each)."""
    return speedup(T, T_gen, spans, curve, costs.per_copy / costs.tau)


def bnd_policy(T: int, T_gen: int, spans: Sequence[int], curve: KernelCurve,
               costs: FixedCosts, m: Optional[int]) -> float:
    """``bnd_fixed`` when spans shorter than ``m`` are generated (``m=None``: none copied)."""
    if m is None:
        return T / (T_gen + sum(spans)) if T else 0.0
    return speedup(T, T_gen, spans, curve, costs.per_copy / costs.tau, min_span=m)


def m_star(curve: KernelCurve, c: float, tau: float, limit: int = 1 << 20) -> Optional[int]:
    """``min{N : s(N) > 1 + c / (N tau)}``; ``None`` if no ``N <= limit`` qualifies."""
    return _first(lambda n: curve(n) > 1 + c / (n * tau), curve, limit)


def m_star_exact(curve: KernelCurve, c: float, tau: float, limit: int = 1 << 20) -> Optional[int]:
    """``min{N : N tau > N tau / s(N) + c}``, the exact break-even of :func:`m_star`."""
    return _first(lambda n: n * tau > n * tau / curve(n) + c, curve, limit)


def _first(ok: Callable[[int], bool], curve: KernelCurve, limit: int) -> Optional[int]:
    # Beyond the last measured N the curve is flat and c / (N tau) falls, so the
    # condition is monotone there: scan the measured range, then bisect the tail.
    last = curve.n[-1]
    for n in range(1, min(last, limit) + 1):
        if ok(n):
            return n
    if limit <= last or not ok(limit):
        return None
    lo, hi = last, limit  # ok(lo) is False, ok(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class Bounds:
    """Every bound of one corpus (or case) for one kernel."""

    T: int
    T_gen: int
    K: int
    span_mean: float
    s8: float
    s_mean: float
    bnd_m8: float
    bnd_mean: float
    bnd_exact: float
    bnd_fixed: Optional[float] = None
    per_copy_cost: Optional[float] = None
    m_star: Optional[int] = None
    m_star_exact: Optional[int] = None
    bnd_policy: Optional[float] = None
    spans_beyond_curve: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compute_bounds(T: int, T_gen: int, spans: Sequence[int], curve: KernelCurve,
                   costs: Optional[FixedCosts] = None) -> Bounds:
    """All bounds for token counts ``T``, ``T_gen`` and copy ``spans``.

    ``spans_beyond_curve`` counts spans longer than the largest measured ``N`` (their
    ``s`` is clamped to the last measured value).
    """
    if T != T_gen + sum(spans):
        raise ValueError(f"T ({T}) must equal T_gen ({T_gen}) + the copied tokens ({sum(spans)})")
    mean = sum(spans) / len(spans) if spans else 0.0
    out = dict(T=T, T_gen=T_gen, K=len(spans), span_mean=mean, s8=curve(8),
               s_mean=curve(mean) if spans else curve(1),
               bnd_m8=bnd_m8(T, T_gen, spans, curve), bnd_mean=bnd_mean(T, T_gen, spans, curve),
               bnd_exact=bnd_exact(T, T_gen, spans, curve),
               spans_beyond_curve=sum(n > curve.n[-1] for n in spans))
    if costs is not None:
        c = costs.per_copy
        m = m_star(curve, c, costs.tau)
        out.update(bnd_fixed=bnd_fixed(T, T_gen, spans, curve, costs), per_copy_cost=c,
                   m_star=m, m_star_exact=m_star_exact(curve, c, costs.tau),
                   bnd_policy=bnd_policy(T, T_gen, spans, curve, costs, m))
    return Bounds(**out)


# --- kernel files ----------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    """A kernel measurement as written by ``bench kernel -o KERNEL.json``."""

    curve_keep1: KernelCurve
    curve_full: KernelCurve
    costs: FixedCosts
    meta: dict[str, Any]

    def curve(self, logits: str = "keep1") -> KernelCurve:
        """The curve with ``logits_to_keep=1`` (what the generator runs) or full logits."""
        if logits not in ("keep1", "full"):
            raise ValueError(f"logits must be 'keep1' or 'full', got {logits!r}")
        return self.curve_keep1 if logits == "keep1" else self.curve_full


def kernel_from_dict(data: dict[str, Any], where: str = "<kernel>") -> Kernel:
    """Parse a kernel record; errors name ``where`` and the missing or bad field."""
    if data.get("kind") != KERNEL_KIND:
        raise InputError(f"{where}: not a kernel file (expected kind {KERNEL_KIND!r}, "
                         f"got {data.get('kind')!r})")
    try:
        n = tuple(int(v) for v in data["n"])
        keep1 = KernelCurve(n, tuple(float(v) for v in data["s_keep1"]))
        full = KernelCurve(n, tuple(float(v) for v in data["s_full"]))
        costs = FixedCosts(**{f: float(data["costs"][f]) for f in FixedCosts.__dataclass_fields__})
    except KeyError as err:
        raise InputError(f"{where}: missing field {err.args[0]!r}") from None
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: {err}") from None
    return Kernel(keep1, full, costs, {k: v for k, v in data.items()
                                       if k not in ("n", "s_keep1", "s_full", "costs")})


def load_kernel(path: str | os.PathLike) -> Kernel:
    """Read a ``bench kernel`` JSON file."""
    from ..files import read_text

    where = os.fspath(path)
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: bad JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object")
    return kernel_from_dict(data, where)


# --- ceiling + bounds (``cad-outlines bench bounds``) ------------------------------------


def ceiling_with_bounds(cases: Iterable[Any], tokenization: Any, kernel: Kernel, *,
                        granularity: str = "lines", min_span: int = 8,
                        progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """Copy-ceiling statistics and every bound, from one pass over the corpus.

    Returns
    -------
    (stats, bounds)
        ``stats`` is :class:`cad_outlines.training.ceiling.CeilingStats`; ``bounds`` maps
        ``"keep1"`` and ``"full"`` (the kernel curve used) to :meth:`Bounds.as_dict`,
        plus ``"kernel"``: where the kernel came from.
    """
    from ..training.ceiling import case_ceilings, summarize

    results = case_ceilings(cases, tokenization, granularity=granularity, min_span=min_span,
                            progress=progress)
    stats = summarize(results)
    spans = [n for r in results for n in r.spans]
    out: dict[str, Any] = {
        logits: compute_bounds(stats.T, stats.T_gen, spans, kernel.curve(logits), kernel.costs).as_dict()
        for logits in ("keep1", "full")}
    out["kernel"] = {k: kernel.meta.get(k) for k in ("preset", "device", "dtype", "prefix", "trials", "max_n")}
    out["kernel"]["tau"] = kernel.costs.tau
    return stats, out


def format_bounds(bounds: dict[str, Any], name: str = "") -> str:
    """Markdown table of the bounds (one row per kernel curve)."""
    k = bounds["kernel"]
    lines = [f"bounds from kernel {k['preset']} ({k['dtype']}, {k['device']}, prefix {k['prefix']}, "
             f"max N {k['max_n']}, tau {k['tau'] * 1e3:.2f} ms)", "",
             f"| {name} logits | s(8) | s(mean span) | bnd_m8 | bnd_mean | bnd_exact | c / tau "
             "| bnd_fixed | m* (exact) | bnd_policy | spans > max N |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for logits in ("keep1", "full"):
        b = bounds[logits]
        lines.append(f"| {logits} | {b['s8']:.2f} | {b['s_mean']:.2f} | {b['bnd_m8']:.2f} | {b['bnd_mean']:.2f} "
                     f"| {b['bnd_exact']:.2f} | {b['per_copy_cost'] / bounds['kernel']['tau']:.1f} "
                     f"| {b['bnd_fixed']:.2f} | {b['m_star']} ({b['m_star_exact']}) | {b['bnd_policy']:.2f} "
                     f"| {b['spans_beyond_curve']}/{b['K']} |")
    return "\n".join(lines)
