"""What every command line of the project shares: the one way a subcommand is
registered (:class:`CommandTable`), the argument groups (device and dtype, model
source, sampling, output, verbosity), argument types, status lines and corpus loading.

The product CLI (:mod:`cad_outlines.cli`, :mod:`~cad_outlines.cli_edit`,
:mod:`~cad_outlines.cli_train`) and the bench CLI (``bench/cli.py``,
``bench/cli_quality.py``) import this module, so none imports another's internals (the
product CLI only delegates to the bench one).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Callable, Union

#: A function that adds one subcommand's parser to ``sub`` (``sub.add_parser(name, ...)``,
#: its arguments, ``set_defaults(func=run)``).
AddCommand = Callable[["argparse._SubParsersAction"], None]


class CommandTable:
    """The subcommands of one command line, in the order ``--help`` lists them.

    Every CLI module registers its subcommands one way: ``@COMMANDS.command`` on the
    function that adds the parser; a table may ``include`` another module's table at that
    point of its order; ``COMMANDS.add_to(sub)`` adds them all.
    """

    def __init__(self) -> None:
        self._entries: list[Union[AddCommand, "CommandTable"]] = []

    def command(self, add: AddCommand) -> AddCommand:
        """Decorator: register ``add`` (returned unchanged)."""
        self._entries.append(add)
        return add

    def include(self, table: "CommandTable") -> None:
        """Register every command of ``table`` here, in its order."""
        self._entries.append(table)

    def add_to(self, sub: "argparse._SubParsersAction") -> None:
        """Add every registered subcommand's parser to ``sub``."""
        for entry in self._entries:
            entry.add_to(sub) if isinstance(entry, CommandTable) else entry(sub)

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


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``low..high`` (``high`` ``None``: no upper bound)."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}" if high is None else
                                             f"must be in {low}..{high}, got {value}")
        return value

    return check


def fraction(value: str) -> float:
    """An argparse type: a number in (0, 1] (``--top-p``, ``--follow-prediction``)."""
    number = float(value)
    if not 0 < number <= 1:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return number


def floor(value: str) -> float | str | None:
    """An argparse type for ``--follow-prediction``: a number in (0, 1], ``model`` (the
    floor recorded with the model, the default) or ``off`` (``None``: the merge only drafts)."""
    if value == "off":
        return None
    if value == "model":
        return value
    try:
        return fraction(value)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], 'model' or 'off', got {value}") from None


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


def write_stdout(text: str) -> None:
    """Write ``text`` to stdout as exact UTF-8 bytes: no locale encoding, no newline translation."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def read_input(path: str) -> str:
    """A file's exact text, or standard input's for ``-`` (UTF-8, newlines kept)."""
    from cad_outlines.files import read_text

    if path != "-":
        return read_text(path)
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"stdin: not UTF-8 text (byte {err.start}: {err.reason})") from None


# -- argument groups, each defined once ---------------------------------------------------


def add_device_args(p: argparse.ArgumentParser, device_help: str = "torch device (cpu, cuda, cuda:1, mps)",
                    dtype_help: str = "weight dtype") -> None:
    """``--device`` (default cpu) and ``--dtype`` (float32, bfloat16, float16)."""
    p.add_argument("--device", default="cpu", help=device_help)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help=dtype_help)


def add_model_source(p: argparse.ArgumentParser, random_use: str) -> None:
    """``--model DIR|FILE.gguf`` or ``--preset NAME``, one of them required; ``random_use``
    says what a random-weight preset is for here."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="DIR|FILE.gguf",
                        help="local Hugging Face model folder (transformers causal LM), or a GGUF file")
    source.add_argument("--preset", metavar="NAME",
                        help="a preset: a real-weight one (smollm2-135m, qwen2.5-coder-0.5b and their "
                             "variants; `cad-outlines weights list`) or a "
                             f"random-weight one ({random_use})")


def add_forward_cost(p: argparse.ArgumentParser) -> None:
    """``--forward-cost COST.json|auto`` (transformers on a CPU: drafts cut to what pays)."""
    p.add_argument("--forward-cost", metavar="COST.json|auto", default=None,
                   help="the machine's forward cost by width, which cuts each draft to what pays for "
                        "the width it adds (worth it on a CPU): auto measures it once per machine and "
                        "model and caches it (a minute for a 0.5B model), or a `bench kernel` JSON or "
                        "a saved ForwardCost; default: drafts go whole")


def add_sampling_args(p: argparse.ArgumentParser) -> None:
    """``--temperature`` (0: greedy), ``--top-p`` and ``--seed``, checked at parse time."""
    p.add_argument("--temperature", type=temperature, default=0.0, metavar="T",
                   help="0 is greedy; otherwise sample")
    p.add_argument("--top-p", type=fraction, default=1.0, metavar="P", help="nucleus sampling mass")
    p.add_argument("--seed", type=seed, default=0, help="sampling seed, an integer in [0, 2**63)")


def add_output_args(p: argparse.ArgumentParser, plot: bool = True) -> None:
    """A measurement's outputs: ``--seed``, ``--json``, ``-o`` and (with ``plot``) ``--plot``."""
    p.add_argument("--seed", type=int, default=0, help="seed of weights, ids and draws (default: 0)")
    p.add_argument("--json", action="store_true", help="print every measurement as JSON")
    p.add_argument("-o", "--output", metavar="OUT.json", help="also write the JSON here (atomically)")
    if plot:
        p.add_argument("--plot", metavar="PNG", help="write the plot here (PNG)")
