"""Training and research around the product: corpora, the copy ceiling, the explicit-edit
mix, SFT rows in the decode layout and LoRA fine-tuning.

It sits above :mod:`cad_outlines.tools` (it builds models with ``tools.models``); nothing in
the product's edit path imports it.
"""
