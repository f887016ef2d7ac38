"""bench quality's bookkeeping, on tiny random-weight models standing in for the real presets."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager

import pytest

from cad_outlines.bench.quality import (CONFIGS, DEFAULT_CONFIGS, QualityConfig, _run_pld, config_of, dropped_tail,
                                        first_of_each_subset, load_eval_cases, run)
from cad_outlines.bench.quality_report import format_table
from cad_outlines.bench._loop import CountingRunner
from cad_outlines.bench.pld import PLDSetting, plain_prompt_ids, run_pld
from cad_outlines.decoding.prompts import trained_style
from cad_outlines.language.program import Copy, Gen
from cad_outlines.training.corpus import Case


def test_every_configuration_runs_and_is_summarised(tiny_model):
    cases = load_eval_cases()[:2]
    cfg = QualityConfig(configs=tuple(CONFIGS), sampled=("cad",), seeds=(0,), cad_budget=24, regen_margin=4)
    assert set(QualityConfig().configs) == set(DEFAULT_CONFIGS) == (
        set(CONFIGS) - {"regen_pld10", "regen_pld20"} - {c for c in CONFIGS if c.startswith("qwen_")})
    report = run(cfg, cases=cases, loader=lambda preset: tiny_model("tiny-qwen"))
    names = {r["config"] for r in report["records"]}
    assert names == set(CONFIGS) - {"qwen_apply", "qwen_regen_apply"}  # snippet cases only: these two are not
    assert len(report["records"]) == len(names) * 2 + 2  # greedy everywhere, one seed of cad
    # prompt lookup verifies its drafts into the regeneration model's own greedy reply
    for case in cases:
        regen, pld = ({r["case"]: r for r in report["records"] if r["config"] == name}[case.id]
                      for name in ("regen", "regen_pld10"))
        assert pld["output"] == regen["output"] and pld["forwards"] <= regen["forwards"]
    for rec in report["records"]:
        # random weights rarely finish; whatever they wrote, no guarantee may break
        assert rec["copies_in_range"], rec
        if rec["config"] in ("cad", "base_cad", "cad_monotone", "base_guarded") and rec["complete"]:
            assert rec["valid"], rec
        assert rec["forwards"] >= 1 and rec["cpu_total_seconds"] > 0
        # warm: the prompt's constant head (the chat header here) is not prefilled again
        assert 0 < rec["prompt_tokens_cached"] < rec["prompt_tokens"] and rec["cpu_prefill_warm_seconds"] > 0
    guarded = [r for r in report["records"] if r["config"] == "base_guarded"]
    assert all(r["program_tokens"] <= 24 for r in guarded)
    table = format_table(report)
    assert "| cad | seed0 |" in table and "Exact match by edit kind" in table
    assert "prompt incl., warm" in table and "| regen_pld20 |" in table
    assert set(report["summaries"]) >= {"cad/greedy", "cad/seed0", "regen/greedy"}
    # speed-ups are over the regeneration row of the same model family
    speed = table.split("Speed (greedy")[1].splitlines()
    for base in ("regen", "qwen_regen"):
        row = next(line for line in speed if line.startswith(f"| {base} |"))
        assert row.endswith("| 1.00x / 1.00x / 1.00x |"), row


def test_prompt_lookup_rows_share_one_greedy_reply_per_case(tiny_model):
    model = tiny_model("tiny-qwen")
    calls = []
    generate = model.model.generate

    def counted(*args, **kwargs):
        calls.append(kwargs.get("prompt_lookup_num_tokens"))
        return generate(*args, **kwargs)

    model.model.generate = counted
    try:
        cases = load_eval_cases()[:2]
        cfg = QualityConfig(configs=("regen_pld10", "regen_pld20"), sampled=(), regen_margin=4)
        report = run(cfg, cases=cases, loader=lambda preset: model)
    finally:
        del model.model.generate
    assert calls.count(None) == len(cases)  # one plain greedy decode a case, not one a row
    rows = {(r["config"], r["case"]): r for r in report["records"]}
    for case in cases:
        assert rows["regen_pld10", case.id]["output"] == rows["regen_pld20", case.id]["output"]


@contextmanager
def scripted(model, after: dict[int, int]):
    """The model's greedy choice after token ``a`` is ``after[a]`` (a logits hook, in every
    forward: transformers' ``generate`` and the runner seam alike)."""
    def hook(module, args, kwargs, output):
        ids, logits = kwargs["input_ids"], output.logits
        for row, token in enumerate(ids[0, -logits.shape[1]:].tolist()):
            if token in after:
                logits[0, row, after[token]] += 1e4
        return output

    handle = model.model.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def count_generate(model, calls: list):
    generate = model.model.generate

    def counted(*args, **kwargs):
        calls.append(1)
        return generate(*args, **kwargs)

    model.model.generate = counted


