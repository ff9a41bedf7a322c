"""The calibration math on post-softmax attention rows (DESIGN.md §1.1). Knows nothing about models.

Rows are laid out as ``[N, R, K]``: ``N`` sequences, ``R`` rows per sequence (heads, or heads x query
positions for mean pooling), ``K`` key positions. A :class:`RowLayout` says, per sequence, where the
isolated edge tokens and the content span lie on the key axis, so the same code serves right padding,
left padding and no padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor

if TYPE_CHECKING:  # a plain forward pass needs no calibration config (nor pydantic)
    from posfair_llamaindex.calibration.config import CalibrationConfig


@dataclass(frozen=True)
class RowLayout:
    """Where each sequence's isolated tokens and content tokens sit on the key axis.

    Built once per batch on the host from the attention mask; the tensors live on the model's device.
    ``shared_start`` is set when every sequence's content starts at the same key position (right padding,
    which the encoder uses), so the content is a plain slice; otherwise one gather aligns it.
    """

    content_start: Tensor  # [N] long
    content_len: Tensor  # [N] long
    first: Optional[Tensor]  # [N] long, position of the isolated first token, None when not isolated
    last: Optional[Tensor]  # [N] long, position of the isolated last token, None when not isolated
    pooling_token: Optional[str]  # "first" | "last" | None (mean pooling): who gets hard_weight
    shared_start: Optional[int]
    num_baskets: int  # the most baskets any sequence of the batch has
    calibrated: Tensor  # [N] bool: sequences with at least basket_size content tokens
    all_calibrated: bool = False
    # [N, P] long: the isolated prefix right after the first token (trained [DUMP] tokens), None without one
    prefix: Optional[Tensor] = None

    @classmethod
    def from_attention_mask(
        cls,
        attention_mask: Tensor,
        *,
        basket_size: int,
        isolate_first: bool,
        isolate_last: bool,
        pooling_token: Optional[str],
        prefix_tokens: int = 0,
        device: Optional[torch.device] = None,
    ) -> RowLayout:
        """Describe a padded batch whose valid tokens form one contiguous run per row (any padding side).

        ``prefix_tokens`` isolates that many tokens right after the (isolated) first token: the [DUMP]
        prefix of a model fine-tuned with one, which is never part of a basket.
        """
        if attention_mask.dim() != 2:
            raise ValueError(f"attention_mask must be [batch, length], got shape {tuple(attention_mask.shape)}")
        if pooling_token == "first" and not isolate_first or pooling_token == "last" and not isolate_last:
            raise ValueError(f"the pooling token ({pooling_token}) must be isolated")
        if prefix_tokens < 0:
            raise ValueError(f"prefix_tokens must be >= 0, got {prefix_tokens}")
        if prefix_tokens and not isolate_first:
            raise ValueError("an isolated prefix follows the first token, which must then be isolated too")
        valid = attention_mask.to(torch.bool).cpu()
        lengths = valid.sum(dim=1)
        if bool((lengths == 0).any()):
            raise ValueError("every sequence needs at least one valid token")
        first = valid.to(torch.int8).argmax(dim=1)
        last = first + lengths - 1
        expected = (torch.arange(valid.shape[1])[None, :] >= first[:, None]) & (
            torch.arange(valid.shape[1])[None, :] <= last[:, None]
        )
        if not torch.equal(expected, valid):
            raise ValueError("the valid tokens of a sequence must be contiguous (padding on one side only)")
        if prefix_tokens and bool((lengths < 1 + prefix_tokens).any()):
            raise ValueError(
                f"a sequence of {int(lengths.min())} tokens cannot hold its first token and {prefix_tokens} "
                "prefix token(s)"
            )
        content_start = first + int(isolate_first) + prefix_tokens
        content_len = (lengths - int(isolate_first) - int(isolate_last) - prefix_tokens).clamp(min=0)
        calibrated = content_len >= basket_size
        starts = content_start.unique()
        shared_start = int(starts[0]) if starts.numel() == 1 else None
        num_baskets = max(1, math.ceil(int(content_len.max()) / basket_size))
        device = device if device is not None else attention_mask.device
        return cls(
            content_start=content_start.to(device),
            content_len=content_len.to(device),
            first=first.to(device) if isolate_first else None,
            last=last.to(device) if isolate_last else None,
            pooling_token=pooling_token,
            shared_start=shared_start,
            num_baskets=num_baskets,
            calibrated=calibrated.to(device),
            all_calibrated=bool(calibrated.all()),
            prefix=(first[:, None] + 1 + torch.arange(prefix_tokens)[None, :]).to(device) if prefix_tokens else None,
        )

    @property
    def any_calibrated(self) -> bool:
        return bool(self.calibrated.any())


def calibrate_rows(probs: Tensor, layout: RowLayout, config: CalibrationConfig) -> Tensor:
    """Return ``lam * a_cal + (1 - lam) * a`` for every row of ``probs`` (shape ``[N, R, K]``).

    Works in float32 whatever the input dtype and returns the input dtype. Sequences with fewer than
    ``basket_size`` content tokens, and rows with no content mass at all, come back unchanged.

    Within a basket the calibrated row is the original times one number, so ``lam * a_cal + (1 - lam) * a``
    is the row times a per-basket factor ``lam * target / mass + (1 - lam)``; the isolated tokens are then
    written on top. That keeps the work to a few passes over the row, which matters when every row of a
    mean-pooled model is calibrated.
    """
    if probs.dim() != 3:
        raise ValueError(f"probs must be [sequences, rows, keys], got shape {tuple(probs.shape)}")
    if config.variant == "cls_hard" and layout.pooling_token is None:
        raise ValueError("variant 'cls_hard' needs a pooling token; mean pooling has none")
    n, r, k = probs.shape
    size, lam = config.basket_size, config.strength
    nb = layout.num_baskets
    width = nb * size
    rows = probs.float()

    # content aligned to start at 0 and cut into contiguous baskets with one reshape
    steps = torch.arange(width, device=probs.device)
    in_content = (steps[None, :] < layout.content_len[:, None])[:, None, :]  # [N, 1, W]
    if layout.shared_start is not None:
        start = layout.shared_start
        index = None
        aligned = rows[..., start : start + width]
        if start + width > k:
            aligned = torch.nn.functional.pad(aligned, (0, start + width - k))
    else:
        index = (layout.content_start[:, None] + steps[None, :])[:, None, :].expand(n, r, width)
        aligned = torch.nn.functional.pad(rows, (0, width)).gather(-1, index)
    # past a sequence's content there is only padding (zero mass) unless a last token is isolated
    masked = aligned * in_content if layout.last is not None else aligned
    basket_mass = masked.reshape(n, r, nb, size).sum(dim=-1)  # [N, R, nb]
    live = basket_mass > 0
    live_count = live.sum(dim=-1, keepdim=True).to(rows.dtype)  # [N, R, 1]
    content_mass = basket_mass.sum(dim=-1, keepdim=True)

    basket_target, isolated = _targets(rows, layout, config, live_count, content_mass)
    factor = torch.where(
        live, lam * basket_target / basket_mass.clamp(min=torch.finfo(rows.dtype).tiny) + (1.0 - lam), 1.0
    )

    if index is None:
        out = rows.clone()
        span = min(width, k - start)
        full = span // size
        if full:
            out[..., start : start + full * size].unflatten(-1, (full, size)).mul_(factor[..., :full, None])
        if span > full * size:
            out[..., start + full * size : start + span].mul_(factor[..., full : full + 1])
    else:
        scaled = (aligned.reshape(n, r, nb, size) * factor[..., None]).view(n, r, width)
        out = torch.nn.functional.pad(rows, (0, width)).scatter_(-1, index, scaled)[..., :k]
    # non-content positions inside the baskets' span are padding (zero mass) or an isolated token,
    # and every isolated token is written here
    for position, mass in isolated:
        original = _mass_at(rows, position)
        out.scatter_(-1, position[:, None, None].expand(n, r, 1), lam * mass + (1.0 - lam) * original)

    if layout.all_calibrated and not isolated:
        # rows without live baskets got factor 1 everywhere: already unchanged
        return out.to(probs.dtype)
    change = layout.calibrated[:, None, None] & (live_count > 0)
    return torch.where(change, out.to(probs.dtype), probs)


def _targets(rows: Tensor, layout: RowLayout, config: CalibrationConfig, live_count: Tensor, content_mass: Tensor):
    """Each live basket's calibrated total, and (position, calibrated mass) for every isolated token."""
    prefix = None if layout.prefix is None else [_mass_at(rows, p) for p in layout.prefix.unbind(dim=1)]
    masses = IsolatedMasses(_mass_at(rows, layout.first), _mass_at(rows, layout.last), prefix)
    target, first, last, kept = isolated_targets(masses, layout, config, live_count, content_mass)
    isolated = [] if layout.prefix is None else list(zip(layout.prefix.unbind(dim=1), kept, strict=True))
    isolated += [
        (position, mass) for position, mass in ((layout.first, first), (layout.last, last)) if mass is not None
    ]
    return target, isolated


