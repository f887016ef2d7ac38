"""The adapter interface and the logic every family shares.

An adapter holds one tokenizer's facts for Copy-as-Decode: the ids of the program's
structural literals, how to tokenize copied text for the KV cache, the context layout
after a copy, and the prompt. A family (``qwen.py``, ``deepseek_coder.py``, ...) is a
subclass that sets a few class attributes (data) and a ``matches`` test.

The text contract
-----------------
:meth:`Adapter.encode` tokenizes its input as ORDINARY text in the middle of a sequence:
no BOS/EOS, no SentencePiece dummy prefix, special-token spellings (``<|im_start|>``,
``<s>``) as plain pieces, byte fallback intact, no Unicode normalization. Decoding is the
concatenation of each token's exact bytes, so for any id list ``P`` ending on a character
boundary::

    decode(P + encode(t)) == decode(P) + t        # byte for byte

Every adapter checks this on probe strings when it is built (:meth:`Adapter._verify`)
and raises :class:`AdapterError` naming the probe that failed.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar, Mapping, Sequence

from cad_outlines.language import syntax

from . import _backend, _view
from ._backend import BackendFacts
from ._errors import AdapterError
from .facts import tokenizer_facts

#: The structural literals whose ids every adapter derives at load.
LITERALS: tuple[str, ...] = (*syntax.STRUCTURAL_LITERALS, *syntax.INDEX_DIGITS)

_COPY_1_3 = syntax.copy_tag("lines", 1, 3)

#: Strings each adapter must round-trip at load (after each of the probe prefixes).
PROBES: tuple[str, ...] = (
    "\n", "\n\n", " ", "  two leading spaces", " one", "\tindented\twith tabs\t",
    "a\r\nb\r\n", "trailing  \n", "   \n  \n", "caf\u00e9 \u00fc\u00df \u4e2d\u6587 \U0001F600 \u2603",
    "e\u0301 A\u030a", "\u2581 \u2581\u2581x", "<|im_start|>user\n", "<|im_end|>", "<s>", "</s>",
    "<|endoftext|>", "<unk>", f"x{syntax.GEN_CLOSE}y", "def add(a, b):\n    return a + b\n",
    syntax.copy_tag("lines", "12", "345"), *LITERALS,
)
_PROBE_PREFIXES: tuple[str, ...] = ("", syntax.PROGRAM_OPEN, syntax.PROGRAM_OPEN + _COPY_1_3, "x")

#: Ordinary text on which the text encoder must agree with the tokenizer itself.
_ORDINARY: tuple[str, ...] = (
    "def add(a, b):\n    return a + b\n",
    "Hello world. The quick brown fox, 42 times!",
    f"{syntax.PROGRAM_OPEN}{_COPY_1_3}{syntax.GEN_OPEN}\nx = 1\n{syntax.GEN_CLOSE}{syntax.PROGRAM_CLOSE}",
)

_SENTINEL = "\ue000cad-outlines-content\ue001"


class Adapter:
    """Token facts of one tokenizer for Copy-as-Decode (see the module docstring).

    Parameters
    ----------
    tokenizer
        A Hugging Face fast tokenizer (``transformers`` ``PreTrainedTokenizerBase``).

    Attributes
    ----------
    name
        The family name (a key of :data:`cad_outlines.adapters.ADAPTERS`).
    tokenizer
        The Hugging Face tokenizer.
    eos_token_id
        The id that ends generation: the chat end-of-turn token where the family has one.
    literal_ids
        Ids of every literal in :data:`LITERALS`, from :meth:`encode`.
    special_ids
        Ids of the tokenizer's special tokens and of ``eos_token_id``; :meth:`encode`
        never produces them.
    facts
        What was read from the tokenizer's backend (:class:`._backend.BackendFacts`).

    Raises
    ------
    AdapterError
        If the tokenizer lacks a token the family needs, or a probe fails.
    """

    #: Family name; subclasses override.
    name: ClassVar[str] = "generic"
    #: Spelling of the end-of-answer token; ``None``: the tokenizer's ``eos_token``.
    eos_spelling: ClassVar[str | None] = None
    #: Added tokens that ``encode`` must split as text even if the tokenizer marks them
    #: non-special (``eos_spelling`` is always included).
    control_spellings: ClassVar[tuple[str, ...]] = ()
    #: Tokens the family needs in the vocabulary (besides ``eos_spelling``).
    required_spellings: ClassVar[tuple[str, ...]] = ()
    #: Chat template (Jinja, rendered by ``apply_chat_template``) for tokenizers that ship
    #: none. Besides ``messages`` it sees ``bos`` (the BOS spelling when the tokenizer adds
    #: BOS, else empty) and ``eos`` (the end-of-answer spelling). Generic form: each
    #: message's content on its own line.
    fallback_chat_template: ClassVar[str] = (
        "{{ bos }}{% for m in messages %}{{ m['content'] + '\\n' }}{% endfor %}")
    #: Extra keyword arguments for ``apply_chat_template`` (e.g. Qwen3's thinking switch).
    chat_template_kwargs: ClassVar[dict[str, Any]] = {}

    @classmethod
    def matches(cls, tokenizer: Any, facts: BackendFacts) -> bool:
        """Whether auto-detection should pick this family for ``tokenizer``."""
        return False

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        facts = tokenizer_facts(tokenizer)
        self._spec = facts.spec
        self.facts = facts.backend
        self._bytes = facts.table
        vocab = tokenizer.get_vocab()
        missing = [s for s in (*self.required_spellings, *filter(None, [self.eos_spelling]))
                   if s not in vocab]
        if missing:
            raise AdapterError(f"{self.name} adapter: the tokenizer has no token "
                               f"{', '.join(map(repr, missing))}, which this family needs")
        eos = vocab[self.eos_spelling] if self.eos_spelling else tokenizer.eos_token_id
        if eos is None:
            raise AdapterError(f"{self.name} adapter: the tokenizer defines no eos_token")
        self.eos_token_id: int = int(eos)
        control = {*self.control_spellings, *self.facts.specials,
                   tokenizer.convert_ids_to_tokens(self.eos_token_id)}
        self._encoder = facts.text_encoder(control)
        self._spm_space_ids: list[int] | None = None
        if self.facts.scheme == "sentencepiece":
            # "▁" in the text would decode as a space; spell it with byte tokens instead.
            self._spm_space_ids = _backend.spm_byte_ids(self._spec, _backend.SPM_SPACE)
        self.special_ids: frozenset[int] = frozenset(
            {t.id for t in self.facts.specials.values()} | {self.eos_token_id})
        self._sentence_prefix = self._detect_sentence_prefix()
        self._adds_bos = self._detect_bos()
        self._verify()
        self.literal_ids: dict[str, list[int]] = {lit: self.encode(lit) for lit in LITERALS}

    def check_tokenizer(self, tokenizer: Any) -> None:
        """Refuse to serve a model whose tokenizer is not this adapter's.

        An adapter built for another tokenizer would feed the model another vocabulary's
        ids. A different object with the same vocabulary (the same folder loaded twice)
        is accepted.

        Raises
        ------
        AdapterError
            Naming both tokenizers when their vocabularies differ.
        """
        if tokenizer is self.tokenizer:
            return
        get_vocab = getattr(tokenizer, "get_vocab", None)
        if get_vocab is None or get_vocab() != self.tokenizer.get_vocab():
            raise AdapterError(
                f"{self.name} adapter was built for {_describe(self.tokenizer)} and cannot serve "
                f"{_describe(tokenizer)}: the vocabularies differ (pass adapter=None to detect "
                "the model's own family, or an adapter built from the model's tokenizer)")

    # -- text ---------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as ordinary mid-sequence text (see the module docstring)."""
        if self._spm_space_ids is not None and _backend.SPM_SPACE in text:
            ids: list[int] = []
            for i, part in enumerate(text.split(_backend.SPM_SPACE)):
                if i:
                    ids.extend(self._spm_space_ids)
                if part:
                    ids.extend(self._encoder.encode(part, add_special_tokens=False).ids)
            return ids
        return self._encoder.encode(text, add_special_tokens=False).ids if text else []

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``: their bytes joined (nothing stripped or cleaned), as UTF-8.

        Invalid UTF-8 (ids ending inside a character) decodes to U+FFFD.
        """
        return self.id_bytes(ids).decode("utf-8", errors="replace")

    def id_bytes(self, ids: Sequence[int]) -> bytes:
        """The exact bytes of ``ids`` joined."""
        table = self._bytes
        try:
            return b"".join(table[i] for i in ids)
        except (IndexError, TypeError):
            bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < len(table)]
            raise AdapterError(f"token ids outside the vocabulary 0..{len(table) - 1}: {bad[:5]}") from None

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes of one token."""
        return self.id_bytes([token_id])

    def encode_span(self, text: str) -> list[int]:
        """Ids spliced into the KV cache for copied text (same contract as :meth:`encode`)."""
        return self.encode(text)

    # -- copy layout ---------------------------------------------------------------------

    def copy_layout(self, lines: Sequence[str]) -> str:
        """The text that follows a line copy's ``"/>`` in the model's context.

        THE layout rule: ``"\\n" + "\\n".join(lines) + "\\n"``; the next op's ``<``
        follows it. Training-data builders must use this same function.
        """
        if not lines:
            raise ValueError("a copy spans at least one line")
        if any("\n" in line for line in lines):
            raise ValueError("copied lines must not contain '\\n' (split the document first)")
        return "\n" + "\n".join(lines) + "\n"

    def copy_ids(self, lines: Sequence[str]) -> list[int]:
        """``encode_span(copy_layout(lines))``: the ids spliced after a line copy."""
        return self.encode_span(self.copy_layout(lines))

    # -- token granularity ----------------------------------------------------------------

    def document_ids(self, document: str) -> list[int]:
        """The document's ids for ``<copy tokens="a-b"/>`` positions (``encode(document)``)."""
        return self.encode(document)

    def token_pieces(self, document: str) -> list[bytes]:
        """The byte string of each document token; they join to ``document.encode()``."""
        table = self._bytes
        pieces = [table[i] for i in self.document_ids(document)]
        if b"".join(pieces) != document.encode("utf-8"):
            raise AdapterError(f"{self.name} adapter: the document's tokens do not spell it exactly")
        return pieces

    # -- prompt -----------------------------------------------------------------------------

    def render_document(self, document: str, granularity: str = "lines", style: str = "full") -> str:
        """The numbered view of ``document`` used in the prompt.

        Lines: ``f"{i:>{w}}| {line}"`` for ``i, line`` in ``enumerate(syntax.copy_lines(document), 1)``
        with ``w = len(str(n))`` (style ``compact``: ``f"{i} {line}"``). Tokens: one row per
        line, prefixed by the positions of the tokens starting on it, ``·`` before each
        further token (see ``adapters/_view.py``).
        """
        if style != "full":
            _view.check_style(style, granularity)
        if granularity == "lines":
            return _view.number_lines(document, style)
        if granularity == "tokens":
            return _view.number_tokens(document, self.token_pieces(document))
        raise ValueError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")

    def user_content(self, document: str, instruction: str, granularity: str = "lines",
                     template: Any = None, style: str = "full") -> str:
        """The user message: instruction, program format, numbered document (in the order
        of ``style``, see ``adapters/_view.py``).

        ``template`` (a ``cad_outlines.decoding.prompts.PromptTemplate``) replaces the default layout.
        """
        return _view.user_content(instruction, self.render_document(document, granularity, style),
                                  granularity, template, style)

    def prompt(self, document: str, prompt: str | Sequence[Mapping[str, str]], granularity: str = "lines",
               template: Any = None, style: str = "full") -> str:
        """The prompt text: the conversation inside the chat template.

        ``prompt`` is the instruction, or a conversation (message dicts) whose last
        message is the user's instruction; that message becomes :meth:`user_content`.
        """
        before, after = self._template(prompt)
        return before + self.user_content(document, _instruction(prompt), granularity, template, style) + after

    def plain_prompt(self, document: str, prompt: str | Sequence[Mapping[str, str]], style: str = "full") -> str:
        """The regeneration prompt: the conversation with :func:`_view.plain_content`
        (the instruction, a request for the whole edited document, the file as it is; in
        ``style`` ``compact`` the file first)."""
        before, after = self._template(prompt)
        return before + _view.plain_content(_instruction(prompt), document, style) + after

    def plain_prompt_ids(self, document: str, prompt: str | Sequence[Mapping[str, str]],
                         style: str = "full") -> list[int]:
        """Ids of :meth:`plain_prompt`, tokenized as :meth:`prompt_ids` tokenizes its prompt."""
        return self._content_ids(prompt, _view.plain_content(_instruction(prompt), document, style))

    def prompt_ids(self, document: str, prompt: str | Sequence[Mapping[str, str]],
                   granularity: str = "lines", template: Any = None, style: str = "full") -> list[int]:
        """Ids of :meth:`prompt`, built by pieces.

        The template's text before the last and after the first control token around the
        user message is tokenized by the tokenizer itself (its special tokens as special
        tokens, and so are earlier turns of a conversation); the text run holding the user
        message is tokenized with :meth:`encode`, so a spelling like ``<|im_start|>`` in the
        document stays text. SentencePiece tokenizers start every text run after a special
        token with the dummy-prefix ``▁``, as their own tokenizer does, so there
        ``decode(prompt_ids)`` shows one more space after such a token than :meth:`prompt`.
        """
        return self._content_ids(prompt, self.user_content(document, _instruction(prompt), granularity,
                                                           template, style))

    def constant_ids(self, granularity: str = "lines", style: str = "full", plain: bool = False) -> list[int]:
        """The ids every prompt of this layout starts with, whatever the document and the
        instruction (a single instruction, no conversation): the chat template's head and,
        in style ``compact``, the format statement. What a process can prefill once and
        reuse (``TransformersRunner.pin``). ``plain``: of :meth:`plain_prompt_ids`."""
        def ids(document: str, instruction: str) -> list[int]:
            if plain:
                return self.plain_prompt_ids(document, instruction, style)
            return self.prompt_ids(document, instruction, granularity, style=style)

        # Edits that differ from their first character on, documents that start with a
        # letter, a blank or a line break or are empty (the layout's text before the
        # document may merge with it into one token): the ids all share are constant.
        probes = [ids(doc, instruction) for doc, instruction in
                  (("a", "x"), ("b\nc", "y"), ("", "z"), ("\n\n", "w"), (" \t", "v"))]
        return list(os.path.commonprefix(probes))

    def _content_ids(self, prompt: str | Sequence[Mapping[str, str]], content: str) -> list[int]:
        """Ids of the conversation with ``content`` as its last user message."""
        before, after = self._template(prompt)
        head, tail = self._split_at_added(before, last=True)
        lead, rest = self._split_at_added(after, last=False)
        native = self.tokenizer.encode
        ids = native(head, add_special_tokens=False) if head else []
        ids += self.encode(self._sentence_prefix + tail + content + lead)
        ids += native(rest, add_special_tokens=False) if rest else []
        return ids

    def _template(self, prompt: str | Sequence[Mapping[str, str]] = "") -> tuple[str, str]:
        """The prompt's text before and after the (last) user message.

        The tokenizer's chat template renders the conversation; a tokenizer without one
        uses the family's :attr:`fallback_chat_template`.
        """
        tok = self.tokenizer
        if isinstance(prompt, str):
            messages = [{"role": "user", "content": _SENTINEL}]
        else:
            messages = [dict(m) for m in prompt]
            messages[-1]["content"] = _SENTINEL
        extra: dict[str, Any] = {}
        if not getattr(tok, "chat_template", None):
            extra = {"chat_template": self.fallback_chat_template,
                     "bos": tok.bos_token if self._adds_bos and tok.bos_token else "",
                     "eos": tok.convert_ids_to_tokens(self.eos_token_id)}
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                       **self.chat_template_kwargs, **extra)
        if not isinstance(text, str) or text.count(_SENTINEL) != 1:
            raise AdapterError(f"{self.name} adapter: the prompt template does not hold the "
                               "user message exactly once")
        before, after = text.split(_SENTINEL)
        return before, after

    def _split_at_added(self, text: str, last: bool) -> tuple[str, str]:
        """Split ``text`` after the last (or before the first) added-token spelling."""
        spellings = sorted(self.facts.added, key=len, reverse=True)
        matches = list(re.finditer("|".join(map(re.escape, spellings)), text)) if spellings else []
        if not matches:
            return ("", text) if last else (text, "")
        cut = matches[-1].end() if last else matches[0].start()
        return text[:cut], text[cut:]

    # -- load-time checks ---------------------------------------------------------------------

    def _detect_sentence_prefix(self) -> str:
        """What the tokenizer itself puts before a text run: "" or SentencePiece's " "."""
        got = self.id_bytes(self.tokenizer.encode("a", add_special_tokens=False))
        if got == b"a":
            return ""
        if got == b" a":
            return " "
        raise AdapterError(f"{self.name} adapter: cannot tell how the tokenizer starts a text: "
                           f"'a' encodes to tokens spelling {got!r}")

    def _detect_bos(self) -> bool:
        bos = self.tokenizer.bos_token_id
        return bos is not None and self.tokenizer.encode("a", add_special_tokens=True)[:1] == [bos]

    def _verify(self) -> None:
        """Round-trip probes; raise :class:`AdapterError` naming the first that fails."""
        where = f"{self.name} adapter rejected the tokenizer"
        for prefix_text in _PROBE_PREFIXES:
            prefix = self.encode(prefix_text)
            if self.decode(prefix) != prefix_text:
                raise AdapterError(f"{where}: probe prefix {prefix_text!r} decodes to "
                                   f"{self.decode(prefix)!r} (ids {prefix})")
            for probe in PROBES:
                ids = self.encode(probe)
                got = self.decode(prefix + ids)
                if got != prefix_text + probe:
                    raise AdapterError(
                        f"{where}: probe {probe!r} after {prefix_text!r} did not round-trip: "
                        f"encode gave ids {ids}, which decode to {self.decode(ids)!r}")
        for spelling in sorted(self.facts.specials) + [self.decode([self.eos_token_id])]:
            ids = self.encode(spelling)
            hit = self.special_ids.intersection(ids)
            if hit:
                raise AdapterError(f"{where}: the text {spelling!r} encodes to the special "
                                   f"token id(s) {sorted(hit)} instead of text pieces")
        native = self.tokenizer.encode
        for text in _ORDINARY:
            ours = self.encode(self._sentence_prefix + text)
            theirs = native(text, add_special_tokens=False)
            if ours != theirs:
                raise AdapterError(f"{where}: on ordinary text {text!r} the text encoder gives "
                                   f"{ours}, the tokenizer itself {theirs}")
        for lit in LITERALS:
            if not self.encode(lit):
                raise AdapterError(f"{where}: the literal {lit!r} encodes to no tokens")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} vocab={len(self._bytes)} eos={self.eos_token_id}>"


def _instruction(prompt: str | Sequence[Mapping[str, str]]) -> str:
    """The instruction of a prompt: the text, or the conversation's last message."""
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


def _describe(tokenizer: Any) -> str:
    """A tokenizer's class, folder and size, for error messages."""
    where = getattr(tokenizer, "name_or_path", "") or "?"
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else "?"
    return f"{type(tokenizer).__name__}({where!r}, {size} tokens)"
