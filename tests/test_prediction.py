"""``prediction``: the program writing an expected document is drafted and verified by the
model's own choices; it saves forwards when right and changes no output either way."""

from __future__ import annotations

import pytest

from cad_outlines.bench.quality import load_eval_cases
from cad_outlines.decoding.drafting import Drafter
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.program import Copy, Gen


def test_the_drafter_follows_the_plan_up_to_each_splice():
    lines = [f"line {i}" for i in range(1, 11)]
    plan = [Copy(1, 3), Gen("\nNEW\n"), Copy(5, 10)]
    d = Drafter(lines, "lines", plan=plan)
    assert d.predict("<pro", []) == 'gram><copy lines="1-3' and d.kind == "plan"
    # after the first copy: the gen and the next copy up to its end index, in one draft
    assert d.predict("", [Copy(1, 3)]) == '<gen>\nNEW\n</gen><copy lines="5-10'
    assert d.predict("", plan) == "</program>"
    # the program left the plan: the ordinary drafts take over
    assert d.predict("", [Copy(1, 4)]) != "" and d.kind == "tag"


@pytest.mark.parametrize("subset", ["whole_151_400", "commit_snippets"])
def test_a_right_prediction_saves_forwards_and_changes_nothing(tiny_model, subset):
    model = tiny_model("tiny-qwen")
    cases = [c for c in load_eval_cases("v2") if c.meta["subset"] == subset][:3]
    ops_total = plain_total = predicted_total = 0
    for case in cases:
        ops = oracle_program(case.doc, case.gold)
        gen = CaDGenerator(model, case.doc)
        plain = gen.run(case.meta["instruction"], force_program=ops)
        predicted = gen.run(case.meta["instruction"], force_program=ops, prediction=case.gold)
        wrong = gen.run(case.meta["instruction"], force_program=ops, prediction=case.doc)
        assert plain.program == predicted.program == wrong.program and predicted.document == case.gold
        ops_total += len(ops)
        plain_total += plain.stats.forward_passes
        predicted_total += predicted.stats.forward_passes
    assert predicted_total < plain_total and predicted_total <= 1.25 * ops_total + len(cases)


def test_greedy_choices_are_the_models_own_with_or_without_a_prediction(tiny_model):
    model = tiny_model("tiny-qwen")
    case = next(c for c in load_eval_cases("v2") if c.meta["subset"] == "whole_le50")
    gen = CaDGenerator(model, case.doc, max_new_tokens=48)
    runs = [gen.run(case.meta["instruction"], prediction=p) for p in (None, case.gold, case.doc)]
    assert runs[0].program == runs[1].program == runs[2].program
    assert runs[0].stats.decoded_tokens == runs[1].stats.decoded_tokens


def test_apply_predicts_the_literal_merge(tiny_model):
    doc = "".join(f"x{i} = {i}\n" for i in range(1, 30))
    update = "# ... existing code ...\nx9 = 9\nx10 = 100\nx11 = 11\n# ... existing code ...\n"
    gen = CaDGenerator(tiny_model("tiny-qwen"), doc)
    assert gen.predicted(update) == doc.replace("x10 = 10\n", "x10 = 100\n")
    assert gen.predicted("# ... existing code ...\nnot in the file\n# ... existing code ...\n") is None


def test_follow_prediction_takes_the_predictions_tokens_the_model_does_not_overrule(tiny_model):
    """With ``follow_prediction`` the prediction is a prior: at a floor no allowed token
    falls under, a random-weight model writes the prediction's program exactly; at 1.0
    only tokens the model is certain of are taken, which it would choose anyway."""
    from cad_outlines.errors import OptionError
    from cad_outlines.generate import cad

    model = tiny_model("tiny-qwen")
    case = next(c for c in load_eval_cases("v2") if c.meta["subset"] == "commit_snippets")
    instruction = case.meta["instruction"]
    own = CaDGenerator(model, case.doc, max_new_tokens=256).run(instruction, prediction=case.gold)
    assert own.document != case.gold  # random weights: the model alone does not write it
    followed = cad(model, case.doc, max_new_tokens=1024, follow_prediction=1e-12).run(
        instruction, prediction=case.gold)
    assert followed.document == case.gold and followed.ops == oracle_program(case.doc, case.gold)
    assert followed.stats.forward_passes < len(oracle_program(case.doc, case.gold)) * 3
    certain = cad(model, case.doc, max_new_tokens=256, follow_prediction=1.0).run(
        instruction, prediction=case.gold)
    assert certain.program == own.program
    # no prediction: the option changes nothing
    alone = cad(model, case.doc, max_new_tokens=64, follow_prediction=1e-12).run(instruction)
    assert alone.program == CaDGenerator(model, case.doc, max_new_tokens=64).run(instruction).program
    for bad in (0, 1.5, True, "0.1"):
        with pytest.raises(OptionError, match="follow_prediction"):
            cad(model, case.doc, follow_prediction=bad)


