"""The product workflow around the loop: the edit workflow, model presets and real weights, diffs, the demo, devices and the text-only (chat reply) path."""
