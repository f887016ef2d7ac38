"""What the benchmarks that train a small model share (bench dccd, bench learn).

A byte-level BPE tokenizer trained on the benchmark's own texts, and the training step:
AdamW with a linear warm-up over the first 5% of the steps and a cosine decay to
``floor`` times the base rate, right-padded batches with the loss on labelled positions
only, gradients clipped to norm 1.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from ..tools.sft import IGNORE

#: One training row: input ids and their labels (:data:`~cad_outlines.tools.sft.IGNORE`: no loss).
Row = tuple[list[int], list[int]]


def byte_level_bpe(texts: Sequence[str], vocab_size: int, special_tokens: Sequence[str]) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on ``texts`` (every byte in its alphabet)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tk.train_from_iterator(texts, trainer)
    return tk


def optimizer(model: Any, lr: float, steps: int, floor: float = 0.0) -> tuple[Any, Any]:
    """AdamW and its warm-up + cosine schedule over ``steps`` steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, steps // 20)

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_at)


def collate(batch: Sequence[Row], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad ``batch``: ``(input_ids, attention_mask, labels)``."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    attn = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (seq, lab) in enumerate(batch):
        ids[i, :len(seq)] = torch.tensor(seq)
        labels[i, :len(seq)] = torch.tensor(lab)
        attn[i, :len(seq)] = 1
    return ids, attn, labels


def train_step(model: Any, opt: Any, sched: Any, batch: Sequence[Row], pad_id: int) -> float:
    """One optimiser step on ``batch``; its loss."""
    ids, attn, labels = collate(batch, pad_id)
    loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    return float(loss.detach())
