"""The guarantees on the model's path: freely sampled programs on adversarial documents.

Each preset samples programs (temperature 0.7-3, ``top_p`` < 1 and = 1, line and token
granularity, drafts on and off) on documents from
:func:`cad_outlines.bench.fuzz.adversarial_document` (10-300 lines, CRLF, no final
newline, blank runs, program literals and special-token spellings as text, the escape
characters, long and non-ASCII lines). :func:`cad_outlines.bench.fuzz.check_result`
checks every guarantee: a ``CaDResult`` comes back, a complete program parses and
resolves strictly with ``lo <= i <= j <= hi`` for every copy, an incomplete one has
``document=None``. The same code drives ``cad-outlines bench fuzz`` for the
>= 1,000-run campaign (``docs/reliability.md``).
"""

from __future__ import annotations

import dataclasses

import pytest

from cad_outlines.bench.fuzz import adversarial_document, draw_case, run_case
from testdata import FAMILY_PRESETS

# (granularity, drafts, top_p < 1): all eight combinations across the three presets.
GRID = [(g, d, p) for g in ("lines", "tokens") for d in (False, True) for p in (False, True)]


def _cases(preset):
    index = FAMILY_PRESETS.index(preset)
    for k in range(4):
        granularity, drafts, nucleus = GRID[(2 * index + 3 * k) % len(GRID)]
        case = draw_case(preset, seed=0, index=100 * index + k)
        yield dataclasses.replace(case, granularity=granularity, draft_tags=drafts,
                                  top_p=0.8 if nucleus else 1.0)


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_sampled_programs_keep_every_guarantee(preset, tiny_model):
    model = tiny_model(preset)
    outcomes = []
    for case in _cases(preset):
        outcome = run_case(model, case, max_new_tokens=48, bias=True)
        assert outcome.error is None, (case.index, outcome.error)
        assert not outcome.problems, (case.index, outcome.problems)
        outcomes.append(outcome)
    # The bias makes programs end: the suite must see complete programs, not only
    # budget-exhausted ones, or it would check little.
    assert sum(o.complete for o in outcomes) >= 2, [o.complete for o in outcomes]


def test_the_closing_bias_reaches_the_loop(tiny_model):
    # Regression: the bias once overrode a generator method the loop no longer called, so
    # a 3,000-run campaign sampled no gen body at all. It is a logits processor now.
    model = tiny_model("tiny-deepseek-coder")
    outcomes = [run_case(model, draw_case("tiny-deepseek-coder", seed=0, index=k),
                         max_new_tokens=48, bias=True) for k in range(8)]
    assert all(o.error is None and not o.problems for o in outcomes)
    assert sum(o.gens for o in outcomes) >= 1, [(o.complete, o.gens) for o in outcomes]


def test_suite_covers_the_option_grid_and_document_features():
    cases = [c for preset in FAMILY_PRESETS for c in _cases(preset)]
    assert {(c.granularity, c.draft_tags, c.top_p < 1) for c in cases} == set(GRID)
    assert all(0.7 <= c.temperature <= 3.0 for c in cases)
    docs = [c.document for c in cases]
    joined = "".join(docs)
    for feature in ("\r\n", "</gen>", "</program>", "\u27e8", "\n\n\n"):
        assert feature in joined, feature
    assert any(not d.endswith("\n") for d in docs) and any(ord(ch) > 0xFFFF for ch in joined)


def test_adversarial_documents_stay_in_the_line_range():
    import random

    for seed in range(50):
        doc = adversarial_document(random.Random(seed))
        lines = doc.replace("\r\n", "\n").split("\n")
        count = len(lines) - (1 if doc.endswith("\n") else 0)
        assert 10 <= count <= 300, count
