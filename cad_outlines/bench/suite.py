"""``bench all``: items 1–5 of the benchmark on one corpus, in one process, timed.

One model and one kernel curve serve every item, so the bounds (item 2) and the
end-to-end ratio (item 3) read the curve that item 1 measured in the same run, on the
same cases:

1. ``kernel``   the s(N) curve and fixed costs (prefix: the cases' mean prompt length);
2. ``bounds``   copy ceiling + bnd_m8 / bnd_mean / bnd_exact / m* of the chosen cases;
3. ``e2e``      the decodes of every case: CaD, its ablations, Outlines and PLD (:mod:`.e2e`;
               each case's record also goes to ``e2e.partial.jsonl`` as it finishes, and the
               same command run again on the same folder resumes from it, with the kernel
               of ``kernel.json``);
4. ``formats``  output tokens and round trips of the four edit formats (:mod:`.formats`);
5. ``perturb``  exact match under shifted copy endpoints (:mod:`.perturb`).

Each item's JSON and plot go to one folder with ``summary.md`` (every table and the
wall seconds of each item). The wall time of the whole run is what the issue's "fits in
20 minutes" target is checked against.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional, Sequence

from ..training.corpus import Case
from ..tools.presets import REAL_PRESETS
from ..errors import InputError
from ..files import atomic_write, read_text
from . import _common
from .bounds import ceiling_with_bounds, format_bounds, kernel_from_dict
from .e2e import E2EConfig, build_model, kernel_config, run_e2e, select_cases
from .e2e_report import format_e2e, plot_e2e
from .formats import format_formats, run_formats
from .kernel import format_kernel, measure_kernel, plot_kernel
from .perturb import format_perturb, plot_perturb, run_perturb

__all__ = ["run_suite"]

ITEMS = ("kernel", "bounds", "e2e", "formats", "perturb")


def run_suite(cases: Sequence[Case], cfg: E2EConfig, out_dir: str | os.PathLike, *, name: str = "corpus",
              eps: Sequence[int] = (0, 1, 2, 3, 5), perturb_trials: int = 5, progress: bool = True,
              model: Any = None) -> dict[str, Any]:
    """Run items 1–5 on ``cases`` (``cfg.limit`` / ``cfg.order`` choose them); write ``out_dir``.

    Parameters
    ----------
    cases
        The corpus, already loaded.
    cfg
        Model, threads, case selection and kernel settings (as for ``bench e2e``).
    out_dir
        Folder for ``{kernel,bounds,e2e,formats,perturb}.json``, the plots and
        ``summary.md``; created if missing.
    model
        An Outlines transformers model to use instead of building ``cfg.preset``.

    Returns
    -------
    dict
        ``seconds`` (wall seconds per item and ``total``, model building included),
        ``files`` and the ``config``.
    """
    from ..training.ceiling import format_table, load_tokenization

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chosen = select_cases(cases, cfg.order, cfg.limit, cfg.lines, cfg.split)
    if not chosen:
        raise InputError("no cases to run (empty corpus, or --limit, --lines or --split selects none)")
    seconds: dict[str, float] = {}
    tables: dict[str, str] = {}
    started = time.perf_counter()
    with _common.torch_threads(cfg.threads):
        # at the start: the commit, date and load of the code that runs, not of a later HEAD
        env = _common.environment(threads=cfg.threads)
        clock = time.perf_counter()
        if model is None:
            model = build_model(cfg)
        seconds["model"] = time.perf_counter() - clock

        clock = time.perf_counter()
        kernel_record = resumed_kernel(out)
        if kernel_record is None:
            kernel_record = measure_kernel(model, kernel_config(model, chosen, cfg), progress=progress)
            _common.write_json(out / "kernel.json", kernel_record)
        elif progress:
            print(f"resuming {out}: the kernel of kernel.json, the cases of e2e.partial.jsonl", file=sys.stderr)
        plot_kernel(kernel_record, str(out / "kernel.png"))
        tables["kernel"] = format_kernel(kernel_record)
        seconds["kernel"] = time.perf_counter() - clock

        clock = time.perf_counter()
        tokenization = load_tokenization(model.hf_tokenizer)
        stats, bounds = ceiling_with_bounds(chosen, tokenization, kernel_from_dict(kernel_record))
        _common.write_json(out / "bounds.json", {**stats.as_dict(), "bounds": bounds})
        tables["bounds"] = format_table(stats, name) + "\n\n" + format_bounds(bounds, name)
        seconds["bounds"] = time.perf_counter() - clock

        clock = time.perf_counter()
        # the cases are chosen already: e2e takes them all, in this order
        e2e_cfg = E2EConfig(**{**asdict(cfg), "limit": None, "order": "file"})
        e2e = run_e2e(chosen, e2e_cfg, progress=progress, model=model, kernel_record=kernel_record,
                      checkpoint=out / "e2e.partial.jsonl")
        e2e["config"] = {**asdict(cfg), "suite": True}
        _common.write_json(out / "e2e.json", e2e)
        weights = "real weights" if cfg.preset in REAL_PRESETS else "random weights"
        plot_e2e(e2e, str(out / "e2e.png"), title=f"{name}: {cfg.preset} e2e ({weights})")
        tables["e2e"] = format_e2e(e2e, name)
        seconds["e2e"] = time.perf_counter() - clock

    clock = time.perf_counter()
    formats = run_formats(chosen, tokenization, progress=progress)
    _common.write_json(out / "formats.json", formats)
    tables["formats"] = format_formats(formats, name)
    seconds["formats"] = time.perf_counter() - clock

    clock = time.perf_counter()
    perturb = run_perturb(chosen, list(eps), trials=perturb_trials, seed=cfg.seed, progress=progress)
    _common.write_json(out / "perturb.json", perturb)
    plot_perturb(perturb, str(out / "perturb.png"),
                 title=f"{name}: copy-index perturbation ({perturb['n']} cases x {perturb_trials} trials)")
    tables["perturb"] = format_perturb(perturb, name)
    seconds["perturb"] = time.perf_counter() - clock
    seconds["total"] = time.perf_counter() - started

    report = {"config": {**asdict(cfg), "corpus": name, "cases": [c.id for c in chosen],
                         "eps": list(eps), "perturb_trials": perturb_trials},
              "seconds": seconds, "failures": e2e["failures"],
              "files": sorted(p.name for p in out.iterdir()),
              "env": env}
    _common.write_json(out / "suite.json", report)
    atomic_write(out / "summary.md", format_suite(report, tables))
    report["files"] = sorted(p.name for p in out.iterdir())
    return report


def resumed_kernel(out: Path) -> dict[str, Any] | None:
    """The kernel of the run ``out`` holds, when its e2e checkpoint has cases to resume:
    those records were measured against that curve, so the rest must be too."""
    partial, kernel = out / "e2e.partial.jsonl", out / "kernel.json"
    if not (partial.is_file() and kernel.is_file()) or len(read_text(partial).splitlines()) < 2:
        return None
    try:
        return json.loads(read_text(kernel))
    except json.JSONDecodeError as err:
        raise InputError(f"{kernel}: not JSON ({err.msg}); remove it and e2e.partial.jsonl to start afresh") from None


def format_suite(report: dict[str, Any], tables: Optional[dict[str, str]] = None) -> str:
    """Markdown: the wall seconds of each item, then each item's tables."""
    s, cfg, env = report["seconds"], report["config"], report["env"]
    lines = [f"# bench all: {cfg['corpus']}, {len(cfg['cases'])} case(s), preset {cfg['preset']}", "",
             f"started {env.get('date_utc')} UTC, commit {env.get('git_commit')}, {env.get('cpu')} x {env.get('cpus')}, "
             f"torch {env.get('torch')}, transformers {env.get('transformers')}, threads {cfg['threads']}, "
             f"load average {env.get('loadavg_1_5_15')}", "",
             "| item | wall seconds |", "| --- | ---: |"]
    lines += [f"| {item} | {s[item]:.1f} |" for item in ("model", *ITEMS)]
    lines.append(f"| **total** | **{s['total']:.1f}** ({s['total'] / 60:.1f} min) |")
    for item in ITEMS:
        if tables and item in tables:
            lines += ["", f"## {item}", "", tables[item]]
    return "\n".join(lines) + "\n"
