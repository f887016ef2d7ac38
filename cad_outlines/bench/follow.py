"""Regeneration that follows a predicted file: the fast-apply rival of CaD's ``apply``.

An apply model that retypes the file (Morph, Relace) is served with speculative decoding
whose drafts come from a predicted output, such as the file or a snippet's literal merge.
:func:`run_follow` is that decode for the twin fine-tuned to regenerate: greedy, drafts of
up to ``k`` ids read off the prediction, verified in one forward, and, like CaD's
``follow_prediction``, the prediction as a *prior*: its token is taken wherever the model
gives it at least ``floor`` of the next-token distribution (:func:`~cad_outlines.decoding.sampler.holds`,
the check CaD's loop uses), else the model's own greedy choice. So the same literal merge
steers both rows, and on a snippet case the comparison asks what the program format adds
beyond it.

After the model leaves the prediction, drafting resumes where the reply's last ``n`` ids
(then ``n - 1`` ... 1) occur in the prediction, the occurrence nearest to where it left;
until they do, it decodes one token per forward. The output is the model's, as decoded
(not teacher-forced), so exact match is measured, not assumed.
"""

from __future__ import annotations

import bisect
import time
from functools import cached_property
from typing import Any, Optional, Sequence

from ..decoding.runner import ObservedRunner, Runner, TransformersRunner
from ..decoding.sampler import holds
from ._loop import CpuClock, cpu_run

__all__ = ["Realigner", "run_follow"]


class Realigner:
    """Where in ``prediction`` a reply picks up again: an index of the prediction's n-grams
    (sizes 1..``n``, built once) so that each lookup costs its occurrences, not the
    prediction's length (a model off a long file's merge looks up once per token: on a
    20,000-id prediction a scan took 7.9 ms a lookup, the index 5.5 us after a 0.12 s build,
    which waits for the first lookup)."""

    def __init__(self, prediction: Sequence[int], n: int = 3):
        self.prediction = prediction
        self.n = n

    @cached_property
    def ends(self) -> dict[tuple[int, ...], list[int]]:
        """Each n-gram's end indices, ascending."""
        ends: dict[tuple[int, ...], list[int]] = {}
        for size in range(1, self.n + 1):
            for end in range(size, len(self.prediction) + 1):
                ends.setdefault(tuple(self.prediction[end - size:end]), []).append(end)
        return ends

    def __call__(self, reply: Sequence[int], near: int) -> Optional[int]:
        """The index that follows the last ``n`` (then fewer) ids of ``reply``, at the
        occurrence nearest to ``near``; ``None`` if even the last id does not occur."""
        for size in range(min(self.n, len(reply)), 0, -1):
            ends = self.ends.get(tuple(reply[-size:]))
            if ends:  # ascending: the nearest is at the bisection point or just before it
                i = bisect.bisect_left(ends, near)
                return min(ends[max(0, i - 1):i + 1], key=lambda end: (abs(end - near), end))
        return None


def run_follow(hf_model: Any, prompt_ids: Sequence[int], prediction_ids: Sequence[int], k: int, floor: float,
               eos_token_id: int, max_new_tokens: int, runner: Optional[Runner] = None) -> dict[str, Any]:
    """Decode a reply to ``prompt_ids``, drafting from and following ``prediction_ids``.

    ``prediction_ids`` is the predicted reply, its end (``eos_token_id``) included, so that
    following it also stops where it stops. Returns the reply (``ids``, the end cut),
    ``complete`` (it ended within ``max_new_tokens``), ``forward_passes`` (the prefill
    included), ``draft_tokens`` / ``draft_accepted``, ``followed`` (ids taken from the
    prediction), ``overruled`` (of those, where the model's own greedy choice was another
    id: what the prior changed), ``left`` (times the model left the prediction), and the
    CPU figures of :func:`~._loop.cpu_run`.
    """
    clock = CpuClock()
    observed = ObservedRunner(runner if runner is not None else TransformersRunner(hf_model), clock)
    stats = {"forward_passes": 0, "draft_tokens": 0, "draft_accepted": 0, "followed": 0, "overruled": 0,
             "left": 0, "prefill_seconds": 0.0}
    reply: list[int] = []
    realigner = Realigner(prediction_ids)
    state = {"at": 0, "done": False}  # the prediction's next index (None: lost), reply ended

    def choose(row: Any) -> int:
        at = state["at"]
        greedy = int(row.argmax())
        if at is not None and at < len(prediction_ids):
            planned = int(prediction_ids[at])
            if planned == greedy or holds(row, None, planned, floor):
                stats["followed"] += 1
                stats["overruled"] += planned != greedy
                state["at"] = at + 1
                return planned
            stats["left"] += 1
        state["at"] = realigner(reply + [greedy], at if at is not None else len(reply) + 1)
        return greedy

    def take(token: int) -> bool:
        """Append ``token`` to the reply; whether decoding goes on."""
        if token == eos_token_id:
            state["done"] = True
            return False
        reply.append(token)
        return len(reply) < max_new_tokens

    def verify(token: int, cache: Any) -> Optional[int]:
        """Feed ``token`` and the prediction's next ``k`` ids in one forward; keep the
        drafts the model takes; the next token to feed (``None``: the reply ended)."""
        at = state["at"]
        draft = list(prediction_ids[at:at + k]) if at is not None else []
        draft = draft[:max(0, max_new_tokens - len(reply))]
        rows = observed.forward([token] + draft, cache, rows=1 + len(draft)).reshape(1 + len(draft), -1)
        stats["forward_passes"] += 1
        stats["draft_tokens"] += len(draft)
        for i, drafted in enumerate(draft):  # row i chooses what follows token and draft[:i]
            chosen = choose(rows[i])
            if chosen != drafted:
                observed.crop(cache, len(draft) - i)
                return chosen
            stats["draft_accepted"] += 1
            if not take(chosen):
                return None
        return choose(rows[len(draft)])

    def decode() -> float:
        start = time.perf_counter()
        cache = observed.new_cache()
        token: Optional[int] = choose(observed.forward(list(prompt_ids), cache))
        stats["prefill_seconds"] = time.perf_counter() - start
        stats["forward_passes"] += 1
        while token is not None and take(token):
            token = verify(token, cache)
        return time.perf_counter() - start

    total, cpu = cpu_run(clock, decode)
    return {"ids": reply, "complete": state["done"], "prompt_tokens": len(prompt_ids), **stats,
            "total_seconds": total, "gen_seconds": total - stats["prefill_seconds"], **cpu, "k": k,
            "floor": floor}
