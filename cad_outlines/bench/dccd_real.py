"""CD vs DCCD with pretrained weights, on structured tasks whose answers are known.

The toy bench (:mod:`cad_outlines.bench.dccd`) shows the mechanism on a model trained here.
This one asks the claim users care about of a real instruct model (SmolLM2-135M-Instruct
by default, the ``smollm2-135m-base`` preset): forced into a JSON schema, does it lose
accuracy, and does drafting first win it back?

Two tasks, generated here with a fixed seed (:func:`make_items`):

* ``arith`` — one-step word problems (``Tom has 3 apples and buys 4 more...``), answered
  as ``{"answer": <int>}``;
* ``extract`` — a short record (``Payment of 380 dollars received from John Smith on
  2023-11-02.``) turned into ``{"name": ..., "date": ..., "amount": ...}``.

Every method is asked with the same prompt (the task text and the format request) and,
per item, the same seed. The methods:

* ``free`` — unconstrained greedy decoding, then the first ``{...}`` parsed and checked
  against the schema (what a user gets without a constraint);
* ``cd`` — plain constrained decoding (greedy) under the schema;
* ``dccd_greedy`` — one greedy draft, projected (K = 1);
* ``dccd_k{K}_{selector}`` — K sampled drafts (nested subsets of one draw of ``max(ks)``),
  each projected, one kept by the selector.

Drafts are written from the task text without the format request (the model answers in
its own words); each projection sees the full prompt and the draft.

The constraint is an Outlines output type (``outlines.types.JsonSchema``) compiled by the
llguidance backend — the path any Outlines user takes.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from ..errors import InputError
from ._common import environment

__all__ = ["RealDCCDConfig", "TASKS", "format_real_table", "make_items", "run_real"]

# --- the tasks -----------------------------------------------------------------------

WHITESPACE = r"[ \n]{0,6}"
"""The JSON whitespace the constraint allows: enough for the compact and the indented
style the model writes unconstrained, bounded so a weak model cannot wander in it."""

_NAMES = ("Tom", "Sara", "Ali", "Mia", "Leo", "Nina", "Omar", "Ella", "Ravi", "Lucy",
          "Ben", "Zoe", "Ivan", "Kate", "Yuki", "Sam")
_THINGS = ("apples", "pens", "books", "stickers", "marbles", "cookies", "stamps", "coins",
           "cards", "shells")
_ARITH = (
    ("{n} has {a} {t} and buys {b} more. How many {t} does {n} have now?", lambda a, b: a + b),
    ("{n} has {a} {t} and gives {b} to a friend. How many {t} does {n} have left?", lambda a, b: a - b),
    ("A box holds {a} {t}. {n} puts {b} more {t} in the box. How many {t} are in the box?", lambda a, b: a + b),
    ("{n} had {a} {t} and lost {b} of them. How many {t} does {n} have?", lambda a, b: a - b),
    ("{n} has {a} bags with {b} {t} in each bag. How many {t} does {n} have in all?", lambda a, b: a * b),
)
_FIRST = ("Maria", "John", "Priya", "Ahmed", "Laura", "Chen", "Fatima", "David", "Elena",
          "Kofi", "Anna", "Marco", "Sofia", "Hiro", "Grace", "Pedro")
_LAST = ("Lopez", "Smith", "Patel", "Khan", "Martin", "Wang", "Okafor", "Brown", "Rossi",
         "Mensah", "Novak", "Silva", "Kim", "Tanaka", "Moore", "Costa")
_RECORDS = (
    "Invoice from {name}, dated {date}, total ${amount}.",
    "Payment of {amount} dollars received from {name} on {date}.",
    "On {date}, {name} paid ${amount} for office supplies.",
    "{name} | {date} | USD {amount}",
    "Refund of ${amount} issued to {name} ({date}).",
)

ARITH_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": -1000,
                                                             "maximum": 1000}},
                "required": ["answer"], "additionalProperties": False}
EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 40},
                   "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                   "amount": {"type": "integer", "minimum": 0, "maximum": 100000}},
    "required": ["name", "date", "amount"], "additionalProperties": False}


@dataclass(frozen=True)
class Task:
    """A structured task: its schema, the format request and how items are made."""

    name: str
    schema: dict
    request: str  # appended to every item's text: the format the answer must take


TASKS: dict[str, Task] = {
    "arith": Task("arith", ARITH_SCHEMA,
                  'Answer in JSON as {"answer": <integer>}.'),
    "extract": Task("extract", EXTRACT_SCHEMA,
                    'Answer in JSON as {"name": <string>, "date": <string>, "amount": <integer>}.'),
}


def make_items(task: str, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` items of ``task``, each ``{"id", "text", "prompt", "truth"}`` (``prompt`` is
    ``text`` plus the format request); the same seed gives the same items."""
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")
    rng = random.Random(f"{task}-{seed}")
    items = []
    for i in range(n):
        if task == "arith":
            template, op = rng.choice(_ARITH)
            a, b = rng.randint(2, 20), rng.randint(2, 9)
            a = max(a, b + 1) if op(5, 2) == 3 else a  # subtraction stays positive
            text = template.format(n=rng.choice(_NAMES), t=rng.choice(_THINGS), a=a, b=b)
            truth: Any = {"answer": op(a, b)}
        else:
            name = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
            date = f"{rng.randint(2019, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            amount = rng.randint(5, 2000)
            text = ("Record: " + rng.choice(_RECORDS).format(name=name, date=date, amount=amount)
                    + "\nExtract the person's name, the date (YYYY-MM-DD) and the amount in dollars.")
            truth = {"name": name, "date": date, "amount": amount}
        items.append({"id": f"{task}-{i:03d}", "text": text,
                      "prompt": f"{text}\n{TASKS[task].request}", "truth": truth})
    return items


