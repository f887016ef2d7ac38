"""What the adapters read from a tokenizer's ``tokenizers`` backend.

Pure functions of the parsed ``tokenizer.json``; :mod:`.facts` calls them once per
tokenizer and keeps the results. Three things, all derived from the tokenizer's own ``tokenizer.json`` (never typed in):

- :class:`BackendFacts`: the byte scheme (byte-level BPE, SentencePiece, other), the
  component types and the added tokens, for family detection;
- :func:`token_bytes_table`: the exact byte string of every token id, which makes
  decoding a byte concatenation (so it keeps leading spaces mid-sequence and never
  cleans anything up);
- :func:`text_encoder`: a private copy of the backend that tokenizes its input as
  ordinary text in the middle of a sequence: no BOS/EOS, no position artefacts
  (SentencePiece dummy prefix, byte-level ``add_prefix_space``), no Unicode
  normalization (so any text round-trips byte for byte), and control-token spellings
  split into ordinary pieces.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal

import tokenizers

from ._errors import AdapterError

Scheme = Literal["byte_level", "sentencepiece", "other"]

SPM_SPACE = "\u2581"  # "▁", SentencePiece's space
_BYTE_TOKEN_RE = re.compile(r"<0x([0-9A-Fa-f]{2})>")

# Normalizers dropped from the text encoder. Prepend adds SentencePiece's dummy "▁" at
# the start of every segment, which is wrong in the middle of a sequence; NFC would
# make a non-NFC input decode to different bytes (on NFC text it is the identity).
_DROPPED_NORMALIZERS = frozenset({"Prepend", "NFC"})


@dataclass(frozen=True)
class AddedToken:
    """One entry of the backend's added vocabulary."""

    id: int
    content: str
    special: bool


@dataclass(frozen=True)
class BackendFacts:
    """Facts about a tokenizer's backend used for family detection and set-up.

    Attributes
    ----------
    scheme
        ``"byte_level"`` (GPT-2 byte alphabet), ``"sentencepiece"`` (``▁`` for space,
        byte fallback) or ``"other"``.
    model_type
        The backend model type, e.g. ``"BPE"``.
    byte_fallback
        Whether the model falls back to ``<0xNN>`` byte tokens.
    normalizers, pre_tokenizers, decoders
        Component type names, with ``Sequence`` containers flattened.
    added
        The added vocabulary by spelling.
    vocab_size
        One more than the largest token id.
    """

    scheme: Scheme
    model_type: str
    byte_fallback: bool
    normalizers: tuple[str, ...]
    pre_tokenizers: tuple[str, ...]
    decoders: tuple[str, ...]
    added: dict[str, AddedToken]
    vocab_size: int

    @property
    def specials(self) -> dict[str, AddedToken]:
        """The added tokens flagged special."""
        return {c: t for c, t in self.added.items() if t.special}


