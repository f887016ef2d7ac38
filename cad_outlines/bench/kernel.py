"""``bench kernel``: one N-token forward vs N one-token forwards, and per-op fixed costs.

After a ``P``-token prefix in a ``DynamicCache``, for ``N`` in ``1, 2, 4, ..., max_n``:

* ``T_AR(N)``: ``N`` one-token decode forwards, run back to back from the prefix (one run
  of ``max_n`` steps per trial; ``T_AR(N)`` is the time of its first ``N`` steps);
* ``T_PP(N)``: ONE ``N``-token forward over the same prefix, with ``logits_to_keep=1``
  (what the generator runs) and with full logits;
* ``s(N) = T_AR(N) / T_PP(N)``, from the median of ``trials`` trials after a warm-up
  pass over every shape. The cache is cropped back to the prefix between runs. On the
  CPU the same forwards are also timed in process CPU time (``*_cpu`` fields), which
  leaves out the time other processes held the cores of a shared machine.

Fixed costs (medians; see :mod:`.bounds` for how they enter the bounds):

* ``tau``: one decode step (median of all timed one-token forwards);
* ``c_mask`` / ``c_mask_tag``: the constraint's ``allowed()`` + the generator's masked
  argmax over the model's vocabulary, at each state of a real program prefix inside a gen
  body / inside a copy tag;
* ``c_sync``: ``logits[0, -1].float().cpu()`` after a synchronized forward;
* ``c_forced``: one forward over a ``forced_tokens``-token run (default 4);
* the tag's decode steps and forced runs, counted by running the real loop
  (:func:`._loop.tag_shape`).

Forwards are timed with ``time.perf_counter`` around the call and, on CUDA,
``torch.cuda.synchronize()`` before reading the clock.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ..errors import InputError
from ..decoding.generator import MAX_DRAFT_TOKENS, CaDGenerator
from ..language.program import Copy, Gen, render
from ..decoding.sampler import Sampler, SamplingOptions
from ..language.syntax import COPY_START, GEN_OPEN, PROGRAM_CLOSE
from ..decoding.drafting import ForwardCost
from ..decoding.runner import BatchRunner
from ..decoding.forcing import forced_ids
from ..tools.calibration import measure_forward_cost
from . import _common
from ._loop import tag_shape
from .bounds import KERNEL_KIND, FixedCosts, KernelCurve, m_star, m_star_exact

__all__ = ["KernelConfig", "format_kernel", "measure_kernel", "plot_kernel", "run_kernel"]

#: Program prefixes whose every state is timed for ``c_mask`` (gen body) and
#: ``c_mask_tag`` (inside a copy tag; the kernel's synthetic document has 300 lines).
GEN_STATE = render([Copy(1, 120)]).removesuffix(PROGRAM_CLOSE) + GEN_OPEN + (
    "\ndef scale(values, factor):\n    return [v * factor for v in values]\n")
TAG_STATE = render([Copy(1, 120), Gen("\nx = 1\n"), Copy(123, 287)]).removesuffix(PROGRAM_CLOSE)


@dataclass(frozen=True)
class KernelConfig:
    """What ``bench kernel`` measures."""

    preset: str
    device: str = "cpu"
    dtype: str = "float32"
    prefix: int = 1024
    trials: int = 3
    max_n: int = 512
    seed: int = 0
    threads: Optional[int] = None
    forced_tokens: int = 4
    #: also measure the curve ``--forward-cost auto`` would (a minute or two at 0.5B on a
    #: CPU), for ``bench e2e``'s ``cad_auto`` row; off when that row is skipped
    auto_curve: bool = True

    def __post_init__(self) -> None:
        if self.prefix < 1 or self.trials < 1 or self.max_n < 1 or self.forced_tokens < 1:
            raise InputError("prefix, trials, max_n and forced_tokens must be >= 1, got "
                             f"{self.prefix}, {self.trials}, {self.max_n}, {self.forced_tokens}")


#: Every width up to this one is measured: drafts live there (a draft of up to
#: ``MAX_DRAFT_TOKENS`` after one chosen token), and a CPU's matmul kernels make that
#: range uneven (here widths 2-3 cost about one decode step, 4-15 up to 3.3, 16-17 two).
DENSE_MAX = MAX_DRAFT_TOKENS + 1


def grid(max_n: int) -> list[int]:
    """``1, 2, 3, ...`` up to :data:`DENSE_MAX`, then doubling: ``32, 64, ...`` up to
    ``max_n`` (``max_n`` itself included)."""
    out = list(range(1, min(max_n, DENSE_MAX) + 1))
    power = 32
    while power < max_n:
        if power > out[-1]:
            out.append(power)
        power *= 2
    if out[-1] != max_n:
        out.append(max_n)
    return out


def run_kernel(cfg: KernelConfig, progress: bool = True) -> dict[str, Any]:
    """Build the preset (seeded random weights) and :func:`measure_kernel` it."""
    import outlines

    from ..tools import models

    with _common.torch_threads(cfg.threads):
        hf_model, tokenizer = models.build(cfg.preset, seed=cfg.seed, dtype=cfg.dtype, device=cfg.device)
        model = outlines.from_transformers(hf_model, tokenizer)
        return measure_kernel(model, cfg, progress=progress)


def measure_kernel(model: Any, cfg: KernelConfig, progress: bool = True) -> dict[str, Any]:
    """Measure the kernel curve and fixed costs of an Outlines transformers ``model``.

    Returns
    -------
    dict
        The kernel record (``kind`` = ``"cad-outlines.kernel"``), readable by
        :func:`cad_outlines.bench.bounds.kernel_from_dict`.
    """
    doc = "\n".join(f"line {k} = {k} * 2" for k in range(1, 301))
    gen = CaDGenerator(model, doc)
    runner = gen.runner
    assert isinstance(runner, BatchRunner)  # the default TransformersRunner: it times raw forwards
    device = runner.device
    ns = grid(cfg.max_n)
    rng = torch.Generator().manual_seed(cfg.seed)
    ordinary = torch.tensor(sorted(set(range(len(gen.adapter.tokenizer))) - set(gen.adapter.special_ids)))
    ids = ordinary[torch.randint(len(ordinary), (cfg.prefix + cfg.max_n,), generator=rng)]
    ids = ids.unsqueeze(0).to(device)
    prefix, tail = ids[:, :cfg.prefix], ids[:, cfg.prefix:]
    sync = _sync_fn(device)

    def forward(x: torch.Tensor, cache: Any, keep: int) -> Any:
        # through the runner seam (the cache keyword right on every transformers), with
        # keep=0 (every row) and no host copy
        out = runner.forward_tensor(x, cache, keep)
        sync()
        return out

    def timed(x: torch.Tensor, cache: Any, keep: int) -> tuple[float, float]:
        """(wall seconds, process CPU seconds) of one forward."""
        cpu, clock = time.process_time(), time.perf_counter()
        forward(x, cache, keep)
        return time.perf_counter() - clock, time.process_time() - cpu

    cache = runner.new_cache()
    forward(prefix, cache, 1)
    steps = cfg.trials * (cfg.max_n + 2 * len(ns) + 1) + 2 * len(ns) + 4
    bar = _common.progress(total=steps, desc=f"kernel {cfg.preset}", unit="fwd", disable=not progress)
    # warm-up: every shape once (allocator, kernels, one-time dispatch)
    for n in ns:
        for keep in (1, 0):
            timed(tail[:, :n], cache, keep)
            _crop(cache, cfg.prefix)
            bar.update()
    for k in range(4):
        timed(tail[:, k % cfg.max_n:k % cfg.max_n + 1], cache, 1)  # the tail holds max_n ids
        bar.update()
    _crop(cache, cfg.prefix)

    # clock 0: wall, clock 1: process CPU time
    ar: list[list[list[float]]] = [[], []]  # per clock, per trial: cumulative time after each step
    steps_all: list[float] = []
    pp: dict[tuple[int, int], dict[int, list[float]]] = {
        (keep, c): {n: [] for n in ns} for keep in (1, 0) for c in (0, 1)}
    forced: list[float] = []
    for _ in range(cfg.trials):
        step_times = []
        for k in range(cfg.max_n):
            step_times.append(timed(tail[:, k:k + 1], cache, 1))
            bar.update()
        _crop(cache, cfg.prefix)
        steps_all.extend(t[0] for t in step_times)
        for c in (0, 1):
            ar[c].append(_cumsum([t[c] for t in step_times]))
        for n in ns:
            for keep in (1, 0):
                got = timed(tail[:, :n], cache, keep)
                for c in (0, 1):
                    pp[keep, c][n].append(got[c])
                _crop(cache, cfg.prefix)
                bar.update()
        forced.append(timed(tail[:, :cfg.forced_tokens], cache, 1)[0])
        _crop(cache, cfg.prefix)
        bar.update()
    bar.close()

    def medians(c: int) -> tuple[list[float], list[float], list[float]]:
        return ([statistics.median(trial[n - 1] for trial in ar[c]) for n in ns],
                [statistics.median(pp[1, c][n]) for n in ns],
                [statistics.median(pp[0, c][n]) for n in ns])

    t_ar, t_keep1, t_full = medians(0)
    tau = statistics.median(steps_all)
    c_sync = _time_sync(forward, tail[:, :1], cache, cfg.prefix)
    c_mask, c_mask_tag = _time_masks(gen)
    shape = tag_shape(model)
    costs = FixedCosts(tau=tau, c_mask=c_mask, c_mask_tag=c_mask_tag, c_sync=c_sync,
                       c_forced=statistics.median(forced), tag_decode_steps=shape.decode_steps,
                       tag_forced_runs=shape.forced_runs)
    s_keep1 = [a / p for a, p in zip(t_ar, t_keep1)]
    s_full = [a / p for a, p in zip(t_ar, t_full)]
    curve = KernelCurve(tuple(ns), tuple(s_keep1))
    c = costs.per_copy
    cpu: dict[str, Any] = {}
    if device.type == "cpu":
        # Process CPU time: the forwards' own work, without the time other processes
        # held the cores (meaningful with one intra-op thread on a shared machine).
        c_ar, c_keep1, c_full = medians(1)
        cpu = {"t_ar_cpu": c_ar, "t_pp_keep1_cpu": c_keep1, "t_pp_full_cpu": c_full,
               "s_keep1_cpu": [a / p for a, p in zip(c_ar, c_keep1)],
               "s_full_cpu": [a / p for a, p in zip(c_ar, c_full)]}
    record = {
        "kind": KERNEL_KIND,
        "version": 1,
        "preset": cfg.preset,
        "device": str(device),
        "dtype": cfg.dtype,
        "prefix": cfg.prefix,
        "trials": cfg.trials,
        "max_n": cfg.max_n,
        "seed": cfg.seed,
        "forced_tokens": cfg.forced_tokens,
        "vocab": runner.vocab_size,
        "n": ns,
        "t_ar": t_ar,
        "t_pp_keep1": t_keep1,
        "t_pp_full": t_full,
        "s_keep1": s_keep1,
        "s_full": s_full,
        **cpu,
        "costs": {k: getattr(costs, k) for k in FixedCosts.__dataclass_fields__},
        "tag": {"text": shape.tag, "decode_steps": shape.decode_steps,
                "forced_runs": shape.forced_runs, "forced_tokens": shape.forced_tokens},
        "per_copy_cost": c,
        "per_copy_steps": c / tau,
        "m_star": m_star(curve, c, tau),
        "m_star_exact": m_star_exact(curve, c, tau),
        "loop_overhead_fraction": costs.loop_overhead_fraction,
        "env": _common.environment(threads=cfg.threads),
    }
    record["forward_cost"] = forward_cost_of(record).to_dict()
    if cfg.auto_curve:
        # what `--forward-cost auto` measures on this machine (bench e2e's cad_auto row)
        record["auto_forward_cost"] = measure_forward_cost(model.model).to_dict()
    return record


def forward_cost_of(record: dict[str, Any]) -> ForwardCost:
    """The :class:`ForwardCost` a kernel record measured: its process-CPU-time curves where
    it has them (on a shared CPU they measure the forwards' own work), else wall time.
    Records written before ``forward_cost`` was stored are read from their curves."""
    if "forward_cost" in record:
        return ForwardCost.from_dict(record["forward_cost"])
    cpu = "t_pp_keep1_cpu" in record
    keep1 = record["t_pp_keep1_cpu" if cpu else "t_pp_keep1"]
    full = record["t_pp_full_cpu" if cpu else "t_pp_full"]
    return ForwardCost(tuple(record["n"]), tuple(keep1), tuple(full))


def _sync_fn(device: torch.device):
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _crop(cache: Any, length: int) -> None:
    """Cut the cache back to ``length`` tokens (a negative ``crop`` removes tokens in
    every transformers version that has ``crop``)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def _cumsum(values: list[float]) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _time_sync(forward: Any, x: torch.Tensor, cache: Any, prefix: int, reps: int = 30) -> float:
    """Median of ``logits[0, -1].float().cpu()`` after a synchronized forward."""
    times = []
    for _ in range(reps):
        out = forward(x, cache, 1)
        clock = time.perf_counter()
        out[0, -1].float().cpu()
        times.append(time.perf_counter() - clock)
        _crop(cache, prefix)
    return statistics.median(times)


def _time_masks(gen: CaDGenerator) -> tuple[float, float]:
    """Median ``allowed()`` + masked argmax over the states of :data:`GEN_STATE` (after
    its ``<gen>``) and of the copy tag that ends :data:`TAG_STATE`."""
    from ..decoding.constraint import ProgramConstraint

    logits = torch.randn(gen.runner.vocab_size, generator=torch.Generator().manual_seed(0))
    gen_open = GEN_STATE.index(GEN_OPEN) + len(GEN_OPEN)
    tag_open = TAG_STATE.rindex(COPY_START)
    greedy = Sampler(SamplingOptions())  # the loop's greedy choice
    out = []
    for text, start in ((GEN_STATE, gen_open), (TAG_STATE, tag_open)):
        constraint = ProgramConstraint(gen.compiled)
        times = []
        for tid in forced_ids(gen.adapter, text):
            if len(constraint.text) >= start:
                clock = time.perf_counter()
                allowed = constraint.allowed(gen.runner.vocab_size)
                greedy.choose_one(logits, allowed)
                times.append(time.perf_counter() - clock)
            constraint.advance([tid])
        if not times:
            raise RuntimeError(f"no state timed in {text!r}")
        out.append(statistics.median(times))
    return out[0], out[1]


# --- reporting ----------------------------------------------------------------------------


def format_kernel(record: dict[str, Any]) -> str:
    """Markdown: the curve table and the fixed costs."""
    lines = [f"kernel: {record['preset']} on {record['device']} ({record['dtype']}), prefix "
             f"{record['prefix']}, median of {record['trials']} trial(s)", "",
             "| N | T_AR (s) | T_PP keep1 (s) | T_PP full (s) | s keep1 | s full |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, n in enumerate(record["n"]):
        lines.append(f"| {n} | {record['t_ar'][i]:.4g} | {record['t_pp_keep1'][i]:.4g} "
                     f"| {record['t_pp_full'][i]:.4g} | {record['s_keep1'][i]:.2f} "
                     f"| {record['s_full'][i]:.2f} |")
    c = record["costs"]
    tau = c["tau"]
    lines += ["", "| cost | seconds | / tau |", "| --- | ---: | ---: |"]
    for key in ("tau", "c_mask", "c_mask_tag", "c_sync", "c_forced"):
        lines.append(f"| {key} | {c[key]:.3g} | {c[key] / tau:.4f} |")
    lines.append(f"| c (per copy) | {record['per_copy_cost']:.3g} | {record['per_copy_steps']:.2f} |")
    tag = record["tag"]
    lines += ["", f"tag {tag['text']}: {tag['decode_steps']} decode steps, {tag['forced_runs']} "
              f"forced run(s) ({tag['forced_tokens']} tokens)",
              f"(c_mask + c_sync) / tau = {record['loop_overhead_fraction']:.2%}",
              f"m* = {record['m_star']} (exact break-even: {record['m_star_exact']})"]
    return "\n".join(lines)


def plot_kernel(record: dict[str, Any], path: str) -> None:
    """Two panels: ``s(N)`` (keep1 and full logits) and the raw times, log scales."""
    plt = _common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    ns = record["n"]
    left.plot(ns, record["s_keep1"], "o-", label="logits_to_keep=1")
    left.plot(ns, record["s_full"], "s--", label="full logits")
    left.axhline(1.0, color="grey", lw=0.8)
    if record.get("m_star"):
        left.axvline(record["m_star"], color="tab:red", lw=0.8, ls=":", label=f"m* = {record['m_star']}")
    left.set_xscale("log", base=2)
    left.set_xticks(ns, [str(n) for n in ns], fontsize=7)
    left.set_xlabel("N (tokens)")
    left.set_ylabel("s(N) = T_AR / T_PP")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.loglog(ns, record["t_ar"], "o-", label="T_AR: N decode forwards", base=2)
    right.loglog(ns, record["t_pp_keep1"], "s-", label="T_PP: one N-token forward", base=2)
    right.set_xticks(ns, [str(n) for n in ns], fontsize=7)
    right.set_xlabel("N (tokens)")
    right.set_ylabel("seconds")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    env = record.get("env", {})
    fig.suptitle(f"{record['preset']} ({record['dtype']}, {record['device']}, prefix {record['prefix']}, "
                 f"random weights) — {env.get('cpu', '')} {env.get('date_utc', '')}", fontsize=9)
    fig.tight_layout()
    _common.save_figure(fig, path)
    plt.close(fig)
