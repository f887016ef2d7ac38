"""The adapters' error type (its own module so every adapter module can raise it)."""

from cad_outlines.errors import InputError


class AdapterError(InputError):
    """A tokenizer no adapter can serve, or an adapter misused; the message says why."""
