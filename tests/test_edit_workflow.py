"""The ``edit`` workflow (tools/edit.py) on the vLLM branch, with vLLM stood in for: one
outcome per file, whatever happens to another file's program."""

from __future__ import annotations

import sys
import types

from hypothesis import given, strategies as st

from cad_outlines.decoding.results import CaDResult, CaDStats
from cad_outlines.errors import ResolveError
from cad_outlines.language.program import Copy
from cad_outlines.tools.edit import EditJob, EditOptions, edit_with_vllm, run_edit


def _fake_vllm(monkeypatch, results):
    """A stand-in for cad_outlines.engines.vllm whose edit_many returns ``results``."""
    calls = {}

    class Engine:
        class llm_engine:
            class engine_core:
                @staticmethod
                def shutdown():
                    calls["shutdown"] = True

    def edit_many(editor, edits, *, force_programs, progress, predictions=None, return_exceptions=False):
        calls["edits"], calls["return_exceptions"] = edits, return_exceptions
        if not return_exceptions:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return list(results)

    module = types.SimpleNamespace(load=lambda folder, **kw: Engine(), edit_many=edit_many,
                                   VLLMEditor=lambda llm, **kw: object())
    monkeypatch.setitem(sys.modules, "cad_outlines.engines.vllm", module)
    import cad_outlines.engines

    monkeypatch.setattr(cad_outlines.engines, "vllm", module, raising=False)
    return calls


def _done(document):
    return CaDResult(document, '<program><copy lines="1-1"/></program>', [Copy(1, 1)], True, CaDStats())


def test_one_unresolvable_program_spoils_only_its_own_file(monkeypatch, tmp_path):
    documents = {"a.py": "a = 1\n", "b.py": "b = 2\n", "c.py": "c = 3\n"}
    bad = ResolveError(0, Copy(5, 5), "line range 5-5 is outside the document's lines 1-1")
    calls = _fake_vllm(monkeypatch, [_done("a = 1\n"), bad, _done("c = 3\n")])
    outcomes = edit_with_vllm(str(tmp_path), documents, "x", EditOptions())
    assert [o.name for o in outcomes] == ["a.py", "b.py", "c.py"]  # every file, in order
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].error.startswith("b.py: the model's program does not resolve: op 0")
    assert outcomes[2].result.document == "c = 3\n"
    assert calls["return_exceptions"] and calls["shutdown"]


def test_run_edit_checks_the_job_before_any_model_loads(monkeypatch, tmp_path):
    import pytest

    from cad_outlines.errors import InputError

    monkeypatch.setattr("cad_outlines.tools.edit.load_model", lambda **kw: pytest.fail("the model was loaded"))
    docs = {"a.py": "a = 1\n"}
    with pytest.raises(InputError, match="needs --model DIR"):
        run_edit(EditJob(docs, "x", engine="vllm", preset="tiny-qwen"))
    with pytest.raises(InputError, match="--forward-cost is for --engine transformers"):
        run_edit(EditJob(docs, "x", engine="vllm", model=str(tmp_path), forward_cost_file="cost.json"))
    with pytest.raises(InputError, match="--forward-cost is for --engine transformers"):
        edit_with_vllm(str(tmp_path), docs, "x", EditOptions(forward_cost=object()))
    prog = tmp_path / "p.prog"
    prog.write_text('<program><copy lines="1-9"/></program>\n')
    with pytest.raises(InputError, match="on a.py"):
        run_edit(EditJob(docs, "x", preset="tiny-qwen", force_program=str(prog)))


@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 12)), max_size=8))
def test_repeated_lines_counts_every_copy_of_a_line_after_its_first(spans):
    from collections import Counter

    from cad_outlines.language.program import Gen
    from cad_outlines.language.program import repeated_lines

    ops = [op for start, length in spans for op in (Copy(start, start + length), Gen("x\n"))]
    counts = Counter(line for op in ops if isinstance(op, Copy) for line in range(op.start, op.end + 1))
    assert repeated_lines(ops) == sum(n - 1 for n in counts.values())
