"""Ask a CaD adapter to write one line into an empty file: the check a new adapter must pass
before it replaces the shipped one (the training mix's documents start at 8 lines, so
nothing in it keeps this behaviour; tests/test_real_qwen.py holds the first ask).

    python scripts/empty_file_probe.py [ADAPTER_DIR ...]

Greedy, one torch thread, the `qwen2.5-coder-0.5b` preset with each folder's adapter
merged in place of the shipped one (none given: the shipped one). Each ask names the one
line it wants; the empty file is "" and the one-blank-line file "\\n". Prints each edited
file and, per adapter, how many of the asks on "" gave exactly that line. Three of the
asks are phrasings of the mix's `new_file` kind: a regression check, not a held-out one.
"""

from __future__ import annotations

import sys

#: (the ask, the file it should give from an empty one)
ASKS = (("Add a comment line '# hi' at the top of the file.", "# hi\n"),
        ("Insert a new line containing exactly `import os`.", "import os\n"),
        ("Write `print('hello')` as the first line.", "print('hello')\n"),
        ("Add the line `x = 1`.", "x = 1\n"),
        ("Add a comment line '# TODO' at the top of the file.", "# TODO\n"))


def main(adapters: list[str]) -> None:
    import outlines
    import torch

    from cad_outlines.generate import cad
    from cad_outlines.tools.models import build

    torch.set_num_threads(1)
    for adapter in adapters or [None]:
        model = outlines.from_transformers(*build("qwen2.5-coder-0.5b", adapter=adapter))
        right = 0
        for document in ("", "\n"):
            for ask, want in ASKS:
                got = cad(model, document, max_new_tokens=64).run(ask).document
                right += document == "" and got == want
                print(f"{adapter or 'shipped'}\t{document!r}\t{ask}\t-> {got!r}", flush=True)
        print(f"{adapter or 'shipped'}: {right} of {len(ASKS)} asks on the empty file gave exactly their line")


if __name__ == "__main__":
    main(sys.argv[1:])
