"""How the document is shown to the model, and the short statement of the program format.

Line view (``granularity="lines"``)
-----------------------------------
The document's lines are ``syntax.copy_lines(document)`` (the copy units: a trailing
newline gives an empty last line, and a document without one shows its open end, an
empty last line too). Line ``i`` (1-indexed) is shown as::

    f"{i:>{w}}| {line}"        # w = len(str(n)), n = number of lines

rows joined by ``"\\n"``. Example for ``"def f():\\n    return 1\\n"``::

    1| def f():
    2|     return 1
    3|

Token view (``granularity="tokens"``)
-------------------------------------
Still one row per document line, so the document reads as usual. A row is::

    f"{a}-{b}".rjust(w) + "| " + marked line       # blank range when no token starts there

where ``a..b`` are the 0-indexed positions of the tokens that START on that line
(counting a token that starts at the line's newline), and the line text has a middle dot
``·`` (U+00B7) inserted before every other token that starts inside the line, including
one at the line's end for a token that starts with the newline. A token that runs into
the next line (e.g. ``"\\n\\n"``) counts on the line where it starts. A character split
over several tokens (byte-level BPE on rare characters) is shown whole, with no dot inside
it. Example (Qwen; ``():\\n`` is one token there, so line 1 ends without a dot)::

    0-2| def· f·():
    3-7|    · return· ·1·
       |

The last row is the empty line after the final newline: no token starts on it.
"""

from __future__ import annotations

from typing import Any, Sequence

from cad_outlines.language import syntax

TOKEN_MARK = "\u00b7"  # ·

_PROGRAM = f"{syntax.PROGRAM_OPEN}...{syntax.PROGRAM_CLOSE}"
# Said in words, not as a literal like "<gen>text</gen>" that a weak model copies verbatim.
_GEN = f"{syntax.GEN_OPEN}, the new text, {syntax.GEN_CLOSE}"
_FORMAT = {
    "lines": (
        "Answer with an edit program instead of the whole edited document. "
        f"A program is {_PROGRAM} holding, in order, any number of:\n"
        f"{syntax.copy_tag('lines', 'i', 'j')} (the document's lines i to j, inclusive, unchanged) and\n"
        f"{_GEN} (text that is not in the document).\n"
        'The document is shown with each line prefixed by its number and "| "; '
        "the prefix is not part of the line."
    ),
    "tokens": (
        "Answer with an edit program instead of the whole edited document. "
        f"A program is {_PROGRAM} holding, in order, any number of:\n"
        f"{syntax.copy_tag('tokens', 'a', 'b')} (the document's tokens a to b, 0-indexed, inclusive, "
        f"unchanged) and\n{_GEN} (text that is not in the document).\n"
        'The document is shown line by line; each line is prefixed by the positions "a-b" '
        'of the tokens that start on it and "| ", and "\u00b7" marks where each further '
        "token starts; neither is part of the text."
    ),
}


#: Prompt styles. ``full``: instruction, format statement, document numbered ``"{i:>w}| "``
#: (the layout every shipped model before ``compact`` was trained on). ``compact``: the
#: constant part first, so a process caches its KV once for every later edit, then the
#: document, then the instruction, so successive edits of one file share the document's
#: KV up to the first changed line; a shorter statement and ``"{i} "`` numbering, the
#: scheme every supported tokenizer splits into the fewest pieces (``bench prompt``).
PROMPT_STYLES = ("full", "compact")

_COMPACT = (
    "Reply with an edit program, not the edited document: "
    f"{_PROGRAM} holding, in order, {syntax.copy_tag('lines', 'i', 'j')} (lines i to j, unchanged) "
    f"and {_GEN}. Each line of the document starts with its number and a space."
)


def check_style(style: str, granularity: str) -> None:
    """Raise ``ValueError`` for an unknown style, or ``compact`` with token granularity."""
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt_style must be one of {', '.join(PROMPT_STYLES)}, got {style!r}")
    if style == "compact" and granularity != "lines":
        raise ValueError("prompt_style 'compact' numbers lines; use it with granularity 'lines'")


def format_statement(granularity: str, style: str = "full") -> str:
    """The short statement of the program format put in every prompt."""
    if granularity not in _FORMAT:
        raise ValueError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")
    check_style(style, granularity)
    return _COMPACT if style == "compact" else _FORMAT[granularity]


def number_lines(document: str, style: str = "full") -> str:
    """The line view of ``document`` (see the module docstring; ``compact``: ``"{i} "``)."""
    lines = syntax.copy_lines(document)
    if style == "compact":
        return "\n".join(f"{i} {line}" for i, line in enumerate(lines, 1))
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}}| {line}" for i, line in enumerate(lines, 1))


def number_tokens(document: str, pieces: Sequence[bytes]) -> str:
    """The token view of ``document`` given its token ``pieces`` (see the module docstring)."""
    data = document.encode("utf-8")
    if b"".join(pieces) != data:
        raise ValueError("token pieces do not spell the document")
    starts = []
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece)
    rows: list[tuple[str, str]] = []
    line_start = 0
    k = 0  # next token to place
    for line in (text.encode("utf-8") for text in syntax.split_lines(document)):
        line_end = line_start + len(line)  # offset of this line's newline (or of the end)
        first = k
        marks: list[int] = []
        while k < len(starts) and starts[k] <= line_end and starts[k] < len(data):
            if starts[k] > line_start:
                marks.append(starts[k] - line_start)
            k += 1
        text = _mark(line, marks)
        span = f"{first}-{k - 1}" if k > first else ""
        rows.append((span, text))
        line_start = line_end + 1
    width = max(len(span) for span, _ in rows)
    return "\n".join(f"{span:>{width}}| {text}" for span, text in rows)


def _mark(line: bytes, marks: list[int]) -> str:
    # Insert the mark at byte offsets that fall on character boundaries only.
    out: list[str] = []
    prev = 0
    for m in marks:
        if m < len(line) and (line[m] & 0xC0) == 0x80:
            continue  # inside a UTF-8 character
        out.append(line[prev:m].decode("utf-8"))
        out.append(TOKEN_MARK)
        prev = m
    out.append(line[prev:].decode("utf-8"))
    return "".join(out)


def user_content(instruction: str, view: str, granularity: str, template: Any = None,
                 style: str = "full") -> str:
    """The user message: instruction, format statement, numbered document.

    ``template`` (a ``cad_outlines.decoding.prompts.PromptTemplate``) replaces the default layout
    ``"{instruction}\\n\\n{format}\\n\\nDocument:\\n{document}"`` (style ``full``) or
    ``"{format}\\n\\n{document}\\n\\n{instruction}"`` (style ``compact``).
    """
    statement = format_statement(granularity, style)
    if template is not None:
        return template.render(instruction=instruction.strip(), format=statement, document=view)
    if style == "compact":
        return f"{statement}\n\n{view}\n\n{instruction.strip()}"
    return f"{instruction.strip()}\n\n{statement}\n\nDocument:\n{view}"


def plain_content(instruction: str, document: str, style: str = "full") -> str:
    """The user message of a regeneration prompt: no format statement, no line numbers.

    ``style`` follows the program prompt's: ``full`` puts the instruction first;
    ``compact`` puts the document first and the instruction last, so that the prompts of
    several edits of one file share the document as a prefix a cache can keep.
    """
    request = "Reply with the whole edited document and nothing else."
    if style == "compact":
        return f"Document:\n{document}\n\n{instruction.strip()}\n\n{request}"
    return f"{instruction.strip()}\n\n{request}\n\nDocument:\n{document}"
