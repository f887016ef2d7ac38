"""Edits in a person's own words: the synthetic edit kinds of the v2 mix and, for each, many
phrasings, some of them held out of training entirely for evaluation.

An edit is made once (:func:`make_edit`: the edited lines plus the *facts* a sentence can
name: line numbers, the old and new text, the enclosing function) and phrased afterwards
(:func:`phrase`), so one edit can be asked for in many ways. Line numbers are written
several ways (``line 14``, ``line #14``, ``L14``, ``the 14th line``); a line may be quoted
instead of numbered, a function or name named instead of a line. Templates are split per
kind: the last :data:`HELD_OUT_SHARE` of each kind's list never appears in training rows.
Model-free and seeded; nothing here imports torch.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

__all__ = ["HELD_OUT_SHARE", "KINDS_V2", "Edit", "kind_weights", "make_edit", "phrase", "templates"]

#: Share of each kind's templates held out of training (evaluation only).
HELD_OUT_SHARE = 0.25

_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{2,}\b")
_NUMBER = re.compile(r"\b\d+\b")
_STRING = re.compile(r"(\"[^\"\\\n]{2,40}\"|'[^'\\\n]{2,40}')")
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(->[^:]*)?:\s*(#.*)?$")
_KEYWORDS = frozenset("""and as assert async await break class continue def del elif else except
False finally for from global if import in is lambda None nonlocal not or pass raise return True
try while with yield self const char int void static struct return unsigned size_t bool auto
include define ifdef ifndef endif float double long short sizeof typedef enum the and cls""".split())


@dataclass
class Edit:
    """One edit of a document: the edited lines and what a sentence may name."""

    kind: str
    gold: list[str]
    facts: dict[str, Any] = field(default_factory=dict)


def _n(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


#: Ways to write "line k" (train ones first; the last is held out with the templates).
LINE_FORMS: tuple[Callable[[int], str], ...] = (
    lambda k: f"line {k}", lambda k: f"line {k}", lambda k: f"line #{k}", lambda k: f"L{k}",
    lambda k: f"the {_n(k)} line", lambda k: f"line no. {k}")


def _line(rng: random.Random, k: int) -> str:
    return rng.choice(LINE_FORMS)(k)


def _quote(line: str) -> str:
    return f"`{line.strip()}`"


# -- templates: kind -> list of format strings over the facts (+ {L}, {L2}: a line reference) --

_T: dict[str, list[str]] = {
    "replace": [
        "Replace {L} with this line:\n{new}", "Change {L} to:\n{new}", "{L} should read:\n{new}",
        "Swap out {L} for the following:\n{new}", "Replace the line {old_q} with:\n{new}",
        "Overwrite {L} so it says\n{new}", "Put this in place of {L}:\n{new}",
        "Rewrite {L} as:\n{new}"],
    "insert_after": [
        "Insert this line after {L}:\n{new}", "Add the following line below {L}:\n{new}",
        "After {L}, add:\n{new}", "Add a new line after the line {old_q}:\n{new}",
        "Right after {L} put this line:\n{new}", "Append this after {L}:\n{new}",
        "Below {L}, insert a line containing exactly\n{new}", "Following {L}, add a line:\n{new}"],
    "insert_before": [
        "Insert this line before {L}:\n{new}", "Add the following line above {L}:\n{new}",
        "Before {L}, add:\n{new}", "Add a new line before the line {old_q}:\n{new}",
        "Just above {L} put this line:\n{new}", "Put a line in front of {L}:\n{new}"],
    "delete": [
        "Delete {L}.", "Remove {L}.", "Get rid of {L}.", "Delete the line {old_q}.",
        "{L} is not needed; remove it.", "Drop {L}.", "Please delete {L} ({old_q}).",
        "Take out {L}."],
    "delete_span": [
        "Delete lines {k} to {m}.", "Remove lines {k}-{m}.", "Delete {L} through {L2}.",
        "Get rid of lines {k}..{m}.", "Drop everything from {L} to {L2}.",
        "Lines {k} to {m} should go.", "Remove {L} up to and including {L2}."],
    "change": [
        "In {L}, change `{old}` to `{new}`.", "On {L}, replace `{old}` with `{new}`.",
        "Change `{old}` to `{new}` in {L}.", "{L}: `{old}` should be `{new}`.",
        "In the line {old_q}, change `{old}` to `{new}`.", "Use `{new}` instead of `{old}` on {L}.",
        "Fix {L}: it should say `{new}` where it says `{old}`.", "On {L}, turn `{old}` into `{new}`."],
    "rename": [
        "Rename `{old}` to `{new}` everywhere.", "Rename `{old}` to `{new}`.",
        "Change every `{old}` to `{new}`.", "`{old}` should be called `{new}` throughout.",
        "Replace all occurrences of `{old}` with `{new}`.", "Use the name `{new}` instead of `{old}`.",
        "Rename the identifier `{old}` as `{new}` in the whole file.", "s/{old}/{new}/g"],
    "swap": [
        "Swap lines {k} and {m}.", "Swap {L} and {L2}.", "Exchange {L} with {L2}.",
        "Put {L2} before {L}.", "Lines {k} and {m} are in the wrong order; swap them.",
        "Move {L} below {L2}."],
    "identity": [
        "Keep the document unchanged.", "Leave the file as it is.", "No changes.",
        "Return the file unchanged.", "Nothing to change here.", "Do not modify anything."],
    "docstring": [
        "Add the docstring {doc} as the first line of the body of `{name}`.",
        "Give `{name}` the docstring {doc}.", "Document `{name}` with the docstring {doc}.",
        "Add a docstring to `{name}`: {doc}", "Put {doc} as the docstring of `{name}`.",
        "`{name}` needs a docstring; use {doc}."],
    "add_import": [
        "Add `{new}` at the top of the file.", "Add the import `{new}`.", "Import it: `{new}`.",
        "Add `{new}` to the imports.", "We need `{new}`; add it with the other imports.",
        "Put `{new}` before the first import."],
    "add_param": [
        "Add a parameter `{param}` to `{name}`, after its other parameters.",
        "`{name}` should also take `{param}` as its last argument.",
        "Give `{name}` a new last parameter `{param}`.", "Extend the signature of `{name}` with `{param}`.",
        "Append the argument `{param}` to the definition of `{name}`.",
        "Add `{param}` at the end of `{name}`'s parameter list."],
    "remove_param": [
        "Remove the parameter `{param}` from `{name}`'s definition.",
        "Drop the `{param}` argument from the signature of `{name}`.",
        "`{name}` should no longer take `{param}`; remove it from the def line.",
        "Delete `{param}` from the parameter list of `{name}`.",
        "Take `{param}` out of the signature of `{name}`.",
        "Remove `{param}` from `def {name}(...)`."],
    "comment_out": [
        "Comment out {L}.", "Comment out the line {old_q}.", "Disable {L} by commenting it out.",
        "Turn {L} into a comment.", "Put `{c}` in front of {L}.", "Comment {L} out."],
    "uncomment": [
        "Uncomment {L}.", "Uncomment the line {old_q}.", "Enable {L} again (remove the comment marker).",
        "Remove the `{c}` that comments out {L}.", "Make {L} live code again.", "Un-comment {L}."],
    "wrap_if": [
        "Wrap {L} in `if {cond}:`.", "Only run {L} when `{cond}`.", "Guard {L} with `if {cond}:`.",
        "Put {L} inside an `if {cond}:` block.", "Execute {L} only if `{cond}`.",
        "Make {L} conditional on `{cond}`."],
    "wrap_try": [
        "Wrap {L} in a try/except that catches `{exc}` and passes.",
        "Put {L} in `try:` with `except {exc}: pass`.", "Ignore `{exc}` raised by {L}.",
        "Surround {L} with try/except {exc} (do nothing on the error).",
        "Catch `{exc}` around {L} and ignore it.", "Make {L} tolerate `{exc}` with a try/except."],
    "change_string": [
        "Change the string {old} to {new}.", "In {L}, the text {old} should be {new}.",
        "Replace the string literal {old} with {new}.", "{old} should say {new}.",
        "Update the message {old} to {new}.", "Use {new} instead of {old}."],
    "new_file": [
        "Add the line `{new}`.", "Write `{new}` as the first line.",
        "The file is empty; put this line in it:\n{new}", "Start the file with this line:\n{new}",
        "Insert a new line containing exactly `{new}`.", "Add this line at the top of the file:\n{new}",
        "Fill the empty file with the line `{new}`.", "Create the file's first line:\n{new}"],
    "top_comment": [
        "Add a comment line '{new}' at the top of the file.", "Put the comment `{new}` on the first line.",
        "Add a comment saying {text} at the top of the file.", "Start the file with the comment:\n{new}",
        "Insert `{new}` as the file's first line.", "Add the header comment `{new}`.",
        "Begin the file with a comment line '{new}'.", "Prepend a comment that says {text}."],
}
#: The v2 synthetic edit kinds and their shares among synthetic edits.
KINDS_V2: dict[str, float] = {
    "replace": 0.09, "insert_after": 0.08, "insert_before": 0.05, "delete": 0.07, "delete_span": 0.04,
    "change": 0.10, "rename": 0.08, "swap": 0.04, "identity": 0.03, "docstring": 0.06, "add_import": 0.05,
    "add_param": 0.05, "remove_param": 0.04, "comment_out": 0.05, "uncomment": 0.03, "wrap_if": 0.04,
    "wrap_try": 0.04, "change_string": 0.06,
    # An empty file asked for its first line (the document is replaced by ""). Weight 0 by
    # default, last in the table, so the shipped recipes draw the rows they drew before;
    # `--kinds new_file:W` adds it (a continuation otherwise forgets empty files, docs/learn.md).
    "new_file": 0.0,
    # A comment line at the top of the file, the file empty half the time (weight 0, last).
    "top_comment": 0.0}
#: The one sentence per kind of the first mix (the "templated" evaluation subset).
V1_TEMPLATE = {"replace": 0, "insert_after": 0, "insert_before": 0, "delete": 0, "delete_span": 0,
               "change": 0, "rename": 0, "swap": 0, "identity": 0}


def kind_weights(overrides: Iterable[tuple[str, float]] = ()) -> dict[str, float]:
    """:data:`KINDS_V2` with ``overrides`` (kind, weight) applied; :class:`ValueError`
    naming the unknown kinds, so the library and the CLI refuse the same mistakes."""
    overrides = dict(overrides)
    unknown = sorted(set(overrides) - set(KINDS_V2))
    if unknown:
        raise ValueError(f"unknown edit kinds {', '.join(unknown)} (known: {', '.join(KINDS_V2)})")
    return {**KINDS_V2, **overrides}


def templates(kind: str, held_out: bool) -> list[str]:
    """``kind``'s training templates, or (``held_out``) those kept for evaluation only."""
    every = _T[kind]
    cut = len(every) - max(1, round(len(every) * HELD_OUT_SHARE))
    return every[cut:] if held_out else every[:cut]


