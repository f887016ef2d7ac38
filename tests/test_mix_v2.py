"""Training mix v2 (whole files, a person's words, lazy snippets) and the update-snippet
format, model-free."""

from __future__ import annotations

import random
import re

import pytest

from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.resolver import resolve
from cad_outlines.language.snippets import is_marker, make_snippet, marker, update_instruction
from cad_outlines.language.syntax import split_lines
from cad_outlines.training.edits import EVAL_SETS_V2, MixV2Config, eval_sets_v2, make_mix_v2, split_of
from cad_outlines.training.phrasings import KINDS_V2, _T, make_edit, phrase, templates
from testdata import corpus_records

SMALL = ((8, 50, 0.6), (51, 150, 0.4))  # the fixture sample's files are 11-72 lines


def _records() -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for r in corpus_records():
        by.setdefault(r["id"].rsplit("-", 1)[0].removeprefix("commits_"), []).append(r)
    return by


def _apply_snippet(doc: list[str], snippet: str) -> list[str]:
    """A reference reader of the snippet convention: a marker stands for the document's
    lines up to where the snippet's next line occurs (its first occurrence after the part
    already read); every other snippet line is a line of the result."""
    lines = snippet.split("\n")[:-1]
    out: list[str] = []
    pos = 0  # the first document line not yet read
    for index, line in enumerate(lines):
        if is_marker(line):
            nxt = next((x for x in lines[index + 1:] if not is_marker(x)), None)
            end = len(doc) if nxt is None else doc.index(nxt, pos) if nxt in doc[pos:] else pos
            out.extend(doc[pos:end])
            pos = end
        else:
            out.append(line)
            if pos < len(doc) and doc[pos] == line:
                pos += 1
            elif line in doc[pos:] and index > 0 and is_marker(lines[index - 1]):
                pos = doc.index(line, pos) + 1
            else:  # a new line, or the context after a deletion: skip to its match if it is near
                ahead = doc[pos:pos + 8]
                if line in ahead and line.strip():
                    pos += ahead.index(line) + 1
    return out


def test_markers_in_each_comment_syntax():
    assert marker("a.py") == "# ... existing code ..."
    assert marker("x.cpp", "    ") == "    // ... existing code ..."
    assert marker("README.md") == "<!-- ... existing content ... -->"
    for line in ("# ... existing code ...", "    // ... existing code ...", "<!-- ... existing content ... -->",
                 "/* ... rest of the file ... */", "-- … unchanged …", "// ...existing code..."):
        assert is_marker(line), line
    for line in ("# existing code", "x = 1  # ... existing code ...", "print('... existing code ...')", "..."):
        assert not is_marker(line), line


def test_a_snippet_shows_changes_with_context_and_marks_the_gaps():
    doc = [f"line {i}" for i in range(1, 31)]
    gold = doc[:9] + ["NEW"] + doc[10:24] + doc[25:]  # replace line 10, delete line 25
    snippet = make_snippet(doc, gold, "f.py", context=2)
    assert snippet == ("# ... existing code ...\nline 8\nline 9\nNEW\nline 11\nline 12\n"
                       "# ... existing code ...\nline 23\nline 24\nline 26\nline 27\n# ... existing code ...\n")
    # the deletion is line 24 next to line 26, with no marker between them
    assert _apply_snippet(doc, snippet) == gold
    assert make_snippet(doc, doc) is None
    assert make_snippet(doc, doc[:3] + ["# ... existing code ..."] + doc[3:]) is None  # ambiguous


def test_update_instruction_fences_the_snippet():
    text = update_instruction("x = 1\n# ... existing code ...\n", "fix the bug", "a.py")
    assert text.startswith("fix the bug\n") and text.endswith("<update>\nx = 1\n# ... existing code ...\n</update>")
    assert "`# ... existing code ...`" in text


