"""Exit statuses and one-line errors of the command line (issue 10's CLI defects)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cad_outlines import cli
from cad_outlines.errors import InputError, ModelOutputError
from cad_outlines.generate import cad

from testdata import CORPUS_SAMPLE, ROOT, TOKENIZERS


def run(capsys, argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("raised, status", [
    (ValueError("an internal bug"), cli.EXIT_INTERNAL),
    (TypeError("another bug"), cli.EXIT_INTERNAL),
    (InputError("bad input"), cli.EXIT_USAGE),
    (FileNotFoundError("no such file"), cli.EXIT_USAGE),
    (ModelOutputError("unfinished"), cli.EXIT_MODEL),
])
def test_exit_status_follows_the_error_type(monkeypatch, capsys, tmp_path, raised, status):
    def boom(args):
        raise raised

    monkeypatch.setattr(cli, "_run_oracle", boom)
    doc = tmp_path / "d.txt"
    doc.write_text("a\n", encoding="utf-8")
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: _with_func(parser, "oracle", boom))
    code, out, err = run(capsys, ["oracle", doc, doc])
    assert code == status and out == ""
    if status == cli.EXIT_INTERNAL:  # a bug shows where it happened
        assert "Traceback (most recent call last)" in err and str(raised) in err
        assert "internal error" in err
    else:
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and str(raised) in err


def _with_func(parser, command, func):
    sub = next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction))
    sub.choices[command].set_defaults(func=func)
    return parser


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-0.5"])
def test_temperature_must_be_finite_and_non_negative(capsys, tmp_path, value):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["edit", str(tmp_path / "f.py"), "--instruction", "x", "--preset", "tiny-qwen",
                  f"--temperature={value}"])
    err = capsys.readouterr().err
    # argparse's usage, then one error line (no traceback, no grammar dump)
    assert exit_info.value.code == 2 and "Traceback" not in err and err.startswith("usage:")
    assert err.splitlines()[-1] == ("cad-outlines edit: error: argument --temperature: "
                                    f"must be a finite number >= 0, got {value}")


@pytest.mark.parametrize("value", ["nan", "0", "1.5"])
def test_top_p_range(capsys, tmp_path, value):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["edit", str(tmp_path / "f.py"), "--instruction", "x", "--preset", "tiny-qwen",
                  "--top-p", value])
    assert exit_info.value.code == 2 and "(0, 1]" in capsys.readouterr().err


def test_generator_rejects_nan_temperature(tiny_model):
    with pytest.raises(ValueError, match="temperature"):
        cad(tiny_model("tiny-qwen"), "a\n", temperature=float("nan"))


@pytest.mark.parametrize("device", ["gpu0", "cuda:x", "cuda:99"])
def test_bad_device_is_one_line(capsys, device):
    code, _, err = run(capsys, ["demo", "--device", device, "-q"])
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert repr(device) in err


def test_bad_dtype_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--dtype", "float64"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_tokenizer_folder_without_tokenizer_json(capsys, tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    doc = tmp_path / "d.txt"
    doc.write_text("a\n", encoding="utf-8")
    code, _, err = run(capsys, ["oracle", doc, doc, "--cost-aware", "--tokenizer", folder])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no tokenizer.json" in err


def test_ceiling_on_an_empty_corpus_is_an_error(capsys, tmp_path):
    corpus = tmp_path / "empty.jsonl"
    corpus.write_text("\n", encoding="utf-8")
    code, out, err = run(capsys, ["ceiling", corpus, "--tokenizer", TOKENIZERS / "qwen"])
    assert code == 2 and out == "" and "no cases" in err


def test_bad_model_directory_says_it_does_not_exist(capsys, tmp_path):
    src = tmp_path / "a.py"
    src.write_text("a\n", encoding="utf-8")
    code, _, err = run(capsys, ["edit", src, "--instruction", "x", "--model", tmp_path / "no-such-model"])
    assert code == 2 and "directory does not exist" in err and "Repo id" not in err


def test_plot_without_matplotlib_names_the_extra_and_keeps_the_json(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out_json = tmp_path / "perturb.json"
    code, _, err = run(capsys, ["bench", "perturb", CORPUS_SAMPLE, "--limit", "2",
                                "--trials", "1", "--eps", "0,1", "-o", out_json,
                                "--plot", tmp_path / "p.png"])
    assert code == 2 and "cad-outlines[bench]" in err and "Traceback" not in err
    assert out_json.exists() and not (tmp_path / "p.png").exists()


def test_help_lists_presets_and_defaults(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # no wrapping inside "(default: ...)"
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    out = capsys.readouterr().out
    from cad_outlines.tools.presets import PRESETS

    assert all(name in out for name in PRESETS) and "smollm2-135m " in out
    assert "(default: smollm2-135m)" in out and "(default: cpu)" in out
    with pytest.raises(SystemExit):
        cli.main(["edit", "--help"])
    out = capsys.readouterr().out
    for default in ["(default: 2048)", "(default: 0.0)", "(default: lines)", "(default: 0)"]:
        assert default in out


def test_version_and_python_dash_m():
    from cad_outlines import __version__

    done = subprocess.run([sys.executable, "-m", "cad_outlines", "--version"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"cad-outlines {__version__}"
    from importlib.metadata import version

    assert __version__ == version("cad-outlines")
