"""``bench quality``: does a real model edit right when it chooses its own program?

On the eval split (files never seen in training; ``cad_outlines/data/eval_edits.jsonl``
by default), one run decodes each case with each configuration:

=============  ==========================  =========================================
name           model                       how
=============  ==========================  =========================================
base_cad       ``smollm2-135m-base``       CaD, constrained (the default prompt)
base_regen     ``smollm2-135m-base``       regeneration, plain prompt
cad            ``smollm2-135m``            CaD, constrained, fine-tuned adapter
cad_compact    ``smollm2-135m-compact``    the same, trained and prompted with the compact
                                           prompt (``prompt_style="compact"``)
regen          ``smollm2-135m-regen``      regeneration, plain prompt, its adapter
text           ``smollm2-135m``            text mode: the CaD prompt, free generation
                                           (``generate`` stopping at ``</program>``), then
                                           :func:`~cad_outlines.tools.text.apply_reply`
cad_monotone   ``smollm2-135m``            CaD with ``monotone_copies``
base_guarded   ``smollm2-135m-base``       CaD with ``monotone_copies`` and a gen cap
regen_pld10    ``smollm2-135m-regen``      prompt lookup (k=10, n=2) over the regen
regen_pld20    ``smollm2-135m-regen``      model's own greedy output (k=20, n=3)
=============  ==========================  =========================================

The PLD rows clock transformers' prompt-lookup drafting verified against the regeneration
model's own greedy reply (what greedy PLD produces): its output is regeneration's, only
the forwards differ. That reply is decoded once per case and model and shared by every
PLD row: it is the regeneration row's output when that row ran first in the same process
(re-encoded, and taken only if the verify forwards' own logits choose it at every
position, ``greedy_mismatches``; the records say ``reply_from``, and a refused reply's
count as ``refused_reply_mismatches``), else an untimed ``generate``. Opt-in
(``--configs``). A CaD run of a lazy-snippet case (an instruction made by
:func:`~cad_outlines.language.snippets.update_instruction`) drafts from the snippet's
literal merge, as ``apply`` does; a configuration with a
``follow_prediction`` floor (``qwen_apply``, ``qwen_apply@P``) runs on snippet cases only
(elsewhere it would repeat its CaD row).

The ``qwen_*`` configurations (opt-in) run Qwen2.5-Coder-0.5B-Instruct on the same
footing: ``qwen_cad``/``qwen_apply`` fine-tuned to write programs,
``qwen_regen`` its twin fine-tuned to regenerate (same v2 mix, steps and seed),
``qwen_regen_pld20``/``qwen_regen_pld128`` prompt lookup over that twin (k=20 n=3 and
the long drafts k=128 n=7), and ``qwen_base_*`` the released model prompted. The
fine-tuned models hold their copies in order by default (``monotone_copies="model"``);
``qwen_cad_any_order`` lifts that, as every CaD row ran before 2026-12-05.

Per run: exact match, complete, valid (a complete program parses and resolves
strictly), copies in range (``1 <= i <= j <= n``), forwards, process CPU seconds (one
torch thread), program tokens and, for CaD, the oracle program's tokens. Greedy for every
configuration; sampled (temperature 0.7, several seeds) for those named in
``sampled``. Regeneration's budget is the gold's length plus a margin (it cannot need
more); a CaD program's budget is fixed (:attr:`QualityConfig.cad_budget`).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, Callable, Sequence

from ..language import program as programs
from ..language.program import Copy
from ..language.snippets import update_of
from ..language.syntax import PROGRAM_CLOSE, copy_lines, split_lines
from ..errors import InputError, OptionError
from ..files import read_text
from ..training.corpus import Case
from ._common import environment, progress
from ..decoding.options import LoopSwitches
from ..decoding.prompts import trained_style
from ._checkpoint import RecordLog
from ._loop import WarmPrefill, clocked_generator, cpu_run
from .fuzz import check_result
from .quality_report import group, summary

__all__ = ["CONFIGS", "DEFAULT_CONFIGS", "QualityConfig", "config_of", "load_eval_cases", "run"]

#: configuration -> (preset, method, generator options)
CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "base_cad": ("smollm2-135m-base", "cad", {}),
    "base_regen": ("smollm2-135m-base", "regen", {}),
    "cad": ("smollm2-135m", "cad", {}),
    "cad_compact": ("smollm2-135m-compact", "cad", {}),
    "regen": ("smollm2-135m-regen", "regen", {}),
    "text": ("smollm2-135m", "text", {}),
    "cad_monotone": ("smollm2-135m", "cad", {"monotone_copies": True}),
    "base_guarded": ("smollm2-135m-base", "cad", {"monotone_copies": True, "max_gen_tokens": 96}),
    "regen_pld10": ("smollm2-135m-regen", "pld", {"k": 10, "n": 2}),
    "regen_pld20": ("smollm2-135m-regen", "pld", {"k": 20, "n": 3}),
    # Qwen2.5-Coder-0.5B-Instruct (real weights, docs/models.md): the released model
    # prompted, and fine-tuned on the v2 mix: to write CaD programs, and its twin (same mix,
    # steps and seed) to regenerate, with prompt lookup over that twin's replies.
    # The model alone: a snippet's merge only drafts (not the adapter's recorded floor).
    "qwen_cad": ("qwen2.5-coder-0.5b", "cad", {"follow_prediction": None}),
    # the same with copies in any order (the loop's default for this model before 2026-12-05)
    "qwen_cad_any_order": ("qwen2.5-coder-0.5b", "cad", {"follow_prediction": None, "monotone_copies": False}),
    # the same, with a snippet's literal merge as a prior the model overrules only where it
    # gives the merge's token under the floor recorded with the adapter (its apply.json),
    # as `apply` runs by default (LoopSwitches.follow_prediction; snippet cases only)
    "qwen_apply": ("qwen2.5-coder-0.5b", "cad", {"follow_prediction": "model"}),
    "qwen_regen": ("qwen2.5-coder-0.5b-regen", "regen", {}),
    "qwen_regen_pld20": ("qwen2.5-coder-0.5b-regen", "pld", {"k": 20, "n": 3}),
    "qwen_regen_pld128": ("qwen2.5-coder-0.5b-regen", "pld", {"k": 128, "n": 7}),
    # the twin with a snippet's literal merge as drafts (k=128) and as a prior at the floor
    # CaD's adapter records (follow.run_follow; snippet cases only): what the merge alone
    # does for regeneration, beside `qwen_apply`
    "qwen_regen_apply": ("qwen2.5-coder-0.5b-regen", "follow", {"k": 128, "follow_prediction": 0.001}),
    "qwen_base_cad": ("qwen2.5-coder-0.5b-base", "cad", {}),
    "qwen_base_guarded": ("qwen2.5-coder-0.5b-base", "cad", {"monotone_copies": True, "max_gen_tokens": 96}),
    "qwen_base_regen": ("qwen2.5-coder-0.5b-base", "regen", {}),
    "qwen_base_pld20": ("qwen2.5-coder-0.5b-base", "pld", {"k": 20, "n": 3}),
    "qwen_base_pld128": ("qwen2.5-coder-0.5b-base", "pld", {"k": 128, "n": 7}),
}


def config_of(name: str) -> tuple[str, str, dict[str, Any]]:
    """``CONFIGS[name]``, or for ``NAME@P`` the configuration ``NAME`` (one with a
    ``follow_prediction`` floor) with its floor set to ``P``: several floors side by side
    in one run. Raises ``KeyError`` naming what is wrong."""
    base, sep, floor = name.partition("@")
    if base not in CONFIGS:
        raise KeyError(f"unknown configuration {base!r}")
    preset, method, options = CONFIGS[base]
    if not sep:
        return preset, method, options
    if options.get("follow_prediction") is None:
        raise KeyError(f"{base!r} has no follow_prediction floor to set (NAME@P works for "
                       + ", ".join(n for n, c in CONFIGS.items() if c[2].get("follow_prediction") is not None) + ")")
    try:
        value = float(floor)
        LoopSwitches(follow_prediction=value)  # the loop's own check of the floor
    except OptionError as err:  # before ValueError, which it is
        raise KeyError(f"{name!r}: {err}") from None
    except ValueError:
        raise KeyError(f"{name!r}: {floor!r} is not a number") from None
    return preset, method, {**options, "follow_prediction": value}


#: Configurations run unless ``--configs`` names others (the PLD rows are opt-in: they
#: need the regeneration model's own output, from its row or decoded again).
DEFAULT_CONFIGS = tuple(name for name in CONFIGS if not name.startswith(("regen_pld", "qwen_")))
#: ``--cases v2``: the bundled v2 subsets (scripts/make_eval_v2.py): templated, held-out
#: phrasings, whole files by length, lazy snippets and subjects of real commits.
V2_CASES = "v2"


@dataclass
class QualityConfig:
    """What determines a run (reported with the results)."""

    configs: tuple[str, ...] = DEFAULT_CONFIGS
    sampled: tuple[str, ...] = ("cad", "regen")
    seeds: tuple[int, ...] = (0, 1, 2)
    temperature: float = 0.7
    limit: int | None = None  # first N cases (greedy)
    per_subset: int | None = None  # first N cases of each subset (before ``limit``)
    subsets: tuple[str, ...] = ()  # only these subsets (``meta["subset"]``; empty: all)
    sampled_limit: int | None = 30  # first N cases (sampled)
    cad_budget: int = 256
    regen_margin: int = 32
    threads: int = 1
    cases_path: str = "cad_outlines/data/eval_edits.jsonl"  # or V2_CASES
    # (real preset, LoRA folder): that folder merged instead of the preset's shipped
    # adapter, so that a training run's adapter is scored before it is shipped
    adapters: tuple[tuple[str, str], ...] = ()


def load_eval_cases(path: str | None = None) -> list[Case]:
    """The eval cases (JSONL of ``id, doc, gold, instruction, kind, corpus, file`` and, in
    the v2 set, ``subset, form, lines``); ``path`` :data:`V2_CASES` reads the bundled v2 set."""
    if path is None or path == V2_CASES:
        name = "eval_edits.jsonl" if path is None else "eval_v2.jsonl"
        text = resources.files("cad_outlines.data").joinpath(name).read_text("utf-8")
    else:
        try:
            text = read_text(path)
        except OSError as err:
            raise InputError(f"--cases {path}: cannot read it ({err.strerror or err})") from None
    cases = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                r = json.loads(line)
                cases.append(Case(r["id"], r["doc"], r["gold"],
                                  {k: r[k] for k in ("instruction", "kind", "corpus", "file", "subset", "form", "lines")
                                   if k in r}))
                if not isinstance(r.get("instruction"), str) or not r["instruction"].strip():
                    raise KeyError("instruction")
            except (ValueError, KeyError, TypeError) as err:
                raise InputError(f"{path or 'eval_edits.jsonl'}, line {number}: not an eval case "
                                 f"(JSON with id, doc, gold, instruction): {err}") from None
    return cases


def first_of_each_subset(cases: Sequence[Case], n: int) -> list[Case]:
    """The first ``n`` cases of each subset (``meta["subset"]``; cases without one form a
    subset of their own), in their original order."""
    seen: dict[str, int] = defaultdict(int)
    kept = []
    for case in cases:
        subset = case.meta.get("subset", "")
        seen[subset] += 1
        if seen[subset] <= n:
            kept.append(case)
    return kept


def dropped_tail(ops: Sequence[Any], case: Case) -> bool:
    """A complete program that stops copying before the file's last line while the gold
    keeps that line: the failure that silently drops a file's tail."""
    def body(text: str) -> list[str]:
        lines = split_lines(text)
        return lines[:-1] if lines and lines[-1] == "" else lines

    doc, gold = body(case.doc), body(case.gold)
    if not doc or not gold or gold[-1] != doc[-1]:
        return False  # the edit changes the file's last line: no tail to keep
    copies = [op for op in ops if isinstance(op, Copy)]
    return not copies or copies[-1].end < len(doc)


