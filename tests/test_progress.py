"""The decode-progress display: what it shows, and that it stays silent when it should."""

from __future__ import annotations

import io

from cad_outlines.decoding.generator import CaDStats
from cad_outlines.decoding.progress import DecodeProgress, wants_progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_wants_progress_only_on_a_terminal_and_not_quiet():
    assert wants_progress(stream=_Terminal())
    assert not wants_progress(quiet=True, stream=_Terminal())
    assert not wants_progress(stream=io.StringIO())  # piped or redirected


def test_bar_shows_prefill_then_decoded_forced_and_copied(capsys):
    stats = CaDStats(prompt_tokens=321)
    with DecodeProgress("a.py", total=100) as bar:
        bar(stats)  # before the prefill
        assert "a.py: prefill (321 prompt tokens)" in str(bar._bar)
        stats.forward_passes, stats.decoded_tokens, stats.forced_tokens = 3, 5, 7
        stats.copied_tokens, stats.splices = 40, 2
        bar(stats)
        shown = str(bar._bar)
        assert "a.py: decoding" in shown and "12/100" in shown
        assert "decoded=5" in shown and "forced=7" in shown and "copied=40" in shown and "splices=2" in shown
    assert bar._bar is None  # closed on exit


def test_disabled_bar_draws_nothing(capsys):
    with DecodeProgress("a.py", total=10, enabled=False) as bar:
        bar(CaDStats(prompt_tokens=1))
    assert bar._bar is None and capsys.readouterr().err == ""
