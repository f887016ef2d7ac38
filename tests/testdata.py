"""Where the test data lives, for the module-level constants of test files.

Test files import these names (``from testdata import FIXTURES``) where they need a path
or the corpus sample at import time (``pytest.mark.parametrize`` lists); a test that
needs them only at run time takes the fixtures of ``conftest.py`` instead. Nothing
imports ``conftest`` itself (pytest loads it as a plugin).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from cad_outlines.adapters import get_adapter
from cad_outlines.decoding.runner import TransformersRunner

#: The repository's root (grammars/, adapters/, docs/, pyproject.toml).
ROOT = Path(__file__).resolve().parents[1]
#: tests/fixtures: tokenizers, corpus sample, conformance vectors.
FIXTURES = ROOT / "tests" / "fixtures"
#: The real tokenizers of the three families, one folder each.
TOKENIZERS = FIXTURES / "tokenizers"
#: The shared-corpus sample copied into tests/fixtures (see its README).
CORPUS_SAMPLE = FIXTURES / "corpus_sample.jsonl"
#: The tokenizer families, by fixture folder name.
FAMILIES = ("qwen", "deepseek-coder", "codellama")
#: One tiny random-weight preset per family (cad_outlines.tools.presets).
FAMILY_PRESETS = ["tiny-qwen", "tiny-deepseek-coder", "tiny-codellama"]


@lru_cache(maxsize=None)
def corpus_records() -> tuple[dict, ...]:
    """The records of :data:`CORPUS_SAMPLE`, read once."""
    with open(CORPUS_SAMPLE, encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh)


def _cases(k: int) -> list[dict]:
    """k cases from each corpus of the sample (python, c, prose)."""
    by_corpus: dict[str, list[dict]] = {}
    for case in corpus_records():
        by_corpus.setdefault(case["id"].rsplit("-", 1)[0], []).append(case)
    return [case for cases in by_corpus.values() for case in cases[:k]]


#: Odd documents for the sampled-program tests (CRLF, no final newline, literals as text, ...).
_DOCS = [
    "def f(x):\n    return x + 1\n",
    "héllo wörld 😀\n\n\n\nend",
    "line one\r\nline two\r\n\r\nline four\r\n",
    "a\n</gen>\n<copy lines=\"1-2\"/>\nb\n",
    "⟨gen⟩ look-alike ⟨/gen⟩\n<|im_start|>system\n<s> </s>\n",
    "\n",
    "x",
]


def _structure_bias(model, adapter, strength: float = 9.0):
    """Shape random weights so sampled programs finish within budget.

    A forward hook boosts the program's literal pieces and, at positions inside a gen
    body, the pieces of ``</gen>``. It only changes which valid program is sampled:
    validity is the constraint's job, never the hook's (:func:`prefix_hook`).
    """
    import torch

    vocab = model.model.get_output_embeddings().weight.shape[0]
    structure = torch.zeros(vocab)
    for ids in adapter.literal_ids.values():
        structure[torch.tensor(ids)] = strength
    closing = structure.clone()
    closing[torch.tensor(adapter.literal_ids["</gen>"])] = strength + 4

    def bias(logits, text, last):
        in_gen = text.rfind("<gen>") > text.rfind("</gen>")
        logits += (closing if in_gen else structure).to(logits.dtype)

    return prefix_hook(model, adapter, bias)


def prefix_hook(model, adapter, bias):
    """Register a forward hook calling ``bias(logits_row, text, last_ids)`` for each row of
    logits a forward computes: ``text`` is the decoded last 120 ids before that row,
    ``last_ids`` the last 3. The cache length locates each forward, so the biased model
    stays a function of the prefix alone, as a real model is; drafting relies on that (a
    drafted token sees exactly what it would see undrafted, a rejected one leaves no
    trace). Chains only: tree forwards (``draft_trees``) are not located row by row."""
    fed: list[int] = []

    def hook(module, args, kwargs, output):
        ids = kwargs["input_ids"][0].tolist()
        end = kwargs["cache"].get_seq_length()
        del fed[end - len(ids):]
        fed.extend(ids)
        rows = output.logits.shape[1]
        for row in range(rows):
            upto = end - rows + row + 1
            bias(output.logits[0, row], adapter.decode(fed[max(0, upto - 120):upto]), tuple(fed[max(0, upto - 3):upto]))
        return output

    return model.model.register_forward_hook(hook, with_kwargs=True)


def continuation_bias(adapter, wanted: str):
    """``boost(written, logits)``: where ``written`` is a prefix of ``wanted``, give every
    token that continues it along ``wanted`` a large logit, the longer the larger, so the
    constrained choice follows ``wanted`` while the grammar allows it and the model's top
    token is the one it refuses where ``wanted`` leaves the grammar. A model that wants one
    program text, for the loop's runner (tests/test_ending.py) and vLLM's processor."""
    pieces = _pieces(adapter)

    def boost(written: str, logits) -> None:
        if wanted.startswith(written):
            rest = wanted[len(written):]
            for k in range(1, min(len(rest), 24) + 1):
                for tid in pieces.get(rest[:k], []):
                    if tid < logits.shape[-1]:
                        logits[..., tid] = 1e4 + 10 * k

    return boost


_PIECES: dict[int, tuple[object, dict[str, list[int]]]] = {}  # id -> (tokenizer, kept alive; table)


def _pieces(adapter) -> dict[str, list[int]]:
    """Each token's text (with its spaces, as the adapter decodes it) -> its ids; once per tokenizer."""
    key = id(adapter.tokenizer)
    if key not in _PIECES:
        table: dict[str, list[int]] = {}
        for tid in range(len(adapter.tokenizer)):
            table.setdefault(adapter.decode([tid]), []).append(tid)
        _PIECES[key] = (adapter.tokenizer, table)
    return _PIECES[key][1]


class WantsText(TransformersRunner):
    """A runner whose model wants one program text (tests/test_ending.py, test_repetition.py):
    the model's side, preferring at every step the longest token that continues
    ``wanted`` from the program fed so far (splices and drafts off: what follows the
    prompt is the program)."""

    def __init__(self, hf_model, tokenizer, wanted: str):
        super().__init__(hf_model)
        self.adapter = get_adapter(tokenizer)
        self.boost = continuation_bias(self.adapter, wanted)
        self.prompt: int | None = None
        self.fed: list[int] = []

    def forward(self, ids, cache, rows=1):
        logits = super().forward(ids, cache, rows).clone()  # inference tensors are read-only
        if self.prompt is None:
            self.prompt = len(ids)
        del self.fed[cache.get_seq_length() - len(ids):]  # a fresh cache starts a new run
        self.fed.extend(ids)
        self.boost(self.adapter.decode(self.fed[self.prompt:]), logits)
        return logits