def _oracle_tokens(adapter: Any, case: Case) -> int:
    from ..language.oracle import oracle_program

    return len(adapter.encode(programs.render(oracle_program(case.doc, case.gold))))


def _copies_in_range(ops: Sequence[Any], n: int) -> bool:
    return all(1 <= op.start <= op.end <= n for op in ops if isinstance(op, Copy))


def _run_generator(model: Any, case: Case, method: str, options: dict[str, Any], budget: int,
                   sampling: dict[str, Any], texts: dict[Any, str] | None = None, key: Any = None
                   ) -> dict[str, Any]:
    """One CaD or regeneration run; a complete greedy regeneration's text is kept in
    ``texts`` under ``(key, budget)`` for the prompt-lookup rows of the same model."""
    gen, clock = clocked_generator(model, case.doc, **options)
    instruction = case.meta["instruction"]
    update = update_of(instruction)
    if method == "cad":
        # A snippet case is what `apply` runs: drafted from the snippet's literal merge
        # (greedy output unchanged; fewer forwards where the model follows the snippet).
        result, cpu = cpu_run(clock, lambda: gen.run(
            instruction, max_new_tokens=budget, **sampling,
            prediction=gen.predicted(update) if update is not None else None))
    else:
        result, cpu = cpu_run(clock, lambda: gen.regenerate(instruction, max_new_tokens=budget, **sampling))
    st = result.stats
    if method == "regen" and texts is not None and result.complete and not sampling.get("temperature"):
        texts[key, budget] = result.program
    # CaD: every guarantee the fuzz campaign checks (parse, strict resolve, index bounds)
    problems = check_result(result, gen) if method == "cad" else []
    return {"exact": result.document == case.gold, "complete": result.complete,
            "valid": result.complete and not problems, "problems": problems,
            "dropped_tail": method == "cad" and result.complete and dropped_tail(result.ops, case),
            "copies_in_range": not any("out of range" in p for p in problems),
            "forwards": st.forward_passes, "program_tokens": st.program_tokens,
            "prompt_tokens": st.prompt_tokens, "stop_reason": st.stop_reason, "ended_in_gen": st.ended_in_gen,
            **cpu, "output": result.program[:2000]}


