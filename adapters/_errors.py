"""The adapters' error type (its own module so every adapter module can raise it)."""


class AdapterError(ValueError):
    """A tokenizer no adapter can serve, or an adapter misused; the message says why."""
