"""bench formats and bench perturb: model-free, on hand-made edits and the fixture sample."""

from __future__ import annotations

import json
import random

import pytest

from cad_outlines import cli
from cad_outlines.bench.formats import (
    SearchReplace, apply_search_replace, apply_unified_diff, case_formats, run_formats,
    search_replace_blocks, unified_diff)
from cad_outlines.bench.perturb import perturb_ops, run_perturb
from cad_outlines.training.ceiling import load_tokenization
from cad_outlines.training.corpus import load_corpus
from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.program import Copy, Gen
from cad_outlines.language.resolver import resolve

from testdata import CORPUS_SAMPLE, TOKENIZERS

SAMPLE = CORPUS_SAMPLE
QWEN = TOKENIZERS / "qwen"
CASES = load_corpus(SAMPLE)

EDITS = [
    ("a\nb\nc\n", "new\na\nb\nc\n"),          # insertion at the top
    ("a\nb\nc\n", "a\nb\nc\nd\n"),            # insertion at the end
    ("a\nb\nc\nd\n", "a\nd\n"),               # deletion
    ("a\nb\nc\n", "a\nB\nc\n"),               # replacement
    ("a\nb\nc", "a\nb\nC"),                   # no final newline
    ("x\n", "y\n"),                           # whole file
]


@pytest.mark.parametrize("doc,gold", EDITS)
def test_search_replace_and_unified_diff_round_trip(doc, gold):
    blocks = search_replace_blocks(doc, gold)
    assert blocks and all(b.search for b in blocks)  # an insertion gets an anchor line
    assert apply_search_replace(doc, blocks)[0] == gold
    assert apply_search_replace(doc, blocks, unique=True)[0] == gold
    diff = unified_diff(doc, gold)
    assert diff.startswith("--- a/file\n+++ b/file\n")
    assert apply_unified_diff(doc, diff) == gold


def test_unified_diff_marks_a_missing_final_newline():
    diff = unified_diff("a\nb", "a\nc")
    assert "\\ No newline at end of file\n" in diff
    assert apply_unified_diff("a\nb", diff) == "a\nc"


def test_first_match_is_an_anchor_ambiguity_failure():
    # The edited line also occurs earlier: Aider's first match hits the wrong one.
    doc = "x = 1\nfoo()\nx = 1\nbar()\n"
    gold = "x = 1\nfoo()\nx = 2\nbar()\n"
    blocks = search_replace_blocks(doc, gold)
    assert blocks == [SearchReplace(("x = 1",), ("x = 2",), 2)]
    text, used, ambiguous, misapplied = apply_search_replace(doc, blocks)
    assert text == "x = 2\nfoo()\nx = 1\nbar()\n" and ambiguous == 1 and misapplied == 1
    text, used, ambiguous, misapplied = apply_search_replace(doc, blocks, unique=True)
    assert text == gold and misapplied == 0
    assert used[0].search == ("foo()", "x = 1")  # grown until it occurs once
    assert "foo()" in used[0].render()


def test_case_formats_on_real_edits():
    tok = load_tokenization(QWEN)
    for case in CASES[:12]:
        out = case_formats(case, tok)
        for name in ("full", "unified_diff", "cad_lines", "cad_tokens", "search_replace_unique"):
            assert out[name]["exact"], (case.id, name)
        assert out["full"]["tokens"] == len(tok.encode(case.gold))
        assert out["cad_lines"]["tokens"] < out["full"]["tokens"]
        # the minimal search/replace fails only by misapplying an ambiguous anchor
        assert out["search_replace"]["exact"] or out["search_replace"]["misapplied"] > 0


def test_run_formats_summary_counts():
    report = run_formats(CASES[:10], load_tokenization(QWEN), progress=False)
    s = report["summary"]
    assert report["n"] == 10 and s["full"]["exact"] == 10 and s["unified_diff"]["exact"] == 10
    assert s["full"]["total"] == sum(c["full"]["tokens"] for c in report["cases"])
    assert s["search_replace"]["exact"] == 10 - s["search_replace"]["cases_with_misapplied"]
    assert s["search_replace_unique"]["misapplied_blocks"] == 0
    assert s["cad_lines"]["median"] <= s["cad_lines"]["p95"]


def test_formats_cli_json(capsys):
    assert cli.main(["bench", "formats", str(SAMPLE), "--tokenizer", str(QWEN), "--limit", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 4 and report["summary"]["cad_lines"]["exact"] == 4
    assert report["env"]["patch"].startswith("patch") or "GNU" in report["env"]["patch"]


# --- perturb ----------------------------------------------------------------------------


def test_perturb_eps_zero_is_exact_everywhere():
    report = run_perturb(CASES, [0], trials=2, seed=3, progress=False)
    row = report["rows"][0]
    assert row["exact"] == row["runs"] == 2 * len(CASES) and row["exact_rate"] == 1.0


def test_perturb_ops_shifts_within_eps_and_clamps():
    ops = [Copy(1, 3), Gen("\nx\n"), Copy(8, 10)]
    rng = random.Random(0)
    for _ in range(200):
        new, unmoved = perturb_ops(ops, 10, 2, rng)
        assert new[1] == ops[1]
        for old, op in ((ops[0], new[0]), (ops[2], new[2])):
            assert 1 <= op.start <= 10 and 1 <= op.end <= 10
            assert abs(op.start - old.start) <= 2 and abs(op.end - old.end) <= 2
        if unmoved:  # no draw moved an endpoint: the same program
            assert new == ops
    with pytest.raises(ValueError):
        perturb_ops(ops, 10, -1, rng)


def test_perturb_is_seeded_and_shifts_break_programs():
    a = run_perturb(CASES[:15], [0, 1, 3], trials=3, seed=7, progress=False)
    b = run_perturb(CASES[:15], [0, 1, 3], trials=3, seed=7, progress=False)
    assert a["rows"] == b["rows"]
    rates = [r["exact_rate"] for r in a["rows"]]
    assert rates[0] == 1.0 and rates[1] < 1.0
    # an unmoved program is always exact, so exact >= chance
    assert all(r["exact_rate"] >= r["no_shift_rate"] for r in a["rows"])


def test_clipped_resolve_handles_swapped_range():
    doc = "a\nb\nc\n"
    with pytest.warns(Warning):
        assert resolve([Copy(3, 1)], doc, "clipped") == resolve([Copy(1, 3)], doc)
    assert resolve(oracle_program(doc, "a\nX\nc\n"), doc) == "a\nX\nc\n"


def test_perturb_cli_writes_plot_and_json(tmp_path, capsys):
    png, out = tmp_path / "p.png", tmp_path / "p.json"
    code = cli.main(["bench", "perturb", str(SAMPLE), "--eps", "0,2", "--trials", "2", "--limit", "5",
                     "--seed", "1", "--plot", str(png), "-o", str(out)])
    assert code == 0
    assert "| 0 | 10/10 | 100.0%" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["eps"] for r in json.loads(out.read_text())["rows"]] == [0, 2]
    assert cli.main(["bench", "perturb", str(SAMPLE), "--eps", "0,-1"]) == 2


def test_cli_rejects_bad_case_file(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "doc": "a"}\n')
    assert cli.main(["bench", "perturb", str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