def phrase(edit: Edit, rng: random.Random, variant: str = "train") -> tuple[str, str]:
    """The instruction for ``edit`` and the template it came from: ``variant`` is ``"templated"`` (the first mix's one
    sentence, line numbers written ``line k``), ``"train"`` or ``"held_out"``.

    Templates that quote a line are skipped when the quoted line occurs twice (ambiguous).
    """
    facts = edit.facts
    if variant == "templated":
        chosen = _T[edit.kind][V1_TEMPLATE.get(edit.kind, 0)]
        return chosen.format(L=f"line {facts.get('k')}", L2=f"line {facts.get('m')}", **facts), chosen
    options = templates(edit.kind, variant == "held_out")
    if not facts.get("quotable", True):
        options = [t for t in options if "{old_q}" not in t] or options
    chosen = rng.choice(options)
    forms = LINE_FORMS[:-1] if variant == "train" else LINE_FORMS
    form = rng.choice(forms)
    return chosen.format(L=form(facts["k"]) if "k" in facts else "",
                         L2=form(facts["m"]) if "m" in facts else "", **facts), chosen


# -- making the edits ---------------------------------------------------------------------

def _pick(rng: random.Random, lines: Sequence[str], ok: Callable[[str], bool] = lambda s: bool(s.strip())) -> int | None:
    choices = [i for i, line in enumerate(lines) if ok(line)]
    return rng.choice(choices) if choices else None