def parse_free(text: str, schema: dict) -> dict | None:
    """The first JSON object in free text that the schema accepts, else ``None``."""
    import jsonschema

    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            try:
                jsonschema.validate(value, schema)
            except jsonschema.ValidationError:
                return None
            return value
    return None


# --- the run -------------------------------------------------------------------------


@dataclass
class RealDCCDConfig:
    """One ``bench dccd --preset ...`` run."""

    preset: str = "smollm2-135m-base"
    tasks: tuple[str, ...] = ("arith", "extract")
    items: int = 200
    ks: tuple[int, ...] = (1, 3, 5)
    selectors: tuple[str, ...] = ("sum_log_alpha", "loglik", "vote")
    draft_temperature: float = 0.7
    # Equal budgets: every free decode (the ``free`` answer and each draft) gets
    # ``free_tokens``; every constrained decode (CD and each projection) ``json_tokens``,
    # more than the longest output the schemas and the whitespace rule allow (a 40-character
    # name, bounded numbers, at most 6 whitespace characters between tokens), so the
    # constraint's validity is never undone by a budget cut.
    free_tokens: int = 48
    json_tokens: int = 160
    seed: int = 0
    threads: int = 1


@dataclass
class _Stat:
    correct: list[bool] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    mean_alpha: list[float] = field(default_factory=list)
    tax: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, value: Any, truth: Any, valid: bool, tokens: int, cpu: float,
            trace: Any = None) -> None:
        self.correct.append(valid and value == truth)
        self.valid.append(valid)
        self.tokens.append(tokens)
        self.cpu.append(cpu)
        if trace is not None:
            self.mean_alpha.append(trace.mean_alpha)
            self.tax.append(trace.projection_tax)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(self.correct), "accuracy": statistics.fmean(self.correct),
                               "valid": statistics.fmean(self.valid),
                               "tokens": statistics.fmean(self.tokens),
                               "cpu_s": statistics.fmean(self.cpu)}
        if self.mean_alpha:
            out["mean_alpha"] = statistics.fmean(self.mean_alpha)
            out["projection_tax"] = statistics.fmean(self.tax)
        return out


def _candidate_ok(c: Any) -> bool:
    return c.complete and c.parse_error is None


def _value(c: Any) -> Any:
    return c.value if _candidate_ok(c) else None