def _run_pld(model: Any, case: Case, options: dict[str, Any], budget: int,
             replies: dict[Any, tuple[list[int], str]], texts: dict[Any, str], key: Any) -> dict[str, Any]:
    """Prompt lookup over the model's own greedy regeneration (the plain prompt).

    The reply is the regeneration row's complete output on this case (``texts``, re-encoded;
    from this process or the checkpoint's record of that row) when the verify forwards
    confirm, at every position, that greedy decoding chooses it; otherwise the model's
    ``generate`` (untimed). It is kept in ``replies`` under ``(key, budget)``, so that every
    PLD row of one model on one case verifies into one regeneration instead of each
    decoding the whole file again."""
    from .pld import PLDSetting, plain_prompt_ids, run_pld

    tok = model.hf_tokenizer
    prompt = plain_prompt_ids(tok, case.doc, case.meta["instruction"], trained_style(model.model))
    setting = PLDSetting(options["k"], options["n"])

    def verify(reply: list[int]) -> dict[str, Any]:
        return run_pld(model.model, prompt, reply, setting, tok.eos_token_id, budget, check_greedy=True)

    rec, refused = None, None
    if (key, budget) not in replies and (key, budget) in texts:
        reused = tok.encode(texts[key, budget], add_special_tokens=False)
        rec = verify(reused)
        if rec["greedy_mismatches"] == 0:
            replies[key, budget] = reused, "regeneration row"
        else:  # re-encoded otherwise than the model wrote it, or a near tie: decode it once more
            rec, refused = None, rec["greedy_mismatches"]
    if (key, budget) not in replies:
        replies[key, budget] = _greedy_reply(model, prompt, budget), "generate"
    reply, origin = replies[key, budget]
    if rec is None:
        rec = verify(reply)
    document = tok.decode(reply, skip_special_tokens=True)
    complete = len(reply) < budget
    return {"exact": complete and document == case.gold, "complete": complete, "valid": complete,
            "copies_in_range": True, "forwards": rec["forward_passes"], "program_tokens": rec["tokens"],
            "prompt_tokens": rec["prompt_tokens"], "stop_reason": "" if complete else "max_new_tokens",
            "cpu_total_seconds": rec["cpu_total_seconds"], "cpu_gen_seconds": rec["cpu_gen_seconds"],
            "greedy_mismatches": rec["greedy_mismatches"], "reply_from": origin, "refused_reply_mismatches": refused,
            "output": document[:2000]}