def test_every_template_formats_with_its_edits_facts():
    rng = random.Random(0)
    lines = split_lines(next(r["doc"] for r in corpus_records() if r["id"].startswith("commits_python")))[:-1]
    pool = ["x = 1", "return None", "print('hi')"]
    made = {}
    for kind in KINDS_V2:
        for _ in range(200):
            edit = make_edit(kind, rng, list(lines), pool, "python")
            if edit is not None:
                made[kind] = edit
                break
    # new_file edits only an empty document (test_an_empty_file_is_asked_for_its_first_line)
    assert set(made) >= set(KINDS_V2) - {"uncomment", "remove_param", "add_param", "docstring", "new_file"}
    for kind, edit in made.items():
        for template in _T[kind]:
            template.format(L="line 1", L2="line 2", **edit.facts)  # no missing field
        assert phrase(edit, rng, "templated")[0] and phrase(edit, rng, "held_out")[0]


def test_an_empty_file_is_asked_for_its_first_line():
    """``new_file``: weight 0 unless given, and drawn last, so the shipped recipes' rows stay
    as they were; given a weight, edits of an empty document ("") into one unindented line,
    phrased by its own templates, whose oracle program resolves."""
    import hashlib
    import json

    records = _records()
    default = make_mix_v2(records, MixV2Config(seed=2, cases=40, buckets=SMALL))
    assert "new_file" not in {c.meta["kind"] for c in default}
    # the rows this mix drew before the kind existed (a change in the draws fails here)
    assert hashlib.sha256(json.dumps([(c.doc, c.gold, c.meta) for c in default], sort_keys=True)
                          .encode()).hexdigest()[:16] == "b58ac324a175ed47"
    mix = make_mix_v2(records, MixV2Config(seed=2, cases=60, buckets=SMALL, kinds=(("new_file", 0.5),)))
    empty = [c for c in mix if c.meta["kind"] == "new_file"]
    assert len(empty) >= 10
    for case in empty:
        assert case.doc == "" and (case.meta["lines"], case.meta["bucket"]) == (0, "0-0")
        line = case.gold[:-1]
        assert case.gold.endswith("\n") and line and "\n" not in line and line == line.strip()
        assert resolve(oracle_program(case.doc, case.gold), case.doc) == case.gold
        if case.meta["form"] == "words":
            assert case.meta["template"] in templates("new_file", False) and line in case.meta["instruction"]
    assert make_edit("new_file", random.Random(0), ["x = 1"], ["y = 2"], "python") is None


def test_a_comment_at_the_top_of_the_file_empty_or_not():
    """``top_comment``: weight 0 unless given (the digest above pins the default rows); given
    one, a comment line in the corpus's own syntax put before line 1, the file empty in
    some rows and not in others, the comment quoted whole or (``{text}``) without its marker."""
    records = _records()
    mix = make_mix_v2(records, MixV2Config(seed=3, cases=80, buckets=SMALL, kinds=(("top_comment", 0.5),)))
    tops = [c for c in mix if c.meta["kind"] == "top_comment"]
    assert {c.doc == "" for c in tops} == {True, False}
    marks = {"python": "# ", "c": "// ", "prose": "<!-- "}
    for case in tops:
        first, rest = case.gold.split("\n", 1)
        assert first.startswith(marks[case.meta["corpus"]]) and rest == case.doc
        assert resolve(oracle_program(case.doc, case.gold), case.doc) == case.gold
        if case.meta["form"] == "words":
            assert case.meta["template"] in templates("top_comment", False)
            body = first.removeprefix(marks[case.meta["corpus"]]).removesuffix(" -->")
            assert (first if "{new}" in case.meta["template"] else body) in case.meta["instruction"]
    assert {c.meta["corpus"] for c in tops} >= {"python", "c"}


def test_held_out_phrasings_never_reach_training_rows():
    for kind in _T:
        train, held = templates(kind, False), templates(kind, True)
        assert held and train and not set(train) & set(held)
    mix = make_mix_v2(_records(), MixV2Config(seed=0, cases=120, buckets=SMALL))
    used = [c.meta["template"] for c in mix if c.meta["form"] in ("words", "templated")]
    assert len(used) > 40 and not set(used) & {t for k in _T for t in templates(k, True)}
    evals = eval_sets_v2(_records(), per_set=8)["held_out_phrasings"]
    assert all(c.meta["template"] in templates(c.meta["kind"], True) for c in evals)


