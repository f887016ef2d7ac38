"""The v2 training recipe's cost cuts change the cost of a step, not what it learns from."""

from __future__ import annotations

import copy

import torch

from cad_outlines.tools.models import build
from cad_outlines.training.sft import IGNORE
from cad_outlines.training.train import curriculum, optimizer, train_step


def _batch():
    ids = [list(range(5, 45)), list(range(60, 90))]
    labels = [[IGNORE] * 30 + ids[0][30:], [IGNORE] * 10 + ids[1][10:12] + [IGNORE] * 14 + ids[1][26:]]
    return list(zip(ids, labels))


def test_sparse_logits_give_the_same_loss_and_update():
    torch.manual_seed(0)
    model, _ = build("tiny-qwen")
    twin = copy.deepcopy(model)
    losses, grads = [], []
    for m, sparse in ((model, False), (twin, True)):
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
