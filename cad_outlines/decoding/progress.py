"""A progress display for one decode run (prefill, tokens decoded, copies spliced).

The decode loop reports through :class:`~cad_outlines.decoding.generator.CaDGenerator`'s
``progress`` callback; this module turns those calls into a tqdm bar on stderr, so the
loop itself knows nothing about terminals.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["DecodeProgress", "wants_progress"]


def wants_progress(quiet: bool = False, stream: TextIO | None = None) -> bool:
    """Whether to draw a bar: not asked to be quiet, and the stream is a terminal."""
    stream = sys.stderr if stream is None else stream
    return not quiet and bool(getattr(stream, "isatty", lambda: False)())


class DecodeProgress:
    """Callable progress display for ``CaDGenerator.run(..., progress=...)``.

    Shows ``prefill (N prompt tokens)`` until the prompt's forward is done, then the
    program tokens against the ``max_new_tokens`` budget with the decoded, forced and
    copied (spliced) counts.

    Parameters
    ----------
    label
        What is being decoded (a file name).
    total
        The token budget (``max_new_tokens``); None shows a count without a bar.
    enabled
        False draws nothing (``-q``, or stderr is not a terminal).
    """

    def __init__(self, label: str, total: int | None, enabled: bool = True):
        self.label, self.total, self.enabled = label, total, enabled
        self._bar: Any = None

    def __call__(self, stats: Any) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, file=sys.stderr, unit="tok", dynamic_ncols=True,
                             leave=False)
        if stats.forward_passes == 0:
            self._bar.set_description(f"{self.label}: prefill ({stats.prompt_tokens} prompt tokens)")
            return
        self._bar.set_description(f"{self.label}: decoding")
        self._bar.n = stats.program_tokens if self.total is None else min(stats.program_tokens, self.total)
        self._bar.set_postfix(decoded=stats.decoded_tokens, forced=stats.forced_tokens,
                              copied=stats.copied_tokens, splices=stats.splices, refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        """Remove the bar (the caller prints the final summary)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "DecodeProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
