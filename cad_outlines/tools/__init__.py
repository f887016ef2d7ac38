"""Around the loop: corpora, files, presets, the copy ceiling, diffs, the demo, SFT rows and the text-only (chat reply) path."""
