"""Argument types and inputs shared by the product CLI and the bench CLI.

Both :mod:`cad_outlines.cli` and the bench CLI (`bench/cli.py`) import this module, so
neither imports the other (the product CLI only delegates to the bench one).
"""

from __future__ import annotations

import argparse
import math
import sys

from cad_outlines.errors import UsageError  # noqa: F401 (re-exported: its old home)


def positive(value: str) -> int:
    """An argparse type: an integer >= 1."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def add_ceiling_arguments(p: argparse.ArgumentParser) -> None:
    """The corpus, tokenizer and oracle arguments of `ceiling` (also used by `bench bounds`)."""
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    p.add_argument("--tokenizer", metavar="DIR", required=True,
                   help="Hugging Face tokenizer folder that counts the tokens")
    p.add_argument("--granularity", choices=["lines", "tokens"], default="lines",
                   help="line oracle (default) or greedy token oracle")
    p.add_argument("--min-span", type=positive, default=8, metavar="M",
                   help="shortest token copy, in tokens (default: 8)")
    p.add_argument("--special-tokens", choices=["text", "match"], default="text",
                   help="text (default): special-token spellings in the text are plain "
                        "text; match: they become special tokens")


def load_cases(path: str) -> list:
    """The cases of a corpus file; an empty corpus is a usage error, not a 0-case report."""
    from cad_outlines.training.corpus import load_corpus

    cases = load_corpus(path)
    if not cases:
        raise UsageError(f"{path}: the corpus has no cases (expected JSONL lines of "
                         '{"id", "doc", "gold"})')
    return cases


class HelpFormatter(argparse.HelpFormatter):
    """Every option's default in its help (unless it already names one; flags and
    options without a default show none); descriptions and epilogs keep their line
    breaks and wrap each line."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.default is None or action.default is False
                or action.default is argparse.SUPPRESS or not action.option_strings):
            return text
        return text + " (default: %(default)s)"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "\n".join(textwrap.fill(line, width, initial_indent=indent,
                                        subsequent_indent=indent + " " * (len(line) - len(line.lstrip())))
                          if line.strip() else "" for line in text.splitlines())


def temperature(value: str) -> float:
    """An argparse type: a finite number >= 0."""
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {value}")
    return number


def top_p(value: str) -> float:
    """An argparse type: a number in (0, 1]."""
    number = float(value)
    if not 0 < number <= 1:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return number


def seed(value: str) -> int:
    """An argparse type: an integer in [0, 2**63)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {value!r}") from None
    if not 0 <= number < 2**63:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**63), got {value}")
    return number


def status(args: argparse.Namespace, message: str) -> None:
    """Print ``message`` on stderr unless ``--quiet``."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr, flush=True)


def add_verbosity(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose``, mutually exclusive."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true",
                       help="also print the token counts and timings of each run")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="no progress bar, program or summary on stderr (errors only)")
