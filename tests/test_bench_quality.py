"""bench quality's bookkeeping, on tiny random-weight models standing in for the real presets."""

from __future__ import annotations

from cad_outlines.bench.quality import CONFIGS, DEFAULT_CONFIGS, QualityConfig, format_table, load_eval_cases, run


def test_every_configuration_runs_and_is_summarised(tiny_model):
    cases = load_eval_cases()[:2]
    cfg = QualityConfig(configs=tuple(CONFIGS), sampled=("cad",), seeds=(0,), cad_budget=24, regen_margin=4)
    assert set(QualityConfig().configs) == set(DEFAULT_CONFIGS) == set(CONFIGS) - {"regen_pld10", "regen_pld20"}
    report = run(cfg, cases=cases, loader=lambda preset: tiny_model("tiny-qwen"))
    names = {r["config"] for r in report["records"]}
    assert names == set(CONFIGS)
    assert len(report["records"]) == len(CONFIGS) * 2 + 2  # greedy everywhere, one seed of cad
    # prompt lookup verifies its drafts into the regeneration model's own greedy reply
    for case in cases:
        regen, pld = ({r["case"]: r for r in report["records"] if r["config"] == name}[case.id]
                      for name in ("regen", "regen_pld10"))
        assert pld["output"] == regen["output"] and pld["forwards"] <= regen["forwards"]
    for rec in report["records"]:
        # random weights rarely finish; whatever they wrote, no guarantee may break
        assert rec["copies_in_range"], rec
        if rec["config"] in ("cad", "base_cad", "cad_monotone", "base_guarded") and rec["complete"]:
            assert rec["valid"], rec
        assert rec["forwards"] >= 1 and rec["cpu_total_seconds"] > 0
        # warm: the prompt's constant head (the chat header here) is not prefilled again
        assert 0 < rec["prompt_tokens_cached"] < rec["prompt_tokens"] and rec["cpu_prefill_warm_seconds"] > 0
    guarded = [r for r in report["records"] if r["config"] == "base_guarded"]
    assert all(r["program_tokens"] <= 24 for r in guarded)
    table = format_table(report)
    assert "| cad | seed0 |" in table and "Exact match by edit kind" in table
    assert "prompt incl., warm" in table and "| regen_pld20 |" in table
    assert set(report["summaries"]) >= {"cad/greedy", "cad/seed0", "regen/greedy"}
