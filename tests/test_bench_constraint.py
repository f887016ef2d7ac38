"""bench constraint: llguidance vs outlines_core, CI-sized (--tiny) through the CLI."""

from __future__ import annotations

import json

import pytest

from cad_outlines import cli
from cad_outlines.adapters import get_adapter, load_tokenizer
from cad_outlines.bench.constraint import ConstraintConfig, format_constraint, run_constraint
from cad_outlines.decoding.forcing import forced_ids
from cad_outlines.training.corpus import load_corpus
from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.program import render
from cad_outlines.language.syntax import COPY_TAG_RE

from testdata import CORPUS_SAMPLE, TOKENIZERS

CASES = load_corpus(CORPUS_SAMPLE)


@pytest.fixture(scope="module")
def tiny_report():
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        status = cli.main(["bench", "constraint", str(CORPUS_SAMPLE), "--tiny", "--json"])
    assert status == 0
    return json.loads(out.getvalue())


@pytest.mark.slow
def test_tiny_run_measures_both_backends(tiny_report):
    cfg = ConstraintConfig.tiny()
    assert list(tiny_report["tokenizers"]) == list(cfg.tokenizers)
    rec = tiny_report["tokenizers"]["codellama"]
    assert "stopped" not in rec
    setup = rec["setup"]
    assert setup["llguidance_tokenizer_setup_seconds"] > 0
    assert setup["outlines_core_vocabulary_seconds"] > 0
    assert list(rec["sizes"]) == [str(n) for n in cfg.sizes]
    for row in rec["sizes"].values():
        llg, oc, agree = row["llguidance"], row["outlines_core"], row["agreement"]
        assert llg["compile_seconds"] > 0 and oc["index_seconds"] > 0
        # Every index state has transitions over a share of the vocabulary.
        assert oc["index_transitions"] > oc["index_states"] and oc["index_serialized_mib"] > 0
        # Every token of the forced program got one timed mask per backend and pass.
        assert llg["steps"] == oc["steps"] == agree["steps"] == rec["program_tokens"] > 50
        for stats in (llg["allowed_us"], llg["fill_bitmask_us"], oc["fill_bitmask_us"], oc["get_tokens_us"]):
            assert stats["n"] == rec["program_tokens"] * cfg.repeats
            assert 0 < stats["p50"] <= stats["p95"] <= stats["max"]
            assert stats["body"]["n"] + stats["structure"]["n"] == stats["n"]
        assert agree["steps_differing"] == sum(agree["by_region"].values()) <= agree["steps"]
    # The index is built from program_regex(n): a wider index range means more states.
    small, large = (rec["sizes"][str(n)]["outlines_core"]["index_states"] for n in cfg.sizes)
    assert large > small > 0
    env = tiny_report["environment"]
    assert env["llguidance"] and env["outlines_core"] and env["date_utc"]


@pytest.mark.slow  # the tiny_report fixture runs `bench constraint --tiny` (~30 s)
def test_table_names_every_row(tiny_report):
    table = format_constraint(tiny_report)
    assert "llguidance (CFG) vs outlines_core (token FSM)" in table
    assert table.count("codellama") == 1 + len(ConstraintConfig.tiny().sizes)
    env = tiny_report["environment"]
    assert f"llguidance {env['llguidance']}, outlines_core {env['outlines_core']}" in table


def test_forced_ids_end_on_every_copy_tag():
    case = next(c for c in CASES if c.id == ConstraintConfig().case)
    text = render(oracle_program(case.doc, case.gold))
    adapter = get_adapter(load_tokenizer(TOKENIZERS / "codellama"))
    ids = forced_ids(adapter, text)
    assert adapter.id_bytes(ids) == text.encode("utf-8")
    boundaries, pos = set(), 0
    for tid in ids:
        pos += len(adapter.id_bytes([tid]))
        boundaries.add(pos)
    tag_ends = {len(text[:m.end()].encode("utf-8")) for m in COPY_TAG_RE.finditer(text)}
    assert tag_ends and tag_ends <= boundaries


def test_a_worker_past_the_memory_limit_is_stopped_and_reported():
    cfg = ConstraintConfig.tiny(sizes=(40,), memory_limit_gib=0.05)
    report = run_constraint(CASES, cfg, progress=False)
    rec = report["tokenizers"]["codellama"]
    assert "resident memory passed 0.05 GiB" in rec["stopped"]
    assert rec["sizes"] == {}
    assert "stopped" in format_constraint(report)


def test_bad_configurations_are_named():
    with pytest.raises(ValueError, match="tokenizers must be among"):
        ConstraintConfig(tokenizers=("gpt2",))
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        ConstraintConfig(sizes=(0,))
    # 35 copy units: its 34 text lines and the empty one after the final newline.
    with pytest.raises(ValueError, match="35 lines"):
        run_constraint(CASES, ConstraintConfig.tiny(sizes=(10,)), progress=False)
    with pytest.raises(ValueError, match="not in the corpus"):
        run_constraint(CASES, ConstraintConfig.tiny(case="nope"), progress=False)


def test_cli_rejects_bad_sizes(capsys):
    assert cli.main(["bench", "constraint", str(CORPUS_SAMPLE), "--tiny", "--sizes", "4x"]) == 2
    assert "--sizes takes comma-separated integers" in capsys.readouterr().err
