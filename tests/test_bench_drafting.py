"""`cad-outlines bench drafting`: drafts off vs on, counted through an observed runner."""

from __future__ import annotations

import json

from cad_outlines import cli


def test_bench_drafting_counts_forwards_of_both_settings(capsys, tmp_path, corpus_sample_path):
    out = tmp_path / "drafting.json"
    status = cli.main(["bench", "drafting", str(corpus_sample_path), "--preset", "tiny-qwen",
                       "--per-corpus", "1", "--json", "-o", str(out)])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text(encoding="utf-8")) == report
    entry = report["presets"]["tiny-qwen"]
    assert [c["corpus"] for c in entry["cases"]] == ["commits_python", "commits_c", "commits_prose"]
    for case in entry["cases"]:
        # No draft: one forward per decode step (the prefill serves the first, the last
        # step's </program> needs none); drafts: a saved forward replaces one.
        assert case["forward_passes_off"] == case["decoded_tokens"]
        assert case["forward_passes_on"] + case["forwards_saved"] == case["decoded_tokens"]
        assert case["forward_passes_on"] < case["forward_passes_off"]
        assert 0 < case["draft_accepted"] <= case["draft_tokens"]
        assert len(case["seconds_off"]) == len(case["seconds_on"]) == 1
    total = entry["total"]
    assert total["forward_passes_off"] == sum(c["forward_passes_off"] for c in entry["cases"])
    assert {"git_commit", "date_utc", "torch", "transformers"} <= set(report["env"])
    assert report["env"]["torch_threads"] == 1


def test_bench_drafting_rejects_an_unknown_preset(capsys, corpus_sample_path):
    assert cli.main(["bench", "drafting", str(corpus_sample_path), "--preset", "no-such"]) == 2
    assert "no-such" in capsys.readouterr().err
