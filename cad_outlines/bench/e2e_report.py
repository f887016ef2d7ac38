"""The ``bench e2e`` report: the pooled table, the drift warning and the speed-up plot.

:mod:`cad_outlines.bench.e2e` runs the cases and pools them; this module only reads the report.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _common

__all__ = ["DRIFT_LIMIT", "drift_note", "format_e2e", "plot_e2e"]


_LABELS = {
    "regen": "regeneration (a), CaD prompt",
    "outlines": "Outlines Generator + CFG, forced (b)",
    "cad": "**CaD** (drafts cut by the run's kernel curve, calibrated online)",
    "cad_uncosted": "CaD, drafts whole (library default)",
    "cad_auto": "CaD, drafts cut by `--forward-cost auto`'s curve, calibrated online",
    "cad_fixedcost": "CaD, drafts cut by the kernel curve read as measured (not calibrated online)",
    "cad_nodraft": "CaD draft_tags=False",
    "cad_notrees": "CaD, drafts whole, draft_trees=False",
    "cad_nosplice": "CaD splice=False (c)",
    "cad_plain": "CaD splice=False, fast_forward=False",
}


def _label(name: str, pld: dict[str, Any]) -> str:
    if name in pld:
        s = pld[name]
        return f"PLD k={s['k']}, n={s['n']} (transformers' prompt lookup)"
    return _LABELS.get(name, name)


#: How far regeneration's time per token may stray from the kernel's tau before the report
#: says the comparison with the bound is unsound (pooled 2026-12-01 runs: python and C 8-12 %
#: under tau in both clocks; a prose run whose machine slowed during it 25 % over in CPU
#: time, 33 % in wall-clock time).
DRIFT_LIMIT = 0.15


def drift_note(measures: dict[str, Any], clock: str = "wall-clock", limit: float = DRIFT_LIMIT) -> Optional[str]:
    """A warning when regeneration's seconds per token differ from the kernel's tau by more
    than ``limit`` (a fraction), else ``None``.

    ``measures`` is the pooled ``overhead`` (wall clock) or ``cpu`` (process CPU time)
    record: ``tau_kernel``, ``regen_seconds_per_token`` and ``regen_drift``. ``bnd_exact``
    comes from the kernel curve measured at the start of the run, after a prefix of the
    cases' mean prompt; when the machine gets slower or faster later (other jobs), or the
    decode contexts are much longer than that prefix, realized / bnd_exact in that clock
    compares unlike times, and the report says so rather than let it pass.
    """
    drift = measures.get("regen_drift")
    if drift is None or abs(drift) <= limit:
        return None
    return (f"**note ({clock}):** regeneration took {measures['regen_seconds_per_token'] * 1e3:.1f} ms per "
            f"token, {drift:+.0%} off the kernel's tau ({measures['tau_kernel'] * 1e3:.1f} ms): the machine's "
            "speed changed during the run (other load) or the decode contexts are far from the kernel's "
            f"prefix; either way the {clock} realized / bnd_exact compares unlike times, so rerun (on a "
            "quieter machine, or with --kernel-prefix near the cases' contexts) before quoting it.")


def format_e2e(report: dict[str, Any], name: str = "") -> str:
    """Markdown tables: per case, pooled (generation-only and prompt-included), gap
    breakdown, prompt cost, loop overhead."""
    names = list(report["cases"][0]["runs"]) if report["cases"] else []
    short = {"regen": "regen", "outlines": "outlines", "cad": "cad", "cad_uncosted": "uncosted",
             "cad_auto": "auto", "cad_fixedcost": "fixed-cost", "cad_nodraft": "no-draft", "cad_notrees": "no-trees",
             "cad_nosplice": "no-splice", "cad_plain": "plain"}
    heads = [short.get(n, n.replace("pld_", "PLD ")) + " s" for n in names]
    lines = ["generation phase seconds per case (prefill excluded)", "",
             "| case | T | T_gen | K | " + " | ".join(heads) + " | realized | bnd_exact | ratio |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in heads) + " | ---: | ---: | ---: |"]
    for r in report["cases"]:
        g = " | ".join(f"{r['runs'][k]['gen_seconds']:.1f}" for k in names)
        lines.append(f"| {r['id']} | {r['T']} | {r['T_gen']} | {len(r['spans'])} | {g} "
                     f"| {r['realized']:.2f} | {r['bounds']['bnd_exact']:.2f} | {r['ratio']:.2f} |")
    for f in report["failures"]:
        lines.append(f"| {f['id']} | failed: {f['error']} |")
    p = report["pooled"]
    if p is None:
        return "\n".join(lines)
    b = p["bounds"]
    sp, spi, fw = p["speedup"], p["speedup_prompt_included"], p["forward_passes"]
    pr = p["prompt"]
    lines += ["", f"pooled over {p['n']} case(s) {name}: T = {p['T']}, T_gen = {p['T_gen']}, K = {p['K']}",
              "", "| speed-up over regeneration | generation only | prompt included | forwards "
              "(prefill incl.) |", "| --- | ---: | ---: | ---: |"]
    for run in names:
        if run == "regen":
            lines.append(f"| regeneration (a) | 1.00 | 1.00 (plain prompt) | {fw['regen']} |")
            continue
        lines.append(f"| {_label(run, p['pld'])} | {sp[run]:.2f} | {spi[run]:.2f} | {fw[run]} |")
    lines += ["", "| CaD against its bound (generation phase) | value |", "| --- | ---: |",
              f"| **CaD realized** | **{p['realized']:.2f}** |",
              f"| bnd_exact | {b['bnd_exact']:.2f} |",
              f"| **realized / bnd_exact** | **{p['ratio']:.2f}** (case median {p['ratio_case_median']:.2f}) |",
              f"| bnd_m8 / bnd_mean / bnd_fixed / bnd_policy (m* = {b['m_star']}) | {b['bnd_m8']:.2f} / "
              f"{b['bnd_mean']:.2f} / {b['bnd_fixed']:.2f} / {b['bnd_policy']:.2f} |"]
    if "cad_nodraft" in sp:
        lines.append(f"| CaD draft_tags=False / bnd_exact | {sp['cad_nodraft'] / b['bnd_exact']:.2f} |")
    lines += ["", "| prompt (summed over cases) | CaD prompt | plain prompt (PLD, prompt-included regen) "
              "| CaD / plain |", "| --- | ---: | ---: | ---: |",
              f"| tokens | {pr['cad_prompt_tokens']} | {pr['plain_prompt_tokens']} | {pr['tokens_ratio']:.2f} |",
              f"| prefill seconds | {pr['cad_prefill_seconds']:.2f} | {pr['plain_prefill_seconds']:.2f} "
              f"| {pr['prefill_ratio']:.2f} |"]
    if p["pld"]:
        lines += ["", "| PLD | verify forwards | drafted | accepted | tokens per forward | forwards per 128 tokens |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for run, s in p["pld"].items():
            verify = s["forward_passes"] - p["n"]
            lines.append(f"| k={s['k']}, n={s['n']} | {verify} | {s['draft_tokens']} | {s['draft_accepted']} "
                         f"| {s['tokens'] / max(1, verify):.2f} | {128 * verify / max(1, s['tokens']):.2f} |")
    if p.get("cpu"):
        c = p["cpu"]
        warm = c.get("speedup_prompt_included_warm")
        doc = c.get("speedup_prompt_included_doc")
        lines += ["", "| same, in process CPU time (robust to other processes' load) | generation only "
                  "| prompt included, cold | prompt included, warm head | prompt included, warm document |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for run in names:
            if run != "regen":
                warm_cell = f"{warm[run]:.2f}" if warm else "-"
                doc_cell = f"{doc[run]:.2f}" if doc else "-"
                lines.append(f"| {_label(run, p['pld'])} | {c['speedup'][run]:.2f} "
                             f"| {c['speedup_prompt_included'][run]:.2f} | {warm_cell} | {doc_cell} |")
        lines += [f"| bnd_exact (CPU-time kernel curve) | {c['bnd_exact']:.2f} | | | |",
                  f"| **CaD realized / bnd_exact** | **{c['ratio']:.2f}** | | | |"]
        if warm:
            lines += ["", "warm: each prompt's constant head cached once per process (tokens cached, summed: "
                      f"CaD {c['prompt_tokens_cached']['cad']}, plain {c['prompt_tokens_cached']['plain']}; "
                      f"warm prefill CPU s: CaD {c['prefill_warm_seconds']['cad']:.2f}, "
                      f"plain {c['prefill_warm_seconds']['plain']:.2f})"]
        if doc:
            lines += ["", "warm document: an earlier edit of the same file version left its prompt's "
                      "shared prefix cached (tokens cached, summed: "
                      f"CaD {c['prompt_tokens_doc_cached']['cad']}, plain {c['prompt_tokens_doc_cached']['plain']}; "
                      f"prefill CPU s: CaD {c['prefill_doc_seconds']['cad']:.2f}, "
                      f"plain {c['prefill_doc_seconds']['plain']:.2f})"]
        if "outlines_over_cad_plain_gen" in c:
            lines.append(f"| Outlines (b) / CaD plain | {c['outlines_over_cad_plain_gen']:.3f} |")
        note = drift_note(c, "process CPU time")
        if note:
            lines += ["", note]
    g = p["gap"]
    tau = p["overhead"]["tau_kernel"]
    # Forwards that carried no splice (the prompt's is not in the generation phase); the
    # identity: measured - bound = (these - T_gen) tau + widening + splice excess
    # + constraint + other.
    plain_fwd = g["forward_passes"] - 1 - g["splices"]
    widening = g["decode_forward_seconds"] - plain_fwd * tau
    lines += ["", "| where CaD's generation time goes (vs the bound) | seconds |", "| --- | ---: |",
              f"| measured generation phase | {g['measured_gen_seconds']:.2f} |",
              f"| bound: tau x (T_gen + sum N/s(N)) | {g['bound_gen_seconds']:.2f} |",
              f"| **gap** | **{g['measured_gen_seconds'] - g['bound_gen_seconds']:.2f}** |",
              f"| decode forwards beyond T_gen ({plain_fwd} - {g['gold_gen_tokens']} = "
              f"{plain_fwd - g['gold_gen_tokens']}: copy tags, gen/program markers), at tau "
              f"| {(plain_fwd - g['gold_gen_tokens']) * tau:.2f} |",
              f"| forced runs and drafts widening those forwards ({g['forced_tokens']} forced tokens, "
              f"{g.get('draft_tokens', 0)} drafted; also any drift of the real step time from tau) "
              f"| {widening:.2f} |",
              f"| splice forwards over the bound ({g['splices']} splices, {g['copied_tokens']} tokens: "
              f"{g['splice_seconds']:.2f} vs {g['bound_splice_seconds']:.2f}) "
              f"| {g['splice_seconds'] - g['bound_splice_seconds']:.2f} |",
              f"| constraint (mask, advance, forced runs) | {g['constraint_seconds']:.2f} |",
              f"| drafting (predict, encode, validate) | {g.get('draft_seconds', 0.0):.2f} |",
              f"| other (loop, prompt ids, matcher set-up) | {g['other_seconds']:.2f} |"]
    drafting = (f"drafting: {g['draft_accepted']} of {g['draft_tokens']} drafted tokens kept, "
                f"{g['forwards_saved']} decode steps without a forward; {g['forward_passes']} forward passes")
    if "nodraft_forward_passes" in g:
        drafting += (f" with drafts vs {g['nodraft_forward_passes']} without (generation phase "
                     f"{g['measured_gen_seconds']:.2f} s vs {g['nodraft_gen_seconds']:.2f} s)")
    lines += ["", drafting]
    if "operations" in g:  # records from before 2026-12-03 lack the breakdown
        ops, prefill = g["operations"], p["n"]
        other = g["forward_passes"] - prefill - g["splice_forwards"] - g["index_forwards"] - g["body_forwards"]
        lines += ["", f"forwards by what they followed: {prefill} prefill, {g['splice_forwards']} splices, "
                      f"{g['index_forwards']} copy-tag tokens (index digits), {g['body_forwards']} gen text, "
                      f"{other} other tags; {ops} operations: {g['forward_passes'] / ops:.2f} forwards per "
                      f"operation, {(g['forward_passes'] - g['body_forwards']) / ops:.2f} outside gen text"]
    kinds = p.get("forwards_by_kind", {})
    if kinds:
        lines += ["", "| CaD run | forwards | after index digits | after gen text | splices | "
                      "per operation outside gen text | digit alternatives drafted |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {_LABELS.get(name, name)} | {k['forward_passes']} | {k['index_forwards']} | "
                  f"{k['body_forwards']} | {k['splice_forwards']} | "
                  f"{(k['forward_passes'] - k['body_forwards']) / k['operations']:.2f} | {k['draft_alternatives']} |"
                  for name, k in kinds.items()]
    o = p["overhead"]
    lines += ["", "| loop overhead | value |", "| --- | ---: |",
              f"| tau (kernel) | {o['tau_kernel'] * 1e3:.2f} ms |",
              f"| c_mask + c_sync (kernel) | {o['c_mask_plus_c_sync'] * 1e3:.3f} ms "
              f"({o['c_mask_plus_c_sync_over_tau']:.2%} of tau) |",
              f"| regen: seconds per token (forward + sync) | {o['regen_seconds_per_token'] * 1e3:.2f} ms |"]
    if "cad_plain_seconds_per_token" in o:
        lines += [f"| CaD plain: seconds per decoded token | {o['cad_plain_seconds_per_token'] * 1e3:.2f} ms |",
                  f"| CaD plain: constraint per decoded token | "
                  f"{o['cad_plain_constraint_seconds_per_token'] * 1e3:.3f} ms |"]
    if "outlines_seconds_per_token" in o:
        lines.append(f"| Outlines (b): seconds per token | {o['outlines_seconds_per_token'] * 1e3:.2f} ms |")
    if "outlines_over_cad_plain_gen" in o:
        lines += [f"| Outlines (b) / CaD plain, generation phase | {o['outlines_over_cad_plain_gen']:.3f} |",
                  f"| Outlines (b) / CaD plain, prefill included | {o['outlines_over_cad_plain_total']:.3f} |"]
    note = drift_note(o, "wall-clock")
    if note:
        lines += ["", note]
    ex = p["exact"]
    lines += ["", "exact results (document == gold, or program reproduced for Outlines): "
              + ", ".join(f"{k} {v}/{p['n']}" for k, v in ex.items())]
    return "\n".join(lines)


def plot_e2e(report: dict[str, Any], path: str, title: str = "") -> None:
    """Per-case speed-up against ``bnd_exact`` (with y = x and y = 0.85 x): CaD, and each
    PLD run (generation phase, over the same regeneration)."""
    plt = _common.pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    xs = [r["bounds"]["bnd_exact"] for r in report["cases"]]
    ys = [r["realized"] for r in report["cases"]]
    ax.scatter(xs, ys, s=18, label="CaD, cases")
    pld = [name for name in (report["cases"][0]["runs"] if report["cases"] else ()) if name.startswith("pld_")]
    for marker, name in zip("xv+^", pld):
        speed = [r["runs"]["regen"]["gen_seconds"] / r["runs"][name]["gen_seconds"] for r in report["cases"]]
        ys += speed
        ax.scatter(xs, speed, s=18, marker=marker, label=name.replace("pld_", "PLD "))
    if report["pooled"]:
        p = report["pooled"]
        ax.scatter([p["bounds"]["bnd_exact"]], [p["realized"]], marker="*", s=120, color="tab:red",
                   label=f"CaD pooled (ratio {p['ratio']:.2f})")
    top = max(xs + ys + [1.0]) * 1.1
    ax.plot([0, top], [0, top], color="grey", lw=0.8, label="realized = bound")
    ax.plot([0, top], [0, 0.85 * top], color="grey", lw=0.8, ls="--", label="0.85 x bound")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("bnd_exact (kernel curve of the same run)")
    ax.set_ylabel("speed-up over regeneration (generation phase)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{report['config']['preset']} e2e (random weights)", fontsize=9)
    fig.tight_layout()
    _common.save_figure(fig, path)
    plt.close(fig)
