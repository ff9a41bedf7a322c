"""Turning the last hidden states into one vector per text."""

from __future__ import annotations

import torch
from torch import Tensor


def pool_hidden_states(hidden: Tensor, attention_mask: Tensor, pooling: str, skip: int = 0) -> Tensor:
    """Pool ``[N, L, D]`` hidden states over each row's valid tokens, whatever the padding side.

    ``skip`` leaves each row's first valid tokens out of a mean: a prompt that sentence-transformers
    excludes from pooling (``include_prompt: false``).
    """
    mask = attention_mask.to(hidden.device).bool()
    if skip and pooling != "mean":
        raise ValueError(f"only mean pooling leaves prompt tokens out; {pooling!r} pools one token")
    if skip:
        starts = mask.to(torch.int8).argmax(dim=1)
        positions = torch.arange(mask.shape[1], device=mask.device)
        mask = mask & (positions[None, :] >= (starts + skip)[:, None])
    if pooling == "mean":
        weights = mask.to(hidden.dtype)[..., None]
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
    batch = torch.arange(hidden.shape[0], device=hidden.device)
    return hidden[batch, pooling_positions(mask, pooling)]


def pooling_positions(attention_mask: Tensor, pooling: str) -> Tensor:
    """The position of each row's pooling token: its first or its last valid token."""
    mask = attention_mask.bool()
    if pooling == "first":
        return mask.to(torch.int8).argmax(dim=1)
    if pooling == "last":
        width = mask.shape[1]
        return width - 1 - mask.flip(1).to(torch.int8).argmax(dim=1)
    raise ValueError(f"pooling {pooling!r} has no single pooling token")
