"""This machine's forward cost by width, measured once per model and cached (``--forward-cost auto``).

On a CPU a forward's cost grows with its width, so a speculative draft is worth appending
only as far as its expected saving pays for the width it adds (``DraftBudget``). The curve
that prices it (:class:`~cad_outlines.decoding.drafting.ForwardCost`) belongs to a machine
and a model shape: this module measures it the first time a model is used with ``auto``
and keeps it under the user cache, keyed by what the timing depends on (the model's
architecture, not its weights; dtype, device, torch's thread count, the CPU and torch's
version). A later run on the same machine and model reads the file.

Widths 1..17 cover every draft (up to ``MAX_DRAFT_TOKENS`` after one chosen token);
32, 64 and 128 give the slope along which a splice's long forward is extrapolated.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import InputError
from .weights import cache_root

if TYPE_CHECKING:  # torch loads only when a curve is measured or read (bench's CPU name needs none)
    from ..decoding.drafting import ForwardCost

__all__ = ["AUTO", "NO_COST_ON_VLLM", "WIDTHS", "cached_forward_cost", "cost_key", "cpu_model", "forward_cost_for",
           "load_forward_cost", "measure_forward_cost"]

#: The ``--forward-cost`` value that measures the curve once and caches it.
AUTO = "auto"
#: Both engines' commands refuse a cost curve on vLLM with this message.
NO_COST_ON_VLLM = "--forward-cost is for --engine transformers (vLLM drafts nothing)"
#: Widths measured (see the module docstring).
WIDTHS = tuple(range(1, 18)) + (32, 64, 128)
#: Config fields that name or date a model without changing its forward's cost.
_NOT_SHAPE = ("_name_or_path", "name_or_path", "transformers_version", "architectures", "_commit_hash")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def cost_key(hf_model: Any) -> str:
    """16 hex digits naming what a forward's cost depends on (module docstring)."""
    import torch

    config = {k: v for k, v in hf_model.config.to_dict().items() if k not in _NOT_SHAPE}
    parameter = next(hf_model.parameters())
    facts = {"config": config, "dtype": str(parameter.dtype), "device": str(parameter.device),
             "threads": torch.get_num_threads(), "cpu": cpu_model(), "torch": torch.__version__}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def measure_forward_cost(hf_model: Any) -> "ForwardCost":
    """The curve ``auto`` caches: :data:`WIDTHS` after a 256-token cache, the fastest of two
    timings of each (``bench kernel`` records the same as ``auto_forward_cost``)."""
    from ..decoding.drafting import ForwardCost
    from ..decoding.runner import TransformersRunner

    return ForwardCost.measure(TransformersRunner(hf_model), widths=WIDTHS, repeats=2)


def cached_forward_cost(hf_model: Any, status: Callable[[str], None] = lambda _m: None) -> "ForwardCost":
    """The curve of this machine and model: read from the cache, or measured and saved.

    Measuring takes about 20 s for SmolLM2-135M and a minute or two for a 0.5B model on one
    CPU core; the curve is saved atomically, so an interrupted measurement leaves nothing,
    and a cache that cannot be written is said, not fatal."""
    from ..decoding.drafting import ForwardCost

    path = cache_root() / "forward-cost" / f"{cost_key(hf_model)}.json"
    if path.is_file():
        try:
            return ForwardCost.load(path)
        except (KeyError, TypeError, ValueError):
            status(f"{path} is not a forward-cost curve; measuring it again")
    status(f"measuring this machine's forward cost by width once (cached in {path}) ...")
    cost = measure_forward_cost(hf_model)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        cost.save(path)
    except OSError as err:  # a read-only cache costs the next run a measurement, not this edit
        status(f"could not cache the forward cost in {path} ({err.strerror or err}); using it for this run")
    return cost


def forward_cost_for(spec: str | None, hf_model: Any,
                     status: Callable[[str], None] = lambda _m: None) -> "ForwardCost | None":
    """What ``--forward-cost SPEC`` means for ``hf_model``: ``None`` (drafts go whole),
    ``"auto"`` (:func:`cached_forward_cost`; on an accelerator ``None``, where width is
    nearly free) or a curve file (a ``bench kernel`` record or a saved ``ForwardCost``)."""
    if spec is None:
        return None
    if spec == AUTO:
        device = next(hf_model.parameters()).device
        if device.type != "cpu":
            status(f"--forward-cost auto on {device}: width is nearly free there, drafts go whole")
            return None
        return cached_forward_cost(hf_model, status)
    return load_forward_cost(spec)


def load_forward_cost(path: str) -> "ForwardCost":
    """A cost curve file (``bench kernel`` record or saved ``ForwardCost``), or an input error."""
    from ..decoding.drafting import ForwardCost

    try:
        return ForwardCost.load(path)
    except OSError as err:
        raise InputError(f"--forward-cost {path}: cannot read it ({err.strerror or err})") from None
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"--forward-cost {path}: not a bench kernel record or a saved ForwardCost "
                         f"({type(err).__name__}: {err}); or give 'auto'") from None