def _other_name(rng: random.Random, old: str) -> str:
    suffix = rng.choice(("_new", "_v2", "_tmp", "_count", "_value", "2", "_x", "_list", "_map"))
    prefix = rng.choice(("", "", "new_", "my_", "old_", "the_"))
    return prefix + old + suffix


def _new_line(rng: random.Random, pool: Sequence[str], avoid: Sequence[str]) -> str:
    for _ in range(50):
        line = rng.choice(pool)
        if line.strip() and line not in avoid:
            return line
    return "pass"


def _quotable(lines: Sequence[str], i: int) -> bool:
    return sum(1 for x in lines if x.strip() == lines[i].strip()) == 1


_COMMENT = {"python": "#", "c": "//", "prose": "<!--"}
_DOCS = ("Return the result.", "Compute the value.", "Helper for the caller.", "Load the data.",
         "Check the input.", "Build the output.", "Parse the text.", "Run one step.")
_IMPORTS = {"python": ("import os", "import sys", "import re", "import json", "from typing import Any",
                       "import logging", "from pathlib import Path", "import math"),
            "c": ("#include <stdio.h>", "#include <string.h>", "#include <stdlib.h>", "#include <stdint.h>",
                  "#include <assert.h>", "#include <math.h>")}
_NOTES = ("hi", "TODO", "TODO: tests", "helpers", "Copyright 2026 the authors", "SPDX-License-Identifier: MIT",
          "generated file, do not edit", "utilities for parsing", "FIXME", "config", "main entry point")
