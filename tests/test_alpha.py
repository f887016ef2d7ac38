"""Feasible mass α against a brute-force softmax sum, and the vocab-mismatch rules."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.decoding.alpha import AlphaTrace, align_mask, feasible_mass, log_feasible_mass


def brute_alpha(logits: torch.Tensor, allowed: list[bool]) -> float:
    """Σ over allowed ids of softmax(logits), in float64, one id at a time."""
    z = logits.double()
    probs = [math.exp(float(v)) for v in z - z.max()]
    total = sum(probs)
    return sum(p for p, ok in zip(probs, allowed) if ok) / total


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-20, 20, allow_nan=False), min_size=2, max_size=24),
    st.data(),
)
def test_alpha_matches_brute_force(values, data):
    logits = torch.tensor(values, dtype=torch.float32)
    allowed = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    if not any(allowed):
        allowed[data.draw(st.integers(0, len(values) - 1))] = True
    got = feasible_mass(logits, torch.tensor(allowed))
    assert got == pytest.approx(brute_alpha(logits, allowed), rel=1e-5, abs=1e-7)


def test_none_mask_means_all_allowed():
    logits = torch.randn(50, generator=torch.Generator().manual_seed(1))
    assert feasible_mass(logits, None) == 1.0
    assert feasible_mass(logits, torch.ones(50, dtype=torch.bool)) == pytest.approx(1.0)


def test_tiny_alpha_stays_finite_in_log_space():
    logits = torch.tensor([0.0, -900.0, -950.0])
    log_a = log_feasible_mass(logits, torch.tensor([False, True, True]))
    # exp(-900) underflows float64, its log must not.
    assert log_a == pytest.approx(-900.0, abs=1e-3)
    assert feasible_mass(logits, torch.tensor([False, True, True])) == 0.0


def test_padded_logits_are_never_allowed_but_count_in_the_denominator():
    # The model has 6 logits, the tokenizer's mask only 4 ids; ids 4 and 5 are padding.
    logits = torch.tensor([1.0, 2.0, 0.5, -1.0, 3.0, 3.0])
    mask = torch.tensor([True, False, True, False])
    got = feasible_mass(logits, mask)
    assert got == pytest.approx(brute_alpha(logits, [True, False, True, False, False, False]))
    # Not the renormalised-over-tokenizer-ids value: padding mass is mass lost.
    assert got < brute_alpha(logits[:4], [True, False, True, False])


def test_mask_longer_than_logits_is_cut():
    # Grammar bitmasks are padded to a multiple of 32: entries past the logits carry
    # zero model probability, even when set.
    logits = torch.tensor([0.0, 1.0, 2.0])
    mask = torch.zeros(32, dtype=torch.bool)
    mask[[0, 2, 31]] = True
    assert feasible_mass(logits, mask) == pytest.approx(brute_alpha(logits, [True, False, True]))
    assert align_mask(mask, 3).tolist() == [True, False, True]
    assert align_mask(torch.tensor([True]), 3).tolist() == [True, False, False]


def test_align_mask_rejects_non_bool():
    with pytest.raises(ValueError, match="bool"):
        align_mask(torch.tensor([1, 0, 1]), 3)


def test_trace_accumulates_and_summarises():
    gen = torch.Generator().manual_seed(0)
    trace = AlphaTrace()
    expected_alphas, expected_chosen = [], []
    for step in range(5):
        logits = torch.randn(40, generator=gen) * 3
        allowed = torch.rand(40, generator=gen) < 0.3
        allowed[step] = True
        chosen = int(torch.nonzero(allowed)[0])
        a = trace.record(logits, allowed, chosen)
        expected_alphas.append(brute_alpha(logits, allowed.tolist()))
        expected_chosen.append(float(torch.softmax(logits.double(), 0)[chosen]))
        assert a == pytest.approx(expected_alphas[-1], rel=1e-5)
    assert trace.steps == 5
    assert trace.alphas == pytest.approx(expected_alphas, rel=1e-5)
    assert trace.chosen_probs == pytest.approx(expected_chosen, rel=1e-5)
    tax = sum(math.log(1 / a) for a in expected_alphas)
    assert trace.projection_tax == pytest.approx(tax, rel=1e-5)
    assert trace.sum_log_alpha == pytest.approx(-tax, rel=1e-5)
    assert trace.mean_alpha == pytest.approx(sum(expected_alphas) / 5, rel=1e-5)
    assert trace.log_likelihood == pytest.approx(sum(math.log(p) for p in expected_chosen), rel=1e-5)
    # q = π/α on allowed ids.
    assert trace.constrained_log_likelihood == pytest.approx(
        trace.log_likelihood + tax, rel=1e-5)


def test_trace_rejects_a_forbidden_choice():
    trace = AlphaTrace()
    with pytest.raises(ValueError, match="not in the allowed set"):
        trace.record(torch.zeros(4), torch.tensor([True, False, True, True]), 1)
    with pytest.raises(ValueError, match="outside the logits"):
        trace.record(torch.zeros(4), None, 4)
    assert trace.steps == 0


def test_half_precision_logits_are_upcast():
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(3)) * 5
    mask = torch.arange(1000) % 7 == 0
    assert feasible_mass(logits.to(torch.bfloat16), mask) == pytest.approx(
        feasible_mass(logits.to(torch.bfloat16).float(), mask), rel=1e-6)


def test_empty_trace_properties():
    trace = AlphaTrace()
    assert trace.steps == 0 and trace.projection_tax == 0.0
    assert math.isnan(trace.mean_alpha)
