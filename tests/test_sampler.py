"""The shared Sampler (model-free): mask first, then transformers' processors and warpers."""

from __future__ import annotations

import pytest
import torch
from transformers import TopPLogitsWarper

from cad_outlines.decoding.sampler import SAMPLING_OPTIONS, OptionError, Sampler, SamplingOptions


def _logits(seed: int = 0, vocab: int = 50) -> torch.Tensor:
    return torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * 3


def test_option_names_are_the_outlines_ones():
    assert SAMPLING_OPTIONS == ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed")


@pytest.mark.parametrize("bad", [dict(temperature=-0.1), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1),
                                 dict(top_k=2.5), dict(min_p=1.5), dict(repetition_penalty=0.0), dict(seed="x")])
def test_out_of_range_options_name_themselves(bad):
    (name, _), = bad.items()
    with pytest.raises(OptionError, match=name):
        SamplingOptions(**bad)


def test_greedy_takes_the_best_allowed_id():
    logits = _logits()
    allowed = torch.zeros(50, dtype=torch.bool)
    allowed[[3, 7, 11]] = True
    best = max([3, 7, 11], key=lambda i: logits[i])
    assert Sampler(SamplingOptions()).choose_one(logits, allowed) == best
    assert Sampler(SamplingOptions()).choose_one(logits) == int(logits.argmax())


def test_sampling_never_leaves_the_allowed_set_and_is_seeded():
    allowed = torch.zeros(50, dtype=torch.bool)
    allowed[[1, 2, 40]] = True
    draws = []
    for options in [SamplingOptions(temperature=2.0, seed=5),
                    SamplingOptions(temperature=1.0, top_k=2, seed=5),
                    SamplingOptions(temperature=1.0, top_p=0.5, seed=5),
                    SamplingOptions(temperature=1.0, min_p=0.5, seed=5)]:
        sampler = Sampler(options)
        got = [sampler.choose_one(_logits(i), allowed) for i in range(60)]
        assert set(got) <= {1, 2, 40}
        again = Sampler(options)
        assert [again.choose_one(_logits(i), allowed) for i in range(60)] == got
        draws.append(got)
    assert len(set(draws[0])) > 1  # it does sample


def test_top_k_acts_on_the_allowed_set():
    # Mask first: top_k=1 keeps the best ALLOWED id, so sampling is greedy over the mask.
    logits = _logits(1)
    allowed = torch.zeros(50, dtype=torch.bool)
    allowed[int(logits.argmin())] = True
    allowed[int(logits.argsort()[1])] = True  # two of the worst ids
    sampler = Sampler(SamplingOptions(temperature=3.0, top_k=1, seed=0))
    greedy = Sampler(SamplingOptions()).choose_one(logits, allowed)
    assert {sampler.choose_one(logits, allowed) for _ in range(30)} == {greedy}


def test_top_p_matches_transformers_on_the_masked_scores():
    logits = _logits(2)
    allowed = torch.rand(50, generator=torch.Generator().manual_seed(3)) < 0.5
    masked = logits.masked_fill(~allowed, float("-inf"))
    kept = TopPLogitsWarper(0.6)(torch.zeros((1, 0), dtype=torch.long), masked[None])[0] > float("-inf")
    sampler = Sampler(SamplingOptions(temperature=1.0, top_p=0.6, seed=1))
    got = {sampler.choose_one(logits, allowed) for _ in range(300)}
    assert got == set(kept.nonzero().flatten().tolist())


def test_repetition_penalty_reads_the_context():
    logits = torch.tensor([2.0, 1.9, -5.0])
    sampler = Sampler(SamplingOptions(repetition_penalty=1.5))
    assert sampler.needs_context
    assert sampler.choose_one(logits, context=[0]) == 1  # 2.0 / 1.5 < 1.9
    assert sampler.choose_one(logits, context=[2]) == 0
    with pytest.raises(OptionError, match="context"):
        sampler.choose(logits[None])


def test_batched_rows_are_independent():
    logits = torch.stack([_logits(4), _logits(5)])
    allowed = torch.ones_like(logits, dtype=torch.bool)
    allowed[0, :25] = False
    got = Sampler(SamplingOptions()).choose(logits, allowed)
    assert got.tolist() == [25 + int(logits[0, 25:].argmax()), int(logits[1].argmax())]


def test_caller_processors_bias_but_never_unmask():
    logits = torch.zeros(6)
    allowed = torch.tensor([True, True, False, True, False, True])
    seen = []

    def favour(ids: torch.Tensor, scores: torch.Tensor, target: int) -> torch.Tensor:
        seen.append(ids.tolist())
        scores = scores.clone()
        scores[:, target] = 100.0  # also lifts a masked id above -inf
        return scores

    for options in (SamplingOptions(temperature=0), SamplingOptions(temperature=1.5, seed=3)):
        to_allowed = Sampler(options, processors=[lambda i, s: favour(i, s, 3)])
        assert to_allowed.needs_context
        assert to_allowed.choose_one(logits, allowed, [7, 8]) == 3
        to_masked = Sampler(options, processors=[lambda i, s: favour(i, s, 2)])
        picks = {to_masked.choose_one(logits, allowed, [7, 8]) for _ in range(20)}
        assert picks <= {0, 1, 3, 5}, picks
    assert seen[0] == [[7, 8]]  # processors get the ids the model has seen