def one_line_reply(model):
    """The first eval case, the model's scripted greedy reply to its plain prompt (one line),
    and the token chain that scripts it (for :func:`scripted`)."""
    tok = model.hf_tokenizer
    case = load_eval_cases()[0]
    prompt = plain_prompt_ids(tok, case.doc, case.meta["instruction"], trained_style(model.model))
    reply = tok.encode("total = add(1, 2)\n", add_special_tokens=False)
    return case, reply, [prompt[-1], *reply, tok.eos_token_id]


def test_prompt_lookup_verifies_into_the_regeneration_rows_own_output(tiny_model):
    model = tiny_model("tiny-qwen")
    case, reply, chain = one_line_reply(model)
    assert len(set(chain)) == len(chain)  # each token names its successor
    calls: list = []
    count_generate(model, calls)
    try:
        with scripted(model, dict(zip(chain, chain[1:]))):
            cfg = QualityConfig(configs=("regen_pld10", "regen", "regen_pld20"), sampled=(), regen_margin=4)
            report = run(cfg, cases=[case], loader=lambda preset: model)
            # a reply the regeneration row did not write is refused by the verify forwards
            wrong = _run_pld(model, case, {"k": 10, "n": 2}, 93, {}, {("p", 93): "total = add(2, 1)\n"}, "p")
    finally:
        del model.model.generate
    rows = {r["config"]: r for r in report["records"]}
    assert [r["config"] for r in report["records"]] == list(cfg.configs)  # the order asked for
    assert rows["regen"]["output"] == "total = add(1, 2)\n" and rows["regen"]["complete"]
    for name in ("regen_pld10", "regen_pld20"):
        assert rows[name]["reply_from"] == "regeneration row" and rows[name]["greedy_mismatches"] == 0
        assert rows[name]["output"] == rows["regen"]["output"] and rows[name]["program_tokens"] == len(reply)
    assert len(calls) == 1  # only the refused reply above was decoded again
    assert wrong["reply_from"] == "generate" and wrong["greedy_mismatches"] == 0
    assert wrong["refused_reply_mismatches"] >= 1 and rows["regen_pld10"]["refused_reply_mismatches"] is None
    assert wrong["output"] == "total = add(1, 2)\n"


def test_greedy_check_counts_the_positions_greedy_would_choose_otherwise():
    class Always(CountingRunner):  # greedy always chooses token 5
        def forward(self, ids, cache, rows=1):
            logits = super().forward(ids, cache, rows)
            logits[..., 5] = 1.0
            return logits

    prompt = [1, 2, 5, 5, 5, 5]
    for gold, eos, budget, mismatches in (([5, 5, 5], None, 8, 0), ([5, 6, 5], None, 8, 1),
                                          ([5, 5], 7, 8, 1),  # greedy would not stop: EOS is 7
                                          ([5, 5], 7, 2, 0)):  # the budget stopped it, not EOS
        stats = run_pld(None, prompt, gold, PLDSetting(4, 2), eos, budget, runner=Always(16), check_greedy=True)
        assert stats["greedy_mismatches"] == mismatches, (gold, eos, budget)
    assert "greedy_mismatches" not in run_pld(None, prompt, [5], PLDSetting(4, 2), None, 8, runner=Always(16))


