"""The training / eval mix of explicit edits over real files (model-free)."""

from __future__ import annotations

import re

from cad_outlines.bench.quality import load_eval_cases
from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.resolver import resolve
from cad_outlines.language.syntax import split_lines
from cad_outlines.training.edits import KINDS, MixConfig, commit_cases, make_mix, split_of
from testdata import corpus_records


def _records() -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for r in corpus_records():
        by.setdefault(r["id"].rsplit("-", 1)[0].removeprefix("commits_"), []).append(r)
    return by


def test_the_split_is_by_file_and_never_mixes():
    records = _records()
    train = make_mix(records, MixConfig(seed=0, cases=60, split="train"))
    held = make_mix(records, MixConfig(seed=0, cases=20, split="eval"))
    assert {c.meta["file"] for c in train}.isdisjoint({c.meta["file"] for c in held})
    for case in train + held:
        source, path = case.meta["file"].split(":", 1)
        assert split_of(source, path) == case.id.split("-")[0]


def test_the_mix_is_seeded_and_each_case_is_a_real_edit():
    records = _records()
    a = make_mix(records, MixConfig(seed=3, cases=40))
    b = make_mix(records, MixConfig(seed=3, cases=40))
    assert [(c.doc, c.gold, c.meta) for c in a] == [(c.doc, c.gold, c.meta) for c in b]
    assert a != make_mix(records, MixConfig(seed=4, cases=40))
    assert {c.meta["kind"] for c in a} <= set(KINDS)
    for case in a:
        assert (case.doc == case.gold) == (case.meta["kind"] == "identity"), case.id
        n = len(split_lines(case.doc))
        for number in re.findall(r"lines? (\d+)", case.meta["instruction"]):
            assert 1 <= int(number) <= n, (case.id, case.meta["instruction"])
        # the oracle's program rebuilds the edit: the row the model learns is right
        assert resolve(oracle_program(case.doc, case.gold), case.doc) == case.gold


def test_explicit_instructions_say_exactly_what_changes():
    for case in make_mix(_records(), MixConfig(seed=1, cases=80, kinds=("replace", "delete", "swap"))):
        doc, gold = case.doc.split("\n"), case.gold.split("\n")
        text = case.meta["instruction"]
        if case.meta["kind"] == "replace":
            k = int(re.match(r"Replace line (\d+)", text).group(1))
            assert gold[k - 1] == text.split("\n", 1)[1] and gold[:k - 1] == doc[:k - 1]
        elif case.meta["kind"] == "swap":
            k, m = map(int, re.findall(r"\d+", text))
            assert (gold[k - 1], gold[m - 1]) == (doc[m - 1], doc[k - 1])
        else:
            assert len(gold) < len(doc)


def test_the_bundled_eval_split_holds_unseen_files_and_real_commits():
    cases = load_eval_cases()
    assert len(cases) >= 80
    assert all(split_of(*c.meta["file"].split(":", 1)) == "eval" for c in cases)
    kinds = {c.meta["kind"] for c in cases}
    assert "commit" in kinds and len(kinds) >= 6
    commits = commit_cases(_records(), "eval")
    assert all(c.meta["kind"] == "commit" and c.doc != c.gold for c in commits)
