"""``bench perturb``: how exact are oracle programs whose copy indices are slightly off?

For each ``eps`` and trial, every copy endpoint of the oracle program (lines) is shifted
by an integer drawn uniformly from ``[-eps, eps]`` (start and end independently), clamped
to the document's lines ``1..n``, and the program is resolved in ``clipped`` mode (which
swaps a reversed range). A result counts when it equals the gold exactly.

``no_shift`` is the share of trials in which every draw was 0, i.e. the chance level of
an exact result; anything above it is a shift that happened to be harmless (e.g. moving
a boundary across a line that is the same on both sides, or clamped back at the ends).

Draws come from ``random.Random(f"{seed}:{eps}:{case id}:{trial}")``: string seeds are
hashed with SHA-512 by ``random``, so results do not depend on ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import random
import warnings
from typing import Any, Optional, Sequence

from ..training.corpus import Case
from ..errors import InputError
from ..language.oracle import oracle_program
from ..language.program import Copy, Op
from ..language.resolver import ResolveWarning, resolve
from ..language.syntax import split_lines
from . import _common

__all__ = ["format_perturb", "perturb_ops", "plot_perturb", "run_perturb"]


def perturb_ops(ops: Sequence[Op], n_lines: int, eps: int, rng: random.Random) -> tuple[list[Op], bool]:
    """Shift every copy endpoint by ``U[-eps, eps]``, clamped to ``1..n_lines``.

    Returns the new ops and whether every draw was 0.
    """
    if eps < 0:
        raise InputError(f"eps must be >= 0, got {eps}")
    out: list[Op] = []
    unmoved = True
    for op in ops:
        if isinstance(op, Copy):
            da, db = rng.randint(-eps, eps), rng.randint(-eps, eps)
            unmoved = unmoved and da == 0 and db == 0
            op = Copy(min(max(op.start + da, 1), n_lines), min(max(op.end + db, 1), n_lines))
        out.append(op)
    return out, unmoved


def run_perturb(cases: Sequence[Case], eps_values: Sequence[int], *, trials: int = 5, seed: int = 0,
                limit: Optional[int] = None, progress: bool = True) -> dict[str, Any]:
    """Exact-match rate per ``eps`` over ``cases`` x ``trials``."""
    if trials < 1:
        raise InputError(f"trials must be >= 1, got {trials}")
    if not eps_values or min(eps_values) < 0:
        raise InputError(f"eps values must be >= 0, got {list(eps_values)}")
    chosen = list(cases)[:limit] if limit is not None else list(cases)
    programs = [(case, oracle_program(case.doc, case.gold)) for case in chosen]
    rows = []
    bar = _common.progress(total=len(eps_values) * len(programs), desc="perturb", unit="case",
                           disable=not progress)
    for eps in eps_values:
        exact = unmoved_count = 0
        failed_cases = set()
        for case, ops in programs:
            n_lines = len(split_lines(case.doc))
            for trial in range(trials):
                rng = random.Random(f"{seed}:{eps}:{case.id}:{trial}")
                new_ops, unmoved = perturb_ops(ops, n_lines, eps, rng)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ResolveWarning)
                    ok = resolve(new_ops, case.doc, "clipped") == case.gold
                exact += ok
                unmoved_count += unmoved
                if not ok:
                    failed_cases.add(case.id)
            bar.update()
        total = len(programs) * trials
        rows.append({"eps": eps, "runs": total, "exact": exact, "exact_rate": exact / total if total else 0.0,
                     "no_shift_rate": unmoved_count / total if total else 0.0,
                     "cases_ever_wrong": len(failed_cases)})
    bar.close()
    return {"n": len(programs), "trials": trials, "seed": seed, "rows": rows,
            "copies": sum(isinstance(op, Copy) for _, ops in programs for op in ops),
            "env": _common.environment()}


def format_perturb(report: dict[str, Any], name: str = "") -> str:
    """Markdown table: exact-match rate per eps."""
    lines = [f"{name} {report['n']} cases x {report['trials']} trials, {report['copies']} copy ops, "
             f"seed {report['seed']}".strip(), "",
             "| eps | exact | exact rate | no-shift rate (chance) | cases ever wrong |",
             "| ---: | ---: | ---: | ---: | ---: |"]
    for row in report["rows"]:
        lines.append(f"| {row['eps']} | {row['exact']}/{row['runs']} | {row['exact_rate']:.1%} "
                     f"| {row['no_shift_rate']:.1%} | {row['cases_ever_wrong']}/{report['n']} |")
    return "\n".join(lines)


def plot_perturb(report: dict[str, Any], path: str, title: str = "") -> None:
    """Exact-match rate against eps, with the no-shift (chance) rate."""
    plt = _common.pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    eps = [r["eps"] for r in report["rows"]]
    ax.plot(eps, [100 * r["exact_rate"] for r in report["rows"]], "o-", label="exact match")
    ax.plot(eps, [100 * r["no_shift_rate"] for r in report["rows"]], "s--", color="grey",
            label="no endpoint moved (chance)")
    ax.set_xlabel("eps (max shift of each copy endpoint, lines)")
    ax.set_ylabel("% of runs")
    ax.set_ylim(-2, 102)
    ax.set_xticks(eps)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or f"copy-index perturbation ({report['n']} cases x {report['trials']} trials)",
                 fontsize=9)
    fig.tight_layout()
    _common.save_figure(fig, path)
    plt.close(fig)
