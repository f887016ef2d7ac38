"""Argument types and inputs shared by the product CLI and the bench CLI.

Both :mod:`cad_outlines.cli` and the bench CLI (`bench/cli.py`) import this module, so
neither imports the other (the product CLI only delegates to the bench one).
"""

from __future__ import annotations

import argparse

from cad_outlines.errors import InputError


class UsageError(InputError):
    """A problem with the command's input that the user can fix."""


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
    from cad_outlines.tools.corpus import load_corpus

    cases = load_corpus(path)
    if not cases:
        raise UsageError(f"{path}: the corpus has no cases (expected JSONL lines of "
                         '{"id", "doc", "gold"})')
    return cases
