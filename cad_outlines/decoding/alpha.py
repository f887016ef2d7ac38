"""Feasible mass: how much of the model's own probability a constraint lets through.

Constrained decoding renormalises the model's next-token distribution ``π(·|h_t)`` onto
the allowed set ``A(h_t)``. The mass it keeps,

    α_t = Σ_{a ∈ A(h_t)} π(a | h_t),

is the step's *feasible mass*; the constrained distribution ``q = π|_A / α_t`` sits at
``KL(q ‖ π) = log(1/α_t)`` from the model, and a trajectory's *projection tax* is
``Σ_t log(1/α_t)``. A tax near zero means the constraint only removed tokens the model
did not want anyway; a large tax means the format fought the model.

α is always measured on the raw (temperature-1) logits, whatever the sampler does
afterwards, so traces of greedy and sampled runs are comparable.

Vocabulary sizes
----------------
Models often pad their output layer beyond the tokenizer (Qwen2.5: 151 936 logits for
151 665 tokenizer ids), and grammar engines pad their bitmask to a multiple of 32.
:func:`align_mask` reconciles the two explicitly:

* logits longer than the mask: the extra ids are padding the tokenizer cannot produce;
  they are **never allowed**, but their probability stays in the denominator (it is
  mass the model really put outside the allowed set).
* mask longer than the logits: the extra entries name ids the model cannot emit
  (bitmask padding, or tokenizer ids beyond the output layer); they carry zero
  probability and are dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

__all__ = ["AlphaTrace", "align_mask", "feasible_mass", "log_feasible_mass"]


def align_mask(allowed: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Return ``allowed`` as a bool mask of exactly ``vocab_size`` entries.

    Parameters
    ----------
    allowed
        1-D boolean mask over token ids (tokenizer- or bitmask-sized).
    vocab_size
        Length of the model's logits.

    Returns
    -------
    torch.Tensor
        The mask cut to ``vocab_size`` (extra ids carry no model probability) or padded
        with ``False`` (padded logits are never allowed).

    Raises
    ------
    ValueError
        If ``allowed`` is not a 1-D boolean tensor.
    """
    if allowed.dtype != torch.bool or allowed.dim() != 1:
        raise ValueError(
            f"allowed must be a 1-D bool tensor, got dtype={allowed.dtype} "
            f"shape={tuple(allowed.shape)}")
    n = allowed.shape[0]
    if n == vocab_size:
        return allowed
    if n > vocab_size:
        return allowed[:vocab_size]
    pad = torch.zeros(vocab_size - n, dtype=torch.bool, device=allowed.device)
    return torch.cat([allowed, pad])


def _check_logits(logits: torch.Tensor) -> torch.Tensor:
    if logits.dim() != 1:
        raise ValueError(f"logits must be 1-D (vocab,), got shape {tuple(logits.shape)}")
    # float32 at least: logsumexp over ~10^5 half-precision values loses the small α's.
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def log_feasible_mass(logits: torch.Tensor, allowed: torch.Tensor | None) -> float:
    """``log α``: log of the probability mass ``softmax(logits)`` puts on ``allowed``.

    Computed as ``logsumexp(logits[allowed]) - logsumexp(logits)``, which stays finite
    for masses far below float underflow. ``allowed=None`` means every id is allowed
    (``log α = 0``). Returns ``-inf`` when no allowed id has finite logit.
    """
    logits = _check_logits(logits)
    if allowed is None:
        return 0.0
    mask = align_mask(allowed.to(logits.device), logits.shape[0])
    return _log_alpha(logits, mask, torch.logsumexp(logits, dim=0))


def _log_alpha(logits: torch.Tensor, mask: torch.Tensor | None, total: torch.Tensor) -> float:
    if mask is None:
        return 0.0
    if not bool(mask.any()):
        return -math.inf
    kept = torch.logsumexp(logits[mask], dim=0)
    # Clamp: with every id allowed the two sums agree up to rounding, α must not exceed 1.
    return min(float(kept - total), 0.0)