def _evaluate(cfg: RealDCCDConfig, task: str, items: Sequence[dict[str, Any]],
              loader: Callable[[str], Any] | None, progress: bool) -> dict[str, Any]:
    """Every method on ``items`` of one task (one process, ``cfg.threads`` threads)."""
    import torch
    from outlines.types import JsonSchema
    from tqdm.auto import tqdm

    from ..decoding.dccd import DraftConditionedGenerator, select
    from ..tools import models

    torch.set_num_threads(cfg.threads)
    model = (loader or models.load)(cfg.preset)
    schema = dict(TASKS[task].schema)
    # A weak model can wander in optional whitespace; the schema bounds it (WHITESPACE).
    schema["x-guidance"] = {"whitespace_pattern": WHITESPACE}
    gen = DraftConditionedGenerator(model, JsonSchema(schema), k=max(cfg.ks), backend="llguidance",
                                    max_new_tokens=cfg.json_tokens, draft_max_tokens=cfg.free_tokens,
                                    draft_temperature=cfg.draft_temperature)
    tok = model.hf_tokenizer
    stats: dict[str, _Stat] = {m: _Stat() for m in ("free", "cd", "dccd_greedy")}
    for k in cfg.ks:
        for s in cfg.selectors:
            stats[f"dccd_k{k}_{s}"] = _Stat()
    oracle: dict[int, list[bool]] = {k: [] for k in cfg.ks}
    examples: list[dict[str, Any]] = []
    for n, item in enumerate(tqdm(items, desc=task, disable=not progress, file=sys.stderr)):
        prompt, truth, seed = item["prompt"], item["truth"], cfg.seed * 100_003 + n
        t0 = time.process_time()
        gen.draft_temperature = 0.0
        free_text, free_len = gen.draft_with_lengths(prompt, 1, torch.Generator().manual_seed(seed))
        t1 = time.process_time()
        free_value = parse_free(free_text[0], TASKS[task].schema)
        stats["free"].add(free_value, truth, free_value is not None, free_len[0], t1 - t0)
        cd = gen.cd(prompt, seed=seed).chosen
        t2 = time.process_time()
        stats["cd"].add(_value(cd), truth, _candidate_ok(cd), len(cd.token_ids), t2 - t1, cd.trace)
        # Drafts come from the task text alone: the model answers in its own words, and
        # only the projection is asked for the format.
        greedy = gen.run(prompt, k=1, draft_prompt=item["text"], seed=seed).chosen
        t3 = time.process_time()
        stats["dccd_greedy"].add(_value(greedy), truth, _candidate_ok(greedy),
                                 greedy.draft_tokens + len(greedy.token_ids), t3 - t2, greedy.trace)
        gen.draft_temperature = cfg.draft_temperature
        cands = gen.run(prompt, draft_prompt=item["text"], seed=seed).candidates
        shared = time.process_time() - t3
        for k in cfg.ks:
            sub = cands[:k]
            oracle[k].append(any(_value(c) == truth for c in sub))
            tokens = sum(c.draft_tokens + len(c.token_ids) for c in sub)
            for s in cfg.selectors:
                best = sub[select(sub, s, prompt)]
                # A K run costs about the K-candidate share of the shared batched run.
                stats[f"dccd_k{k}_{s}"].add(_value(best), truth, _candidate_ok(best), tokens,
                                            shared * k / len(cands), best.trace)
        if len(examples) < 3:
            examples.append({"prompt": prompt, "truth": truth, "free": free_text[0], "cd": cd.text,
                             "dccd_greedy": greedy.text, "drafts": [c.draft for c in cands],
                             "projections": [c.text for c in cands],
                             "cd_alphas": [round(a, 4) for a in cd.trace.alphas]})
    return {"methods": {m: st.summary() for m, st in stats.items()},
            "oracle_at_k": {str(k): statistics.fmean(v) for k, v in oracle.items()},
            "examples": examples, "tokenizer_vocab": len(tok)}


def run_real(cfg: RealDCCDConfig, *, jobs: int = 1, progress: bool = True,
             loader: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Every task of ``cfg``; ``jobs > 1`` runs the tasks in that many worker processes."""
    for task in cfg.tasks:
        if task not in TASKS:
            raise InputError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")
    items = {task: make_items(task, cfg.items, cfg.seed) for task in cfg.tasks}
    env = environment()  # recorded before the runs: the code and load they started with
    started = time.time()
    if jobs > 1 and loader is None and len(cfg.tasks) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(jobs, len(cfg.tasks)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {t: pool.submit(_evaluate, cfg, t, items[t], None, progress) for t in cfg.tasks}
            results = {t: f.result() for t, f in futures.items()}
    else:
        results = {t: _evaluate(cfg, t, items[t], loader, progress) for t in cfg.tasks}
    return {"config": asdict(cfg), "jobs": jobs, "seconds": round(time.time() - started, 1),
            "environment": {**env, "loadavg_end": environment()["loadavg_1_5_15"]}, "tasks": results}


_LABELS = {"free": "unconstrained + parse", "cd": "CD", "dccd_greedy": "DCCD, greedy draft (K=1)"}


def format_real_table(report: dict[str, Any]) -> str:
    """One markdown table per task, then the oracle@K line."""
    lines: list[str] = []
    for task, res in report["tasks"].items():
        lines += [f"**{task}** ({res['methods']['cd']['n']} items)", "",
                  "| method | accuracy | valid | mean α | tax (nats) | tokens | CPU s/item |",
                  "|---|---|---|---|---|---|---|"]
        for name, m in res["methods"].items():
            label = _LABELS.get(name)
            if label is None:
                k, sel = re.fullmatch(r"dccd_k(\d+)_(.+)", name).groups()
                label = f"DCCD K={k} ({sel})"
            alpha = f"{m['mean_alpha']:.4f}" if "mean_alpha" in m else "—"
            tax = f"{m['projection_tax']:.3f}" if "projection_tax" in m else "—"
            lines.append(f"| {label} | {m['accuracy']:.3f} | {m['valid']:.3f} | {alpha} | {tax} | "
                         f"{m['tokens']:.1f} | {m['cpu_s']:.2f} |")
        oracle = ", ".join(f"K={k}: {v:.3f}" for k, v in res["oracle_at_k"].items())
        lines += ["", f"oracle@K (some projection right): {oracle}", ""]
    return "\n".join(lines).rstrip()
