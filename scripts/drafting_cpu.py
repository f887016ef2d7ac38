"""Drafting on vs off: oracle-forced CaD runs, side by side in one process.

    python3 scripts/drafting_cpu.py [--preset qwen2.5-0.5b] [--per-corpus 5] [--repeats 2] [--threads 1]
    python3 scripts/drafting_cpu.py --counts
    python3 scripts/drafting_cpu.py --widths [--preset qwen2.5-0.5b]

Timing (default): for each of the first ``--per-corpus`` cases of each corpus in
``tests/fixtures/corpus_sample.jsonl`` (id order), the oracle program is forced through
``CaDGenerator`` with ``draft_tags=False`` and ``True``, interleaved (off, on, on, off, ...)
so that a busy shared machine slows both alike. Prints one row per case and the totals
(wall-clock after the prefill = ``total_seconds - prefill_seconds``, forward passes),
then a JSON line with everything.

``--counts``: forward passes only, for every case of the sample and the three tokenizer
families (tiny presets: under a forced program the counts depend on the tokenizer and
the drafter, not on the weights), per corpus.

``--widths``: seconds of one forward of 1..16 tokens after a 600-token prefix, with 1 and
2 torch threads (median and min of 7, the cache cropped back after each): what a draft
appended to a forward costs on this machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from cad_outlines import models
from cad_outlines.generator import CaDGenerator
from cad_outlines.oracle import oracle_program

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "corpus_sample.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="qwen2.5-0.5b")
    parser.add_argument("--per-corpus", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each setting per case")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--counts", action="store_true", help="forward counts of every sample case, tiny presets")
    parser.add_argument("--widths", action="store_true", help="forward seconds by width and thread count")
    args = parser.parse_args(argv)
    if args.widths:
        return widths(args.preset)
    torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    by_corpus: dict[str, list[dict]] = {}
    for row in rows:
        by_corpus.setdefault(row["id"].rsplit("-", 1)[0], []).append(row)
    if args.counts:
        return counts(by_corpus)
    cases = [c for group in by_corpus.values() for c in group[:args.per_corpus]]
    model = models.load(args.preset)
    warm = cases[0]
    for draft in (False, True):  # first-call costs are nobody's
        CaDGenerator(model, warm["doc"], draft_tags=draft).run(
            "apply the change", force_program=oracle_program(warm["doc"], warm["gold"]))
    out = []
    print(f"{'case':28} {'fwd off':>7} {'fwd on':>6} {'acc/drafted':>11} {'s off':>7} {'s on':>7} {'speed-up':>8}")
    for case in cases:
        ops = oracle_program(case["doc"], case["gold"])
        order = [False, True, True, False] * args.repeats
        seconds: dict[bool, list[float]] = {False: [], True: []}
        stats = {}
        for draft in order[:2 * args.repeats]:
            result = CaDGenerator(model, case["doc"], draft_tags=draft).run("apply the change", force_program=ops)
            if result.document != case["gold"]:
                raise SystemExit(f"{case['id']}: draft_tags={draft} did not rebuild the gold")
            seconds[draft].append(result.stats.total_seconds - result.stats.prefill_seconds)
            stats[draft] = result.stats
        off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
        print(f"{case['id']:28} {stats[False].forward_passes:7d} {stats[True].forward_passes:6d} "
              f"{stats[True].draft_accepted:5d}/{stats[True].draft_tokens:<5d} {off:7.2f} {on:7.2f} {off / on:8.2f}")
        out.append({"id": case["id"], "seconds_off": seconds[False], "seconds_on": seconds[True],
                    "forward_passes_off": stats[False].forward_passes,
                    "forward_passes_on": stats[True].forward_passes,
                    "decoded_tokens": stats[True].decoded_tokens,
                    "draft_tokens": stats[True].draft_tokens, "draft_accepted": stats[True].draft_accepted,
                    "forwards_saved": stats[True].forwards_saved,
                    "draft_seconds": stats[True].draft_seconds})
    tot_off = sum(statistics.median(r["seconds_off"]) for r in out)
    tot_on = sum(statistics.median(r["seconds_on"]) for r in out)
    f_off = sum(r["forward_passes_off"] for r in out)
    f_on = sum(r["forward_passes_on"] for r in out)
    acc = sum(r["draft_accepted"] for r in out)
    drafted = sum(r["draft_tokens"] for r in out)
    print(f"{'total':28} {f_off:7d} {f_on:6d} {acc:5d}/{drafted:<5d} {tot_off:7.2f} {tot_on:7.2f} {tot_off / tot_on:8.2f}")
    env = {"preset": args.preset, "threads": args.threads, "torch": torch.__version__,
           "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    print(json.dumps({"env": env, "cases": out}))
    return 0


def widths(preset: str) -> int:
    """One forward of ``width`` tokens after a 600-token prefix, by width and threads."""
    model = models.load(preset)
    gen = CaDGenerator(model, "a\nb\n")
    print(f"{'threads':>7} {'width':>5} {'median s':>9} {'min s':>7}")
    for threads in (1, 2, 1, 2):
        torch.set_num_threads(threads)
        for width in (1, 2, 4, 8, 11, 16):
            cache = gen._new_cache()
            gen._forward(list(range(100, 700)), cache)
            times = []
            for _ in range(7):
                clock = time.perf_counter()
                gen._forward(list(range(1000, 1000 + width)), cache, rows=width)
                times.append(time.perf_counter() - clock)
                cache.crop(-width)
            print(f"{threads:7d} {width:5d} {statistics.median(times):9.3f} {min(times):7.3f}", flush=True)
    return 0


def counts(by_corpus: dict[str, list[dict]]) -> int:
    """Forward passes with drafts off / on, per tiny preset and corpus, every case.

    ``struct/copy``: forwards that follow a decode step outside a gen body (tags,
    ``<gen>``, ``</gen>``, ``<program>``), per copy op. The step's program state is read
    by wrapping ``ProgramConstraint.allowed`` (called once per decode step).
    """
    from cad_outlines.constraint import ProgramConstraint
    from cad_outlines.program import GEN_CLOSE, GEN_OPEN, Copy

    events: list[str | None] = []  # pending text at each decode step, None for a forward
    allowed = ProgramConstraint.allowed

    def logged_allowed(self, vocab_size):
        events.append(self.pending)
        return allowed(self, vocab_size)

    def in_body(pending: str) -> bool:
        return pending.startswith(GEN_OPEN) and not any(
            pending.endswith(GEN_CLOSE[:k]) for k in range(2, len(GEN_CLOSE)))

    ProgramConstraint.allowed = logged_allowed
    print(f"{'preset':20} {'corpus':15} {'cases':>5} {'copies':>6} {'decoded':>7} {'fwd off':>7} "
          f"{'fwd on':>6} {'on/off':>6} {'saved/copy':>10} {'struct/copy off':>15} {'on':>5} {'acc/drafted':>12}")
    for preset in ("tiny-qwen", "tiny-deepseek-coder", "tiny-codellama"):
        model = models.load(preset)
        for corpus, cases in by_corpus.items():
            tot = dict(copies=0, decoded=0, off=0, on=0, acc=0, drafted=0, struct_off=0, struct_on=0)
            for case in cases:
                ops = oracle_program(case["doc"], case["gold"])
                res = {}
                for draft in (False, True):
                    gen = CaDGenerator(model, case["doc"], draft_tags=draft)
                    forward = gen._forward
                    gen._forward = lambda ids, cache, rows=1, f=forward: events.append(None) or f(ids, cache, rows)
                    events.clear()
                    res[draft] = gen.run("apply the change", force_program=ops)
                    tot["struct_on" if draft else "struct_off"] += sum(
                        1 for a, b in zip(events, events[1:]) if a is not None and b is None and not in_body(a))
                if any(r.document != case["gold"] for r in res.values()) or res[True].program != res[False].program:
                    raise SystemExit(f"{preset} {case['id']}: outputs differ")
                tot["copies"] += sum(isinstance(op, Copy) for op in ops)
                tot["decoded"] += res[True].stats.decoded_tokens
                tot["off"] += res[False].stats.forward_passes
                tot["on"] += res[True].stats.forward_passes
                tot["acc"] += res[True].stats.draft_accepted
                tot["drafted"] += res[True].stats.draft_tokens
            c = tot["copies"]
            print(f"{preset:20} {corpus:15} {len(cases):5d} {c:6d} {tot['decoded']:7d} {tot['off']:7d} "
                  f"{tot['on']:6d} {tot['on'] / tot['off']:6.3f} {(tot['off'] - tot['on']) / c:10.2f} "
                  f"{tot['struct_off'] / c:15.2f} {tot['struct_on'] / c:5.2f} {tot['acc']:>5d}/{tot['drafted']:<6d}",
                  flush=True)
    ProgramConstraint.allowed = allowed
    return 0


if __name__ == "__main__":
    sys.exit(main())