def test_split_keeps_prompt_lookup_with_its_regeneration_row():
    from cad_outlines.bench.quality import _split

    names = ("qwen_cad", "qwen_regen", "qwen_regen_pld20", "qwen_regen_pld128", "cad", "regen", "regen_pld20")
    for jobs in (1, 2, 3):
        parts = _split(names, (), jobs)
        assert sorted(n for p in parts for n in p) == sorted(names) and len(parts) <= jobs
        for part in parts:
            for regen in ("qwen_regen", "regen"):
                assert (regen in part) == (f"{regen}_pld20" in part), parts


def test_the_v2_set_holds_every_subset_of_unseen_files():
    from cad_outlines.training.edits import EVAL_SETS_V2, split_of

    cases = load_eval_cases("v2")
    assert {c.meta["subset"] for c in cases} == set(EVAL_SETS_V2)
    assert all(split_of(*c.meta["file"].split(":", 1)) == "eval" for c in cases)
    long = [c for c in cases if c.meta["subset"] == "whole_151_400"]
    assert long and all(151 <= c.meta["lines"] <= 400 for c in long)
    assert all("<update>" in c.meta["instruction"] for c in cases if c.meta["subset"] == "commit_snippets")


def test_per_subset_keeps_the_first_cases_of_each_subset_in_order():
    cases = load_eval_cases("v2")
    kept = first_of_each_subset(cases, 2)
    subsets = [c.meta["subset"] for c in cases]
    assert len(kept) == 2 * len(set(subsets))
    assert [c.id for c in kept] == [c.id for c in cases if c in kept]  # original order
    for name in set(subsets):
        assert [c.id for c in kept if c.meta["subset"] == name] == [c.id for c in cases if c.meta["subset"] == name][:2]


def test_a_dropped_tail_is_a_program_that_stops_copying_early():
    case = Case("x", "a\nb\nc\n", "a\nB\nc\n")
    assert dropped_tail([Copy(1, 1), Gen("B\n")], case)  # c is gone
    assert not dropped_tail([Copy(1, 1), Gen("B\n"), Copy(3, 3)], case)
    assert not dropped_tail([Copy(1, 2)], Case("y", "a\nb\nc\n", "a\nb\nC\n"))  # the last line changes


def test_v2_reports_by_subset(tiny_model):
    cases = [next(c for c in load_eval_cases("v2") if c.meta["subset"] == name) for name in ("templated", "commit_snippets")]
    report = run(QualityConfig(configs=("cad",), sampled=(), cad_budget=16), cases=cases,
                 loader=lambda preset: tiny_model("tiny-qwen"))
    by = report["summaries"]["cad/greedy"]["by_subset"]
    assert set(by) == {"templated", "commit_snippets"} and all(a["n"] == 1 for a in by.values())
    table = format_table(report)
    assert "By subset" in table and "| configuration | commit_snippets | templated |" in table
    ended = sum(r["ended_in_gen"] for r in report["records"])
    assert report["summaries"]["cad/greedy"]["all"]["ended_in_gen"] == ended
    assert ("Programs ended inside a gen" in table) == bool(ended)
    report["summaries"]["cad/greedy"]["all"]["ended_in_gen"] = 2
    assert "where the model asked for the end (docs/generator.md): cad 2." in format_table(report)
    stops = [r["stop_reason"] for r in report["records"] if r["stop_reason"]]
    assert report["summaries"]["cad/greedy"]["all"]["stopped"] == {reason: stops.count(reason) for reason in stops}
    report["summaries"]["cad/greedy"]["all"]["stopped"] = {"repetition": 1, "max_new_tokens": 2}
    assert "by reason: cad/greedy max_new_tokens 2, repetition 1." in format_table(report)


