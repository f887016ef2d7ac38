"""bench kernel, bench bounds and bench e2e on the tiny presets (CI-sized runs)."""

from __future__ import annotations

import json

import pytest

from cad_outlines import cli
from cad_outlines.bench._loop import clocked_generator, counting_generator, regen_baseline, tag_shape
from cad_outlines.bench.bounds import compute_bounds, load_kernel
from cad_outlines.bench.e2e import E2EConfig, run_e2e, run_outlines, select_cases
from cad_outlines.bench.e2e_report import format_e2e
from cad_outlines.adapters import get_adapter
from cad_outlines.errors import InputError
from cad_outlines.training.ceiling import case_ceiling, load_tokenization
from cad_outlines.training.corpus import load_corpus
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.language.program import Copy, Gen

from testdata import CORPUS_SAMPLE, TOKENIZERS

SAMPLE = CORPUS_SAMPLE
QWEN = TOKENIZERS / "qwen"
CASES = load_corpus(SAMPLE)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("kernel")
    path, png = out / "kernel.json", out / "kernel.png"
    code = cli.main(["bench", "kernel", "--preset", "tiny-qwen", "--prefix", "16", "--max-n", "8",
                     "--trials", "1", "--threads", "1", "-o", str(path), "--plot", str(png)])
    assert code == 0
    return path, png


def test_kernel_file(kernel_file):
    path, png = kernel_file
    record = json.loads(path.read_text())
    assert record["n"] == [1, 2, 3, 4, 5, 6, 7, 8] and record["prefix"] == 16 and record["trials"] == 1
    for key in ("t_ar", "t_pp_keep1", "t_pp_full", "s_keep1", "s_full"):
        assert len(record[key]) == len(record["n"]) and all(v > 0 for v in record[key])
    assert record["s_keep1"][2] == pytest.approx(record["t_ar"][2] / record["t_pp_keep1"][2])
    # on the CPU the same forwards are also timed in process CPU time
    assert record["s_keep1_cpu"][3] == pytest.approx(record["t_ar_cpu"][3] / record["t_pp_keep1_cpu"][3])
    # N decode forwards take longer than one of them
    assert record["t_ar"][-1] > record["t_ar"][0]
    costs = record["costs"]
    assert all(costs[k] > 0 for k in ("tau", "c_mask", "c_mask_tag", "c_sync", "c_forced"))
    assert costs["tag_decode_steps"] == record["tag"]["decode_steps"] >= 3
    kernel = load_kernel(path)
    assert kernel.costs.per_copy == pytest.approx(record["per_copy_cost"])
    assert record["env"]["cpus"] >= 1 and record["env"]["torch"]
    assert png.read_bytes()[:8] == PNG