_PARAMS = ("verbose=False", "timeout=None", "strict=True", "name=None", "limit=10", "debug=False")
_CONDS = ("verbose", "not quiet", "debug", "enabled", "x is not None", "count > 0")
_EXCS = ("ValueError", "KeyError", "OSError", "Exception", "TypeError")


def pick_change(rng: random.Random, lines: Sequence[str], keywords: frozenset[str] = _KEYWORDS,
                namer: Callable[[random.Random, str], str] = _other_name) -> tuple[int, str, str] | None:
    """A ``change`` edit: ``(line index, old word or number, new one)``, the old one
    occurring once in its line and not in ``keywords``; ``None`` when no line has one.
    (The first mix passes its own keywords and namer, so that its shipped adapters' rows
    stay exactly as they were.)"""
    i = _pick(rng, lines, lambda s: bool(_IDENT.search(s) or _NUMBER.search(s)))
    if i is None:
        return None
    words = [m.group(0) for m in _IDENT.finditer(lines[i]) if m.group(0) not in keywords]
    numbers = [m.group(0) for m in _NUMBER.finditer(lines[i])]
    candidates = [w for w in words + numbers if lines[i].count(w) == 1]
    if not candidates:
        return None
    old = rng.choice(candidates)
    return i, old, str(int(old) + rng.randint(1, 9)) if old.isdigit() else namer(rng, old)


def pick_rename(rng: random.Random, lines: Sequence[str], most: int = 12,
                keywords: frozenset[str] = _KEYWORDS,
                namer: Callable[[random.Random, str], str] = _other_name) -> tuple[str, str, list[str]] | None:
    """A ``rename`` edit: ``(old name, new name, renamed lines)``, the old name one that
    occurs 1..``most`` times and is not in ``keywords``; ``None`` when there is none. (The
    first mix passes its own ``most``, keywords and namer: its rows stay as they were.)"""
    counts: dict[str, int] = {}
    for line in lines:
        for m in _IDENT.finditer(line):
            counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    names = sorted(w for w, c in counts.items() if 1 <= c <= most and w not in keywords)
    if not names:
        return None
    old = rng.choice(names)
    new = namer(rng, old)
    pattern = re.compile(rf"\b{re.escape(old)}\b")
    return old, new, [pattern.sub(new, line) for line in lines]