def _run_follow(model: Any, case: Case, options: dict[str, Any], budget: int) -> dict[str, Any]:
    """Regeneration drafted from and steered by a snippet case's literal merge
    (:func:`.follow.run_follow`), the plain prompt; greedy."""
    from ..adapters import get_adapter
    from ..decoding.document import DocumentView
    from .follow import run_follow
    from .pld import plain_prompt_ids

    tok = model.hf_tokenizer
    prompt = plain_prompt_ids(tok, case.doc, case.meta["instruction"], trained_style(model.model))
    merged = DocumentView(case.doc, get_adapter(tok)).merged(update_of(case.meta["instruction"]))
    prediction = (tok.encode(merged, add_special_tokens=False) + [tok.eos_token_id]) if merged is not None else []
    rec = run_follow(model.model, prompt, prediction, options["k"], options["follow_prediction"],
                     tok.eos_token_id, budget)
    reply = rec.pop("ids")
    document = tok.decode(reply, skip_special_tokens=True)
    complete = rec.pop("complete")
    return {"exact": complete and document == case.gold, "complete": complete, "valid": complete,
            "copies_in_range": True, "forwards": rec.pop("forward_passes"), "program_tokens": len(reply),
            "stop_reason": "" if complete else "max_new_tokens", "merged": merged is not None, **rec,
            "output": document[:2000]}


