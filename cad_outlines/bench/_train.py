"""What the benchmarks that train a small model share (bench dccd, bench learn).

A byte-level BPE tokenizer trained on the benchmark's own texts, and the training step:
AdamW with a linear warm-up over the first 5% of the steps and a cosine decay to
``floor`` times the base rate, right-padded batches with the loss on labelled positions
only, gradients clipped to norm 1.
"""

from __future__ import annotations

from typing import Any, Sequence

# The training step is the product's (the real-model fine-tuning uses the same one).
from ..training.train import Row, collate, optimizer, train_step  # noqa: F401  (re-exported)


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
