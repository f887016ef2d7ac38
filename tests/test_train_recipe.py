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
