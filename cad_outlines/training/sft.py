"""Supervised fine-tuning rows in exactly the layout the decode loop feeds a model.

A row is one edit: the adapter's prompt for ``(doc, instruction)`` followed by the oracle
program, with every copy tag followed by the ids the loop splices after it
(``adapter.copy_ids(lines)``, the adapter's layout rule). The row is not assembled by a
second tokenizing routine: :func:`build_row` teacher-forces the one decode loop
(:class:`~cad_outlines.decoding.generator.CaDGenerator`) on the oracle program with a *recording*
runner in place of a model (:mod:`cad_outlines.decoding.runner`: it keeps the ids of every forward
and returns zero logits), so ``input_ids`` is, id for id and position for position, what a real model's
KV cache holds after the loop has produced that program (prompt, chosen tokens,
grammar-forced runs, spliced spans). Drafts are off while recording: they change how many
forwards run, never the ids that stay in the cache.

Loss mask
---------
``labels`` equal ``input_ids`` on program tokens and ``-100`` on the prompt and on the
spliced spans. *Program tokens* are every token of the program text, including the
grammar-forced ones (``="`` after ``<copy lines``, ``"/>``, ``</program>``'s tail ...):
the loop feeds them without sampling, but

* a model that is to write programs without the constraint (the text-only path of
  :mod:`cad_outlines.tools.text`, another engine, ``fast_forward=False``) has to produce them;
* which tokens the grammar forces depends on the grammar state and the tokenizer, not on
  the program, so a mask that left them out would change with the loop's options;
* under the constraint their loss is harmless: the loop never reads their logits.

Spliced tokens are input, not output: the model never predicts them, so they carry no
loss (the token after a splice does: it is predicted from a context that ends with the
span). No end-of-sequence token follows ``</program>``: the loop stops there.

The chat form (:func:`chat_messages`) is the same edit as ``{"messages": [...]}`` for
TRL's ``SFTTrainer``: user message = the adapter's user content, assistant message = the
program text. It holds no spliced text, so it trains the text-only layout (a model whose
copies are applied afterwards, :mod:`cad_outlines.tools.text`), not the splice layout.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import torch

from ..language import program, syntax
from ..adapters import Adapter, get_adapter
from .ceiling import oracle_for
from .corpus import Case
from ..files import atomic_write
from ..language.grammar import Granularity
from ..language.program import Op
from ..errors import SFTError

#: Instruction used when a corpus record has no ``instruction`` field.
DEFAULT_INSTRUCTION = "Apply the intended change to the document."

#: Label of a position that carries no loss (the convention of transformers' losses).
IGNORE = -100


@dataclass(frozen=True)
class SFTRow:
    """One training row.

    Attributes
    ----------
    id
        The corpus case id.
    instruction
        The instruction the prompt holds.
    prompt
        The prompt text (:meth:`Adapter.prompt`).
    program
        The target program text.
    input_ids
        Prompt ids, then the program ids with each copy's spliced span after its tag.
    labels
        ``input_ids`` on program tokens, :data:`IGNORE` on prompt and spliced tokens.
    user_content
        The user message inside the prompt (for the chat form).
    """

    id: str
    instruction: str
    prompt: str
    program: str
    input_ids: list[int]
    labels: list[int]
    user_content: str

    def to_json(self) -> dict[str, Any]:
        """The JSONL record: ``id``, ``instruction``, ``prompt``, ``program``, ``input_ids``, ``labels``."""
        return {"id": self.id, "instruction": self.instruction, "prompt": self.prompt,
                "program": self.program, "input_ids": self.input_ids, "labels": self.labels}


def chat_messages(row: SFTRow) -> dict[str, list[dict[str, str]]]:
    """The row as ``{"messages": [user, assistant]}`` (TRL ``SFTTrainer``'s conversational form)."""
    return {"messages": [{"role": "user", "content": row.user_content},
                         {"role": "assistant", "content": row.program}]}


class _RecordingRunner:
    """A :class:`~cad_outlines.decoding.runner.Runner` with no model: it records the ids of every
    forward and returns zero logits (a teacher-forced loop never reads them)."""

    device = torch.device("cpu")

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.fed: list[int] = []

    def new_cache(self) -> None:
        return None

    def forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> torch.Tensor:
        self.fed.extend(int(t) for t in ids)
        return torch.zeros(self.vocab_size) if rows == 1 else torch.zeros(rows, self.vocab_size)

    def crop(self, cache: Any, n: int) -> None:
        raise RuntimeError("the recording loop runs without drafts; nothing is ever cropped")


class RowBuilder:
    """Builds :class:`SFTRow` s for one tokenizer (reuses its adapter and grammar set-up).

    Parameters
    ----------
    tokenizer
        A Hugging Face fast tokenizer.
    granularity
        ``"lines"`` or ``"tokens"``.
    adapter
        Adapter name or instance overriding auto-detection.
    prompt_style
        The prompt's layout (``adapters/_view.py``): ``"full"`` or ``"compact"``.
    """

    def __init__(self, tokenizer: Any, granularity: Granularity = "lines",
                 adapter: str | Adapter | None = None, prompt_style: str = "full"):
        if granularity not in ("lines", "tokens"):
            raise SFTError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")
        self.tokenizer = tokenizer
        self.granularity: Granularity = granularity
        self.prompt_style = prompt_style
        self.adapter = adapter if isinstance(adapter, Adapter) else get_adapter(tokenizer, adapter)
        # No model: the recording runner stands in for the forwards.
        self._runner = _RecordingRunner(max(len(tokenizer), self.adapter.facts.vocab_size))

    def oracle(self, doc: str, gold: str, *, cost_aware: bool = False, min_span: int = 8) -> list[Op]:
        """The oracle program of ``doc -> gold`` at this builder's granularity."""
        ops, _ = oracle_for(doc, gold, self.granularity, self.adapter,
                            min_span=min_span, cost_aware=cost_aware)
        return ops

    def row(self, doc: str, target: str | Sequence[Op], instruction: str, case_id: str = "") -> SFTRow:
        """The training row of one edit.

        Parameters
        ----------
        doc
            The document before the edit.
        target
            The program (text or ops) the model should produce.
        instruction
            What to change.
        case_id
            Name used in the row and in error messages.

        Raises
        ------
        SFTError
            If the document's constraint rejects the program.
        """
        from ..decoding.generator import CaDGenerator, ForcedProgramError
        from ..decoding.options import LoopSwitches

        text = target if isinstance(target, str) else program.render(target)
        self._runner.fed = []
        gen = CaDGenerator.for_tokenizer(self.tokenizer, doc, self._runner, granularity=self.granularity,
                                         adapter=self.adapter, max_new_tokens=1 << 30,
                                         loop=LoopSwitches(draft_tags=False), prompt_style=self.prompt_style)
        try:
            result = gen.run(instruction, force_program=text)
        except (ForcedProgramError, ValueError) as err:
            raise SFTError(f"case {case_id or '?'}: the program does not decode: {err}") from err
        fed = list(self._runner.fed)
        style = self.prompt_style
        doc = gen.view.text  # what the model read (a CRLF file with "\n" ends)
        prompt_ids = self.adapter.prompt_ids(doc, instruction, self.granularity, style=style)
        labels = self._labels(fed, prompt_ids, gen.view.spans(result.ops), case_id)
        tail = self._tail(fed, labels, result.program, result.stats.program_tokens, case_id)
        return SFTRow(case_id, instruction, self.adapter.prompt(doc, instruction, self.granularity, style=style),
                      result.program, fed + tail, labels + tail,
                      self.adapter.user_content(doc, instruction, self.granularity, style=style))

    def _labels(self, fed: list[int], prompt_ids: list[int], spans: list[list[int]],
                case_id: str) -> list[int]:
        """Mask the prompt and every spliced span; the rest is program."""
        if fed[:len(prompt_ids)] != prompt_ids:
            raise SFTError(f"case {case_id}: the loop's prefill differs from the adapter's prompt ids")
        labels = [IGNORE] * len(prompt_ids)
        pos = len(prompt_ids)
        pending = b""  # program bytes since the last copy tag
        queue = iter(spans)
        while pos < len(fed):
            labels.append(fed[pos])
            pending += self.adapter.token_bytes(fed[pos])
            pos += 1
            # The constraint ends every copy tag on a token boundary; its span follows.
            tag = syntax.COPY_TAG_RE.search(pending.decode("utf-8", "replace"))
            if tag and pending.endswith(tag.group(0).encode("utf-8")):
                span = next(queue, None)
                if span is None or fed[pos:pos + len(span)] != span:
                    raise SFTError(f"case {case_id}: the ids after {tag.group(0)!r} are not the "
                                   "adapter's copy ids")
                labels.extend([IGNORE] * len(span))
                pos += len(span)
                pending = b""
        return labels

    def _tail(self, fed: list[int], labels: list[int], program_text: str, program_tokens: int,
              case_id: str) -> list[int]:
        """The ids of the last step, which no forward receives.

        Nothing reads the logits after ``</program>``, so the loop never forwards its last
        chosen token and the forced run after it: the recording ends before them. They are
        the adapter's ids of the rest of the program text; their count is checked against
        the loop's own count of program tokens.
        """
        recorded = [t for t, lab in zip(fed, labels) if lab != IGNORE]
        spelled = self.adapter.id_bytes(recorded)
        data = program_text.encode("utf-8")
        if not data.startswith(spelled):
            raise SFTError(f"case {case_id}: the recorded program ids do not spell the program")
        tail = self.adapter.encode(data[len(spelled):].decode("utf-8"))
        if len(recorded) + len(tail) != program_tokens:
            raise SFTError(f"case {case_id}: the loop counted {program_tokens} program tokens, "
                           f"the row has {len(recorded) + len(tail)}")
        return tail


def build_rows(cases: Iterable[Case], builder: RowBuilder, *, cost_aware: bool = False,
               max_tokens: int | None = None, progress: bool = False,
               ) -> Iterator[SFTRow | tuple[str, str]]:
    """Rows of ``cases``; a skipped case yields ``(id, reason)`` instead.

    Parameters
    ----------
    cases
        Corpus cases; ``case.meta["instruction"]`` is used when present, else
        :data:`DEFAULT_INSTRUCTION`.
    builder
        The tokenizer's :class:`RowBuilder`.
    cost_aware
        Use the cost-aware line oracle.
    max_tokens
        Skip rows longer than this many ids.
    progress
        Show a tqdm progress bar on stderr.
    """
    from tqdm.auto import tqdm

    cases = list(cases)
    for case in tqdm(cases, desc="sft", unit="case", disable=not progress):
        instruction = case.meta.get("instruction") or DEFAULT_INSTRUCTION
        if not isinstance(instruction, str):
            raise SFTError(f"case {case.id}: 'instruction' must be a string")
        ops = builder.oracle(case.doc, case.gold, cost_aware=cost_aware)
        row = builder.row(case.doc, ops, instruction, case.id)
        if max_tokens is not None and len(row.input_ids) > max_tokens:
            yield case.id, f"{len(row.input_ids)} ids > --max-tokens {max_tokens}"
            continue
        yield row


def model_context(folder: str | os.PathLike) -> int | None:
    """``max_position_embeddings`` of the model folder a tokenizer sits in, if it has a config."""
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
            value = json.load(fh).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def write_rows(rows: Iterable[SFTRow], path: str | os.PathLike,
               messages_path: str | os.PathLike | None = None) -> int:
    """Write rows as JSONL (atomically); optionally their chat form to ``messages_path``.

    Returns the number of rows written.
    """
    rows = list(rows)
    atomic_write(path, "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in rows))
    if messages_path is not None:
        atomic_write(messages_path, "".join(json.dumps(chat_messages(r), ensure_ascii=False) + "\n"
                                            for r in rows))
    return len(rows)
