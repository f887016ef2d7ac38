"""Bundled example data (the demo edit)."""
