"""``bench http``: the same edits over loopback HTTP, with and without ``prediction``.

N concurrent clients (threads, the ``openai`` package) send each eval edit to one
``cad-outlines serve`` twice over: as a predicted-output edit (CaD: the server copies
the file's lines) and as plain chat asking for the whole edited file (the server
regenerates it with the same model, transformers ``generate``). Each request streams, so
the time to the first content token is measured too. Reported per method: p50/p95
latency, p50 time to first token, edits per minute (edits / wall-clock of the whole batch),
and exact matches against the gold file.

``subset`` takes the edits from one subset of the v2 eval cases instead (``bench quality
--cases v2``); a lazy-snippet case goes out as the apply-model message
(``<code>…</code><update>…</update>``) whose merge the server follows, and the report
counts the snippets the server could merge (``cad.merged``). ``methods`` picks the rows.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..adapters._view import plain_content
from ..errors import InputError, MissingDependencyError
from ..language.snippets import update_of
from ._common import environment, percentile
from .quality import load_eval_cases

#: Explicit edits (an instruction that says exactly what to change).
KINDS = ("replace", "delete", "insert_after", "change")
METHODS = ("cad", "regen")


@dataclass(frozen=True)
class HttpConfig:
    """One ``bench http`` run."""

    preset: str | None = "smollm2-135m"
    model: str | None = None
    url: str | None = None  # a running server instead of starting one
    api_key: str | None = None  # the running server's key
    clients: int = 8
    edits: int = 16
    max_tokens: int = 512  # CaD: program tokens
    timeout: float = 900.0
    subset: str | None = None  # a subset of the v2 eval cases instead of the explicit kinds
    methods: tuple[str, ...] = METHODS


def _request(client: Any, model: str, method: str, case: Any, max_tokens: int) -> dict[str, Any]:
    instruction = case.meta["instruction"]
    update = update_of(instruction)
    if method == "cad" and update is not None:  # a lazy snippet: the apply-model message
        kwargs = dict(messages=[{"role": "user", "content": f"<code>{case.doc}</code>\n<update>{update}</update>"}],
                      max_tokens=max_tokens)
    elif method == "cad":
        kwargs = dict(messages=[{"role": "user", "content": instruction}],
                      prediction={"type": "content", "content": case.doc}, max_tokens=max_tokens)
    else:  # the file regenerated: the plain prompt the adapters give the regeneration baseline
        kwargs = dict(messages=[{"role": "user", "content": plain_content(instruction, case.doc)}],
                      max_tokens=len(case.gold) // 2 + 32)  # room for the file (>= 2 chars a token)
    start = time.perf_counter()
    first = None
    parts: list[str] = []
    finish = record = None
    for event in client.chat.completions.create(model=model, stream=True, **kwargs):
        record = (event.model_extra or {}).get("cad", record)
        if not event.choices:
            continue
        delta = event.choices[0].delta.content
        if delta:
            first = first if first is not None else time.perf_counter() - start
            parts.append(delta)
        finish = event.choices[0].finish_reason or finish
    text = "".join(parts)
    return {"case": case.id, "method": method, "seconds": time.perf_counter() - start,
            "ttft_seconds": first, "finish_reason": finish, "exact": text == case.gold,
            "merged": (record or {}).get("merged")}


def _summary(rows: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows]
    ttft = [r["ttft_seconds"] for r in rows if r["ttft_seconds"] is not None]
    return {"edits": len(rows), "exact": sum(r["exact"] for r in rows), "wall_seconds": wall,
            "merged": sum(r["merged"] is True for r in rows),
            "edits_per_minute": 60 * len(rows) / wall if wall else 0.0,
            "latency_p50": percentile(seconds, 50), "latency_p95": percentile(seconds, 95),
            "ttft_p50": percentile(ttft, 50), "finished": sum(r["finish_reason"] == "stop" for r in rows)}


class _Server:
    """A ``cad-outlines serve --port 0`` subprocess (its log goes to this process's stderr)."""

    def __init__(self, cfg: HttpConfig, queue: int):
        source = ["--preset", cfg.preset] if cfg.preset else ["--model", str(cfg.model)]
        self.proc = subprocess.Popen([sys.executable, "-m", "cad_outlines", "serve", "--port", "0",
                                      "--max-queue", str(queue), "-q", *source],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(600)
        if not line or " at " not in line[0]:
            self.proc.kill()
            raise InputError(f"bench http: the server did not start ({(line or ['no output'])[0].strip()})")
        self.url = line[0].split(" at ", 1)[1].strip()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)


def run(cfg: HttpConfig, *, cases: Sequence[Any] | None = None) -> dict[str, Any]:
    """Run every method over the same edits; the report (rows, summaries, environment)."""
    try:
        import openai
    except ImportError:
        raise MissingDependencyError("bench http needs the openai client: pip install openai") from None
    unknown = sorted(set(cfg.methods) - set(METHODS))
    if unknown or not cfg.methods:
        raise InputError(f"bench http --methods: {', '.join(unknown) or 'none given'}; "
                         f"the methods are {', '.join(METHODS)}")
    if cases is None and cfg.subset is not None:
        cases = [c for c in load_eval_cases("v2") if c.meta.get("subset") == cfg.subset][:cfg.edits]
        if not cases:
            subsets = sorted({c.meta.get("subset") for c in load_eval_cases("v2")})
            raise InputError(f"bench http --subset {cfg.subset}: no such subset of the v2 cases "
                             f"(one of {', '.join(subsets)})")
    if cases is None:
        cases = [c for c in load_eval_cases() if c.meta.get("kind") in KINDS][:cfg.edits]
    server = _Server(cfg, queue=cfg.clients) if cfg.url is None else None
    url = cfg.url or server.url  # type: ignore[union-attr]
    try:
        client = openai.OpenAI(base_url=url, api_key=cfg.api_key or "none", max_retries=0, timeout=cfg.timeout)
        model = client.models.list().data[0].id
        _request(client, model, "cad", cases[0], cfg.max_tokens)  # warm-up: first-call costs
        rows: list[dict[str, Any]] = []
        summaries: dict[str, Any] = {}
        for method in cfg.methods:
            start = time.perf_counter()
            with ThreadPoolExecutor(cfg.clients) as pool:
                done = list(pool.map(lambda case: _request(client, model, method, case, cfg.max_tokens), cases))
            summaries[method] = _summary(done, time.perf_counter() - start)
            rows += done
    finally:
        if server is not None:
            server.close()
    cad, regen = summaries.get("cad"), summaries.get("regen")
    return {"config": asdict(cfg), "model": model, "summary": summaries,
            "speedup_edits_per_minute": cad["edits_per_minute"] / regen["edits_per_minute"]
            if cad and regen and regen["edits_per_minute"] else None,
            "rows": rows, "environment": environment(server_url=url)}


def format_table(report: dict[str, Any]) -> str:
    """The markdown table of a report."""
    cfg, env = report["config"], report["environment"]
    edits = next(iter(report["summary"].values()))["edits"]
    subset = f" of `{cfg['subset']}`" if cfg.get("subset") else ""
    lines = [f"`bench http`: {report['model']}, {cfg['clients']} clients, {edits} edits{subset}; "
             f"{env['cpu']} ({env['cpus']} CPUs), load {env['loadavg_1_5_15']}, {env['date_utc']} UTC",
             "",
             "| method | exact | finished | merged | edits/min | latency p50 (s) | latency p95 (s) | TTFT p50 (s) |",
             "|---|---|---|---|---|---|---|---|"]
    names = {"cad": "CaD (`prediction`, or the apply form for a snippet)", "regen": "regeneration (plain chat)"}
    for method, s in report["summary"].items():
        lines.append(f"| {names[method]} | {s['exact']}/{s['edits']} | {s['finished']}/{s['edits']} | "
                     f"{s.get('merged', 0)}/{s['edits']} | "
                     f"{s['edits_per_minute']:.2f} | {s['latency_p50']:.2f} | {s['latency_p95']:.2f} | "
                     f"{s['ttft_p50']:.2f} |")
    if report["speedup_edits_per_minute"]:
        lines += ["", f"CaD: {report['speedup_edits_per_minute']:.2f}x the edits per minute of regeneration."]
    return "\n".join(lines)
