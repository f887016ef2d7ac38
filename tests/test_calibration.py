"""``--forward-cost auto``: this machine's forward cost, measured once per model shape and cached."""

from __future__ import annotations

import json

import pytest
import torch

from cad_outlines.cli import main
from cad_outlines.decoding.drafting import ForwardCost
from cad_outlines.errors import InputError
from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.program import render
from cad_outlines.tools import calibration
from cad_outlines.tools.calibration import AUTO, WIDTHS, cached_forward_cost, cost_key, forward_cost_for


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "forward-cost"


def test_the_key_names_the_shape_and_the_machine_not_the_weights(tiny_model, monkeypatch):
    """Timing depends on the architecture, dtype and threads, not on weight values or the
    folder a model was loaded from."""
    hf = tiny_model("tiny-qwen").model
    key = cost_key(hf)
    assert key == cost_key(hf) and len(key) == 16
    hf.config._name_or_path = "/somewhere/else"
    assert cost_key(hf) == key
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert cost_key(hf) != key
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setattr(calibration, "cpu_model", lambda: "another CPU")
    assert cost_key(hf) != key


def test_auto_measures_once_then_reads_the_cache(tiny_model, cache, monkeypatch):
    hf = tiny_model("tiny-qwen").model
    said: list[str] = []
    first = cached_forward_cost(hf, said.append)
    assert first.widths == WIDTHS and min(first.keep1) > 0
    assert len(said) == 1 and "measuring" in said[0]
    files = list(cache.iterdir())
    assert [f.name for f in files] == [f"{cost_key(hf)}.json"]
    assert ForwardCost.load(files[0]) == first

    def no_measuring(*_args, **_kwargs):
        raise AssertionError("measured again although the cache holds the curve")

    monkeypatch.setattr(ForwardCost, "measure", no_measuring)
    said.clear()
    assert forward_cost_for(AUTO, hf, said.append) == first and said == []


def test_a_damaged_cache_file_is_measured_again(tiny_model, cache):
    hf = tiny_model("tiny-qwen").model
    cache.mkdir(parents=True)
    path = cache / f"{cost_key(hf)}.json"
    path.write_text('{"widths": [1]', encoding="utf-8")  # cut short
    said: list[str] = []
    cost = cached_forward_cost(hf, said.append)
    assert "not a forward-cost curve" in said[0] and "measuring" in said[1]
    assert ForwardCost.from_dict(json.loads(path.read_text(encoding="utf-8"))) == cost


def test_a_cache_it_cannot_write_costs_a_message_not_the_edit(tiny_model, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(blocker))  # the cache folder cannot be made
    said: list[str] = []
    cost = cached_forward_cost(tiny_model("tiny-qwen").model, said.append)
    assert cost.widths == WIDTHS
    assert "could not cache the forward cost" in said[-1]


def test_a_curve_file_or_nothing(tmp_path, tiny_model):
    hf = tiny_model("tiny-qwen").model
    assert forward_cost_for(None, hf) is None
    curve = ForwardCost((1, 2, 17), (0.1, 0.11, 0.3), (0.1, 0.12, 0.4))
    curve.save(tmp_path / "cost.json")
    assert forward_cost_for(str(tmp_path / "cost.json"), hf) == curve
    with pytest.raises(InputError, match=r"--forward-cost .*missing\.json: cannot read it"):
        forward_cost_for(str(tmp_path / "missing.json"), hf)


def test_edit_with_auto_writes_the_same_file_and_caches_the_curve(tmp_path, cache, capsys):
    doc, gold = "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n"
    src, out, prog = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "p.txt"
    src.write_text(doc, encoding="utf-8")
    prog.write_text(render(oracle_program(doc, gold)), encoding="utf-8")
    argv = ["edit", str(src), "--preset", "tiny-qwen", "--instruction", "x", "--force-program", str(prog),
            "-o", str(out), "--forward-cost", "auto", "-v"]
    assert main(argv) == 0
    assert out.read_text(encoding="utf-8") == gold
    assert "measuring this machine's forward cost" in capsys.readouterr().err
    assert len(list(cache.iterdir())) == 1
    out.unlink()
    assert main(argv) == 0  # the second run reads the curve
    assert out.read_text(encoding="utf-8") == gold
    assert "measuring" not in capsys.readouterr().err


def test_auto_is_refused_on_vllm_before_anything_loads(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("x = 1\n", encoding="utf-8")
    assert main(["edit", str(src), "--instruction", "x", "--engine", "vllm", "--model", str(tmp_path),
                 "--forward-cost", "auto"]) == 2
    assert "--forward-cost is for --engine transformers" in capsys.readouterr().err


def test_the_server_engine_decodes_with_the_curve(tiny_model):
    from cad_outlines.server.engine import Engine
    from cad_outlines.server.main import serve

    curve = ForwardCost((1, 2, 17), (0.1, 0.11, 0.3), (0.1, 0.12, 0.4))
    engine = Engine(tiny_model("tiny-qwen"), "tiny-qwen", forward_cost=curve)
    try:
        assert engine.loop.forward_cost is curve
    finally:
        engine.close()
    with pytest.raises(InputError, match="--forward-cost is for --engine transformers"):
        serve("folder", "m", engine="vllm", forward_cost=curve)


def test_serve_refuses_a_bad_curve_file_before_loading(tmp_path, capsys, monkeypatch):
    from cad_outlines.tools import edit as edit_tools

    def no_loading(**_kwargs):
        raise AssertionError("the model loaded before the curve file was checked")

    monkeypatch.setattr(edit_tools, "load_model", no_loading)
    assert main(["serve", "--preset", "tiny-qwen", "--port", "0",
                 "--forward-cost", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.json: cannot read it" in err and "Traceback" not in err