def test_a_floor_sweep_runs_side_by_side(tiny_model):
    """``qwen_apply@P`` rows: the floor is set per row; a floor below every token makes
    even random weights write the snippet's merge; a bad name is refused, naming why."""
    v2 = load_eval_cases("v2")
    case = next(c for c in v2 if c.meta["subset"] == "commit_snippets")
    other = next(c for c in v2 if c.meta["subset"] == "templated")
    cfg = QualityConfig(configs=("qwen_apply@1e-12", "qwen_apply@1"), sampled=(), cad_budget=256)
    report = run(cfg, cases=[other, case], loader=lambda preset: tiny_model("tiny-qwen"))
    assert {r["case"] for r in report["records"]} == {case.id}  # a floor needs a snippet to merge
    by = {r["config"]: r for r in report["records"]}
    assert by["qwen_apply@1e-12"]["exact"] and not by["qwen_apply@1"]["exact"]
    assert config_of("qwen_apply@0.01")[2]["follow_prediction"] == 0.01
    for name, why in (("nope@0.1", "unknown"), ("qwen_cad@0.1", "no follow_prediction"),
                      ("qwen_apply@x", "not a number"), ("qwen_apply@0", "(0, 1]")):
        with pytest.raises(KeyError, match=re.escape(why)):
            config_of(name)


def test_a_resumed_run_verifies_into_the_logged_regeneration(tiny_model, tmp_path):
    model = tiny_model("tiny-qwen")
    case, _, chain = one_line_reply(model)
    path = tmp_path / "quality.jsonl"
    with scripted(model, dict(zip(chain, chain[1:]))):
        first = run(QualityConfig(configs=("regen",), sampled=(), regen_margin=4), cases=[case],
                    loader=lambda preset: model, checkpoint=path)
        calls: list = []
        count_generate(model, calls)
        try:  # a later run adds the prompt-lookup row, the regeneration row taken from the log
            again = run(QualityConfig(configs=("regen", "regen_pld20"), sampled=(), regen_margin=4),
                        cases=[case], loader=lambda preset: model, checkpoint=path)
        finally:
            del model.model.generate
    logged = json.loads(path.read_text().splitlines()[1])
    assert logged["reply"]["text"] == "total = add(1, 2)\n"
    assert all("reply" not in r for r in first["records"] + again["records"])  # the log keeps it
    pld = again["records"][1]
    assert again["checkpoint"]["resumed"] == 1 and pld["config"] == "regen_pld20"
    assert pld["reply_from"] == "regeneration row" and pld["greedy_mismatches"] == 0 and calls == []
    assert pld["output"] == "total = add(1, 2)\n"