def test_sampling_follows_the_prediction_where_the_model_does_not_overrule_it(tiny_model):
    """Sampled, the floor decides as greedy does: at a floor no allowed token falls under,
    every temperature and seed writes the prediction's program; at a floor the model
    overrules, the sample is its own, valid and the same for the same seed."""
    from cad_outlines.generate import cad

    model = tiny_model("tiny-qwen")
    case = next(c for c in load_eval_cases("v2") if c.meta["subset"] == "commit_snippets")
    instruction = case.meta["instruction"]
    for seed in (0, 1):
        followed = cad(model, case.doc, max_new_tokens=1024, follow_prediction=1e-12).run(
            instruction, prediction=case.gold, temperature=1.0, seed=seed)
        assert followed.document == case.gold and followed.ops == oracle_program(case.doc, case.gold)
    runs = [cad(model, case.doc, max_new_tokens=96, follow_prediction=0.5).run(
        instruction, prediction=case.gold, temperature=1.0, top_p=0.9, seed=7) for _ in range(2)]
    assert runs[0].program == runs[1].program
    assert runs[0].document != case.gold  # a random-weight model overrules a 0.5 floor somewhere
    assert all(1 <= op.start <= op.end <= len(case.doc.split("\n")) for op in runs[0].ops if isinstance(op, Copy))


def test_the_floor_recorded_with_the_model_is_the_default(tiny_model):
    """``follow_prediction="model"`` (the default) reads ``cad_apply_floor`` from the
    model's config (the loader sets it from the adapter's ``apply.json``): with one there,
    ``apply`` follows the merge; ``None`` turns it off; a number given wins."""
    from cad_outlines.decoding.options import LoopSwitches
    from cad_outlines.generate import cad

    model = tiny_model("tiny-qwen")
    case = next(c for c in load_eval_cases("v2") if c.meta["subset"] == "commit_snippets")
    instruction = case.meta["instruction"]
    assert CaDGenerator(model, case.doc).loop.for_model(model.model).follow_prediction is None  # no record
    model.model.config.cad_apply_floor = 1e-12
    try:
        default = cad(model, case.doc, max_new_tokens=1024)
        assert default.loop.follow_prediction == "model"
        assert default.run(instruction, prediction=case.gold).document == case.gold
        off = cad(model, case.doc, max_new_tokens=256, follow_prediction=None)
        assert off.loop.for_model(model.model).follow_prediction is None
        assert off.run(instruction, prediction=case.gold).document != case.gold
        assert cad(model, case.doc, follow_prediction=0.5).loop.for_model(model.model).follow_prediction == 0.5
        assert LoopSwitches().for_model(model.model).follow_prediction == 1e-12
        assert LoopSwitches().for_model(None).follow_prediction is None  # a bare tokenizer's loop
    finally:
        del model.model.config.cad_apply_floor


def test_the_plan_offers_each_planned_copys_close():
    """Drafts stop at a planned copy's end index (the splice follows its close), so the
    plan must still name the close there: it is where a model extends ``1-2`` to ``1-25``."""
    lines = [f"l{i}" for i in range(1, 31)]
    plan = [Copy(1, 2), Gen("\nNEW\n"), Copy(4, 30)]
    d = Drafter(lines, "lines", plan=plan)
    assert d.predict("<program>", []) == '<copy lines="1-2' and d.plan_closes('<program><copy lines="1-2', [])
    assert d.plan_closes('<copy lines="1-2', [])  # <program> complete: pending is what follows it
    assert not d.plan_closes('<program><copy lines="1-', []) and not d.plan_closes('<copy lines="1-25', [])
    assert d.plan_closes('<copy lines="4-30', plan[:2]) and not d.plan_closes("", plan)
    assert not d.plan_closes('<copy lines="1-2', [Copy(1, 3)])  # the program left the plan


def test_a_followed_plan_closes_its_copies_where_the_model_would_extend_them(family_model):
    """A model that would rather type one more digit of each copy's end (a bias on the
    digits) still writes the predicted program when it follows the prediction, on every
    family (DeepSeek-Coder spells the close ``"/>`` in two tokens)."""
    from cad_outlines.generate import cad

    model = family_model
    doc = "".join(f"v{i} = {i}\n" for i in range(1, 31))
    predicted = doc.replace("v3 = 3\n", "v3 = 33\n")
    digits = [model.hf_tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]

    def bias(input_ids, scores):  # the sampler's choice only; the floor reads the raw logits
        scores = scores.clone()
        scores[..., digits] += 30.0
        return scores

    ops = oracle_program(doc, predicted)
    assert ops[0] == Copy(1, 2) and len(ops) == 3  # '2' could grow to 2x: a digit may follow
    followed = cad(model, doc, max_new_tokens=512, follow_prediction=1e-12,
                   logits_processors=[bias]).run("set v3 to 33", prediction=predicted)
    assert followed.ops == ops and followed.document == predicted
    drifting = cad(model, doc, max_new_tokens=64, follow_prediction=1e-12,
                   logits_processors=[bias]).run("set v3 to 33")
    assert drifting.ops[:1] != ops[:1]  # without the prediction the bias extends the first copy
