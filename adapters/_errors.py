"""The adapters' error type (its own module so every adapter module can raise it)."""

from cad_outlines.errors import AdapterError

__all__ = ["AdapterError"]
