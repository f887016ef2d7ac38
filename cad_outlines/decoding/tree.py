"""Drafts in the KV cache: a proposal shaped as a tree, and its verification.

A forward may carry, after the ids the loop appends, a draft of what most likely comes
next (:mod:`.drafting` guesses it). The draft is a tree of tokens: usually a chain (the
guessed text), sometimes with *alternatives*, tokens that stand beside another at the
same position (:class:`DraftTree`):

* **siblings** of a drafted copy index's first end digit: a copy that does not run to
  the document's end has an end no model-free guess knows, so the drafted digit is
  often wrong; with the other digits beside it, the logits after the digit the model
  does choose come in the same forward, and the next digit needs no forward of its own;
* a **fan**: no chain, only the digits the next choice of an index may take (those a
  longer number can follow), for the same reason.

Each node sees the cache, the forward's ids and its own ancestors (a tree attention
mask; the runner's ``forward_tree``), so its logits are what a plain forward over that
path would give. :class:`PendingDraft` holds the nodes with their logits and walks the
tree with the tokens the loop appends: a token that is a child of the last kept node
needs no forward. Once the walk leaves the tree (or reaches a leaf), the cache keeps the
kept path and drops every other node (the runner's ``keep_nodes``; a chain's prefix is
a plain crop).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..language import syntax
from .drafting import DraftBudget, DraftKind

if TYPE_CHECKING:
    import torch

    from .runner import Runner

__all__ = ["DraftTree", "PendingDraft", "branch_indices", "is_chain"]

#: The most alternatives one node gets (the ten digits).
MAX_ALTERNATIVES = 10
_PARTIAL_NUMBER = re.compile(r"(\d*)\Z")


@dataclass
class DraftTree:
    """Drafted tokens, a parent before its children.

    ``parents[i]`` is the index of node ``i``'s parent, ``-1`` for a child of the
    forward's last appended id; ``alternative[i]`` marks a node that stands beside the
    chain (a sibling or a fan's member), for :class:`DraftBudget`'s separate counts.
    """

    ids: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    alternative: list[bool] = field(default_factory=list)
    kind: DraftKind = "tag"

    @classmethod
    def chain(cls, ids: Sequence[int], kind: DraftKind) -> "DraftTree":
        return cls(list(ids), list(range(-1, len(ids) - 1)), [False] * len(ids), kind)

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: Sequence[int], parent: int) -> None:
        """Alternatives: ``ids`` as children of node ``parent``."""
        self.ids += ids
        self.parents += [parent] * len(ids)
        self.alternative += [True] * len(ids)

    def cut(self, size: int) -> "DraftTree":
        """The first ``size`` nodes (still a tree: parents come first)."""
        return DraftTree(self.ids[:size], self.parents[:size], self.alternative[:size], self.kind)


def branch_indices(tree: DraftTree, pending: str, piece: Callable[[int], str],
                   validate: Callable[[Sequence[int]], int], digits: Mapping[str, int], hi: int,
                   pays: Callable[[int], bool]) -> None:
    """Add digit alternatives to ``tree`` in place, where an index digit is a choice.

    With a chain that reaches a copy's end index, its first end digit gets the other
    digits the grammar allows there as siblings; with no chain and ``pending`` inside a
    copy's indices, the digits allowed next make a fan. Only digits a longer number can
    follow are worth their width (the choice after them is another digit; after the
    rest the tag's close is forced, and their logits would go unread), and only when
    ``pays(count)`` says so.

    ``piece`` is a token's text, ``validate`` how many of some ids the grammar accepts
    from the state after ``pending``, ``digits`` the one-token digits' ids and ``hi``
    the largest copy index.
    """
    # Only the op being written matters, not a long gen body before it.
    pending = pending[max(pending.rfind(syntax.COPY_START[:1]), 0):]
    text, at = pending, None
    for i, token in enumerate(tree.ids):
        end = syntax.COPY_END_INDEX_RE.search(text)
        if end and not end.group("end") and piece(token).isdigit():
            at = i
            break
        text += piece(token)
    if at is None and (tree.ids or syntax.COPY_START not in pending):
        return
    prefix = tree.ids[:at] if at is not None else []
    number = _PARTIAL_NUMBER.search(text if at is not None else pending).group(1)
    taken = tree.ids[at] if at is not None else None
    alternatives = [token for digit, token in digits.items()
                    if token != taken and int(number + digit) * 10 <= hi
                    and validate([*prefix, token]) == len(prefix) + 1][:MAX_ALTERNATIVES]
    if len(alternatives) > (0 if at is not None else 1) and pays(len(alternatives)):
        tree.add(alternatives, at - 1 if at is not None else -1)
        if at is None:
            tree.kind = "fan"


def is_chain(parents: Sequence[int]) -> bool:
    """Whether ``parents`` make a chain starting at the forward's last id."""
    return all(parent == i - 1 for i, parent in enumerate(parents))


class PendingDraft:
    """A draft tree whose KV entries sit at the end of the cache, not yet verified.

    Each node is held with the logits its forward computed after it. A token the loop
    appends that is a child of the last kept node is kept without a forward: same
    token, same position, same ancestors, hence the same KV entry and the same next
    logits. When a token is no child of it (or the kept node is a leaf), the tree is
    resolved: the cache keeps the kept path, the rest is dropped.
    """

    def __init__(self, runner: Runner, cache: Any, budget: DraftBudget):
        self.runner, self.cache, self.budget = runner, cache, budget
        self._tree = DraftTree()
        self._logits: list[torch.Tensor] = []
        self._path: list[int] = []  # the kept nodes, root to leaf
        # A sliding-window layer (Mistral, Qwen2 with use_sliding_window) drops the
        # states that leave its window at every update, so once the window is full a
        # draft could not be cropped from it. Recording keeps them until :meth:`trim`
        # (attention still sees only the window: the layer's update returns just that).
        self._windows = [layer for layer in getattr(cache, "layers", ())
                         if getattr(layer, "is_sliding", False) and hasattr(layer, "activate_past_recording")]
        for layer in self._windows:
            layer.activate_past_recording()

    def __len__(self) -> int:
        """Nodes in the cache not (yet) kept."""
        return len(self._tree) - len(self._path)

    @property
    def kind(self) -> DraftKind:
        return self._tree.kind

    def next_id(self) -> int | None:
        """The chain's next drafted token (``None`` once the chain is used up)."""
        child = self._child(None, chain=True)
        return None if child is None else self._tree.ids[child]

    def add(self, tree: DraftTree, logits: Sequence[torch.Tensor]) -> None:
        """The tree a forward just appended, with the logits after each node."""
        assert not len(self), "a forward starts with no unverified draft"
        self._tree, self._logits, self._path = tree, list(logits), []

    def verify(self, context: Sequence[int]) -> tuple[list[int], torch.Tensor | None]:
        """Keep the drafted tokens ``context`` starts with.

        Returns the part of ``context`` still to be forwarded, and the logits after the
        last kept token (``None`` if none was kept).
        """
        if not len(self._tree):
            return list(context), None
        kept = 0
        while kept < len(context) and (child := self._child(context[kept])) is not None:
            self._path.append(child)
            kept += 1
        after = self._logits[self._path[-1]] if kept else None
        if kept < len(context) or self._child(None) is None:
            self._resolve(record=True)
        return list(context[kept:]), after

    def discard(self) -> None:
        """Drop every node not kept from the cache."""
        if len(self._tree):
            self._resolve(record=False)

    def trim(self) -> None:
        """Drop the recorded states outside each sliding window (no draft may be pending)."""
        assert not len(self), "trimming would drop the states a pending draft's crop needs"
        for layer in self._windows:
            if layer.get_seq_length() >= layer.sliding_window:
                layer.crop(0)  # past the window, crop(0) keeps just the window's states

    def _child(self, token: int | None, chain: bool = False) -> int | None:
        """The child of the last kept node holding ``token`` (any child: ``None``; the
        chain's, not an alternative: ``chain``)."""
        node = self._path[-1] if self._path else -1
        tree = self._tree
        return next((i for i, parent in enumerate(tree.parents)
                     if parent == node and (token is None or tree.ids[i] == token)
                     and not (chain and tree.alternative[i])), None)

    def _resolve(self, record: bool) -> None:
        tree, path = self._tree, self._path
        if path == list(range(len(path))):
            self.runner.crop(self.cache, len(tree) - len(path))
        else:
            self.runner.keep_nodes(self.cache, len(tree), path)  # type: ignore[attr-defined]
        if record:
            chain = [i for i in range(len(tree)) if not tree.alternative[i]]
            if chain:
                kept = sum(not tree.alternative[i] for i in path)
                self.budget.record(tree.kind, kept, missed=kept < len(chain))
            if len(chain) < len(tree):
                self.budget.record("fan", int(any(tree.alternative[i] for i in path)), missed=False)
        self._tree, self._logits, self._path = DraftTree(), [], []
