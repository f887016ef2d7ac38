"""The summaries and markdown tables of a ``bench quality`` report (:func:`.quality.run`):
overall, speed against each family's regeneration row, by v2 subset, by edit kind and by corpus."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any, Callable, Sequence

__all__ = ["format_table", "group", "summary"]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's records summed up: shares, counts, means and CPU per exact edit."""
    def share(key: str) -> float:
        return round(sum(bool(r[key]) for r in rows) / len(rows), 4)

    complete = [r for r in rows if r["complete"]]
    exact = sum(bool(r["exact"]) for r in rows)
    return {"n": len(rows), "exact": share("exact"), "complete": share("complete"),
            "dropped_tail": sum(bool(r.get("dropped_tail")) for r in rows),
            "ended_in_gen": sum(bool(r.get("ended_in_gen")) for r in rows),  # the decoding.ending rule
            "stopped": dict(Counter(r["stop_reason"] for r in rows if r.get("stop_reason"))),
            # what an edit that comes out right costs: every run's CPU over the exact ones
            "cpu_seconds_per_exact": round(sum(r["cpu_total_seconds"] for r in rows) / exact, 3) if exact else None,
            "valid_of_complete": round(sum(r["valid"] for r in complete) / len(complete), 4) if complete else None,
            "copies_in_range": share("copies_in_range"),
            "forwards_mean": round(statistics.mean(r["forwards"] for r in rows), 1),
            "cpu_seconds_mean": round(statistics.mean(r["cpu_total_seconds"] for r in rows), 3),
            "cpu_gen_seconds_mean": round(statistics.mean(r["cpu_gen_seconds"] for r in rows), 3),
            # warm: the prompt's constant head cached once per process (bench._loop.WarmPrefill)
            "cpu_warm_seconds_mean": round(statistics.mean(r["cpu_gen_seconds"] + r["cpu_prefill_warm_seconds"]
                                                           for r in rows), 3),
            "prompt_tokens_mean": round(statistics.mean(r["prompt_tokens"] for r in rows), 1),
            "prompt_tokens_cached_mean": round(statistics.mean(r["prompt_tokens_cached"] for r in rows), 1),
            "program_tokens_mean": round(statistics.mean(r["program_tokens"] for r in rows), 1),
            # CaD: the model's program against the oracle's, on the edits it got right
            "program_over_oracle_exact": _ratio([r for r in rows if r["exact"] and "oracle_tokens" in r])}


def _ratio(rows: list[dict[str, Any]]) -> float | None:
    if not rows:
        return None
    return round(sum(r["program_tokens"] for r in rows) / sum(r["oracle_tokens"] for r in rows), 3)


