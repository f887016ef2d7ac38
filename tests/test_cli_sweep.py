"""The bad-input sweep: every subcommand, fed what a user gets wrong, answers with a usage
error (exit 2, the error as the last stderr line; one line when it is the project's own)
or a model error (exit 1) — never an internal error (exit 70), never a traceback.

``docs/reliability.md`` reports a run of this sweep.
"""

from __future__ import annotations

import io
import json
import sys

import pytest

from cad_outlines import cli
from testdata import CORPUS_SAMPLE, TOKENIZERS

QWEN = TOKENIZERS / "qwen"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    (d / "doc.txt").write_text("a = 1\nb = 2\nc = 3\n")
    (d / "gold.txt").write_text("a = 1\nb = 5\nc = 3\n")
    (d / "bin.txt").write_bytes(b"\xff\xfe\x00bad")
    (d / "prog.txt").write_text('<program><copy lines="1-2"/></program>')
    (d / "bad_prog.txt").write_text("<program><copy lines=")
    (d / "far_prog.txt").write_text('<program><copy lines="1-99"/></program>')
    (d / "tok_prog.txt").write_text('<program><copy tokens="0-1"/></program>')
    (d / "reply_none.txt").write_text("I would rather not.")
    (d / "reply_huge.txt").write_text(f'<program><copy lines="1-{"7" * 5000}"/></program>')
    (d / "reply_two.txt").write_text('<program><copy lines="1-1"/></program> or <program></program>')
    (d / "corpus_bad.jsonl").write_text('{"id": "x", "doc": "a"}\n')
    (d / "corpus_notjson.jsonl").write_text("{nope\n")
    (d / "empty.txt").write_text("")
    (d / "cost.json").write_text('{"not": "a curve"}')
    (d / "cases_bad.jsonl").write_text('{"id": "x"}\n')
    cfg = d / "badmodel"
    cfg.mkdir()
    (cfg / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": "big"}))
    (d / "notgguf.gguf").write_text("not a gguf file")
    (d / "afile").write_text("x")
    return d


# (argv with {d} for the folder above, expected exit status)
CASES = [
    # apply
    (["apply", "{d}/missing.txt", "{d}/doc.txt"], 2),
    (["apply", "{d}/prog.txt", "{d}/missing.txt"], 2),
    (["apply", "{d}/bad_prog.txt", "{d}/doc.txt"], 2),
    (["apply", "{d}/far_prog.txt", "{d}/doc.txt"], 2),
    (["apply", "{d}/tok_prog.txt", "{d}/doc.txt"], 2),
    (["apply", "{d}/prog.txt", "{d}/bin.txt"], 2),
    (["apply", "{d}/prog.txt", "{d}/doc.txt", "-o", "{d}/nofolder/out.txt"], 2),
    (["apply", "{d}/prog.txt", "{d}/doc.txt", "-o", "{d}"], 2),
    (["apply", "--from-reply", "{d}/missing.txt", "{d}/doc.txt"], 2),
    (["apply", "--from-reply", "{d}/reply_none.txt", "{d}/doc.txt"], 2),
    (["apply", "--from-reply", "{d}/reply_huge.txt", "{d}/doc.txt"], 2),
    (["apply", "--from-reply", "{d}/reply_two.txt", "{d}/doc.txt"], 2),
    (["apply", "{d}/prog.txt", "--from-reply", "{d}/reply_none.txt", "{d}/doc.txt"], 2),
    (["apply", "{d}/doc.txt"], 2),
    (["apply", "{d}/prog.txt", "{d}/doc.txt", "--mode", "loose"], 2),
    # oracle
    (["oracle", "{d}/missing.txt", "{d}/gold.txt"], 2),
    (["oracle", "{d}/doc.txt", "{d}/bin.txt"], 2),
    (["oracle", "{d}/doc.txt", "{d}/gold.txt", "--granularity", "tokens"], 2),
    (["oracle", "{d}/doc.txt", "{d}/gold.txt", "--granularity", "tokens", "--tokenizer", "{d}/missing"], 2),
    # ceiling
    (["ceiling", "{d}/missing.jsonl", "--tokenizer", QWEN], 2),
    (["ceiling", "{d}/corpus_bad.jsonl", "--tokenizer", QWEN], 2),
    (["ceiling", "{d}/corpus_notjson.jsonl", "--tokenizer", QWEN], 2),
    (["ceiling", CORPUS_SAMPLE, "--tokenizer", "{d}/missing"], 2),
    (["ceiling", CORPUS_SAMPLE, "--tokenizer", QWEN, "-o", "{d}/nofolder/x.json"], 2),
    # portability
    (["portability", "--tokenizer", "{d}/missing"], 2),
    (["portability", "--tokenizer", "{d}"], 2),
    # sft build
    (["sft", "build", "{d}/missing.jsonl", "--tokenizer", QWEN, "-o", "{d}/rows.jsonl"], 2),
    (["sft", "build", CORPUS_SAMPLE, "--tokenizer", "{d}/missing", "-o", "{d}/rows.jsonl"], 2),
    (["sft", "build", CORPUS_SAMPLE, "--tokenizer", QWEN, "-o", "{d}/nofolder/rows.jsonl"], 2),
    (["sft", "build", CORPUS_SAMPLE, "--tokenizer", QWEN, "-o", "{d}/rows.jsonl", "--max-tokens", "0"], 2),
    (["sft", "build", CORPUS_SAMPLE, "--tokenizer", QWEN, "-o", "{d}/rows.jsonl", "--max-positions", "-5"], 2),
    (["sft", "build", CORPUS_SAMPLE, "--tokenizer", QWEN, "-o", "{d}/rows.jsonl", "--adapter", "bogus"], 2),
    (["sft", "build", CORPUS_SAMPLE, "--tokenizer", QWEN, "-o", "{d}/rows.jsonl", "--granularity", "tokens",
      "--cost-aware"], 2),
    (["sft", "build", "{d}/corpus_bad.jsonl", "--tokenizer", QWEN, "-o", "{d}/rows.jsonl"], 2),
    # edit
    (["edit", "{d}/missing.txt", "--instruction", "x", "--preset", "tiny-qwen"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "  ", "--preset", "tiny-qwen"], 2),
    (["edit", "{d}/bin.txt", "--instruction", "x", "--preset", "tiny-qwen"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "no-such-preset"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--model", "{d}/missing"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--model", "{d}/afile"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--model", "{d}/badmodel"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--model", "{d}/notgguf.gguf"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--force-program", "{d}/bad_prog.txt"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--force-program", "{d}/far_prog.txt"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--force-program", "{d}/missing"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--device", "gpu0"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--device", "cuda:9"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--seed", "1" + "0" * 23], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--temperature", "-1"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--temperature", "nan"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--top-p", "2"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--max-new-tokens", "0"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--forward-cost", "{d}/cost.json"], 2),
    (["edit", "{d}/doc.txt", "{d}/gold.txt", "--instruction", "x", "--preset", "tiny-qwen", "-o", "{d}/o.txt"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "-o", "{d}/nofolder/o.txt"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--engine", "vllm", "--preset", "tiny-qwen"], 2),
    (["weights", "fetch", "no-such-preset"], 2),
    (["serve", "--preset", "tiny-qwen", "--api-key", " "], 2),
    (["serve", "--preset", "tiny-qwen", "--port", "70000"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--max-model-len", "64"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--granularity", "chars"], 2),
    (["edit", "{d}/doc.txt", "--instruction", "x", "--preset", "tiny-qwen", "--max-new-tokens", "2"], 1),
    # demo
    (["demo", "--device", "gpu0"], 2),
    (["demo", "--preset", "nope"], 2),
    (["demo", "--dtype", "float64"], 2),
    # train
    (["train", "--corpus", "{d}/missing.jsonl", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--base", "tiny-qwen", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--lr", "0", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--lr", "nan", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "-o", "{d}/afile"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--layout", "diff", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--mix", "2", "--kinds", "bogus:1", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--mix", "2", "--kinds", "rename:x", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--mix", "2", "--buckets", "90-30:1", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--mix", "2", "--forms", "words:0", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--mix", "2", "--commit-share", "1.5", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--forms", "words:1", "-o", "{d}/run"], 2),
    (["train", "--corpus", CORPUS_SAMPLE, "--mix", "2", "--init-adapter", "no-such-adapter", "-o", "{d}/run"], 2),
    # bench
    (["bench", "quality", "--configs", "bogus"], 2),
    (["bench", "quality", "--seeds", "x"], 2),
    (["bench", "quality", "--cases", "{d}/missing.jsonl"], 2),
    (["bench", "quality", "--cases", "{d}/cases_bad.jsonl"], 2),
    (["bench", "quality", "-o", "{d}/nofolder/q.json"], 2),
    (["bench", "kernel", "--preset", "nope"], 2),
    (["bench", "learn", "--steps", "0"], 2),
    (["bench", "dccd", "--k", "0"], 2),
    (["bench", "e2e", "{d}/missing.jsonl"], 2),
    (["nosuchcommand"], 2),
]


@pytest.mark.parametrize("argv, status", CASES, ids=[" ".join(str(a) for a in c[0][:3]) + f"-{k}"
                                                     for k, c in enumerate(CASES)])
def test_bad_input_is_a_clear_error_never_an_internal_one(argv, status, files, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    argv = [str(a).replace("{d}", str(files)) for a in argv]
    try:
        code = cli.main(argv)
        parsed = True
    except SystemExit as stop:  # argparse: usage, then the error as the last line
        code, parsed = stop.code, False
    err = capsys.readouterr().err
    assert code == status, (code, err[-1500:])
    assert "Traceback" not in err and "internal error" not in err
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("cad-outlines"), err[-1500:]
    if parsed and status == 2:
        errors = [line for line in lines if line.startswith("cad-outlines")]
        assert len(errors) == 1, err[-1500:]


def test_the_sweep_covers_every_subcommand():
    commands = {c[0][0] if c[0][0] != "bench" else f"bench {c[0][1]}" for c in CASES}
    top = {a for a in cli.build_parser()._subparsers._group_actions[0].choices}
    assert top - {"bench"} <= commands
    assert len(CASES) >= 60