def _greedy_reply(model: Any, prompt: list[int], budget: int) -> list[int]:
    """The model's own greedy reply to ``prompt`` (transformers' ``generate``), EOS cut."""
    import torch

    tok = model.hf_tokenizer
    with torch.no_grad():
        out = model.model.generate(torch.tensor([prompt]), max_new_tokens=budget, do_sample=False,
                                   pad_token_id=tok.eos_token_id)
    reply = out[0, len(prompt):].tolist()
    return reply[:-1] if reply and reply[-1] == tok.eos_token_id else reply


def _run_text(model: Any, case: Case, budget: int, sampling: dict[str, Any]) -> dict[str, Any]:
    """Text mode: the CaD prompt, transformers' ``generate`` until ``</program>``, then apply."""
    import torch

    from ..adapters import get_adapter
    from ..tools.text import ReplyError, apply_reply

    adapter = get_adapter(model.hf_tokenizer)
    ids = adapter.prompt_ids(case.doc, case.meta["instruction"], style=trained_style(model.model))
    temperature = sampling.get("temperature", 0.0)
    kwargs: dict[str, Any] = {"do_sample": False} if not temperature else {
        "do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
    if temperature:
        torch.manual_seed(sampling.get("seed", 0))
    start = time.process_time()
    with torch.no_grad():
        out = model.model.generate(torch.tensor([ids]), max_new_tokens=budget, stop_strings=[PROGRAM_CLOSE],
                                   tokenizer=model.hf_tokenizer, pad_token_id=adapter.eos_token_id, **kwargs)
    cpu = time.process_time() - start
    new = out[0, len(ids):].tolist()
    reply = adapter.decode(new)
    try:
        applied = apply_reply(reply, case.doc, "strict", lenient=False)
        document, valid, ops = applied.document, True, applied.ops
    except ReplyError:
        document, valid, ops = None, False, []
    return {"exact": document == case.gold, "complete": PROGRAM_CLOSE in reply, "valid": valid,
            "copies_in_range": _copies_in_range(ops, len(copy_lines(case.doc))),
            "forwards": len(new), "program_tokens": len(new), "prompt_tokens": len(ids),
            "stop_reason": "" if PROGRAM_CLOSE in reply else "max_new_tokens",
            "cpu_total_seconds": cpu, "cpu_gen_seconds": cpu, "output": reply[:2000]}


def _record_key(record: dict[str, Any]) -> tuple[str, str, str]:
    return record["config"], record["sampling"], record["case"]


def _settings(cfg: QualityConfig, cases: Sequence[Case]) -> dict[str, Any]:
    """What a record depends on besides its configuration, sampling and case: a checkpoint
    made under other settings (or other eval cases) is refused."""
    import hashlib

    digest = hashlib.sha256(json.dumps([(c.id, c.doc, c.gold, c.meta) for c in cases],
                                       sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    settings = {"temperature": cfg.temperature, "cad_budget": cfg.cad_budget, "regen_margin": cfg.regen_margin,
                "threads": cfg.threads, "cases": digest}
    if cfg.adapters:  # only when set, so that checkpoints made before the option still resume
        settings["adapters"] = adapter_digests(cfg)
    return settings


def adapter_digests(cfg: QualityConfig) -> dict[str, str]:
    """``{preset: SHA-256 of the adapter weights}`` of the adapters ``cfg`` loads in place
    of the shipped ones."""
    from ..tools.weights import adapter_sha256

    return {preset: adapter_sha256(folder) for preset, folder in cfg.adapters}


def loaded_adapter_sha256(preset: str, swapped: dict[str, str]) -> str | None:
    """The SHA-256 of the adapter ``preset`` loads (``swapped``'s in place of the shipped
    one), ``None`` for a preset without one. Each record carries it, so that a checkpoint
    resumed after a shipped adapter changed measures that preset's rows again instead of
    pooling two models into one table."""
    from ..tools.presets import REAL_PRESETS
    from ..tools.weights import adapter_dir, adapter_sha256

    if preset in swapped:
        return adapter_sha256(swapped[preset])
    shipped = getattr(REAL_PRESETS.get(preset), "adapter", None)
    return adapter_sha256(adapter_dir(shipped)) if shipped else None


def _decode(cfg: QualityConfig, cases: Sequence[Case], configs: Sequence[str],
            loader: Callable[[str], Any] | None, checkpoint: tuple[str, dict[str, Any]] | RecordLog | None = None
            ) -> list[dict[str, Any]]:
    """The records of ``configs`` on ``cases`` (one process, ``cfg.threads`` torch threads).

    ``checkpoint`` (path, settings), or the log run() opened in this process: records found
    there are taken as they are, each new one is appended as soon as it is measured; a model
    is loaded only if it has work."""
    import torch

    from ..adapters import get_adapter
    from ..tools import models

    torch.set_num_threads(cfg.threads)
    swapped = dict(cfg.adapters)
    if loader is None:
        def loader(preset: str) -> Any:
            return models.load(preset, adapter=swapped.get(preset))
    log = checkpoint
    if isinstance(checkpoint, tuple):  # a worker: run() opened (and repaired) the file before it started
        log = RecordLog(checkpoint[0], checkpoint[1], _record_key, repair=False)
    loaded: dict[str, Any] = {}
    replies: dict[Any, tuple[list[int], str]] = {}  # (preset, case id), budget -> greedy reply, its origin
    texts: dict[Any, str] = {}  # the same key -> the regeneration row's complete greedy text
    records: list[dict[str, Any]] = []
    # prompt lookup last: it verifies into the output of its model's regeneration row
    for name in sorted(configs, key=lambda n: config_of(n)[1] == "pld"):
        preset, method, options = config_of(name)
        plain = method in ("regen", "pld", "follow")
        model = None
        weights = loaded_adapter_sha256(preset, swapped) if log else None
        own = cases
        if options.get("follow_prediction") is not None:  # without a snippet to merge it is the CaD row again
            own = [c for c in cases if update_of(c.meta["instruction"]) is not None]
        runs = [("greedy", {"temperature": 0.0}, own)]
        if name in cfg.sampled:
            sample_cases = own[:cfg.sampled_limit] if cfg.sampled_limit else own
            runs += [(f"seed{s}", {"temperature": cfg.temperature, "seed": s}, sample_cases) for s in cfg.seeds]
        for label, sampling, subset in runs:
            for case in progress(subset, desc=f"{name} {label}", unit="edit"):
                key = (preset, case.id)  # of the regeneration reply shared by a model's plain rows
                found = log.get((name, label, case.id)) if log else None
                if found is not None and found.get("adapter_sha256", weights) != weights:
                    found = None  # measured with another adapter (records before the field: kept)
                if found is not None:
                    if "reply" in found:  # a regeneration row's whole reply, for the PLD rows to verify into
                        texts[key, found["reply"]["budget"]] = found["reply"]["text"]
                    records.append(found)
                    continue
                if model is None:
                    if preset not in loaded:
                        loaded[preset] = loader(preset)
                    model = loaded[preset]
                    adapter = get_adapter(model.hf_tokenizer)
                    style = trained_style(model.model)
                    warm = WarmPrefill(model.model, adapter.constant_ids(style=style, plain=plain))
                # a plain reply cannot need more than the gold; one budget for regeneration and
                # prompt lookup, so that the latter finds the former's text under the same key
                budget = (len(model.hf_tokenizer.encode(case.gold, add_special_tokens=False)) + cfg.regen_margin
                          if plain else cfg.cad_budget)
                if method == "text":
                    rec = _run_text(model, case, budget, sampling)
                elif method == "pld":
                    rec = _run_pld(model, case, options, budget, replies, texts, key)
                elif method == "follow":
                    rec = _run_follow(model, case, options, budget)
                else:
                    rec = _run_generator(model, case, method, options, budget, sampling, texts, key)
                instruction = case.meta["instruction"]
                rec.update(warm(adapter.plain_prompt_ids(case.doc, instruction, style) if plain else
                                adapter.prompt_ids(case.doc, instruction, style=style)))
                rec.update(config=name, sampling=label, case=case.id, kind=case.meta.get("kind", "?"),
                           corpus=case.meta.get("corpus", "?"), subset=case.meta.get("subset", "-"))
                if method == "cad":
                    rec["oracle_tokens"] = _oracle_tokens(adapter, case)
                records.append(rec)
                if log:
                    rec["adapter_sha256"] = weights
                    if method == "regen" and label == "greedy" and (key, budget) in texts:
                        # a resumed run's PLD rows verify into it instead of decoding the file
                        # again (``output`` keeps 2,000 characters); run() leaves it out of the report
                        rec["reply"] = {"budget": budget, "text": texts[key, budget]}
                    log.append(rec)
    return records


def _weight(name: str, with_regen: bool = False) -> int:
    """Relative cost of a configuration's runs, to balance ``jobs`` worker processes:
    regeneration decodes the whole file (prompt lookup does so once more, untimed, for its
    reply, unless its model's regeneration row runs first in the same worker:
    ``with_regen``); a prompted base model writes long CaD programs."""
    preset, method, _ = config_of(name)
    return {"regen": 3, "pld": 1 if with_regen else 4}.get(method, 2 if preset.endswith("-base") else 1)


def _split(configs: Sequence[str], sampled: Sequence[str], jobs: int) -> list[list[str]]:
    """``configs`` in at most ``jobs`` parts of about equal weight; the prompt-lookup rows of
    a model go with its regeneration row (they verify into that row's output)."""
    units: dict[str, list[str]] = defaultdict(list)
    for name in configs:
        preset, method, _ = config_of(name)
        units[f"{preset} regen" if method in ("regen", "pld") else name].append(name)

    def weight(unit: list[str]) -> int:
        with_regen = any(config_of(n)[1] == "regen" for n in unit)
        return sum(_weight(n, with_regen) * (2 if n in sampled else 1) for n in unit)

    loads = [0.0] * jobs
    parts: list[list[str]] = [[] for _ in range(jobs)]
    for unit in sorted(units.values(), key=lambda u: -weight(u)):
        k = loads.index(min(loads))
        parts[k].extend(unit)
        loads[k] += weight(unit)
    return [p for p in parts if p]


def run(cfg: QualityConfig, *, cases: Sequence[Case] | None = None,
        loader: Callable[[str], Any] | None = None, jobs: int = 1,
        checkpoint: str | os.PathLike | None = None) -> dict[str, Any]:
    """Run every configuration of ``cfg`` on ``cases``; per-run records and summaries.

    ``loader(preset)`` returns the Outlines model of a preset (default:
    :func:`cad_outlines.tools.models.load`, with ``cfg.adapters``' folders in place of
    those presets' shipped adapters); each preset is loaded once per process.
    ``jobs > 1`` decodes the configurations in that many worker processes at once (each
    with ``cfg.threads`` threads; the default loader only), so that a 2-core machine runs
    the whole comparison in one run; the records are merged in configuration order.
    ``checkpoint``: a JSON-lines file each record is appended to as it is measured; run
    again with the same file (and settings) to take the records already there instead of
    measuring them again (:class:`~cad_outlines.bench._checkpoint.RecordLog`).
    """
    if cases is None:
        cases = load_eval_cases(cfg.cases_path if cfg.cases_path != QualityConfig.cases_path else None)
    resume = opened = None
    if checkpoint is not None:
        settings = _settings(cfg, cases)  # of every eval case: a resumed run may pick other subsets
        opened = RecordLog(checkpoint, settings, _record_key)  # refuses other settings here
        before = {k: r.get("adapter_sha256") for k, r in opened.done.items()}
        resume = (os.fspath(checkpoint), settings)
    if cfg.subsets:
        known = sorted({c.meta["subset"] for c in cases if c.meta.get("subset")})
        unknown = sorted(set(cfg.subsets) - set(known))
        if unknown:
            raise InputError(f"subsets: no eval case is in {', '.join(unknown)} "
                             f"(the cases' subsets: {', '.join(known) or 'none'})")
        cases = [c for c in cases if c.meta.get("subset") in cfg.subsets]
    cases = first_of_each_subset(cases, cfg.per_subset) if cfg.per_subset else list(cases)
    cases = cases[:cfg.limit] if cfg.limit else cases
    env = environment()  # recorded before the runs: the code and load they started with
    started = time.time()
    if jobs > 1 and loader is None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        parts = _split(cfg.configs, cfg.sampled, jobs)
        with ProcessPoolExecutor(len(parts), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_decode, cfg, cases, part, None, resume) for part in parts]
            found = [rec for future in futures for rec in future.result()]
    else:
        found = _decode(cfg, cases, cfg.configs, loader, opened)
    records = [{k: v for k, v in rec.items() if k != "reply"} for name in cfg.configs
               for rec in found if rec["config"] == name]
    summaries: dict[str, Any] = {}
    for name in cfg.configs:
        for label in sorted({r["sampling"] for r in records if r["config"] == name}):
            rows = [r for r in records if r["config"] == name and r["sampling"] == label]
            synthetic = [r for r in rows if r["kind"] != "commit"]
            summaries[f"{name}/{label}"] = {
                "all": summary(rows), "synthetic": summary(synthetic) if synthetic else None,
                "by_kind": group(rows, lambda r: r["kind"]), "by_corpus": group(rows, lambda r: r["corpus"]),
                "by_subset": group(rows, lambda r: r.get("subset", "-"))}
    report = {"config": asdict(cfg), "jobs": jobs, "cases": len(cases), "seconds": round(time.time() - started, 1),
              "environment": {**env, "loadavg_end": environment()["loadavg_1_5_15"]}, "summaries": summaries,
              "records": records}
    if cfg.adapters:  # which weights the swapped presets ran with
        report["adapters"] = adapter_digests(cfg)
    if resume is not None:  # records measured by an earlier run: its seconds and environment are not these
        report["checkpoint"] = {"path": resume[0], "resumed": sum(
            _record_key(r) in before and before[_record_key(r)] == r.get("adapter_sha256") for r in records)}
    return report