def feasible_mass(logits: torch.Tensor, allowed: torch.Tensor | None) -> float:
    """α: the probability mass ``softmax(logits)`` puts on the ``allowed`` ids.

    Parameters
    ----------
    logits
        Raw next-token logits, shape ``(vocab,)`` (temperature 1).
    allowed
        Boolean mask of allowed ids, or ``None`` for "all allowed". Its length may differ
        from ``logits``; see :func:`align_mask`.

    Returns
    -------
    float
        α in ``[0, 1]``.
    """
    return math.exp(log_feasible_mass(logits, allowed))


@dataclass
class AlphaTrace:
    """Per-step feasible mass of one constrained trajectory.

    Attributes
    ----------
    alphas
        α_t for each recorded step.
    log_alphas
        log α_t (kept separately: α can underflow to 0 while log α is finite).
    chosen_probs
        π(y_t | h_t) of the emitted token under the *unconstrained* model.
    chosen_logprobs
        log π(y_t | h_t), same caveat as ``log_alphas``.
    """

    alphas: list[float] = field(default_factory=list)
    log_alphas: list[float] = field(default_factory=list)
    chosen_probs: list[float] = field(default_factory=list)
    chosen_logprobs: list[float] = field(default_factory=list)

    def record(self, logits: torch.Tensor, allowed: torch.Tensor | None, chosen: int) -> float:
        """Record one decoding step and return its α.

        Parameters
        ----------
        logits
            Raw (temperature-1) logits of the step, shape ``(vocab,)``.
        allowed
            Boolean mask of the ids the constraint allowed, or ``None`` (all allowed).
            Length mismatches are handled by :func:`align_mask`.
        chosen
            The id that was emitted.

        Raises
        ------
        ValueError
            If ``chosen`` is outside the logits or not in the allowed set: a trace of a
            token the constraint forbade would be meaningless.
        """
        logits = _check_logits(logits)
        vocab = logits.shape[0]
        if not 0 <= chosen < vocab:
            raise ValueError(f"chosen id {chosen} is outside the logits (vocab {vocab})")
        if allowed is not None:
            mask = align_mask(allowed.to(logits.device), vocab)
            if not bool(mask[chosen]):
                raise ValueError(f"chosen id {chosen} is not in the allowed set at step "
                                 f"{self.steps}")
        else:
            mask = None
        total = torch.logsumexp(logits, dim=0)
        log_alpha = _log_alpha(logits, mask, total)
        log_p = float(logits[chosen] - total)
        self.log_alphas.append(log_alpha)
        self.alphas.append(math.exp(log_alpha))
        self.chosen_logprobs.append(log_p)
        self.chosen_probs.append(math.exp(log_p))
        return self.alphas[-1]

    @property
    def steps(self) -> int:
        """Number of recorded steps."""
        return len(self.log_alphas)

    @property
    def sum_log_alpha(self) -> float:
        """Σ_t log α_t (≤ 0; 0 means the constraint never bit)."""
        return math.fsum(self.log_alphas)

    @property
    def projection_tax(self) -> float:
        """Σ_t log(1/α_t) = Σ_t KL(q_t ‖ π_t), in nats."""
        return -self.sum_log_alpha

    @property
    def mean_alpha(self) -> float:
        """Arithmetic mean of α_t (``nan`` for an empty trace)."""
        return math.fsum(self.alphas) / self.steps if self.steps else math.nan

    @property
    def min_alpha(self) -> float:
        """Smallest α_t, the step where the format fought hardest (``nan`` if empty)."""
        return min(self.alphas) if self.steps else math.nan

    @property
    def log_likelihood(self) -> float:
        """Σ_t log π(y_t | h_t) of the emitted tokens under the unconstrained model."""
        return math.fsum(self.chosen_logprobs)

    @property
    def constrained_log_likelihood(self) -> float:
        """Σ_t log q(y_t | h_t) under the renormalised (constrained) distribution.

        Equals ``log_likelihood + projection_tax`` since q = π / α on allowed ids.
        """
        return self.log_likelihood - self.sum_log_alpha

    def to_dict(self) -> dict:
        """Plain-JSON summary plus the per-step lists."""
        return {
            "steps": self.steps,
            "mean_alpha": self.mean_alpha,
            "min_alpha": self.min_alpha,
            "projection_tax": self.projection_tax,
            "log_likelihood": self.log_likelihood,
            "alphas": list(self.alphas),
            "chosen_probs": list(self.chosen_probs),
        }