def backend_spec(tokenizer: Any) -> dict:
    """The parsed ``tokenizer.json`` of a Hugging Face fast tokenizer.

    Raises
    ------
    AdapterError
        If the tokenizer has no ``tokenizers`` backend (a slow tokenizer).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise AdapterError(
            f"{type(tokenizer).__name__} has no `tokenizers` backend (backend_tokenizer); "
            "the adapters need a fast tokenizer (tokenizer.json)")
    return json.loads(backend.to_str())


def _flatten(node: dict | None, key: str) -> list[dict]:
    if not node:
        return []
    if node.get("type") == "Sequence":
        return [leaf for child in node.get(key, []) for leaf in _flatten(child, key)]
    return [node]


def read_facts(spec: dict) -> BackendFacts:
    """Read :class:`BackendFacts` from a parsed ``tokenizer.json``."""
    model = spec.get("model") or {}
    normalizers = _flatten(spec.get("normalizer"), "normalizers")
    pre = _flatten(spec.get("pre_tokenizer"), "pretokenizers")
    dec = _flatten(spec.get("decoder"), "decoders")
    types = {n["type"] for n in pre} | {n["type"] for n in dec}
    replaces_space = any(n["type"] == "Replace" and n.get("content") == SPM_SPACE
                         for n in normalizers)
    if "ByteLevel" in types:
        scheme: Scheme = "byte_level"
    elif model.get("byte_fallback") or "Metaspace" in types or replaces_space:
        scheme = "sentencepiece"
    else:
        scheme = "other"
    added = {a["content"]: AddedToken(a["id"], a["content"], bool(a.get("special")))
             for a in spec.get("added_tokens", [])}
    vocab = model.get("vocab") or {}
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
    size = max([*ids, *(a.id for a in added.values())], default=-1) + 1
    return BackendFacts(scheme, str(model.get("type")), bool(model.get("byte_fallback")),
                        tuple(n["type"] for n in normalizers), tuple(n["type"] for n in pre),
                        tuple(n["type"] for n in dec), added, size)


def _token_strings(spec: dict, size: int) -> list[str | None]:
    strings: list[str | None] = [None] * size
    vocab = (spec.get("model") or {}).get("vocab") or {}
    items = vocab.items() if isinstance(vocab, dict) else ((p[0], i) for i, p in enumerate(vocab))
    for token, idx in items:
        strings[idx] = token
    for a in spec.get("added_tokens", []):
        strings[a["id"]] = a["content"]
    return strings


def token_bytes_table(spec: dict, facts: BackendFacts, fallback: Any = None) -> list[bytes]:
    """The byte string of every token id (``b""`` for ids the vocabulary skips).

    Byte-level BPE: each character of the token maps back to its byte; a token with a
    character outside the byte alphabet (e.g. ``<｜begin▁of▁sentence｜>``) is its UTF-8
    spelling, as the ``tokenizers`` ByteLevel decoder does. SentencePiece: ``▁`` is a
    space and ``<0xNN>`` is the byte NN. Other schemes: ``fallback(token)`` (the HF
    tokenizer's ``convert_tokens_to_string``), checked by the adapter's probes.
    """
    strings = _token_strings(spec, facts.vocab_size)
    added = {a.id for a in facts.added.values()}
    table: list[bytes] = []
    if facts.scheme == "byte_level":
        # GPT-2's byte alphabet (byte value -> printable stand-in), from transformers itself
        # (imported here: 0.6 s, paid once per tokenizer, not by model-free commands).
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        alphabet = {c: b for b, c in bytes_to_unicode().items()}
        # str.translate + latin-1 maps a whole token to its bytes in C.
        to_latin1 = str.maketrans({c: chr(b) for c, b in alphabet.items()})
        charset = frozenset(alphabet)
        for tok in strings:
            if tok is None:
                table.append(b"")
            elif charset.issuperset(tok):
                table.append(tok.translate(to_latin1).encode("latin-1"))
            else:
                table.append(tok.encode("utf-8"))
    elif facts.scheme == "sentencepiece":
        for idx, tok in enumerate(strings):
            if tok is None:
                table.append(b"")
            elif idx in added:
                table.append(tok.encode("utf-8"))
            elif facts.byte_fallback and (m := _BYTE_TOKEN_RE.fullmatch(tok)):
                table.append(bytes([int(m.group(1), 16)]))
            else:
                table.append(tok.replace(SPM_SPACE, " ").encode("utf-8"))
    elif facts.model_type == "WordPiece":
        # "##b" continues a word and "b" starts one after an implied space: a token's
        # text depends on its neighbours, so no token has bytes of its own.
        raise AdapterError(
            "WordPiece tokenizers are not supported: their tokens have no exact bytes "
            "(spaces between words are implied, not tokens), and Copy-as-Decode splices "
            "and decodes byte-exact token runs")
    else:
        for tok in strings:
            table.append(b"" if tok is None or fallback is None else _fallback_bytes(fallback, tok))
    return table


def _fallback_bytes(fallback: Any, token: str) -> bytes:
    """One token's bytes through the tokenizer's ``convert_tokens_to_string``."""
    try:
        return fallback([token]).encode("utf-8")
    except Exception as err:  # the backend's decoder raises its own types
        raise AdapterError(f"cannot read the bytes of token {token!r} from the tokenizer's "
                           f"decoder: {type(err).__name__}: {err}") from err


def _strip_normalizer(node: dict | None) -> dict | None:
    if not node:
        return None
    if node.get("type") == "Sequence":
        kept = [n for n in (_strip_normalizer(c) for c in node.get("normalizers", [])) if n]
        return {"type": "Sequence", "normalizers": kept} if kept else None
    return None if node.get("type") in _DROPPED_NORMALIZERS else node


def _no_prefix_space(node: dict | None) -> None:
    # Walks pre-tokenizers in place: the prefix space is a start-of-text artefact.
    if not node:
        return
    for child in node.get("pretokenizers", []) if node.get("type") == "Sequence" else ():
        _no_prefix_space(child)
    if node.get("type") == "ByteLevel":
        node["add_prefix_space"] = False
    elif node.get("type") == "Metaspace":
        node["prepend_scheme"] = "never"
        if "add_prefix_space" in node:
            node["add_prefix_space"] = False


def text_encoder(spec: dict, table: list[bytes], control: Iterable[str]) -> tokenizers.Tokenizer:
    """A private backend that tokenizes input as ordinary text in mid-sequence.

    Parameters
    ----------
    spec
        The parsed ``tokenizer.json`` (not modified).
    table
        :func:`token_bytes_table` of the same tokenizer.
    control
        Spellings of added tokens to split as text even where the tokenizer marks them
        non-special (e.g. an end-of-turn token).

    Notes
    -----
    Special added tokens are split (``encode_special_tokens``); an added token whose
    bytes differ from its spelling (DeepSeek-Coder's ``õ``, which stands for the byte
    0xF5) is dropped, since matching it in text would change the text.
    """
    control = set(control)
    kept = []
    for a in spec.get("added_tokens", []):
        if table[a["id"]] != a["content"].encode("utf-8"):
            continue
        kept.append({**a, "special": True} if a["content"] in control else a)
    # Only the parts changed below are copied; the (large) model is shared.
    spec = {**spec, "pre_tokenizer": copy.deepcopy(spec.get("pre_tokenizer"))}
    spec["added_tokens"] = kept
    spec["normalizer"] = _strip_normalizer(spec.get("normalizer"))
    _no_prefix_space(spec.get("pre_tokenizer"))
    spec["post_processor"] = None
    spec["truncation"] = None
    spec["padding"] = None
    encoder = tokenizers.Tokenizer.from_str(json.dumps(spec))
    encoder.encode_special_tokens = True
    return encoder


def spm_byte_ids(spec: dict, text: str) -> list[int] | None:
    """Byte-fallback ids spelling ``text`` (``None`` if a byte token is missing)."""
    vocab = (spec.get("model") or {}).get("vocab") or {}
    if not isinstance(vocab, dict):
        return None
    ids = [vocab.get(f"<0x{b:02X}>") for b in text.encode("utf-8")]
    return None if None in ids else ids  # type: ignore[return-value]