@dataclass(frozen=True)
class IsolatedMasses:
    """The plain attention mass of each isolated token of some rows (any shape ending in a size-1 axis)."""

    first: Optional[Tensor]
    last: Optional[Tensor]
    prefix: Optional[list] = None  # one tensor per [DUMP] position, in order


def isolated_targets(
    masses: IsolatedMasses, layout: RowLayout, config: CalibrationConfig, live_count: Tensor, content_mass: Tensor
) -> tuple:
    """``(basket_target, first, last, prefix)``: every live basket's calibrated total and each isolated token's
    calibrated mass (``None`` where that token is not isolated), from the masses alone (DESIGN.md §1.2, §1.8).

    Every variant gives all live baskets of a row the same total, which is what lets the all-rows path work
    from per-basket attention outputs. Prefix ([DUMP]) tokens keep their own mass under every variant; the
    variant's rule shares out the rest.
    """
    first_mass, last_mass = masses.first, masses.last
    prefix = list(masses.prefix or [])
    dtype = content_mass.dtype
    if config.variant == "uniform":
        units = live_count.clone()
        for mass in (first_mass, last_mass):
            if mass is not None:
                units = units + (mass > 0).to(dtype)
        share = 1.0 / units.clamp(min=1.0)
        if prefix:
            share = share * (1.0 - sum(prefix)).clamp(min=0.0)

        def edge(mass):
            return None if mass is None else torch.where(mass > 0, share, torch.zeros_like(share))

        return share, edge(first_mass), edge(last_mass), prefix
    if config.variant == "cls_soft":
        # isolated tokens keep their own mass (written back: a last token may sit inside a basket's span);
        # the content keeps its total, shared equally by the live baskets
        return content_mass / live_count.clamp(min=1.0), first_mass, last_mass, prefix
    weight = config.hard_weight
    pool_is_first = layout.pooling_token == "first"
    pool_mass, other_mass = (first_mass, last_mass) if pool_is_first else (last_mass, first_mass)
    remainder = content_mass + pool_mass - weight  # == 1 - w - the other isolated tokens' mass
    others = prefix + ([other_mass] if other_mass is not None else [])
    if others:
        # attention sinks heavier than 1 - w together leave nothing for the content: shrink them to fit,
        # each by its share of their total
        shrink = torch.where(remainder < 0, remainder, torch.zeros_like(remainder))
        if prefix:
            total = sum(others).clamp(min=torch.finfo(dtype).tiny)
            others = [mass + shrink * mass / total for mass in others]
        else:  # one sink: it takes the whole shrink (the same numbers as the share above, without a division)
            others = [mass + shrink for mass in others]
        if other_mass is not None:
            other_mass = others[-1]
        prefix = others[: len(prefix)]
    pinned = torch.full_like(pool_mass, weight)
    first, last = (pinned, other_mass) if pool_is_first else (other_mass, pinned)
    return remainder.clamp(min=0.0) / live_count.clamp(min=1.0), first, last, prefix


def _mass_at(rows: Tensor, position: Optional[Tensor]) -> Optional[Tensor]:
    if position is None:
        return None
    n, r, _ = rows.shape
    return rows.gather(-1, position[:, None, None].expand(n, r, 1))
