"""Every query row calibrated at about the cost of one attention pass (mean pooling, DESIGN.md §2.1).

Take one query row with plain weights ``a`` over groups ``g``: each basket, and each isolated token. With
``m_g`` the group's mass and ``o_g`` the attention output over the group's keys alone, the plain output is
``sum_g m_g o_g``. Every variant keeps the proportions inside a basket and gives all live baskets of a row
the same total ``T`` (``calibration.isolated_targets``), so the calibrated output is

    (1 - lam) * sum_g m_g o_g  +  lam * (T * sum_{live b} o_b  +  sum_i t_i v_i)

Attention over one basket's keys returns ``o_b`` and its log-sum-exp, from which ``m_b`` follows once the
row's total is known; no ``K x K`` tensor is ever formed. Two paths produce the per-basket pieces:

- the compiled kernel (:mod:`posfair_llamaindex.calibration.kernel.fused_kernel`) walks every basket inside one
  call and keeps the plain and summed outputs in cache; it takes float32 CPU tensors whose mask is the same for
  every row (an encoder's padding);
- the PyTorch path calls a flash kernel once per basket and builds the plain sum with the running-maximum
  rescaling of flash attention itself, tiled over sequences and query rows; it covers causal and per-row
  masks, other dtypes, other devices and machines where the build failed.

Both end in :func:`_finish`, so the variants' rule lives in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor

from posfair_llamaindex.calibration.kernel import fused_kernel
from posfair_llamaindex.calibration.row_math import IsolatedMasses, RowLayout, isolated_targets

if TYPE_CHECKING:  # a plain forward pass needs no calibration config (nor pydantic)
    from posfair_llamaindex.calibration.config import CalibrationConfig

# running sums per tile (floats): sequences x heads x query rows x head size; small enough for the caches
TILE_FLOATS = 1 << 22
_NEG_INF = float("-inf")


def calibrated_all_rows(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Optional[Tensor],
    scale: float,
    is_causal: bool,
    layout: RowLayout,
    config: CalibrationConfig,
) -> Tensor:
    """Calibrated attention output of every query row, ``[N, Q, H, D]`` (transformers' layout).

    ``query`` is ``[N, H, Q, D]``, ``key``/``value`` ``[N, KV, K, D]`` (grouped-query heads allowed).
    ``attention_mask`` is what SDPA would get (bool, True = attend, or additive float, broadcastable to
    ``[N, H, Q, K]``) or None; ``is_causal`` applies only without a mask. Rows without a live basket and
    sequences too short to calibrate come out as the plain output computed from the same pieces; callers
    that need those bit for bit take them from SDPA.
    """
    n, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    size = config.basket_size
    width = layout.num_baskets * size
    groups = heads // kv_heads

    # content keys and values lined up from offset 0, cut into contiguous baskets, one head per query head
    if layout.shared_start is not None:
        positions = layout.shared_start + torch.arange(width, device=query.device)[None, :]  # [1, W]
    else:
        positions = layout.content_start[:, None] + torch.arange(width, device=query.device)[None, :]  # [N, W]
    content_keys = _along_keys(key, positions)
    content_values = _along_keys(value, positions)

    additive = _additive_mask(attention_mask, query.dtype)
    # a key past a sequence's content (padding, an isolated last token) belongs to no basket
    outside = torch.arange(width, device=query.device)[None, :] >= layout.content_len[:, None]  # [N, W]
    key_positions = positions.expand(n, width)
    isolated = _isolated(query, key, value, additive, is_causal, scale, layout, groups)
    shared = _shared_mask(additive, outside, key_positions, is_causal, width, query.dtype)
    if shared is not None and _fused_applies(query, content_keys, content_values, layout):
        bias = shared[:, :, 0].contiguous() if bool((shared != 0).any()) else None  # None: nothing hidden
        pieces = fused_kernel.basket_pieces(query, content_keys, content_values, bias, scale, size)
        return _from_pieces(pieces, isolated, layout, config)
    if groups > 1:
        content_keys = content_keys.repeat_interleave(groups, dim=1)
        content_values = content_values.repeat_interleave(groups, dim=1)
    nb = layout.num_baskets
    keys = content_keys.view(n, heads, nb, size, dim)  # the kernel takes each basket as a strided view
    values = content_values.view(n, heads, nb, size, -1)

    out = torch.empty(n, q_len, heads, value.shape[-1], dtype=value.dtype, device=value.device)
    per_tile = max(1, TILE_FLOATS // (heads * dim))  # query rows per tile, over all its sequences
    seqs = max(1, min(n, per_tile // max(1, q_len)))
    rows = min(q_len, max(1, per_tile // seqs))
    for n0 in range(0, n, seqs):
        n1 = min(n, n0 + seqs)
        shared_masks = None if shared is None else _per_basket(shared[n0:n1], nb, size)
        for q0 in range(0, q_len, rows):
            q1 = min(q_len, q0 + rows)
            sums = _GroupSums(query[n0:n1, :, q0:q1], value.shape[-1])
            for score, v in isolated:
                sums.add_isolated(score[n0:n1, :, q0:q1, None], v[n0:n1, :, None, :])
            query_positions = torch.arange(q0, q1, device=query.device)
            for b in range(nb):
                if shared_masks is not None:
                    mask = shared_masks[b]
                else:
                    span = slice(b * size, (b + 1) * size)
                    mask = _basket_mask(
                        additive, outside, key_positions, is_causal, (n0, n1), (q0, q1), span, query_positions
                    ).to(query.dtype)
                sums.add_basket(keys[n0:n1, :, b], values[n0:n1, :, b], mask, scale)
            tile = out[n0:n1, q0:q1].transpose(1, 2)
            _finish(
                sums.plain,
                sums.basket_sum,
                [v[n0:n1] for _, v in isolated],
                sums.isolated_masses(),
                sums.live_count,
                sums.content_mass(),
                layout.calibrated[n0:n1],
                layout,
                config,
                out=tile,
            )
    return out


def _fused_applies(query: Tensor, keys: Tensor, values: Tensor, layout: RowLayout) -> bool:
    """The compiled kernel takes float32 CPU tensors (the caller checks that the mask is row-independent)."""
    return (
        query.device.type == "cpu"
        and query.dtype == keys.dtype == values.dtype == torch.float32
        and layout.num_baskets > 0
        and query.stride(-1) == keys.stride(-1) == values.stride(-1) == 1
        and fused_kernel.available()
    )


def _from_pieces(pieces, isolated: list, layout: RowLayout, config: CalibrationConfig) -> Tensor:
    """The calibrated output ``[N, Q, H, D]`` from the compiled kernel's pieces and the isolated tokens."""
    plain, basket_sum, basket_lse, live = pieces
    plain_rows = plain.transpose(1, 2)  # [N, H, Q, D] views of the kernel's [N, Q, H, D] buffers
    calibrated = basket_sum.transpose(1, 2)
    basket_lse, live = basket_lse[..., None], live[..., None]
    scores = [score[..., None] for score, _ in isolated]
    best = basket_lse
    for score in scores:
        best = torch.maximum(best, score)
    reference = torch.where(best > _NEG_INF, best, torch.zeros_like(best))
    content = torch.exp(basket_lse - reference)
    weights = [torch.exp(score - reference) for score in scores]
    total = content.clone()
    for weight in weights:
        total += weight
    total.clamp_(min=torch.finfo(torch.float32).tiny)
    content /= total
    masses = [weight / total for weight in weights]
    plain_rows.mul_(content)  # the plain output over all groups, built from the same pieces
    for (_, v), mass in zip(isolated, masses, strict=True):
        plain_rows.addcmul_(mass, v[:, :, None, :].float())
    values = [v for _, v in isolated]
    _finish(plain_rows, calibrated, values, masses, live, content, layout.calibrated, layout, config, out=None)
    return plain


def _finish(
    plain: Tensor,
    basket_sum: Tensor,
    values: list,
    masses: list,
    live: Tensor,
    content: Tensor,
    calibrated_seqs: Tensor,
    layout: RowLayout,
    config: CalibrationConfig,
    out: Optional[Tensor],
) -> None:
    """Mix the plain and calibrated outputs of some rows: the one ending both paths share.

    ``plain`` and ``basket_sum`` are float32 ``[n, H, q, Dv]`` and are overwritten; ``values`` are the
    isolated tokens' ``[n, H, Dv]`` and ``masses`` their plain masses ``[n, H, q, 1]`` (``_joined`` order);
    ``live`` counts each row's live baskets and ``content`` is its mass over them. The result goes to ``out``
    (any float dtype), or into ``plain`` where ``out`` is None. In place throughout: a fresh tile-sized
    tensor costs page faults that weigh like a pass.
    """
    first, prefix, last = _split(masses, layout)
    target, first, last, kept = isolated_targets(
        IsolatedMasses(first, last, prefix or None), layout, config, live, content
    )
    calibrated = basket_sum.mul_(target)
    for v, mass in zip(values, _joined(first, kept, last), strict=True):
        calibrated.addcmul_(mass, v[:, :, None, :].float())
    # short sequences, and rows with no content mass, stay as they were
    change = (live > 0) & calibrated_seqs[:, None, None, None]
    weight = config.strength if bool(change.all()) else change.to(calibrated.dtype) * config.strength
    if out is None:
        plain.lerp_(calibrated, weight)
    elif out.dtype == calibrated.dtype:
        torch.lerp(plain, calibrated, weight, out=out)
    else:
        out.copy_(plain.lerp_(calibrated, weight))


class _GroupSums:
    """Running sums over the groups of one tile's rows, in float32.

    ``plain`` is kept normalised: after each group it is the plain attention output over the groups seen so
    far, so adding a group of log-sum-exp ``l`` and output ``o`` is one ``lerp`` towards ``o`` by that group's
    share of the new total (the running maximum ``best`` keeps the exponentials in range).
    """

    def __init__(self, q: Tensor, value_dim: int) -> None:
        # the CPU flash kernel runs about 10% faster on a contiguous query; the score tile elsewhere needs no copy
        self.q = q.contiguous() if q.device.type == "cpu" else q
        rows = (*q.shape[:3], 1)
        self.best = torch.full(rows, _NEG_INF, device=q.device)
        self.total = torch.zeros(rows, device=q.device)  # sum of exp(lse_g - best) over the groups seen
        self.content = torch.zeros(rows, device=q.device)  # the same over baskets alone
        self.live_count = torch.zeros(rows, device=q.device)
        self.plain: Optional[Tensor] = None  # allocated by the first group
        self.basket_sum: Optional[Tensor] = None  # sum of o_b over live baskets
        self.scores: list = []

    def _add(self, lse: Tensor, output: Tensor, basket: bool, finite: bool = False) -> None:
        """``finite``: every row's ``lse`` is known finite (a basket all rows see), which spares a few of
        the small per-row operations that add up over dozens of baskets."""
        new = torch.maximum(self.best, lse)
        reference = new if finite else torch.where(new > _NEG_INF, new, torch.zeros_like(new))
        rescale = torch.exp(self.best - reference)  # exp(-inf) = 0 while nothing was seen
        weight = torch.exp(lse - reference)
        self.total = torch.addcmul(weight, self.total, rescale)
        self.content = torch.addcmul(weight, self.content, rescale) if basket else self.content * rescale
        self.best = new
        share = weight / (self.total if finite else self.total.clamp(min=torch.finfo(torch.float32).tiny))
        if self.plain is None:
            n, heads, rows = self.q.shape[:3]
            # laid out as the CPU flash kernel returns its output ([n, rows, H, D] in memory): updates that
            # walk two tensors of one layout run at twice the speed of mixed ones
            self.plain = torch.empty(n, rows, heads, output.shape[-1], device=output.device).transpose(1, 2)
            torch.mul(output.float(), share, out=self.plain)
        else:
            self.plain.lerp_(output.float().expand_as(self.plain), share)

    def add_isolated(self, score: Tensor, value: Tensor) -> None:
        """An isolated token: its own group, with output ``v`` and log-sum-exp its masked score."""
        self.scores.append(score)
        self._add(score, value, basket=False)

    def add_basket(self, keys: Tensor, values: Tensor, mask: Optional[Tensor], scale: float) -> None:
        """One basket's keys; ``mask`` None when every row sees every one of them."""
        output, lse = _attention_with_lse(self.q, keys, values, mask, scale)
        output = output.float()
        lse = lse.float()[..., None]
        if mask is None:
            self.live_count = self.live_count + 1.0
        else:
            live = (mask > _NEG_INF).any(dim=-1, keepdim=True)  # [n, 1 or H, q, 1]: any key of the basket seen
            if not bool(live.all()):
                output = output * live  # a row that sees none of the basket's keys gets nothing from it
                lse = lse.masked_fill(~live, _NEG_INF)
            self.live_count = self.live_count + live
        self._add(lse, output, basket=True, finite=mask is None)
        if self.basket_sum is None:
            self.basket_sum = output  # a fresh tensor of the kernel's, ours to add into
        else:
            self.basket_sum += output

    def isolated_masses(self) -> list:
        reference = torch.where(self.best > _NEG_INF, self.best, torch.zeros_like(self.best))
        total = self.total.clamp(min=torch.finfo(torch.float32).tiny)
        return [torch.exp(score - reference) / total for score in self.scores]

    def content_mass(self) -> Tensor:
        return self.content / self.total.clamp(min=torch.finfo(torch.float32).tiny)


def _isolated_positions(layout: RowLayout) -> list:
    """The position ([N]) of each isolated token, in the order first, the [DUMP] prefix, last."""
    prefix = [] if layout.prefix is None else list(layout.prefix.unbind(dim=1))
    return _joined(layout.first, prefix, layout.last)


def _joined(first, prefix: list, last) -> list:
    """``[first, *prefix, last]`` without the edges a layout does not isolate (``None``)."""
    return (
        [item for item in (first,) if item is not None] + list(prefix) + [item for item in (last,) if item is not None]
    )


def _split(items: list, layout: RowLayout) -> tuple:
    """The inverse of :func:`_joined` for this layout: ``(first or None, prefix list, last or None)``."""
    items = list(items)
    first = items.pop(0) if layout.first is not None else None
    last = items.pop() if layout.last is not None else None
    return first, items, last


def _isolated(query, key, value, additive, is_causal, scale, layout, groups) -> list:
    """(scores [N, H, Q] under the mask, value [N, H, D]) of every isolated token, in ``_joined`` order."""
    n, heads, q_len, _ = query.shape
    batch = torch.arange(n, device=query.device)
    found = []
    for position in _isolated_positions(layout):
        k = key[batch, :, position].repeat_interleave(groups, dim=1)  # [N, H, D]
        v = value[batch, :, position].repeat_interleave(groups, dim=1)
        scores = torch.einsum("nhqd,nhd->nhq", query.float(), k.float()) * scale
        if additive is not None:
            column = additive.expand(n, -1, -1, -1)[batch, :, :, position]  # [N, 1 or H, 1 or Q]
            scores = scores + column.float()
        elif is_causal:
            seen = torch.arange(q_len, device=query.device)[None, None, :] >= position[:, None, None]
            scores = scores.masked_fill(~seen, _NEG_INF)
        found.append((scores, v))
    return found


def _shared_mask(additive, outside, key_positions, is_causal, width, dtype) -> Optional[Tensor]:
    """The additive mask ``[N, 1 or H, 1, W]`` over the content keys when no query row differs from another
    (an encoder's padding), built once for both paths; None when the mask depends on the row."""
    if is_causal or (additive is not None and additive.shape[2] > 1):
        return None
    seqs = (0, outside.shape[0])
    return _basket_mask(additive, outside, key_positions, False, seqs, (0, 1), slice(0, width), None).to(dtype)


def _per_basket(shared: Tensor, num_baskets: int, size: int) -> list:
    """One shared mask cut into baskets, None for a basket that hides nothing (which spares the flash kernel
    a pass over its scores)."""
    n, heads = shared.shape[:2]
    open_baskets = (shared == 0).view(n, heads, num_baskets, size).all(dim=3).all(dim=1).all(dim=0).tolist()
    return [None if clear else shared[..., b * size : (b + 1) * size] for b, clear in enumerate(open_baskets)]


def _basket_mask(additive, outside, key_positions, is_causal, seqs, rows, span, query_positions) -> Tensor:
    """The additive mask ``[n, 1 or H, q or 1, B]`` of one basket for one tile: -inf where a key is not seen."""
    (n0, n1), (q0, q1) = seqs, rows
    blocked = outside[n0:n1, span][:, None, None, :]  # [n, 1, 1, B]
    positions = key_positions[n0:n1, span]  # [n, B]
    if additive is not None:
        columns = additive[n0:n1] if additive.shape[0] > 1 else additive
        if columns.shape[2] > 1:
            columns = columns[:, :, q0:q1]
        index = positions.clamp(max=columns.shape[-1] - 1)  # positions past the keys are outside anyway
        gathered = columns.expand(n1 - n0, -1, -1, -1).gather(
            -1, index[:, None, None, :].expand(n1 - n0, columns.shape[1], columns.shape[2], -1)
        )
        return gathered.masked_fill(blocked, _NEG_INF)
    if is_causal:
        blocked = blocked | (positions[:, None, None, :] > query_positions[None, None, :, None])  # [n, 1, q, B]
    return torch.zeros(blocked.shape, device=outside.device).masked_fill(blocked, _NEG_INF)


def _additive_mask(attention_mask: Optional[Tensor], dtype: torch.dtype) -> Optional[Tensor]:
    """SDPA's mask as an additive float tensor with -inf where a key is hidden, broadcast axes kept at 1."""
    if attention_mask is None:
        return None
    mask = attention_mask
    while mask.dim() < 4:
        mask = mask[None]
    for axis in range(3):  # expanded views: keep one copy of a repeated axis
        if mask.shape[axis] > 1 and mask.stride(axis) == 0:
            mask = mask.narrow(axis, 0, 1)
    # an encoder's padding mask comes materialised over query rows that are all alike; one row of it is
    # enough, and every basket then gathers [N, 1, 1, B] instead of [N, 1, Q, B]
    if mask.shape[2] > 1 and torch.equal(mask, mask[:, :, :1].expand_as(mask)):
        mask = mask[:, :, :1]
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, _NEG_INF)
    # transformers' float masks hide keys with the dtype's minimum; treat anything that low as hidden
    hidden = mask <= torch.finfo(mask.dtype).min / 2
    return mask.to(dtype).masked_fill(hidden, _NEG_INF)


def _along_keys(tensor: Tensor, positions: Tensor) -> Tensor:
    """``tensor[:, :, positions]`` for ``[N, H, K, D]`` and positions ``[1 or N, W]``; zeros past the end."""
    n, heads, k_len, dim = tensor.shape
    width = positions.shape[-1]
    short = int(positions.max()) + 1 - k_len
    padded = torch.nn.functional.pad(tensor, (0, 0, 0, short)) if short > 0 else tensor
    if positions.shape[0] == 1:
        start = int(positions[0, 0])
        return padded[:, :, start : start + width]
    index = positions[:, None, :, None].expand(n, heads, width, dim)
    return padded.gather(2, index)


def _attention_with_lse(q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], scale: float) -> tuple:
    """Attention output and log-sum-exp of one basket: the fused flash kernel on CPU, a score tile elsewhere."""
    if q.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask, scale=scale)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores + mask.float()
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - torch.where(lse > _NEG_INF, lse, torch.zeros_like(lse))[..., None])
    return torch.matmul(probs, v.float()).to(q.dtype), lse
