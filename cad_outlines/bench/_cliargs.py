"""What only the ``cad-outlines bench`` command modules share: list-valued options and
report output (the argument groups live in :mod:`cad_outlines.arguments`)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from cad_outlines.arguments import UsageError

__all__ = ["draw_plot", "emit", "int_list", "name_list"]


def int_list(option: str, text: str, minimum: int | None = None) -> tuple[int, ...]:
    """The integers of a comma-separated option value, each at least ``minimum``."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"{option} takes comma-separated integers, got {text!r}") from None
    if minimum is not None and min(values) < minimum:
        raise UsageError(f"{option} values must be >= {minimum}, got {text!r}")
    return values


def emit(args: argparse.Namespace, report: dict, table: str) -> None:
    """Write ``-o`` and print the table (or, with ``--json``, the report)."""
    import json

    from cad_outlines.bench._common import write_json

    if args.output:
        write_json(args.output, report)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else table)


def draw_plot(args: argparse.Namespace, plot: Callable[..., None], *plot_args: Any, **kwargs: Any) -> None:
    """Draw ``--plot`` last, after the JSON is written, so a missing matplotlib loses nothing."""
    from cad_outlines.errors import MissingDependencyError

    if not args.plot:
        return
    try:
        plot(*plot_args, args.plot, **kwargs)
    except MissingDependencyError as err:
        raise UsageError(f"--plot: {err} (the JSON and the table were still written)") from None


def name_list(option: str, text: str, known: Any) -> tuple[str, ...]:
    """The names of a comma-separated option value, each one of ``known``."""
    names = tuple(n for n in text.split(",") if n)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"{option}: unknown value(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return names
