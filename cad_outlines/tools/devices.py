"""Devices and weight dtypes by name, checked against this machine (shared by every loader)."""

from __future__ import annotations

import torch

from ..errors import InputError

__all__ = ["DTYPES", "resolve_device", "resolve_dtype"]

#: Weight dtypes a preset or a loaded model may use, by name.
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                                  "float16": torch.float16}


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32"``/``"bfloat16"``/``"float16"`` (or a ``torch.dtype``) as a ``torch.dtype``.

    Raises
    ------
    InputError
        For any other name.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def resolve_device(device: str | torch.device) -> torch.device:
    """Parse ``device`` and check that this machine has it.

    Raises
    ------
    InputError
        If the name is not a torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``)
        or the device is not available here.
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise InputError(f"unknown device {device!r} (e.g. cpu, cuda, cuda:1, mps): {err}") from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device {device!r}: CUDA is not available on this machine")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise InputError(f"device {device!r}: this machine has {torch.cuda.device_count()} "
                             "CUDA device(s)")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"device {device!r}: MPS is not available on this machine")
    return parsed