def test_the_v2_mix_is_seeded_split_by_file_and_every_case_is_a_real_edit():
    records = _records()
    a = make_mix_v2(records, MixV2Config(seed=2, cases=80, buckets=SMALL))
    assert [(c.doc, c.gold, c.meta) for c in a] == \
        [(c.doc, c.gold, c.meta) for c in make_mix_v2(records, MixV2Config(seed=2, cases=80, buckets=SMALL))]
    held = make_mix_v2(records, MixV2Config(seed=2, cases=30, split="eval", buckets=SMALL))
    assert {c.meta["file"] for c in a}.isdisjoint({c.meta["file"] for c in held})
    forms = {c.meta["form"] for c in a}
    assert {"words", "snippet"} <= forms
    snippets = []
    for case in a + held:
        assert split_of(*case.meta["file"].split(":", 1)) == ("eval" if case in held else "train")
        n = len(split_lines(case.doc)) - 1
        assert case.meta["lines"] == n
        assert (case.doc == case.gold) == (case.meta["kind"] == "identity"), case.id
        assert resolve(oracle_program(case.doc, case.gold), case.doc) == case.gold
        if case.meta["form"] == "snippet":
            assert case.meta["snippet"] in case.meta["instruction"]
            snippets.append(_apply_snippet(split_lines(case.doc)[:-1], case.meta["snippet"]) == split_lines(case.gold)[:-1])
    # a plain in-order reader recovers the edit from nearly every snippet (repeated lines
    # such as "}" can still mislead one that looks no further than the next line)
    assert len(snippets) >= 20 and sum(snippets) >= 0.9 * len(snippets), (sum(snippets), len(snippets))


def test_whole_files_fill_their_bucket_and_long_ones_are_windowed():
    long_doc = "".join(f"value_{i} = {i}\n" for i in range(600))
    records = {"python": [{"id": f"commits_python-{i:04d}", "source": "s", "path": f"p{i}.py", "doc": long_doc,
                           "gold": long_doc, "instruction": ""} for i in range(40)]}
    cases = make_mix_v2(records, MixV2Config(seed=0, cases=20, buckets=((151, 400, 1.0),), commit_share=0.0))
    assert all(151 <= c.meta["lines"] <= 400 for c in cases)
    short = {"python": [dict(r, doc="".join(f"v{i} = {i}\n" for i in range(200))) for r in records["python"]]}
    whole = make_mix_v2(short, MixV2Config(seed=0, cases=10, buckets=((151, 400, 1.0),), commit_share=0.0))
    assert all(c.meta["lines"] == 200 for c in whole)  # the whole file when it fits


def test_the_eval_sets_name_their_subsets():
    sets = eval_sets_v2(_records(), per_set=6)
    assert set(sets) == set(EVAL_SETS_V2)
    for name, cases in sets.items():
        assert all(c.id.startswith(name) and split_of(*c.meta["file"].split(":", 1)) == "eval" for c in cases)
    assert all(c.meta["form"] == "held_out" for c in sets["held_out_phrasings"])
    assert all(c.meta["kind"] == "commit" and c.meta["form"] == "snippet" for c in sets["commit_snippets"])


def test_the_literal_merge_reads_the_conventions():
    from cad_outlines.language.snippets import merge

    doc = "".join(f"line {i}\n" for i in range(1, 31))
    gold_lines = [f"line {i}" for i in range(1, 31)]
    gold_lines[9] = "NEW"
    del gold_lines[24]
    gold = "\n".join(gold_lines) + "\n"
    snippet = make_snippet(doc.split("\n")[:-1], gold_lines, "f.py")
    assert merge(doc, snippet) == gold
    # no marker at the start: the run starts the file; none at the end: it ends the file
    assert merge(doc, "line 1\nFIRST\nline 2\n# ... existing code ...\n") == doc.replace("line 1\n", "line 1\nFIRST\n", 1)
    assert merge(doc, "# ... existing code ...\nline 29\n") == "".join(f"line {i}\n" for i in range(1, 30))
    assert merge(doc, "# ... existing code ...\nnothing here matches\n# ... existing code ...\n") is None


