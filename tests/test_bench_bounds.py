"""Bounds math of cad_outlines.bench.bounds: hand-computed examples, interpolation, m*."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from cad_outlines.bench.bounds import (
    KERNEL_KIND, FixedCosts, KernelCurve, bnd_exact, bnd_fixed, bnd_m8, bnd_mean, bnd_policy,
    compute_bounds, kernel_from_dict, load_kernel, m_star, m_star_exact, speedup)

CURVE = KernelCurve((1, 2, 4, 8, 16, 32, 64), (1.0, 1.5, 2.5, 4.0, 6.0, 8.0, 9.0))


def test_interpolation_is_linear_in_log_n_and_clamped():
    assert CURVE(4) == 2.5 and CURVE(64) == 9.0
    # halfway between 2 and 4 in log N is sqrt(8), not 3
    assert CURVE(math.sqrt(8)) == pytest.approx(2.0)
    assert CURVE(3) == pytest.approx(1.5 + math.log2(1.5))
    assert CURVE(12) == pytest.approx(4.0 + 2.0 * math.log2(1.5))
    assert CURVE(0.5) == 1.0 and CURVE(1000) == 9.0  # clamped outside the measured range


def test_curve_rejects_bad_input():
    with pytest.raises(ValueError, match="strictly increasing"):
        KernelCurve((1, 4, 2), (1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="as many"):
        KernelCurve((1, 2), (1.0,))
    with pytest.raises(ValueError, match="> 0"):
        KernelCurve((1, 2), (1.0, 0.0))


def test_bnd_exact_hand_computed():
    # T = 100 gold tokens, 10 generated, copies of 8, 2 and 80 tokens:
    # 100 / (10 + 8/4 + 2/1.5 + 80/9) = 100 / (200/9) = 4.5 (80 is past N=64: s clamped to 9)
    assert bnd_exact(100, 10, [8, 2, 80], CURVE) == pytest.approx(4.5)
    # every span at s(8) = 4: 100 / (10 + 90/4)
    assert bnd_m8(100, 10, [8, 2, 80], CURVE) == pytest.approx(100 / 32.5)
    # mean span 30: s(30) = 6 + 2 * log2(30/16)
    s30 = 6 + 2 * math.log2(30 / 16)
    assert bnd_mean(100, 10, [8, 2, 80], CURVE) == pytest.approx(100 / (10 + 90 / s30))
    # no copies at all: speed-up 1
    assert bnd_exact(50, 50, [], CURVE) == pytest.approx(1.0)


def test_fixed_cost_definition():
    costs = FixedCosts(tau=0.1, c_mask=0.002, c_mask_tag=0.01, c_sync=0.001, c_forced=0.15,
                       tag_decode_steps=5, tag_forced_runs=2)
    # 5 tag steps * (0.1 + 0.01 + 0.001) + 2 forced runs * (0.15 - 0.1)
    assert costs.per_copy == pytest.approx(0.655)
    assert costs.loop_overhead_fraction == pytest.approx(0.03)
    cheap = FixedCosts(0.1, 0.0, 0.0, 0.0, 0.05, 1, 3)  # a forced run cheaper than tau adds 0
    assert cheap.per_copy == pytest.approx(0.1)
    # bnd_fixed: every copy also costs c / tau = 6.55 steps
    assert bnd_fixed(100, 10, [8, 2, 80], CURVE, costs) == pytest.approx(
        100 / (200 / 9 + 3 * 6.55))


def test_m_star_hand_computed():
    # s(N) > 1 + 10/N: N=5 gives s = 2.5 + 1.5*log2(1.25) = 2.98 < 3; N=6 gives 3.38 > 2.67
    assert CURVE(5) < 1 + 10 / 5 and CURVE(6) > 1 + 10 / 6
    assert m_star(CURVE, c=10.0, tau=1.0) == 6
    # exact: N (1 - 1/s(N)) > 10 first holds at N = 13
    assert 12 * (1 - 1 / CURVE(12)) < 10 < 13 * (1 - 1 / CURVE(13))
    assert m_star_exact(CURVE, c=10.0, tau=1.0) == 13
    # c = 0: any N with s(N) > 1
    assert m_star(CURVE, c=0.0, tau=1.0) == 2


def test_m_star_beyond_the_curve_and_never():
    flat = KernelCurve((1, 2), (1.0, 2.0))
    assert m_star(flat, c=1000.0, tau=1.0) == 1001  # 2 > 1 + 1000/N  <=>  N > 1000
    assert m_star_exact(flat, c=1000.0, tau=1.0) == 2001  # N/2 > 1000
    assert m_star(KernelCurve((1, 8), (1.0, 0.9)), c=1.0, tau=1.0) is None  # copying never pays


def test_policy_generates_short_spans():
    costs = FixedCosts(1.0, 0.0, 0.0, 0.0, 1.0, 10, 0)  # c = 10 steps per copy
    # m = 6: the 2-token span is generated (2 steps), 8 and 80 are copied with +10 each
    got = bnd_policy(100, 10, [8, 2, 80], CURVE, costs, 6)
    assert got == pytest.approx(100 / (10 + 2 + 8 / 4 + 10 + 80 / 9 + 10))
    assert bnd_policy(100, 10, [8, 2, 80], CURVE, costs, None) == pytest.approx(1.0)
    assert speedup(100, 10, [8, 2, 80], CURVE, 0.0, min_span=1000) == pytest.approx(1.0)


def test_compute_bounds_checks_token_counts_and_fills_everything():
    costs = FixedCosts(1.0, 0.0, 0.0, 0.0, 1.0, 10, 0)
    b = compute_bounds(100, 10, [8, 2, 80], CURVE, costs)
    assert b.bnd_exact == pytest.approx(4.5) and b.K == 3 and b.span_mean == 30
    assert b.m_star == 6 and b.per_copy_cost == 10 and b.spans_beyond_curve == 1
    assert b.bnd_policy == pytest.approx(bnd_policy(100, 10, [8, 2, 80], CURVE, costs, 6))
    assert b.bnd_fixed < b.bnd_exact
    with pytest.raises(ValueError, match="must equal"):
        compute_bounds(99, 10, [8, 2, 80], CURVE)


def _record():
    return {"kind": KERNEL_KIND, "n": [1, 2, 4], "s_keep1": [1.0, 1.8, 3.0],
            "s_full": [1.0, 1.5, 2.0], "preset": "x",
            "costs": {"tau": 0.1, "c_mask": 0.001, "c_mask_tag": 0.002, "c_sync": 0.0,
                      "c_forced": 0.12, "tag_decode_steps": 7, "tag_forced_runs": 2}}


def test_kernel_file_round_trip_and_errors(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps(_record()))
    kernel = load_kernel(path)
    assert kernel.curve("keep1")(4) == 3.0 and kernel.curve("full")(4) == 2.0
    assert kernel.costs.tag_decode_steps == 7 and kernel.meta["preset"] == "x"
    bad = _record()
    del bad["costs"]["c_sync"]
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="c_sync"):
        load_kernel(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="bad JSON"):
        load_kernel(path)
    with pytest.raises(ValueError, match="not a kernel file"):
        kernel_from_dict({"kind": "other"})


def test_bounds_module_imports_no_torch():
    code = ("import sys, cad_outlines.bench.bounds; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