def test_a_checkpointed_run_resumes_without_measuring_again(tiny_model, tmp_path, monkeypatch):
    from cad_outlines.bench import _checkpoint
    from cad_outlines.errors import InputError
    from cad_outlines.tools.weights import adapter_dir, adapter_sha256

    model = tiny_model("tiny-qwen")
    loads = []

    def loader(preset):
        loads.append(preset)
        return model

    cases = load_eval_cases()[:3]
    path = tmp_path / "quality.jsonl"
    cfg = QualityConfig(configs=("cad", "regen"), sampled=(), cad_budget=16, regen_margin=4, limit=2)
    first = run(cfg, cases=cases, loader=loader, checkpoint=path)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + 4 and first["checkpoint"]["resumed"] == 0
    # a kill in the middle of a line: that record is measured again, the others are kept
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])
    loads.clear()
    again = run(cfg, cases=cases, loader=loader, checkpoint=path)
    assert again["checkpoint"]["resumed"] == 3 and loads == ["smollm2-135m-regen"]  # only regen had work
    assert [r["case"] for r in again["records"]] == [r["case"] for r in first["records"]]
    kept = {(r["config"], r["case"]): r for r in first["records"]}
    assert all(r == kept[r["config"], r["case"]] for r in again["records"][:3])
    assert "3 of these 4 records were measured by an earlier run" in format_table(again)
    # one more case: only its two records are new; the file stays one JSON record a line
    loads.clear()
    cfg.limit = None
    reads = []
    read_text = _checkpoint.read_text
    monkeypatch.setattr(_checkpoint, "read_text", lambda p: reads.append(p) or read_text(p))
    more = run(cfg, cases=cases, loader=loader, checkpoint=path)
    assert reads == [path]  # in one process the file is read once
    assert more["checkpoint"]["resumed"] == 4 and len(more["records"]) == 6 and loads == ["smollm2-135m", "smollm2-135m-regen"]
    assert all(json.loads(line) for line in path.read_text().splitlines())
    # each record names its adapter's weights; one measured with other weights (a shipped
    # adapter replaced between two runs) is measured again, not pooled into the table
    shipped = adapter_sha256(adapter_dir("smollm2-135m-cad"))
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [r["adapter_sha256"] for r in records if r["config"] == "cad"] == [shipped] * 3
    stale = next(i for i, r in enumerate(records, 1) if r["config"] == "cad")
    lines = path.read_text().splitlines()
    lines[stale] = lines[stale].replace(shipped, "0" * 64)
    path.write_text("\n".join(lines) + "\n")
    loads.clear()
    newer = run(cfg, cases=cases, loader=loader, checkpoint=path)
    assert newer["checkpoint"]["resumed"] == 5 and loads == ["smollm2-135m"]
    assert [r["adapter_sha256"] for r in newer["records"] if r["config"] == "cad"] == [shipped] * 3
    assert run(cfg, cases=cases, loader=loader, checkpoint=path)["checkpoint"]["resumed"] == 6  # the new line wins
    with pytest.raises(InputError, match="other settings .*cad_budget: 16 -> 32"):
        run(QualityConfig(configs=("cad",), sampled=(), cad_budget=32), cases=cases, loader=loader, checkpoint=path)
    with pytest.raises(InputError, match="other settings .*cases"):
        run(cfg, cases=cases[1:], loader=loader, checkpoint=path)
    # another adapter in place of the shipped one: other records, refused by its weights' digest
    folder = adapter_dir("smollm2-135m-compact")
    swapped = QualityConfig(configs=cfg.configs, sampled=(), cad_budget=16, regen_margin=4,
                            adapters=(("smollm2-135m", str(folder)),))
    with pytest.raises(InputError, match=f"other settings .*adapters: None -> .*{adapter_sha256(folder)}"):
        run(swapped, cases=cases, loader=loader, checkpoint=path)


def test_an_adapter_given_for_a_preset_reaches_its_load_and_the_report(tiny_model, monkeypatch):
    """``--adapter PRESET=DIR``: the default loader loads that preset with the folder's
    adapter (the other presets as shipped), and the report names the weights it ran with."""
    from cad_outlines.tools import models
    from cad_outlines.tools.weights import adapter_dir, adapter_sha256

    loads = []
    monkeypatch.setattr(models, "load", lambda preset, adapter=None: loads.append((preset, adapter))
                        or tiny_model("tiny-qwen"))
    folder = str(adapter_dir("smollm2-135m-compact"))
    cfg = QualityConfig(configs=("cad", "regen"), sampled=(), cad_budget=16, regen_margin=4, limit=1,
                        adapters=(("smollm2-135m", folder),))
    report = run(cfg, cases=load_eval_cases()[:1])
    assert loads == [("smollm2-135m", folder), ("smollm2-135m-regen", None)]
    assert report["adapters"] == {"smollm2-135m": adapter_sha256(folder)}
    assert f"`smollm2-135m` ran with the adapter in `{folder}` (weights SHA-256 `{adapter_sha256(folder)}`)" \
        in format_table(report)


def test_bench_quality_refuses_a_checkpoint_it_cannot_read(tmp_path, capsys):
    from cad_outlines import cli

    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert cli.main(["bench", "quality", "--configs", "cad", "--sampled", "", "--checkpoint", str(bad)]) == 2
    assert "bad.jsonl:1: not a checkpoint" in capsys.readouterr().err
    assert cli.main(["bench", "quality", "--configs", "cad", "--sampled", "", "--checkpoint",
                     str(tmp_path / "no" / "such" / "dir.jsonl")]) == 2
