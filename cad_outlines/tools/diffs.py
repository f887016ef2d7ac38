"""The project's one unified-diff writer.

``difflib.unified_diff`` alone writes a broken diff when a file does not end with a
newline: the last line runs into the next hunk line (``-c = 3+c = 4``), and GNU
``patch`` and ``git apply`` reject it. This writer splits at ``"\\n"`` only (so
``"\\r\\n"`` stays part of each line, byte for byte) and closes a last line without a
newline with the ``\\ No newline at end of file`` marker both tools read.
"""

from __future__ import annotations

import os

import difflib

from ..language.syntax import split_lines

#: The marker line ``diff``, ``patch`` and ``git apply`` use for a missing final newline.
NO_NEWLINE = "\\ No newline at end of file\n"


def split_keepends(text: str) -> list[str]:
    """Lines of ``text`` with their ``"\\n"``: the copy units of
    :func:`~cad_outlines.language.syntax.split_lines`, a final empty one dropped.

    ``str.splitlines`` would also split at ``"\\r"``, U+2028, U+0085, ..., which a
    document may hold inside a line.
    """
    parts = split_lines(text)
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def unified_diff(before: str, after: str, from_file: str = "a/file", to_file: str = "b/file",
                 context: int = 3) -> str:
    """A unified diff from ``before`` to ``after`` that ``patch`` and ``git apply`` accept.

    Parameters
    ----------
    before, after
        The two texts.
    from_file, to_file
        Names in the ``---``/``+++`` headers; with ``a/`` and ``b/`` prefixes the diff
        applies with ``patch -p1`` and ``git apply``.
    context
        Lines of context around each change.

    Returns
    -------
    str
        The diff; ``""`` when the texts are equal.
    """
    out = []
    for line in difflib.unified_diff(split_keepends(before), split_keepends(after),
                                     from_file, to_file, n=context):
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)


def _outside(path: str) -> tuple[str, bool]:
    """``path`` resolved through links, relative to the current folder; and whether it lies outside."""
    real = os.path.realpath(path)
    rel = os.path.relpath(real, os.getcwd())
    return rel, rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel)


def patch_header(prefix: str, path: str) -> str:
    """The diff header of ``path`` that `patch -p1` and `git apply` accept.

    Relative to the current folder, through symbolic links (patch refuses to patch a
    link: the header names its target). A file outside the current folder gets its bare
    name: the diff then applies from the file's own folder (:func:`patch_note` says so).
    """
    rel, outside = _outside(path)
    if outside:
        rel = os.path.basename(os.path.realpath(path))
    return f"{prefix}/{rel.replace(os.sep, '/')}"


def patch_note(path: str) -> str | None:
    """What a user must know to apply the diff of ``path``, when its header is not ``path``."""
    rel, outside = _outside(path)
    if outside:
        return f"{path} is outside the current folder: apply the diff from {os.path.dirname(os.path.realpath(path))}"
    if os.path.islink(path):
        return f"{path} is a symbolic link: the diff names its target {rel}"
    return None


def line_summary(before: str, after: str) -> dict[str, int]:
    """Lines ``kept``, ``added`` and ``removed`` from ``before`` to ``after``.

    Lines are counted as :func:`split_keepends` splits them (a final newline ends the
    last line, it does not start another); the alignment is the line oracle's
    (:func:`cad_outlines.language.oracle.line_matches`), which stays fast on repeated lines.
    """
    from ..language.oracle import line_matches

    # Compared without their line ends: a last line copied without its newline is kept.
    a = [line.rstrip("\r\n") for line in split_keepends(before)]
    b = [line.rstrip("\r\n") for line in split_keepends(after)]
    kept = sum(size for _, _, size in line_matches(a, b))
    return {"kept": kept, "added": len(b) - kept, "removed": len(a) - kept}
