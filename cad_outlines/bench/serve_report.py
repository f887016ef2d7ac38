"""The ``bench serve`` report: the markdown table and the throughput plot of a record.

:mod:`cad_outlines.bench.serve` runs vLLM and builds the record; this module only reads it.
"""

from __future__ import annotations

from typing import Any

from . import _common

__all__ = ["RUNS", "format_serve", "plot_serve"]

RUNS = ("regen", "ngram", "ngram-gold", "cad")


def format_serve(record: dict[str, Any]) -> str:
    """The record as a markdown table plus the lines that qualify it."""
    runs, env = record["runs"], record["environment"]
    regen, ngram, gold, cad = (runs[name] for name in RUNS)
    rows = [
        ("gold tokens / s", "{:.1f}", "gold_tokens_per_second"),
        ("wall s (all edits)", "{:.1f}", "wall_seconds"),
        ("latency p50 s", "{:.1f}", "latency_p50"),
        ("latency p95 s", "{:.1f}", "latency_p95"),
        ("decoded tokens", "{}", "decoded_tokens"),
        ("engine steps (decode)", "{}", "engine_steps"),
        ("requests", "{}", "requests"),
        ("prefill computed", "{}", "prefill_computed"),
        ("prefill cached", "{}", "prefill_cached"),
        ("draft acceptance", "{:.1%}", "acceptance_rate"),
        ("exact match", "{}", "exact_match"),
    ]
    edits = record["config"]["edits"]
    spec = _ngram_setting(record["config"])
    session = runs.get("cad-session")  # records before sessions have none
    columns = [regen, ngram, gold, cad] + ([session] if session else [])
    lines = [f"| {edits} concurrent edits | regen | n-gram spec. {spec} (the model's own text) | "
             f"n-gram spec. {spec} on gold (replay, priced) | cad (a request per splice) |"
             + (" cad (one session per edit) |" if session else ""),
             "|---|" + "---:|" * len(columns)]
    for label, fmt, key in rows:
        cells = [fmt.format(run[key]) if run.get(key) is not None else "-" for run in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, run in (("CaD, a request per splice", cad), ("CaD, one session per edit", session)):
        if not run:
            continue
        speed = run["gold_tokens_per_second"]
        lines.append(f"{name}: gold-token throughput {speed / regen['gold_tokens_per_second']:.2f}x regeneration, "
                     f"{speed / ngram['gold_tokens_per_second']:.2f}x n-gram speculation {spec} (the model's own text), "
                     f"{speed / gold['gold_tokens_per_second']:.2f}x n-gram speculation replayed on the gold; "
                     f"p50 latency {run['latency_p50']:.1f} s vs {regen['latency_p50']:.1f} / "
                     f"{ngram['latency_p50']:.1f} / {gold['latency_p50']:.1f} s.")
    model = gold["step_model"]
    lines.append(f"Replay priced with the n-gram run's decode steps: {1000 * model['intercept_seconds']:.0f} ms "
                 f"+ {1000 * model['seconds_per_token']:.2f} ms per scheduled token (R² {model['r2']:.2f}, "
                 f"{model['fitted_steps']} steps of {model['tokens_range'][0]}-{model['tokens_range'][1]} tokens), "
                 f"after the measured prefill phase ({gold['prefill_phase_seconds']:.1f} s).")
    if "splice_cache_hit_rate" in cad:
        lines.append(f"Splices: {cad['splices']}; prefix-cache hits {cad['splice_cached']} of "
                     f"{cad['splice_reusable_blocks']} reusable tokens in whole blocks "
                     f"({100 * cad['splice_cache_hit_rate']:.1f} %; {cad['splice_reusable']} before block rounding).")
    if "splice_overhead_ms" in cad:
        lines.append(f"Continuation request under load: median first token {1000 * cad['continuation_ttft_median']:.0f} ms "
                     f"vs a decode step {1000 * cad['decode_step_seconds']:.0f} ms ({cad['splice_overhead_ms']:.0f} ms "
                     "more, span prefill included).")
    probe = record.get("splice_probe") or {}
    if probe.get("splices"):
        ms = probe["median_ms"]
        lines.append(f"Per splice, one request at a time ({probe['splices']} splices, median span "
                     f"{probe['span_tokens_median']:.0f} tokens; medians): decode step {ms['step']:.0f} ms; new request "
                     f"on a cached context {ms['cached']:.0f} ms, so request overhead {probe['request_overhead_ms']:.0f} ms "
                     f"(scheduling, cache lookup, partial block); with the CaD constraint {ms['cad']:.0f} ms, so grammar "
                     f"start {probe['grammar_start_ms']:.0f} ms (replay alone {probe['replay_ms']:.1f} ms); span prefill "
                     f"{probe['span_prefill_ms']:.0f} ms.")
    startup = env.get("engine_startup_seconds") or {}
    lines.append(f"vLLM {env.get('vllm')}, torch {env.get('torch')}, transformers {env.get('transformers')}, "
                 f"llguidance {env.get('llguidance')}; {env.get('cpu')} ({env.get('cpus')} CPUs), "
                 f"load {env.get('loadavg_1_5_15')} at the start, {env.get('loadavg_end')} at the end; "
                 f"{env.get('date_utc')} to {env.get('date_utc_end')} UTC; engine start-up "
                 + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in startup.items()) + ".")
    return "\n".join(lines) + "\n"


def _ngram_setting(config: dict[str, Any]) -> str:
    """vLLM's n-gram settings of a run, as the tables name them (``k=8 n=2-4``)."""
    return f"k={config.get('ngram_k')} n={config.get('ngram_min')}-{config.get('ngram_max')}"


def plot_serve(record: dict[str, Any], path: str) -> None:
    """Gold-token throughput and p50/p95 latency per edit, one bar group per run."""
    plt = _common.pyplot()
    runs = record["runs"]
    spec = _ngram_setting(record["config"])
    names = list(RUNS) + (["cad-session"] if "cad-session" in runs else [])
    labels = ["regen", f"n-gram\n{spec}\n(own text)", f"n-gram\n{spec}\n(gold, replay)", "CaD\n(request\nper splice)",
              "CaD\n(session\nper edit)"][:len(names)]
    colors = ["tab:grey", "tab:blue", "lightsteelblue", "tab:red", "darkred"][:len(names)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    speeds = [runs[name]["gold_tokens_per_second"] for name in names]
    left.bar(range(len(names)), speeds, color=colors, hatch=["", "", "//", "", ""][:len(names)])
    left.set_ylabel("gold tokens / s")
    for axis in (left, right):
        axis.set_xticks(range(len(names)), labels, fontsize=7)
        axis.grid(axis="y", alpha=0.3)
    width = 0.38
    for offset, key, alpha in ((-width / 2, "latency_p50", 1.0), (width / 2, "latency_p95", 0.5)):
        right.bar([i + offset for i in range(len(names))], [runs[name][key] for name in names], width,
                  color=colors, alpha=alpha, label=key.split("_")[1])
    right.set_ylabel("latency per edit, s")
    right.legend(fontsize=7)
    env = record["environment"]
    fig.suptitle(f"{record['config']['edits']} concurrent edits, {record['config']['model'].rstrip('/').split('/')[-1]}, "
                 f"vLLM {env.get('vllm')}, {env.get('cpus')} CPUs, {env.get('date_utc')} UTC "
                 "(hatched: replay, not a run)", fontsize=8)
    fig.tight_layout()
    _common.save_figure(fig, path)
    plt.close(fig)
