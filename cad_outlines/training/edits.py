"""The training and evaluation mix for a real model: explicit edits over real files.

A 135M-parameter model cannot be taught to edit whole 400-line files on a CPU in an hour
(a row costs ~9 CPU-seconds per 1,000 tokens under LoRA), so each case is a *window* of
a real file (:data:`MIN_LINES`..:data:`MAX_LINES` consecutive lines of a document of
the project's commit corpora, ``commits_*.jsonl``) with one edit on it:

========================  ===============================================================
kind                      instruction (``k``, ``m``: line numbers of the numbered view)
========================  ===============================================================
``replace``               ``Replace line k with this line:`` + the new line
``insert_after``          ``Insert this line after line k:`` + the new line
``insert_before``         ``Insert this line before line k:`` + the new line
``delete``                ``Delete line k.`` / ``Delete lines k to m.``
``change``                ``In line k, change `OLD` to `NEW`.``
``rename``                ``Rename `OLD` to `NEW` everywhere.``
``swap``                  ``Swap lines k and k+1.``
``identity``              ``Keep the document unchanged.`` (copy warm-up)
``commit``                the commit's subject, on a window around the commit's real change
========================  ===============================================================

New lines come from other files of the same corpus and split, so they are real code or
prose. The split is **by file**: a file (``source`` + ``path``) is in the eval split when
its hash says so (:func:`split_of`), and every window of it goes there; a model is never
evaluated on a file it was trained on. Everything is seeded; nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import random
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..language.syntax import split_lines
from .corpus import Case
from .phrasings import pick_change, pick_rename

__all__ = ["KINDS", "MixConfig", "MixV2Config", "eval_sets_v2", "make_mix", "make_mix_v2", "split_of"]

MIN_LINES, MAX_LINES = 8, 24
#: Longest line a window may hold (characters): long lines make long rows.
MAX_LINE_CHARS = 120
#: The edit kinds and their shares of the mix.
KINDS: dict[str, float] = {"replace": 0.14, "insert_after": 0.13, "insert_before": 0.07,
                           "delete": 0.13, "change": 0.14, "rename": 0.10, "swap": 0.07,
                           "identity": 0.05, "commit": 0.17}
EVAL_SHARE = 0.2
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{2,}\b")
_NUMBER = re.compile(r"\b\d+\b")
_KEYWORDS = frozenset("""and as assert async await break class continue def del elif else except
False finally for from global if import in is lambda None nonlocal not or pass raise return True
try while with yield self const char int void static struct return unsigned size_t bool auto
include define ifdef ifndef endif float double long short sizeof typedef enum the and""".split())


@dataclass(frozen=True)
class MixConfig:
    """What determines a mix (recorded with every training run)."""

    seed: int = 0
    cases: int = 1000
    split: str = "train"  # "train" or "eval"
    kinds: tuple[str, ...] = tuple(KINDS)


def split_of(source: str, path: str) -> str:
    """``"eval"`` for about :data:`EVAL_SHARE` of the files, by a hash of their name."""
    digest = hashlib.sha256(f"{source}:{path}".encode()).digest()
    return "eval" if digest[0] < 256 * EVAL_SHARE else "train"


@dataclass(frozen=True)
class _File:
    corpus: str
    key: str
    lines: list[str]  # split_lines of the doc: the last one is "" for a file ending in "\n"


def _files(records: Iterable[dict], split: str) -> list[_File]:
    seen: dict[str, _File] = {}
    for r in records:
        if split_of(r.get("source", ""), r.get("path", r["id"])) != split:
            continue
        key = f"{r.get('source', '')}:{r.get('path', r['id'])}"
        if key not in seen:
            seen[key] = _File(r["id"].rsplit("-", 1)[0], key, split_lines(r["doc"]))
    return list(seen.values())


def _sources(records_by_corpus: dict[str, list[dict]], split: str) -> tuple[
        list[str], dict[str, list[_File]], dict[str, list[str]], dict[str, list[dict]]]:
    """What a mix of ``split`` draws from, per corpus: its files, a pool of real lines for
    new text, and the commits that carry an instruction."""
    corpora = sorted(records_by_corpus)
    files = {c: _files(records_by_corpus[c], split) for c in corpora}
    pools = {c: [line for f in files[c] for line in f.lines if line.strip() and len(line) <= MAX_LINE_CHARS]
             for c in corpora}
    commits = {c: [r for r in records_by_corpus[c]
                   if split_of(r.get("source", ""), r.get("path", r["id"])) == split and r.get("instruction")]
               for c in corpora}
    return corpora, files, pools, commits


def _window(rng: random.Random, f: _File) -> list[str] | None:
    body = f.lines[:-1] if f.lines and f.lines[-1] == "" else f.lines
    size = rng.randint(MIN_LINES, MAX_LINES)
    if len(body) < size:
        return None
    for _ in range(8):
        start = rng.randint(0, len(body) - size)
        window = body[start:start + size]
        if all(len(line) <= MAX_LINE_CHARS for line in window) and sum(bool(x.strip()) for x in window) >= size // 2:
            return window
    return None


def _text(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def _new_line(rng: random.Random, pool: list[str], avoid: Sequence[str]) -> str:
    while True:
        line = rng.choice(pool)
        if line.strip() and line not in avoid:
            return line


def _pick(rng: random.Random, lines: list[str], ok=lambda line: bool(line.strip())) -> int | None:
    choices = [i for i, line in enumerate(lines) if ok(line)]
    return rng.choice(choices) if choices else None


def _synthetic(kind: str, rng: random.Random, lines: list[str], pool: list[str]) -> tuple[str, list[str]] | None:
    """``(instruction, edited lines)`` for one edit of ``kind``, or None when the window has no room."""
    n = len(lines)
    if kind == "identity":
        return "Keep the document unchanged.", lines
    if kind in ("replace", "insert_after", "insert_before"):
        i = _pick(rng, lines) if kind == "replace" else rng.randrange(n)
        if i is None:
            return None
        new = _new_line(rng, pool, lines)
        if kind == "replace":
            return f"Replace line {i + 1} with this line:\n{new}", lines[:i] + [new] + lines[i + 1:]
        if kind == "insert_after":
            return f"Insert this line after line {i + 1}:\n{new}", lines[:i + 1] + [new] + lines[i + 1:]
        return f"Insert this line before line {i + 1}:\n{new}", lines[:i] + [new] + lines[i:]
    if kind == "delete":
        span = rng.choice((1, 1, 2, 3))
        i = rng.randrange(0, n - span + 1)
        if span == 1:
            return f"Delete line {i + 1}.", lines[:i] + lines[i + 1:]
        return f"Delete lines {i + 1} to {i + span}.", lines[:i] + lines[i + span:]
    if kind == "change":
        picked = pick_change(rng, lines, keywords=_KEYWORDS, namer=_other_name)
        if picked is None:
            return None
        i, old, new = picked
        return (f"In line {i + 1}, change `{old}` to `{new}`.",
                lines[:i] + [lines[i].replace(old, new)] + lines[i + 1:])
    if kind == "rename":
        picked = pick_rename(rng, lines, most=4, keywords=_KEYWORDS, namer=_other_name)
        if picked is None:
            return None
        old, new, renamed = picked
        return f"Rename `{old}` to `{new}` everywhere.", renamed
    if kind == "swap":
        i = _pick(rng, lines[:-1], lambda line: bool(line.strip()))
        if i is None or lines[i] == lines[i + 1] or not lines[i + 1].strip():
            return None
        return f"Swap lines {i + 1} and {i + 2}.", lines[:i] + [lines[i + 1], lines[i]] + lines[i + 2:]
    raise ValueError(f"unknown edit kind {kind!r}")


def _other_name(rng: random.Random, old: str) -> str:
    suffix = rng.choice(("_new", "_v2", "_tmp", "_count", "_value", "2", "_x"))
    prefix = rng.choice(("", "", "new_", "my_", "old_"))
    return prefix + old + suffix


def _commit_window(record: dict, context: int = 4) -> tuple[list[str], list[str]] | None:
    """The doc and gold lines around a commit's change, when that change is small."""
    a, b = split_lines(record["doc"]), split_lines(record["gold"])
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops:
        return None
    i1, i2 = ops[0][1], ops[-1][2]  # the first change starts at the same line in both texts
    j2 = ops[-1][4]
    lo = max(0, i1 - context)
    hi_a, hi_b = min(len(a), i2 + context), min(len(b), j2 + context)
    # the same number of unchanged lines after the change in both texts
    tail = min(hi_a - i2, hi_b - j2)
    doc, gold = a[lo:i2 + tail], b[lo:j2 + tail]
    if doc and doc[-1] == "" and gold and gold[-1] == "":
        doc, gold = doc[:-1], gold[:-1]
    if not (MIN_LINES // 2 <= len(doc) <= MAX_LINES + 6 and len(gold) <= MAX_LINES + 6):
        return None
    if any(len(line) > MAX_LINE_CHARS for line in doc + gold):
        return None
    return doc, gold


def make_mix(records_by_corpus: dict[str, list[dict]], cfg: MixConfig) -> list[Case]:
    """``cfg.cases`` edit cases of ``cfg.split`` (``meta``: ``kind``, ``corpus``, ``file``, ``instruction``).

    Parameters
    ----------
    records_by_corpus
        Corpus name (e.g. ``"python"``) -> its JSON records (``id``, ``doc``, ``gold``,
        ``source``, ``path``, ``instruction``).
    cfg
        Seed, size, split and kinds.
    """
    rng = random.Random(f"{cfg.seed}:{cfg.split}")
    corpora, files, pools, commits = _sources(records_by_corpus, cfg.split)
    kinds = [k for k in KINDS if k in cfg.kinds]
    weights = [KINDS[k] for k in kinds]
    cases: list[Case] = []
    seen: set[tuple[str, str]] = set()
    attempts = 0
    while len(cases) < cfg.cases:
        attempts += 1
        if attempts > cfg.cases * 50:
            raise ValueError(f"could not make {cfg.cases} cases from these corpora ({len(cases)} made)")
        kind = rng.choices(kinds, weights)[0]
        corpus = rng.choice(corpora)
        if kind == "commit":
            if not commits[corpus]:
                continue
            record = rng.choice(commits[corpus])
            window = _commit_window(record)
            if window is None:
                continue
            doc_lines, gold_lines = window
            instruction = record["instruction"].strip()
            key = f"{record.get('source', '')}:{record.get('path', record['id'])}"
        else:
            if not files[corpus]:
                continue
            f = rng.choice(files[corpus])
            doc_lines = _window(rng, f)
            if doc_lines is None:
                continue
            made = _synthetic(kind, rng, doc_lines, pools[corpus])
            if made is None:
                continue
            instruction, gold_lines = made
            key = f.key
        doc, gold = _text(doc_lines), _text(gold_lines)
        if (doc, instruction) in seen:
            continue
        seen.add((doc, instruction))
        case_id = f"{cfg.split}-{len(cases):04d}-{kind}"
        cases.append(Case(case_id, doc, gold, {"kind": kind, "corpus": corpus, "file": key,
                                               "instruction": instruction}))
    return cases


def commit_cases(records_by_corpus: dict[str, list[dict]], split: str = "eval") -> list[Case]:
    """Every real commit of ``split`` whose change fits a window (:func:`_commit_window`),
    as a case whose instruction is the commit's subject."""
    cases: list[Case] = []
    for corpus in sorted(records_by_corpus):
        for r in records_by_corpus[corpus]:
            key = f"{r.get('source', '')}:{r.get('path', r['id'])}"
            window = _commit_window(r) if split_of(r.get("source", ""), r.get("path", r["id"])) == split else None
            if window is None or not r.get("instruction"):
                continue
            doc, gold = window
            cases.append(Case(f"{split}-commit-{r['id']}", _text(doc), _text(gold),
                              {"kind": "commit", "corpus": corpus, "file": key,
                               "instruction": r["instruction"].strip()}))
    return cases


# -- mix v2: whole files, a person's own words, lazy snippets, real commits -------------------

#: Document length buckets of the v2 mix (lines, inclusive) and their shares.
BUCKETS_V2: tuple[tuple[int, int, float], ...] = ((8, 50, 0.45), (51, 150, 0.30), (151, 400, 0.25))
#: How a v2 case asks for its edit, and the shares: ``words`` (a training phrasing),
#: ``templated`` (the first mix's sentence), ``snippet`` (a lazy update snippet, the
#: fast-apply contract), ``subject`` (a real commit's subject line; commits only).
FORMS_V2: dict[str, float] = {"words": 0.45, "templated": 0.10, "snippet": 0.30, "subject": 0.15}
#: Share of the v2 mix that edits real commits (their instruction: snippet or subject).
COMMIT_SHARE_V2 = 0.25
#: Longest line a v2 document may hold (whole files keep their long lines up to this).
MAX_LINE_CHARS_V2 = 200


@dataclass(frozen=True)
class MixV2Config:
    """What determines a v2 mix (recorded with every training run).

    ``forms`` may name ``held_out`` (phrasings never used in training) for evaluation sets.
    """

    seed: int = 0
    cases: int = 2000
    split: str = "train"
    buckets: tuple[tuple[int, int, float], ...] = BUCKETS_V2
    forms: tuple[tuple[str, float], ...] = tuple(FORMS_V2.items())
    commit_share: float = COMMIT_SHARE_V2
    snippet_context: int = 2
    version: int = 2
    #: weights of synthetic edit kinds that differ from :data:`~.phrasings.KINDS_V2` (a mix
    #: aimed at the kinds a model misses); empty: the v2 weights
    kinds: tuple[tuple[str, float], ...] = ()


def _body(f: _File) -> list[str]:
    return f.lines[:-1] if f.lines and f.lines[-1] == "" else f.lines


def _document(rng: random.Random, f: _File, lo: int, hi: int) -> list[str] | None:
    """The whole file when its length is in ``lo..hi``; a window of a longer file (as long
    as the bucket allows); ``None`` for a shorter file or one with over-long lines."""
    body = _body(f)
    if len(body) < lo:
        return None
    if len(body) <= hi:
        doc = list(body)
    else:
        size = rng.randint(lo, hi)
        start = 0 if rng.random() < 0.3 else rng.randint(0, len(body) - size)
        doc = body[start:start + size]
    if any(len(line) > MAX_LINE_CHARS_V2 for line in doc) or sum(bool(x.strip()) for x in doc) < len(doc) // 2:
        return None
    return doc


def _commit_region(rng: random.Random, record: dict, lo: int, hi: int) -> tuple[list[str], list[str]] | None:
    """A real commit as a document of ``lo..hi`` lines: the whole file when it fits,
    else a window around the change with the same unchanged tail in both texts."""
    a, b = split_lines(record["doc"]), split_lines(record["gold"])
    if a and a[-1] == "" and b and b[-1] == "":
        a, b = a[:-1], b[:-1]
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops or abs(len(a) - len(b)) > hi // 2:
        return None
    if lo <= len(a) <= hi and len(b) <= hi + 20:
        doc, gold = a, b
    else:
        i1, i2, j2 = ops[0][1], ops[-1][2], ops[-1][4]
        if i2 - i1 > hi // 2 or len(a) < lo:
            return None
        size = rng.randint(max(lo, i2 - i1 + 4), hi)
        before = rng.randint(0, max(0, min(i1, size - (i2 - i1))))
        start = max(0, i1 - before)
        tail = max(0, min(len(a) - i2, len(b) - j2, size - (i2 - start)))
        doc, gold = a[start:i2 + tail], b[start:j2 + tail]
        if not lo <= len(doc) <= hi:
            return None
    if any(len(line) > MAX_LINE_CHARS_V2 for line in doc + gold):
        return None
    return doc, gold


def _suffix_path(key: str) -> str:
    return key.split(":", 1)[-1]


def make_mix_v2(records_by_corpus: dict[str, list[dict]], cfg: MixV2Config, *,
                allow_fewer: bool = False) -> list[Case]:
    """``cfg.cases`` v2 edit cases of ``cfg.split``: documents of every length bucket
    (whole files where they fit), synthetic edits of :data:`~.phrasings.KINDS_V2` asked in
    a person's words, templated or as a lazy snippet, and real commits asked by subject
    or snippet. ``meta``: ``kind``, ``corpus``, ``file``, ``instruction``, ``form``,
    ``lines`` (the document's), ``bucket`` (``"lo-hi"``), ``snippet`` (when the form is one),
    ``template`` (the phrasing's). ``allow_fewer``: return what could be made instead of
    raising when the corpora run out of room (evaluation subsets of a small split).
    """
    from ..language.snippets import make_snippet, update_instruction
    from .phrasings import kind_weights, make_edit, phrase

    rng = random.Random(f"v2:{cfg.seed}:{cfg.split}")
    corpora, files, pools, commits = _sources(records_by_corpus, cfg.split)
    weights = kind_weights(cfg.kinds)
    kinds, kind_weights = list(weights), list(weights.values())
    forms = dict(cfg.forms)
    synthetic_forms = [f for f in forms if f != "subject"]
    cases: list[Case] = []
    seen: set[tuple[str, str]] = set()
    attempts = 0
    while len(cases) < cfg.cases:
        attempts += 1
        if attempts > cfg.cases * 200:
            if allow_fewer:
                break
            raise ValueError(f"could not make {cfg.cases} v2 cases from these corpora ({len(cases)} made)")
        lo, hi, _ = rng.choices(cfg.buckets, [b[2] for b in cfg.buckets])[0]
        corpus = rng.choice(corpora)
        if rng.random() < cfg.commit_share:
            if not commits[corpus]:
                continue
            record = rng.choice(commits[corpus])
            region = _commit_region(rng, record, lo, hi)
            if region is None:
                continue
            doc_lines, gold_lines = region
            key = f"{record.get('source', '')}:{record.get('path', record['id'])}"
            kind, edit_facts = "commit", None
            commit_forms = [f for f in ("snippet", "subject") if forms.get(f)]
            if not commit_forms:
                continue
            form = rng.choices(commit_forms, [forms[f] for f in commit_forms])[0]
        else:
            if not files[corpus]:
                continue
            f = rng.choice(files[corpus])
            doc_lines = _document(rng, f, lo, hi)
            if doc_lines is None:
                continue
            kind = rng.choices(kinds, kind_weights)[0]
            # drawn after the document, so other kinds draw as they did
            if kind == "new_file" or (kind == "top_comment" and rng.random() < 0.5):
                doc_lines = []
            made = make_edit(kind, rng, doc_lines, pools[corpus], corpus)
            if made is None:
                continue
            gold_lines, edit_facts, key = made.gold, made, f.key
            form = rng.choices(synthetic_forms, [forms[x] for x in synthetic_forms])[0]
            if form == "templated" and kind not in _V1_KINDS:
                continue  # the first mix had no sentence for this kind
        snippet = template = None
        if form == "snippet":
            snippet = make_snippet(doc_lines, gold_lines, _suffix_path(key), cfg.snippet_context)
            if snippet is None:
                continue
            instruction = update_instruction(snippet, path=_suffix_path(key))
        elif form == "subject":
            instruction = record["instruction"].strip()
        else:
            instruction, template = phrase(edit_facts, rng, {"words": "train"}.get(form, form))
        doc, gold = _text(doc_lines) if doc_lines else "", _text(gold_lines)
        if (doc, instruction) in seen:
            continue
        seen.add((doc, instruction))
        meta = {"kind": kind, "corpus": corpus, "file": key, "instruction": instruction, "form": form,
                "lines": len(doc_lines), "bucket": f"{lo}-{hi}" if doc_lines else "0-0"}
        if snippet is not None:
            meta["snippet"] = snippet
        if template is not None:
            meta["template"] = template
        cases.append(Case(f"{cfg.split}-v2-{len(cases):05d}-{kind}", doc, gold, meta))
    return cases


_V1_KINDS = frozenset(("replace", "insert_after", "insert_before", "delete", "delete_span", "change", "rename",
                       "swap", "identity"))


#: The evaluation subsets of ``bench quality`` v2: name -> (buckets, forms, commit share).
EVAL_SETS_V2: dict[str, tuple[tuple[tuple[int, int, float], ...], tuple[tuple[str, float], ...], float]] = {
    "templated": (((8, 50, 1.0),), (("templated", 1.0),), 0.0),
    "held_out_phrasings": (((8, 50, 0.6), (51, 150, 0.4)), (("held_out", 1.0),), 0.0),
    "whole_le50": (((8, 50, 1.0),), (("words", 1.0),), 0.0),
    "whole_51_150": (((51, 150, 1.0),), (("words", 1.0),), 0.0),
    "whole_151_400": (((151, 400, 1.0),), (("words", 1.0),), 0.0),
    "commit_snippets": (((8, 50, 0.3), (51, 150, 0.35), (151, 400, 0.35)), (("snippet", 1.0),), 1.0),
    "commit_subjects": ((((8, 50, 0.3), (51, 150, 0.35), (151, 400, 0.35))), (("subject", 1.0),), 1.0),
}


def eval_sets_v2(records_by_corpus: dict[str, list[dict]], per_set: int = 30, seed: int = 0) -> dict[str, list[Case]]:
    """The v2 evaluation subsets on the eval split (files never trained on), ``per_set``
    cases each (fewer where the eval split's commits run out)."""
    out: dict[str, list[Case]] = {}
    for name, (buckets, forms, commit_share) in EVAL_SETS_V2.items():
        cfg = MixV2Config(seed=seed, cases=per_set, split="eval", buckets=buckets, forms=forms,
                          commit_share=commit_share)
        cases = make_mix_v2(records_by_corpus, cfg, allow_fewer=True)  # the eval split's commits are few
        out[name] = [dataclasses.replace(c, id=f"{name}-{i:03d}") for i, c in enumerate(cases)]
    return out