def group(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """:func:`summary` of the records per value of ``key`` (an edit kind, a corpus)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return {k: summary(v) for k, v in sorted(groups.items())}


def _speed_table(report: dict[str, Any], greedy: Sequence[str]) -> str:
    """Process CPU seconds per edit (greedy) generation only, prompt included cold (the
    run's own prefill) and warm (the prompt's constant head cached); speed-ups over the
    regeneration row of the same model family (``regen``; ``qwen_regen`` for ``qwen_*``)."""
    s = {key.split("/")[0]: report["summaries"][key]["all"] for key in greedy}
    lines = ["Speed (greedy, process CPU s per edit; cold: the whole prompt prefilled; warm: its "
             "constant head cached once per process):", "",
             "| configuration | prompt tokens | cached when warm | gen only | prompt incl., cold | prompt incl., warm "
             "| speed-up over its family's regen row: gen / cold / warm |", "|---|---:|---:|---:|---:|---:|---|"]
    keys = ("cpu_gen_seconds_mean", "cpu_seconds_mean", "cpu_warm_seconds_mean")
    for name, a in s.items():
        base = s.get("qwen_regen" if name.startswith("qwen_") else "regen")
        times = [a[k] for k in keys]
        ups = " / ".join(f"{base[k] / a[k]:.2f}x" for k in keys) if base else "-"
        lines.append(f"| {name} | {a['prompt_tokens_mean']} | {a['prompt_tokens_cached_mean']} | {times[0]:.3f} "
                     f"| {times[1]:.3f} | {times[2]:.3f} | {ups} |")
    return "\n".join(lines)


def format_table(report: dict[str, Any]) -> str:
    """The markdown tables of a report: overall (synthetic / commits) and by kind for greedy."""
    out = ["| configuration | sampling | n | exact (synthetic) | exact (commits) | complete | valid of complete "
           "| copies in range | forwards / edit | CPU s / edit |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, s in report["summaries"].items():
        name, label = key.split("/")
        rows = [r for r in report["records"] if r["config"] == name and r["sampling"] == label]
        commits = [r for r in rows if r["kind"] == "commit"]
        a, syn = s["all"], s["synthetic"]
        exact_c = f"{sum(r['exact'] for r in commits)}/{len(commits)}" if commits else "-"
        exact_s = f"{sum(r['exact'] for r in rows if r['kind'] != 'commit')}/{syn['n']}" if syn else "-"
        valid = "-" if a["valid_of_complete"] is None else f"{a['valid_of_complete']:.0%}"
        out.append(f"| {name} | {label} | {a['n']} | {exact_s} | {exact_c} | {a['complete']:.0%} | {valid} "
                   f"| {a['copies_in_range']:.0%} | {a['forwards_mean']} | {a['cpu_seconds_mean']} |")
    greedy = [k for k in report["summaries"] if k.endswith("/greedy")]
    resumed = report.get("checkpoint", {}).get("resumed")
    if resumed:
        out += ["", f"{resumed} of these {len(report['records'])} records were measured by an earlier run "
                    f"and taken from {report['checkpoint']['path']}."]
    for preset, folder in report["config"].get("adapters", ()):
        out += ["", f"`{preset}` ran with the adapter in `{folder}` (weights SHA-256 "
                    f"`{report['adapters'][preset]}`) in place of its shipped one."]
    ended = {key.split("/")[0]: (s.get("all") or {}).get("ended_in_gen") for key, s in report["summaries"].items()}
    ended = {name: count for name, count in ended.items() if count}  # reports written before this count have none
    if ended:
        out += ["", "Programs ended inside a gen where the model asked for the end (docs/generator.md): "
                + ", ".join(f"{name} {count}" for name, count in ended.items()) + "."]
    stopped = {key: (s.get("all") or {}).get("stopped") for key, s in report["summaries"].items()}
    stopped = {key: reasons for key, reasons in stopped.items() if reasons}
    if stopped:  # the token budget, the context, a repeating gen (docs/generator.md)
        out += ["", "Runs stopped before the program's end, by reason: " + "; ".join(
            f"{key} " + ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
            for key, reasons in stopped.items()) + "."]
    out += ["", _speed_table(report, greedy)]
    subsets = sorted({r.get("subset", "-") for r in report["records"]} - {"-"})
    if subsets:  # the v2 set: exact / complete / dropped tails / CPU s per exact edit, per subset
        out += ["", "By subset (greedy): exact, complete, dropped tails, CPU s per exact edit (prompt included, cold):", "",
                "| configuration | " + " | ".join(subsets) + " |", "|---|" + "---|" * len(subsets)]
        for key in greedy:
            by = report["summaries"][key]["by_subset"]
            cells = []
            for name in subsets:
                a = by.get(name)
                per = "-" if a is None or a["cpu_seconds_per_exact"] is None else f"{a['cpu_seconds_per_exact']:.1f} s"
                cells.append("-" if a is None else f"{round(a['exact'] * a['n'])}/{a['n']}, {a['complete']:.0%}, "
                             f"{a['dropped_tail']}, {per}")
            out.append(f"| {key.split('/')[0]} | " + " | ".join(cells) + " |")
    for field, title in (("kind", "edit kind"), ("corpus", "corpus")):
        columns = sorted({r[field] for r in report["records"]})
        out += ["", f"Exact match by {title} (greedy):", "",
                "| configuration | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
        for key in greedy:
            by = report["summaries"][key][f"by_{field}"]
            cells = [f"{round(by[c]['exact'] * by[c]['n'])}/{by[c]['n']}" if c in by else "-" for c in columns]
            out.append(f"| {key.split('/')[0]} | " + " | ".join(cells) + " |")
    return "\n".join(out)