@pytest.mark.slow
def test_bench_bounds_matches_hand_computed_bounds(kernel_file, tmp_path, capsys):
    path, _ = kernel_file
    corpus = tmp_path / "three.jsonl"
    corpus.write_text("".join(line for line in SAMPLE.read_text().splitlines(True)[:3]))
    assert cli.main(["bench", "bounds", str(corpus), "--tokenizer", str(QWEN), "--kernel", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tok = load_tokenization(QWEN)
    results = [case_ceiling(c, tok) for c in CASES[:3]]
    spans = [n for r in results for n in r.spans]
    T = sum(r.T for r in results)
    kernel = load_kernel(path)
    want = compute_bounds(T, T - sum(spans), spans, kernel.curve("keep1"), kernel.costs)
    assert out["T"] == T and out["bounds"]["keep1"]["bnd_exact"] == pytest.approx(want.bnd_exact)
    assert out["bounds"]["keep1"]["m_star"] == want.m_star
    assert cli.main(["bench", "bounds", str(corpus), "--tokenizer", str(QWEN), "--kernel", str(path)]) == 0
    assert "bnd_exact" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "cad-outlines.kernel"}')
    assert cli.main(["bench", "bounds", str(corpus), "--tokenizer", str(QWEN), "--kernel", str(bad)]) == 2
    assert "missing field" in capsys.readouterr().err
    # the product `ceiling` no longer takes a kernel (bounds are a benchmark)
    with pytest.raises(SystemExit):
        cli.main(["ceiling", str(corpus), "--tokenizer", str(QWEN), "--kernel", str(path)])


@pytest.mark.slow
def test_tag_shape_counts_the_real_loop(tiny_model):
    model = tiny_model("tiny-qwen")
    wide, narrow = tag_shape(model, 300, (120, 245)), tag_shape(model, 300, (1, 2))
    # Qwen writes numbers digit by digit: more digits, more decode steps
    assert wide.decode_steps > narrow.decode_steps
    assert narrow.decode_steps >= 3 and wide.forced_runs >= 0
    gen, runner = counting_generator(model, "a\nb\nc", splice=True)
    result = gen.run("x", force_program=[Copy(1, 2), Gen("\nz\n")])
    assert result.document == "a\nb\nz"
    assert len(runner.widths) == result.stats.forward_passes
    assert max(runner.widths[1:]) >= 1 + result.stats.copied_tokens  # one forward carried the span


def test_regeneration_baseline_one_forward_per_token(tiny_model):
    model = tiny_model("tiny-qwen")
    case = select_cases(CASES, "size", 1)[0]
    gen, clock = clocked_generator(model, case.doc)
    ids = gen.adapter.encode(case.gold)
    prompt = gen.adapter.plain_prompt_ids(case.doc, "edit")  # the file as it is, no format statement
    out = regen_baseline(gen, clock, "edit", case.gold)
    assert out["exact"] and out["tokens"] == len(ids) and out["prompt_tokens"] == len(prompt)
    assert out["forward_passes"] == 1 + len(ids)
    assert 0 < out["prefill_seconds"] < out["total_seconds"]
    assert 0 < out["cpu_gen_seconds"] <= out["cpu_total_seconds"]


@pytest.mark.slow
def test_outlines_baseline_is_really_masked_by_outlines(tiny_model):
    model = tiny_model("tiny-qwen")
    doc = "a = 1\nb = 2\nc = 3\n"
    program = '<program><copy lines="1-1"/><gen>\nb = 5\n</gen><copy lines="3-4"/></program>'
    adapter = CaDGenerator(model, doc).adapter
    out = run_outlines(model, doc, "edit", program, adapter)
    assert out["program_ok"] and out["tokens"] == out["forward_passes"] > 5
    # a copy past the document's 4 lines is outside the specialised grammar: Outlines'
    # own mask must refuse it
    with pytest.raises(RuntimeError, match="allows no token"):
        run_outlines(model, doc, "edit", '<program><copy lines="1-9"/></program>', adapter)


def test_select_cases_orders():
    size = lambda c: len(c.doc) + len(c.gold)  # noqa: E731
    by_size = select_cases(CASES, "size", 3)
    assert [size(c) for c in by_size] == sorted(size(c) for c in CASES)[:3]
    assert select_cases(CASES, "file", 2) == CASES[:2]
    with pytest.raises(ValueError):
        select_cases(CASES, "random")


def test_select_cases_by_length_and_split():
    from cad_outlines.bench.cli import line_range
    from cad_outlines.bench.e2e import document_lines
    from cad_outlines.training.corpus import Case
    from cad_outlines.training.edits import split_of

    assert [document_lines(t) for t in ("", "a", "a\n", "a\nb", "a\nb\n\n")] == [0, 1, 1, 2, 3]
    counts = sorted(document_lines(c.doc) for c in CASES)
    low, high = counts[1], counts[-2]
    chosen = select_cases(CASES, lines=(low, high))
    assert chosen and all(low <= document_lines(c.doc) <= high for c in chosen)
    assert len(chosen) == sum(low <= n <= high for n in counts)
    placed = [Case(f"c{k}", "a\n", "b\n", {"source": "org/repo", "path": f"f{k}.py"}) for k in range(40)]
    evals = select_cases(placed, split="eval")
    assert evals and len(evals) < len(placed)
    assert all(split_of("org/repo", c.meta["path"]) == "eval" for c in evals)
    assert len(evals) + len(select_cases(placed, split="train")) == len(placed)
    with pytest.raises(InputError, match="no 'source' and 'path'"):
        select_cases([Case("bare", "a\n", "b\n")], split="eval")
    assert line_range("151-400") == (151, 400)
    for bad in ("400-151", "151", "a-b", "-3"):
        with pytest.raises(Exception, match="LOW-HIGH"):
            line_range(bad)
    with pytest.raises(InputError, match="split"):
        E2EConfig("tiny-qwen", split="test")


@pytest.mark.slow
def test_e2e_pools_six_runs_on_tiny_qwen(tiny_model):
    cfg = E2EConfig("tiny-qwen", limit=2, order="size", threads=1, kernel_max_n=8, kernel_prefix=32)
    report = run_e2e(CASES, cfg, progress=False, model=tiny_model("tiny-qwen"))
    assert not report["failures"] and len(report["cases"]) == 2
    for case in report["cases"]:
        runs = case["runs"]
        assert runs["regen"]["exact"] and runs["cad"]["exact"] and runs["cad_nosplice"]["exact"]
        assert runs["cad_plain"]["exact"] and runs["outlines"]["program_ok"]
        assert runs["regen"]["tokens"] == case["T"]
        assert runs["cad"]["splices"] == len(case["spans"]) and runs["cad_nosplice"]["splices"] == 0
        assert runs["cad_plain"]["forced_tokens"] == 0
        assert runs["cad_nodraft"]["exact"]
        # drafting is on only in the default runs; it saves forwards, never decode steps
        assert runs["cad_nodraft"]["draft_tokens"] == runs["cad_plain"]["draft_tokens"] == 0
        assert runs["cad"]["decoded_tokens"] == runs["cad_nodraft"]["decoded_tokens"]
        assert runs["cad"]["forward_passes"] + runs["cad"]["forwards_saved"] == runs["cad_nodraft"]["forward_passes"]
        assert runs["cad"]["forwards_saved"] > 0
        # PLD (transformers' default and the tuned setting): the gold, fewer forwards than
        # regeneration, on the plain prompt (no format statement, no line numbers)
        for name in ("pld_k10_n2", "pld_k20_n3"):
            assert runs[name]["exact"] and runs[name]["tokens"] == case["T"]
            assert runs[name]["forward_passes"] == 1 + case["T"] - runs[name]["draft_accepted"]
            assert runs[name]["prompt_tokens"] == case["plain_prompt_tokens"] < case["prompt_tokens"]
        assert case["realized"] == pytest.approx(runs["regen"]["gen_seconds"] / runs["cad"]["gen_seconds"])
        assert case["ratio"] == pytest.approx(case["realized"] / case["bounds"]["bnd_exact"])
    pooled = report["pooled"]
    assert pooled["T"] == sum(c["T"] for c in report["cases"])
    regen = sum(c["runs"]["regen"]["gen_seconds"] for c in report["cases"])
    cad = sum(c["runs"]["cad"]["gen_seconds"] for c in report["cases"])
    assert pooled["realized"] == pytest.approx(regen / cad)
    assert pooled["exact"]["cad"] == 2 and pooled["exact"]["pld_k20_n3"] == 2
    # prompt-included: against regeneration with the plain prompt (PLD's prefill)
    plain_prefill = sum(c["runs"]["pld_k10_n2"]["prefill_seconds"] for c in report["cases"])
    assert pooled["speedup_prompt_included"]["cad"] == pytest.approx(
        (regen + plain_prefill) / sum(c["runs"]["cad"]["total_seconds"] for c in report["cases"]))
    assert pooled["prompt"]["tokens_ratio"] > 1
    # the prompt table's CaD prefill is the CaD row's, not regeneration's (the plain prompt)
    assert pooled["prompt"]["cad_prefill_seconds"] == pytest.approx(
        sum(c["runs"]["cad"]["prefill_seconds"] for c in report["cases"]))
    assert pooled["forward_passes"]["pld_k10_n2"] < pooled["forward_passes"]["regen"]
    cpu = pooled["cpu"]
    assert cpu["realized"] == pytest.approx(
        sum(c["runs"]["regen"]["cpu_gen_seconds"] for c in report["cases"])
        / sum(c["runs"]["cad"]["cpu_gen_seconds"] for c in report["cases"]))
    assert cpu["ratio"] == pytest.approx(cpu["realized"] / cpu["bnd_exact"])
    for case in report["cases"]:
        for run in case["runs"].values():
            assert 0 < run["cpu_gen_seconds"] <= run["cpu_total_seconds"]
    overhead = pooled["overhead"]
    assert overhead["regen_drift"] == pytest.approx(overhead["regen_seconds_per_token"] / overhead["tau_kernel"] - 1)
    assert cpu["tau_kernel"] == report["kernel"]["t_ar_cpu"][0]
    assert cpu["regen_drift"] == pytest.approx(
        sum(c["runs"]["regen"]["cpu_gen_seconds"] for c in report["cases"])
        / sum(c["runs"]["regen"]["tokens"] for c in report["cases"]) / cpu["tau_kernel"] - 1)
    gap = pooled["gap"]
    assert gap["extra_decode_steps"] == gap["decoded_tokens"] - pooled["T_gen"]
    assert gap["nodraft_forward_passes"] == gap["forward_passes"] + gap["forwards_saved"]
    # where the forwards went: each splice rode a forward; prefill, splices, index digits
    # and gen text never add up to more than all of them
    assert gap["operations"] == sum(c["runs"]["cad"]["operations"] for c in report["cases"]) > 0
    assert gap["splice_forwards"] == gap["splices"]
    assert 2 + gap["splice_forwards"] + gap["index_forwards"] + gap["body_forwards"] <= gap["forward_passes"]
    assert "forwards per operation" in format_e2e(report) and "forwards per 128 tokens" in format_e2e(report)
    assert report["kernel"]["prefix"] == 32 and report["kernel"]["n"] == [1, 2, 3, 4, 5, 6, 7, 8]
    # the curve read as measured runs beside the calibrated one, with the same output
    assert all(c["runs"]["cad_fixedcost"]["exact"] for c in report["cases"])
    # and the curve `--forward-cost auto` measures, which the kernel record carries
    from cad_outlines.tools.calibration import WIDTHS

    assert tuple(report["kernel"]["auto_forward_cost"]["widths"]) == WIDTHS
    assert all(c["runs"]["cad_auto"]["exact"] for c in report["cases"])
    assert "`--forward-cost auto`" in format_e2e(report)
    # warm: only what follows each prompt's constant head is prefilled
    head = len(get_adapter(tiny_model("tiny-qwen").hf_tokenizer).constant_ids(plain=True))
    for case in report["cases"]:
        assert case["plain_prompt_tokens_cached"] == case["cad_prompt_tokens_cached"] == head > 0
        assert case["cad_prefill_warm_cpu_seconds"] > 0
    warm = cpu["prefill_warm_seconds"]
    assert cpu["speedup_prompt_included_warm"]["cad"] == pytest.approx(
        (sum(c["runs"]["regen"]["cpu_gen_seconds"] for c in report["cases"]) + warm["plain"])
        / (sum(c["runs"]["cad"]["cpu_gen_seconds"] for c in report["cases"]) + warm["cad"]))
    assert "prompt included, warm" in format_e2e(report)


@pytest.mark.slow
def test_e2e_with_the_compact_prompt_caches_its_format_statement(tiny_model):
    cfg = E2EConfig("tiny-qwen", limit=1, order="size", threads=1, kernel_max_n=4, kernel_prefix=16,
                    pld=("20:3",), skip=("outlines", "cad_nodraft", "cad_nosplice", "cad_plain", "cad_auto"),
                    prompt_style="compact")
    report = run_e2e(CASES, cfg, progress=False, model=tiny_model("tiny-qwen"))
    case = report["cases"][0]
    # the auto row skipped: its curve is not measured either
    assert "auto_forward_cost" not in report["kernel"] and "cad_auto" not in case["runs"]
    adapter = get_adapter(tiny_model("tiny-qwen").hf_tokenizer)
    assert case["runs"]["cad"]["exact"] and case["runs"]["cad"]["prompt_tokens"] == case["prompt_tokens"]
    assert case["cad_prompt_tokens_cached"] == len(adapter.constant_ids(style="compact")) > \
        case["plain_prompt_tokens_cached"]
    # warm document: both compact prompts put the file before the instruction, so an
    # earlier edit of the file leaves all of it cached
    doc_tokens = len(adapter.encode(case_doc := select_cases(CASES, "size", 1)[0].doc))
    assert case_doc and case["cad_prompt_tokens_doc_cached"] > doc_tokens
    assert case["plain_prompt_tokens_doc_cached"] > doc_tokens
    assert case["prompt_tokens"] - case["cad_prompt_tokens_doc_cached"] < 32  # the instruction's part
    cpu = report["pooled"]["cpu"]
    assert cpu["speedup_prompt_included_doc"]["cad"] == pytest.approx(
        (case["runs"]["regen"]["cpu_gen_seconds"] + case["plain_prefill_doc_cpu_seconds"])
        / (case["runs"]["cad"]["cpu_gen_seconds"] + case["cad_prefill_doc_cpu_seconds"]))
    assert "warm document" in format_e2e(report)
    with pytest.raises(InputError, match="prompt_style"):
        E2EConfig("tiny-qwen", prompt_style="short")


def test_drift_note_flags_a_run_whose_speed_changed():
    from cad_outlines.bench.e2e_report import drift_note

    steady = {"tau_kernel": 0.19, "regen_seconds_per_token": 0.175, "regen_drift": 0.175 / 0.19 - 1}
    assert drift_note(steady) is None  # 8 % under tau: within the limit
    loaded = {"tau_kernel": 0.188, "regen_seconds_per_token": 0.250, "regen_drift": 0.250 / 0.188 - 1}
    note = drift_note(loaded, "process CPU time")
    assert note and "+33%" in note and "250.0 ms" in note and "188.0 ms" in note
    assert "process CPU time realized / bnd_exact" in note
    assert drift_note({"tau_kernel": 0.2, "regen_seconds_per_token": 0.1, "regen_drift": -0.5}) is not None
    assert drift_note({}) is None  # a report pooled before the field existed


@pytest.mark.slow
def test_e2e_cli(tmp_path, capsys):
    corpus = tmp_path / "one.jsonl"
    smallest = min(SAMPLE.read_text().splitlines(True), key=len)
    corpus.write_text(smallest)
    png, out = tmp_path / "e2e.png", tmp_path / "e2e.json"
    code = cli.main(["bench", "e2e", str(corpus), "--preset", "tiny-qwen", "--limit", "1", "--threads", "1",
                     "--kernel-max-n", "4", "--kernel-prefix", "16", "--plot", str(png), "-o", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "realized / bnd_exact" in text and "Outlines" in text and "PLD k=20, n=3" in text
    assert "| generation only | prompt included |" in text
    assert png.read_bytes()[:8] == PNG
    record = json.loads(out.read_text())
    assert record["pooled"]["n"] == 1 and record["kernel"]["prefix"] == 16  # --kernel-prefix reached the kernel
    assert cli.main(["bench", "e2e", str(corpus), "--preset", "no-such-model"]) == 2


def test_e2e_budgets_cover_the_gold_and_inexact_runs_fail(monkeypatch, tiny_model):
    import cad_outlines.bench.e2e as e2e
    from cad_outlines.bench.bounds import FixedCosts, KernelCurve

    model = tiny_model("tiny-qwen")
    case = select_cases(CASES, "size", 1)[0]
    seen = {}
    real = e2e.regen_baseline

    def wrong(gen, clock, instruction, gold):
        seen["budget"] = gen.max_new_tokens
        return {**real(gen, clock, instruction, gold), "exact": False}

    monkeypatch.setattr(e2e, "regen_baseline", wrong)
    curve, costs = KernelCurve((1, 2), (1.0, 2.0)), FixedCosts(1.0, 0.0, 0.0, 0.0, 1.0, 5, 1)
    with pytest.raises(e2e.InexactRunError, match="regen"):
        e2e.run_case(model, case, "edit", curve, costs)
    # the default max_new_tokens (2048) would cut a long gold short; the budget follows T
    assert seen["budget"] >= len(CaDGenerator(model, case.doc).adapter.encode(case.gold))


@pytest.mark.slow
def test_bench_all_runs_items_1_to_5_with_one_kernel(tmp_path, capsys):
    corpus = tmp_path / "two.jsonl"
    corpus.write_text("".join(sorted(SAMPLE.read_text().splitlines(True), key=len)[:2]))
    out = tmp_path / "all"
    code = cli.main(["bench", "all", str(corpus), "--preset", "tiny-qwen", "--threads", "1",
                     "--kernel-max-n", "4", "--kernel-trials", "1", "--eps", "0,2", "--trials", "2",
                     "--out-dir", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| **total** |" in text
    files = {p.name for p in out.iterdir()}
    assert {"kernel.json", "kernel.png", "bounds.json", "e2e.json", "e2e.png", "formats.json",
            "perturb.json", "perturb.png", "suite.json", "summary.md", "e2e.partial.jsonl"} <= files
    # each case was checkpointed as it finished (after the settings line), and a run cut
    # short can be pooled from it
    assert len((out / "e2e.partial.jsonl").read_text().splitlines()) == 3
    full = json.loads((out / "e2e.json").read_text())["pooled"]
    assert cli.main(["bench", "pool", str(out)]) == 0
    pooled = json.loads((out / "e2e.json").read_text())
    assert pooled["partial"] and pooled["pooled"]["n"] == 2
    assert pooled["pooled"]["speedup"] == pytest.approx(full["speedup"])
    assert (out / "e2e.md").read_text().startswith("# e2e (pooled from the checkpoint: 2 case(s))")
    assert cli.main(["bench", "pool", str(tmp_path)]) == 2  # not a bench all folder
    suite = json.loads((out / "suite.json").read_text())
    kernel = json.loads((out / "kernel.json").read_text())
    e2e = json.loads((out / "e2e.json").read_text())
    # one kernel: the e2e run read the curve item 1 measured, on the same cases
    assert e2e["kernel"] == kernel
    assert [c["id"] for c in e2e["cases"]] == suite["config"]["cases"]
    assert len(suite["config"]["cases"]) == 2
    bounds = json.loads((out / "bounds.json").read_text())
    assert bounds["T"] == e2e["pooled"]["T"]
    assert bounds["bounds"]["keep1"]["bnd_exact"] == pytest.approx(e2e["pooled"]["bounds"]["bnd_exact"])
    assert json.loads((out / "perturb.json").read_text())["n"] == 2
    assert json.loads((out / "formats.json").read_text())["n"] == 2
    seconds = suite["seconds"]
    assert seconds["total"] >= sum(seconds[k] for k in ("kernel", "bounds", "e2e", "formats", "perturb"))
    assert "## e2e" in (out / "summary.md").read_text()
    # cut short after the first case: the same command resumes, with the same kernel,
    # taking that case from the checkpoint and measuring only the second
    lines = (out / "e2e.partial.jsonl").read_text().splitlines(True)
    (out / "e2e.partial.jsonl").write_text("".join(lines[:2]))
    command = ["bench", "all", str(corpus), "--preset", "tiny-qwen", "--threads", "1", "--kernel-max-n", "4",
               "--kernel-trials", "1", "--eps", "0,2", "--trials", "2", "--out-dir", str(out)]
    capsys.readouterr()
    assert cli.main(command) == 0
    assert "resuming" in capsys.readouterr().err
    resumed = json.loads((out / "e2e.json").read_text())
    assert resumed["resumed_cases"] == 1 and resumed["kernel"] == kernel
    assert resumed["cases"][0] == json.loads(lines[1]) and len(resumed["cases"]) == 2
    assert len((out / "e2e.partial.jsonl").read_text().splitlines()) == 3
    # other settings on the same folder are refused, and the checkpoint is kept
    assert cli.main([*command, "--pld", "20:3"]) == 2
    assert "other settings" in capsys.readouterr().err
    assert len((out / "e2e.partial.jsonl").read_text().splitlines()) == 3
    assert cli.main(["bench", "all", str(corpus), "--preset", "tiny-qwen", "--eps", "x",
                     "--out-dir", str(out)]) == 2
    capsys.readouterr()
    code = cli.main(["bench", "all", str(corpus), "--preset", "tiny-qwen", "--threads", "1", "--limit", "1",
                     "--kernel-max-n", "2", "--kernel-trials", "1", "--trials", "1", "--json",
                     "--out-dir", str(tmp_path / "one")])
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and len(record["config"]["cases"]) == 1 and "summary.md" in record["files"]
