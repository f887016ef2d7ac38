"""The v2 training recipe's cost cuts change the cost of a step, not what it learns from."""

from __future__ import annotations

import copy

import pytest
import torch

from cad_outlines.tools.models import build
from cad_outlines.training.sft import IGNORE
from cad_outlines.training.train import curriculum, optimizer, train_step


def _batch():
    ids = [list(range(5, 45)), list(range(60, 90))]
    labels = [[IGNORE] * 30 + ids[0][30:], [IGNORE] * 10 + ids[1][10:12] + [IGNORE] * 14 + ids[1][26:]]
    return list(zip(ids, labels))


# one chunk; several, the last one short; and the long-step path (recomputed activations)
@pytest.mark.parametrize("chunk, recompute_tokens", [(1024, 6144), (7, 6144), (7, 0)])
def test_sparse_logits_give_the_same_loss_and_update(monkeypatch, chunk, recompute_tokens):
    from cad_outlines.training import train as training

    monkeypatch.setattr(training, "LOSS_CHUNK", chunk)
    torch.manual_seed(0)
    model, _ = build("tiny-qwen")
    twin = copy.deepcopy(model)
    losses, grads = [], []
    for m, sparse in ((model, False), (twin, True)):  # the reference: dense, nothing recomputed
        monkeypatch.setattr(training, "RECOMPUTE_TOKENS", recompute_tokens if sparse else 10**9)
        opt, sched = optimizer(m, 1e-3, 10)
        losses.append(train_step(m, opt, sched, _batch(), pad_id=0, sparse_logits=sparse))
        grads.append(torch.cat([p.detach().flatten() for p in m.parameters()]))
    assert abs(losses[0] - losses[1]) < 1e-5, losses
    assert torch.allclose(grads[0], grads[1], atol=1e-6)  # the same step was taken


def test_the_curriculum_keeps_long_rows_out_of_the_first_third():
    lengths = [100, 5000, 200, 7000, 300, 400, 6000, 500, 600]
    order = list(range(len(lengths)))
    out = curriculum(order, lengths, 1000, 3)
    assert sorted(out) == order  # every row once
    assert all(lengths[i] <= 1000 for i in out[:3])
    assert curriculum(order, lengths, 1000, 3) == out  # seeded



def test_a_curriculum_run_resumes_with_more_steps(tmp_path):
    """The curriculum's early share follows the steps the run started with: asking a
    stopped or finished run for more steps continues it on the same order of rows."""
    import json
    import random

    from cad_outlines.bench.quality import load_eval_cases
    from cad_outlines.training.train import TrainConfig, rows_for, train

    cases = load_eval_cases()[:8]
    lengths = [len(ids) for ids, _ in rows_for(cases, build("tiny-qwen")[1], "cad", 4096)[0]]
    median = sorted(lengths)[len(lengths) // 2]
    order = list(range(len(lengths)))
    random.Random(0).shuffle(order)
    # the precondition that makes this test bite: a third of 3 steps and a third of 12
    # give different orders of these rows
    assert curriculum(order, lengths, median, 1) != curriculum(order, lengths, median, 4)
    cfg = TrainConfig(base="tiny-qwen", steps=3, checkpoint_every=1, max_tokens=4096, long_tokens=median)
    train(cases, cfg, tmp_path)
    cfg.steps = 12
    record = train(cases, cfg, tmp_path)
    steps = [json.loads(line)["step"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 13))
    lrs = [json.loads(line)["lr"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert all(0 < lr <= cfg.lr for lr in lrs) and lrs[4] > lrs[-1]  # warm-up, then the longer cosine
    assert record["order_steps"] == 3 and record["config"]["steps"] == 12


def test_a_run_stopped_between_checkpoints_logs_each_step_once(tmp_path):
    """Steps logged after the last checkpoint are trained again on resume: their old rows
    go, so the log holds one row per step (what docs/models.md sums CPU seconds over)."""
    import json

    from cad_outlines.bench.quality import load_eval_cases
    from cad_outlines.training.train import TrainConfig, train

    cases = load_eval_cases()[:4]
    cfg = TrainConfig(base="tiny-qwen", steps=4, checkpoint_every=2, max_tokens=4096)
    train(cases, cfg, tmp_path)
    log = tmp_path / "log.jsonl"
    state = torch.load(tmp_path / "checkpoint" / "state.pt", weights_only=False)
    state["step"], state["losses"] = 2, state["losses"][:2]  # as if killed during steps 3-4
    torch.save(state, tmp_path / "checkpoint" / "state.pt")
    cfg.steps = 5
    train(cases, cfg, tmp_path)
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]


def test_a_warm_start_begins_from_the_adapter_and_refuses_another_shape(tmp_path):
    """``init_adapter`` loads an adapter's weights into the run's fresh LoRA (recorded with
    its digest); an adapter of another rank or other layers is refused in one line."""
    import json

    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    from cad_outlines.bench.quality import load_eval_cases
    from cad_outlines.errors import InputError
    from cad_outlines.training import train as training

    cases = load_eval_cases()[:2]
    first = training.TrainConfig(base="tiny-qwen", steps=2, checkpoint_every=2, max_tokens=4096, lr=0.05)
    training.train(cases, first, tmp_path / "a")
    saved = load_file(str(tmp_path / "a" / "adapter" / "adapter_model.safetensors"))
    assert any(v.abs().sum() > 0 for k, v in saved.items() if "lora_B" in k)  # trained: B left zero

    warm = training.TrainConfig(base="tiny-qwen", steps=1, max_tokens=4096, init_adapter=str(tmp_path / "a" / "adapter"))
    model = training._lora(build("tiny-qwen")[0], warm)
    digest = training._init_from(model, warm)
    loaded = get_peft_model_state_dict(model)
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[k], saved[k].float()) for k in saved)
    record = training.train(cases, warm, tmp_path / "b")
    assert record["init_adapter_sha256"] == digest
    assert json.loads((tmp_path / "b" / "record.json").read_text())["config"]["init_adapter"] == warm.init_adapter

    other = training.TrainConfig(base="tiny-qwen", rank=4, alpha=8, init_adapter=warm.init_adapter)
    with pytest.raises(InputError, match="rank 8, alpha 16"):
        training._init_from(training._lora(build("tiny-qwen")[0], other), other)


def test_a_setting_added_later_matches_old_checkpoints_while_it_is_left_empty():
    from cad_outlines.training.train import settings_changed

    old = {"lr": 1e-3, "mix": {"seed": 0, "forms": [["words", 1.0]]}}
    assert settings_changed(old, {"lr": 1e-3, "init_adapter": "", "mix": {"seed": 0, "forms": [["words", 1.0]], "kinds": ()}}) == []
    assert settings_changed(old, {"lr": 1e-3, "init_adapter": "x", "mix": old["mix"]}) == ["init_adapter: None -> 'x'"]
    assert settings_changed(old, {"lr": 1e-3, "mix": {"seed": 0, "forms": [["words", 1.0]], "kinds": (("swap", 1.0),)}}) \
        == ["mix.kinds: None -> (('swap', 1.0),)"]
    assert settings_changed(old, {"lr": 2e-3, "mix": old["mix"]}) == ["lr: 0.001 -> 0.002"]