def make_edit(kind: str, rng: random.Random, lines: list[str], pool: Sequence[str], corpus: str) -> Edit | None:
    """One edit of ``kind`` on ``lines`` (``pool``: real lines of the same corpus for new
    text); ``None`` when this document has no room for it."""
    n = len(lines)
    py = corpus == "python"
    if kind == "new_file":  # only an empty document; a backtick would break the quoting templates
        new = _new_line(rng, [line.strip() for line in pool if "`" not in line], ())
        return Edit(kind, [new], {"new": new}) if n == 0 else None
    if kind == "top_comment":
        c = _COMMENT.get(corpus, "#")
        # the corpus's own comments, or a note; no quote marks, which would break the templates
        own = [t for t in (s.strip().removeprefix(c).removesuffix("-->").strip() for s in pool
                           if s.strip().startswith(c)) if t[:1].isalnum() and not set("`'\"") & set(t)]
        text = rng.choice(own) if own and rng.random() < 0.5 else rng.choice(_NOTES)
        new = f"<!-- {text} -->" if c == "<!--" else f"{c} {text}"
        return Edit(kind, [new] + list(lines), {"new": new, "text": text})
    if kind == "identity":
        return Edit(kind, list(lines))
    if kind in ("replace", "insert_after", "insert_before", "delete", "comment_out"):
        i = _pick(rng, lines, (lambda s: bool(s.strip()) and not s.lstrip().startswith(("#", "//", "<!--")))
                  if kind == "comment_out" else (lambda s: bool(s.strip())))
        if i is None:
            return None
        facts: dict[str, Any] = {"k": i + 1, "old_q": _quote(lines[i]), "quotable": _quotable(lines, i)}
        if kind == "delete":
            return Edit(kind, lines[:i] + lines[i + 1:], facts)
        if kind == "comment_out":
            c = _COMMENT.get(corpus, "#")
            if c == "<!--":
                new = f"{_indent(lines[i])}<!-- {lines[i].strip()} -->"
            else:
                new = f"{_indent(lines[i])}{c} {lines[i].lstrip()}"
            return Edit(kind, lines[:i] + [new] + lines[i + 1:], {**facts, "c": c})
        new = _new_line(rng, pool, lines)
        facts["new"] = new
        if kind == "replace":
            return Edit(kind, lines[:i] + [new] + lines[i + 1:], facts)
        if kind == "insert_after":
            return Edit(kind, lines[:i + 1] + [new] + lines[i + 1:], facts)
        return Edit(kind, lines[:i] + [new] + lines[i:], facts)
    if kind == "uncomment":
        c = _COMMENT.get(corpus, "#")
        if c == "<!--":
            return None
        i = _pick(rng, lines, lambda s: s.lstrip().startswith(c + " ") and len(s.strip()) > len(c) + 3)
        if i is None:
            return None
        body = lines[i].lstrip()[len(c) + 1:]
        return Edit(kind, lines[:i] + [_indent(lines[i]) + body] + lines[i + 1:],
                    {"k": i + 1, "old_q": _quote(lines[i]), "quotable": _quotable(lines, i), "c": c})
    if kind == "delete_span":
        span = rng.choice((2, 2, 3, 4, 6))
        if n <= span + 1:
            return None
        i = rng.randrange(0, n - span + 1)
        return Edit(kind, lines[:i] + lines[i + span:], {"k": i + 1, "m": i + span})
    if kind == "change":
        picked = pick_change(rng, lines)
        if picked is None:
            return None
        i, old, new = picked
        return Edit(kind, lines[:i] + [lines[i].replace(old, new)] + lines[i + 1:],
                    {"k": i + 1, "old": old, "new": new, "old_q": _quote(lines[i]), "quotable": _quotable(lines, i)})
    if kind == "rename":
        picked = pick_rename(rng, lines)
        if picked is None:
            return None
        old, new, renamed = picked
        return Edit(kind, renamed, {"old": old, "new": new})
    if kind == "swap":
        i = _pick(rng, lines[:-1])
        if i is None or lines[i] == lines[i + 1] or not lines[i + 1].strip():
            return None
        return Edit(kind, lines[:i] + [lines[i + 1], lines[i]] + lines[i + 2:], {"k": i + 1, "m": i + 2})
    if kind == "change_string":
        i = _pick(rng, lines, lambda s: bool(_STRING.search(s)))
        if i is None:
            return None
        match = _STRING.search(lines[i])
        old = match.group(0)
        if lines[i].count(old) != 1 or sum(old in x for x in lines) != 1:
            return None
        quote = old[0]
        inner = old[1:-1]
        new = quote + rng.choice((inner.upper(), inner + " (updated)", inner.replace(" ", "_"),
                                  "new " + inner, inner.capitalize() + "!")) + quote
        if new == old:
            return None
        return Edit(kind, lines[:i] + [lines[i].replace(old, new)] + lines[i + 1:], {"k": i + 1, "old": old, "new": new})
    if kind == "add_import":
        if corpus not in _IMPORTS:
            return None
        new = rng.choice([x for x in _IMPORTS[corpus] if x not in lines] or [""])
        if not new:
            return None
        prefix = ("import ", "from ") if py else ("#include",)
        first = next((i for i, line in enumerate(lines) if line.startswith(prefix)), None)
        if first is None:
            return None
        return Edit(kind, lines[:first] + [new] + lines[first:], {"new": new, "k": first + 1})
    if not py:
        return None
    defs = [(i, m) for i, line in enumerate(lines) if (m := _DEF.match(line))]
    names = [m.group(2) for _, m in defs]
    defs = [(i, m) for i, m in defs if names.count(m.group(2)) == 1]
    if kind in ("docstring", "add_param", "remove_param") and not defs:
        return None
    if kind == "docstring":
        i, m = rng.choice(defs)
        if i + 1 >= n:
            return None
        body = lines[i + 1]
        if not body.strip() or body.lstrip().startswith(('"""', "'''", '"', "'")):
            return None
        doc = f'"""{rng.choice(_DOCS)}"""'
        return Edit(kind, lines[:i + 1] + [_indent(body) + doc] + lines[i + 1:], {"name": m.group(2), "doc": doc, "k": i + 1})
    if kind == "add_param":
        i, m = rng.choice(defs)
        params = m.group(3).strip()
        if "*" in params:  # a parameter after *args or ** changes its meaning
            return None
        param = rng.choice(_PARAMS)
        new_params = f"{params}, {param}" if params else param
        new = lines[i].replace(f"({m.group(3)})", f"({new_params})", 1)
        return Edit(kind, lines[:i] + [new] + lines[i + 1:], {"name": m.group(2), "param": param, "k": i + 1})
    if kind == "remove_param":
        i, m = rng.choice(defs)
        params = [p.strip() for p in m.group(3).split(",") if p.strip()]
        removable = [p for p in params if p not in ("self", "cls") and not p.startswith("*")]
        if len(params) < 2 or not removable:
            return None
        gone = rng.choice(removable)
        new = lines[i].replace(f"({m.group(3)})", "(" + ", ".join(p for p in params if p != gone) + ")", 1)
        return Edit(kind, lines[:i] + [new] + lines[i + 1:], {"name": m.group(2), "param": gone.split("=")[0].split(":")[0].strip(), "k": i + 1})
    if kind in ("wrap_if", "wrap_try"):
        i = _pick(rng, lines, lambda s: bool(s.strip()) and not s.rstrip().endswith((":", "\\", ",", "(", "[", "{"))
                  and not s.lstrip().startswith(("#", "@", "return", "def ", "class ", "else", "elif", "except",
                                                 "finally", ")", "]", "}")))
        if i is None:
            return None
        ind = _indent(lines[i])
        if i > 0 and lines[i - 1].rstrip().endswith(("\\", ",", "(")):
            return None
        inner = ind + "    " + lines[i].lstrip()
        if kind == "wrap_if":
            cond = rng.choice(_CONDS)
            new = [f"{ind}if {cond}:", inner]
            facts = {"k": i + 1, "cond": cond}
        else:
            exc = rng.choice(_EXCS)
            new = [f"{ind}try:", inner, f"{ind}except {exc}:", f"{ind}    pass"]
            facts = {"k": i + 1, "exc": exc}
        return Edit(kind, lines[:i] + new + lines[i + 1:], facts)
    raise ValueError(f"unknown edit kind {kind!r}")


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]