def test_a_lazy_snippet_without_edge_markers_keeps_the_lines_around_it():
    """A function handed over whole, with no marker, as models and people write lazy
    snippets: the lines before and after it are kept (the convention's reading, "it starts
    the file", cannot hold: its first line is further down)."""
    from cad_outlines.language.snippets import merge

    doc = "import os\n\ndef main():\n    print('hi')\n    return 0\n\n\ndef other():\n    pass\n"
    fixed = doc.replace("print('hi')", "print('hello')")
    assert merge(doc, "def main():\n    print('hello')\n    return 0\n") == fixed
    # a marker after it only: the lines before are kept, the marker keeps the rest
    assert merge(doc, "def main():\n    print('hello')\n    return 0\n# ... existing code ...\n") == fixed
    # starting with a marker, the literal reading is the only one (no tail is invented)
    assert merge(doc, "# ... existing code ...\nnowhere\n") is None
    # a snippet that can start the file is still read as starting it
    assert merge(doc, "import os\nimport sys\n# ... existing code ...\n") == doc.replace("import os\n", "import os\nimport sys\n")


def test_a_new_edge_line_rewrites_the_line_it_resembles_beside_the_anchor():
    """A lazy snippet that starts (or ends) with a changed line instead of an unchanged
    one: the changed line replaces the line it resembles beside the anchor, not an
    insertion that keeps both; a new line like none of its neighbours is still inserted."""
    from cad_outlines.language.snippets import merge

    doc = "import os\n\n\ndef mean(xs):\n    total = sum(xs)\n    return total / len(xs)\n\n\ndef other():\n    pass\n"
    lead = "# ... existing code ...\ndef mean(xs, default=0.0):\n    if not xs:\n        return default\n    total = sum(xs)\n# ... existing code ...\n"
    assert merge(doc, lead) == doc.replace("def mean(xs):\n", "def mean(xs, default=0.0):\n    if not xs:\n        return default\n")
    both = ("# ... existing code ...\ndef mean(xs, default=0.0):\n    total = sum(xs)\n"
            "    return total / len(xs) if xs else default\n# ... existing code ...\n")
    assert merge(doc, both) == doc.replace("def mean(xs):", "def mean(xs, default=0.0):").replace(
        "len(xs)\n", "len(xs) if xs else default\n")
    insert = "# ... existing code ...\n    assert isinstance(xs, list)\n    total = sum(xs)\n# ... existing code ...\n"
    assert merge(doc, insert) == doc.replace("    total", "    assert isinstance(xs, list)\n    total")


def test_the_literal_merge_recovers_nearly_every_mix_snippet():
    from cad_outlines.language.snippets import merge

    mix = [c for c in make_mix_v2(_records(), MixV2Config(seed=0, cases=120, buckets=SMALL)) if c.meta["form"] == "snippet"]
    right = sum(merge(c.doc, c.meta["snippet"]) == c.gold for c in mix)
    assert len(mix) >= 20 and right >= 0.9 * len(mix), (right, len(mix))


def test_kind_weights_shape_the_mix_and_the_default_leaves_it_as_it_was():
    from collections import Counter

    from cad_outlines.training.edits import MixV2Config, make_mix_v2

    records = _records()
    base = make_mix_v2(records, MixV2Config(seed=3, cases=60, buckets=SMALL, commit_share=0.0))
    same = make_mix_v2(records, MixV2Config(seed=3, cases=60, buckets=SMALL, commit_share=0.0, kinds=()))
    assert [(c.doc, c.gold, c.meta) for c in base] == [(c.doc, c.gold, c.meta) for c in same]
    aimed = make_mix_v2(records, MixV2Config(seed=3, cases=60, buckets=SMALL, commit_share=0.0,
                                             kinds=(("rename", 5.0), ("swap", 5.0))))
    count = Counter(c.meta["kind"] for c in aimed)
    assert count["rename"] + count["swap"] > 2 * sum(1 for c in base if c.meta["kind"] in ("rename", "swap"))
    with pytest.raises(ValueError, match="unknown edit kinds bogus"):
        make_mix_v2(records, MixV2Config(seed=3, cases=5, buckets=SMALL, kinds=(("bogus", 1.0),)))
