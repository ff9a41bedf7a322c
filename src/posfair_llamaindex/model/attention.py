"""The registered attention function and the per-batch plan it reads (DESIGN.md §1.2).

Every row goes through transformers' own SDPA. In a calibrated layer only the pooling token's row is
recomputed (``q_s K^T``, softmax under the same mask, calibrate, ``@ V``) and written over SDPA's output,
so no ``K x K`` attention matrix ever exists. Mean-pooled models have no pooling token: there every query
row is calibrated from attention over each basket alone (``basket_attention``), at about the cost of SDPA.

The plan travels as a forward keyword argument (``model(..., posfair_plan=plan)``), which transformers
hands to the attention function of every layer. No global or thread-local state is involved, so two
encoders, or two threads sharing one, never see each other's batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from posfair_llamaindex.calibration.basket_attention import calibrated_all_rows
from posfair_llamaindex.calibration.row_math import RowLayout, calibrate_rows
from posfair_llamaindex.options import POOLINGS

if TYPE_CHECKING:  # a plain forward pass needs no calibration config (nor pydantic)
    from posfair_llamaindex.calibration.config import CalibrationConfig

ATTENTION_NAME = "posfair_sdpa"
PLAN_KWARG = "posfair_plan"
PROBE_KWARG = "posfair_probe"

# Called with (layer_idx, plain_rows, used_rows), rows of shape [N, H, K] for the pooling token.
RowRecorder = Callable[[int, Tensor, Tensor], None]


@dataclass(frozen=True)
class CalibrationPlan:
    """Everything one forward pass needs to calibrate: which layers, what, and where each sequence lies."""

    config: CalibrationConfig
    layers: frozenset
    layout: RowLayout
    pooling: str  # "first" | "last" | "mean"
    pool_positions: Optional[Tensor] = None  # [N] long, the pooling token of each sequence (not for mean)
    recorder: Optional[RowRecorder] = field(default=None, compare=False)
    # dual encoding: the batch of ``dual_batch`` sequences is doubled at layer ``branch_layer``; from there
    # on its first half is the plain branch and its second half the calibrated one (the layout and the
    # pooling positions describe one half)
    dual_batch: Optional[int] = None
    branch_layer: Optional[int] = None

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.pooling != "mean" and self.pool_positions is None:
            raise ValueError(f"pooling {self.pooling!r} needs pool_positions")
        if self.recorder is not None and self.pooling == "mean":
            raise ValueError("recording pooling rows needs a pooling token; mean pooling has none")
        if (self.dual_batch is None) != (self.branch_layer is None):
            raise ValueError("a dual plan needs both dual_batch and branch_layer")
        if self.dual_batch is not None and self.recorder is not None:
            raise ValueError("a dual plan cannot record rows")


def posfair_attention(
    module: torch.nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Optional[Tensor],
    scaling: Optional[float] = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple:
    """SDPA, plus the calibrated pooling row(s) in the layers a plan selects."""
    plan: Optional[CalibrationPlan] = kwargs.pop(PLAN_KWARG, None)
    probe = kwargs.pop(PROBE_KWARG, None)
    layer = getattr(module, "layer_idx", None)
    if probe is not None:
        probe.append(layer)
    calibrate_here = (
        plan is not None and not plan.config.is_plain and layer in plan.layers and plan.layout.any_calibrated
    )
    record_here = plan is not None and plan.recorder is not None
    if calibrate_here and plan.dual_batch is not None:
        return _dual(module, query, key, value, attention_mask, scaling, dropout, plan, kwargs), None
    return _attention(
        module, query, key, value, attention_mask, scaling, dropout, plan, calibrate_here, record_here, kwargs
    ), None


def _attention(module, query, key, value, attention_mask, scaling, dropout, plan, calibrate_here, record_here, kwargs):
    if calibrate_here and plan.pooling == "mean":
        return _all_rows_calibrated(module, query, key, value, attention_mask, scaling, dropout, plan, kwargs)
    out, _ = sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
    )
    if calibrate_here or record_here:
        out = _pooling_row_calibrated(
            module, query, key, value, attention_mask, scaling, plan, calibrate_here, kwargs, out
        )
    return out


def _dual(module, query, key, value, attention_mask, scaling, dropout, plan, kwargs):
    """A calibrated layer of a doubled batch: the first half plain, the second half calibrated."""
    n = plan.dual_batch
    if query.shape[0] != 2 * n:
        raise RuntimeError(
            f"a dual plan for {n} sequences reached layer {module.layer_idx} with a batch of {query.shape[0]}; "
            "the encoder doubles the batch at the branch layer"
        )

    def half(tensor, part):
        if tensor is None or tensor.shape[0] == 1:  # absent, or broadcast over the batch
            return tensor
        return tensor[:n] if part == 0 else tensor[n:]

    plain, _ = sdpa_attention_forward(
        module, query[:n], key[:n], value[:n], half(attention_mask, 0), scaling=scaling, dropout=dropout, **kwargs
    )
    calibrated = _attention(
        module, query[n:], key[n:], value[n:], half(attention_mask, 1), scaling, dropout, plan, True, False, kwargs
    )
    return torch.cat([plain, calibrated.to(plain.dtype)], dim=0)


def _pooling_row_calibrated(module, query, key, value, attention_mask, scaling, plan, calibrate_here, kwargs, out):
    n, heads, q_len, _ = query.shape
    positions = plan.pool_positions
    batch = torch.arange(n, device=query.device)
    q_rows = query[batch, :, positions][:, :, None, :]  # [N, H, 1, D]
    mask_rows = None
    if attention_mask is not None:
        mask_rows = attention_mask.expand(n, -1, -1, -1)[batch, :, positions][:, :, None, :]
    probs = _masked_probs(module, q_rows, key, mask_rows, positions[:, None], q_len, scaling, kwargs)
    plain = probs[:, :, 0, :]  # [N, H, K]
    used = calibrate_rows(plain, plan.layout, plan.config) if calibrate_here else plain
    if plan.recorder is not None:
        plan.recorder(module.layer_idx, plain, used)
    if not calibrate_here:
        return out
    rows = _weighted_values(used[:, :, None, :], value)[:, :, 0, :]  # [N, H, D]
    keep = ~plan.layout.calibrated[:, None, None]
    out[batch, positions] = torch.where(keep, out[batch, positions], rows.to(out.dtype))
    return out


def _all_rows_calibrated(module, query, key, value, attention_mask, scaling, dropout, plan, kwargs):
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    is_causal = kwargs.get("is_causal")
    is_causal = getattr(module, "is_causal", False) if is_causal is None else is_causal
    causal = bool(is_causal) and attention_mask is None and query.shape[2] > 1
    out = calibrated_all_rows(query, key, value, attention_mask, scale, causal, plan.layout, plan.config)
    if not plan.layout.all_calibrated:
        # short documents stay bit-for-bit plain, whatever else shares their batch
        plain, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
        out = torch.where(plan.layout.calibrated[:, None, None, None], out, plain)
    return out


def _masked_probs(module, q_rows, key, mask_rows, query_positions, q_len, scaling, kwargs) -> Tensor:
    """Post-softmax attention (float32) of some query rows, under exactly the mask SDPA used."""
    n, heads, rows, dim = q_rows.shape
    kv_heads, k_len = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    # grouped-query attention: fold the query heads of each KV head instead of repeating K
    scores = torch.matmul(q_rows.reshape(n, kv_heads, groups * rows, dim), key.transpose(-1, -2))
    scores = scores.view(n, heads, rows, k_len).float().mul_(scale)  # a fresh tensor: safe to edit in place
    if mask_rows is not None:
        if mask_rows.dtype == torch.bool:
            scores.masked_fill_(~mask_rows, torch.finfo(scores.dtype).min)
        else:
            scores.add_(mask_rows.float())
    else:
        is_causal = kwargs.get("is_causal")
        is_causal = getattr(module, "is_causal", False) if is_causal is None else is_causal
        if is_causal and q_len > 1:
            keys = torch.arange(k_len, device=scores.device)
            allowed = keys[None, None, :] <= query_positions[..., None]  # [N or 1, rows, K]
            scores.masked_fill_(~allowed[:, None], torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)


def _weighted_values(probs: Tensor, value: Tensor) -> Tensor:
    """``probs @ V`` for probs ``[N, H, rows, K]`` and V ``[N, KV, K, D]``; returns ``[N, H, rows, D]``."""
    n, heads, rows, k_len = probs.shape
    kv_heads = value.shape[1]
    groups = heads // kv_heads
    weighted = torch.matmul(probs.to(value.dtype).reshape(n, kv_heads, groups * rows, k_len), value)
    return weighted.view(n, heads, rows, value.shape[-1])


def register() -> str:
    """Register the attention and mask functions under :data:`ATTENTION_NAME` (idempotent)."""
    AttentionInterface.register(ATTENTION_NAME, posfair_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    return ATTENTION_NAME


register()


# ---------------------------------------------------------------------------- torch-level entry point
# The interception door (interception.py) sees a model's own ``F.scaled_dot_product_attention`` call, with
# no transformers attention module around it. These run the calibrated path above on that call's tensors.


@dataclass(frozen=True)
class _TorchCall:
    """Stands in for a transformers attention module: what the calibrated path reads from one."""

    layer_idx: int
    is_causal: bool
    num_key_value_groups: int = 1


def calibrated_sdpa(
    out: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    scale: Optional[float],
    is_causal: bool,
    plan: CalibrationPlan,
    layer: int,
) -> Tensor:
    """``out`` (torch SDPA's ``[N, H, L, D]`` output for one half's ``query``/``key``/``value``) with the
    pooling row(s) recomputed as :func:`posfair_attention` recomputes them; the recorder sees every layer."""
    module = _TorchCall(layer, bool(is_causal), max(1, query.shape[1] // key.shape[1]))
    mask = attn_mask
    if mask is not None:
        while mask.dim() < 4:
            mask = mask[None]
        mask = mask.expand(query.shape[0], mask.shape[1], query.shape[2], key.shape[2])
    kwargs = {"is_causal": bool(is_causal)}
    calibrate_here = not plan.config.is_plain and layer in plan.layers and plan.layout.any_calibrated
    if not calibrate_here and plan.recorder is None:
        return out
    if calibrate_here and plan.pooling == "mean":
        return _all_rows_calibrated(module, query, key, value, mask, scale, 0.0, plan, kwargs).transpose(1, 2)
    rows = out.transpose(1, 2)  # [N, L, H, D], the layout the calibrated path writes into
    return _pooling_row_calibrated(
        module, query, key, value, mask, scale, plan, calibrate_here, kwargs, rows
    ).transpose(1, 2)
