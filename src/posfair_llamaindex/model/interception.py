"""The second door into attention: for models that compute attention in their own code (DESIGN.md §2.7).

MPNet and remote-code models (gte's NewModel, nomic, jina) never call transformers' AttentionInterface,
and some reject extra forward keyword arguments. Here a forward pre-hook on each layer of the stack
pushes a ``TorchFunctionMode`` and a forward hook (``always_call=True``) pops it, so inside a layer the
mode sees the torch calls the model's code makes:

- ``F.scaled_dot_product_attention``: its output is kept, and the pooling row(s) are recomputed by
  attention.py's own calibrated path (:func:`~posfair_llamaindex.model.attention.calibrated_sdpa`);
- a softmax over ``(batch, heads, queries, keys)``, every bias and mask already added: the pooling
  row(s) of its probabilities go through ``calibrate_rows`` (every row for mean pooling).

The plan reaches the layers through a ``ContextVar``: a pre-hook on the model itself takes the plan out
of ``model(..., posfair_plan=plan)`` before the model's forward sees it, and a forward hook puts back
what was there before. Two threads (or two encoders) never see each other's plan.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Optional

import torch
from torch.overrides import TorchFunctionMode

from posfair_llamaindex.calibration.row_math import calibrate_rows
from posfair_llamaindex.model.attention import PLAN_KWARG, PROBE_KWARG, CalibrationPlan, calibrated_sdpa

_SDPA = torch.nn.functional.scaled_dot_product_attention
_SOFTMAXES = frozenset({torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax, torch.special.softmax})

_PLAN: ContextVar[Optional[CalibrationPlan]] = ContextVar("posfair_interception_plan", default=None)
_PROBE: ContextVar[Optional[list]] = ContextVar("posfair_interception_probe", default=None)
# what each open forward must undo on its way out: context tokens (model) and pushed modes (layers)
_OPEN_MODELS: ContextVar[tuple] = ContextVar("posfair_interception_models", default=())
_OPEN_LAYERS: ContextVar[tuple] = ContextVar("posfair_interception_layers", default=())


@dataclass(frozen=True)
class AttentionCall:
    """One softmax or SDPA call the probe saw inside a layer."""

    layer: int
    kind: str  # "sdpa" | "softmax"
    shape: tuple  # the scores' (softmax) or the query's (SDPA) shape
    dim: Optional[int] = None  # the softmax dimension, normalised to be non-negative
    dropout: float = 0.0  # the dropout_p an SDPA call passes (some remote code passes its rate in eval mode too)

    @property
    def is_attention(self) -> bool:
        """A call this door can calibrate: SDPA, or a softmax over the keys of a 4-D score tensor."""
        return len(self.shape) == 4 and (self.kind == "sdpa" or self.dim == 3)

    def describe(self) -> str:
        what = "F.scaled_dot_product_attention with query" if self.kind == "sdpa" else f"softmax(dim={self.dim}) over"
        return f"{what} {self.shape}"


def current_plan(kwargs: Optional[dict] = None) -> Optional[CalibrationPlan]:
    """The plan of the forward under way in this context (``kwargs`` is ignored: a :data:`PlanSource`)."""
    return _PLAN.get()


def install(model: torch.nn.Module, layers: list[torch.nn.Module]) -> None:
    """Hook ``model`` and its layer stack; forwards without a plan or a probe are left untouched."""
    model.register_forward_pre_hook(_enter_model, with_kwargs=True)
    model.register_forward_hook(_leave_model, always_call=True)
    for index, layer in enumerate(layers):
        layer.register_forward_pre_hook(functools.partial(_enter_layer, index))
        layer.register_forward_hook(_leave_layer, always_call=True)


def _enter_model(module, args, kwargs):
    tokens = (_PLAN.set(kwargs.pop(PLAN_KWARG, None)), _PROBE.set(kwargs.pop(PROBE_KWARG, None)))
    _OPEN_MODELS.set((*_OPEN_MODELS.get(), tokens))
    return args, kwargs


def _leave_model(module, args, output):
    *rest, (plan_token, probe_token) = _OPEN_MODELS.get()
    _OPEN_MODELS.set(tuple(rest))
    _PROBE.reset(probe_token)
    _PLAN.reset(plan_token)


def _enter_layer(index: int, module, args):
    probe, plan = _PROBE.get(), _PLAN.get()
    mode: Optional[TorchFunctionMode] = None
    if probe is not None:
        mode = _Probe(index, probe)
    elif plan is not None and (plan.recorder is not None or _calibrates(plan, index)):
        mode = _Calibrate(index, plan)
    if mode is not None:
        mode.__enter__()
    _OPEN_LAYERS.set((*_OPEN_LAYERS.get(), mode))


def _leave_layer(module, args, output):
    *rest, mode = _OPEN_LAYERS.get()
    _OPEN_LAYERS.set(tuple(rest))
    if mode is not None:
        mode.__exit__(None, None, None)


def _calibrates(plan: CalibrationPlan, index: int) -> bool:
    return not plan.config.is_plain and index in plan.layers and plan.layout.any_calibrated


def _softmax_dim(args: tuple, kwargs: dict) -> Optional[int]:
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if not isinstance(dim, int) or not isinstance(args[0], torch.Tensor):
        return None
    return dim % args[0].dim() if args[0].dim() else None


def _sdpa_arguments(args: tuple, kwargs: dict) -> dict:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    bound = dict(zip(names, args, strict=False))
    bound.update(kwargs)
    return bound


class _Probe(TorchFunctionMode):
    """Records every softmax and SDPA call of one layer, changing nothing."""

    def __init__(self, layer: int, seen: list) -> None:
        super().__init__()
        self.layer, self.seen = layer, seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _SDPA:
            call = _sdpa_arguments(args, kwargs)
            dropout = float(call.get("dropout_p") or 0.0)
            self.seen.append(AttentionCall(self.layer, "sdpa", tuple(call["query"].shape), dropout=dropout))
        elif func in _SOFTMAXES and args and isinstance(args[0], torch.Tensor):
            self.seen.append(AttentionCall(self.layer, "softmax", tuple(args[0].shape), _softmax_dim(args, kwargs)))
        return func(*args, **kwargs)


class _Calibrate(TorchFunctionMode):
    """Calibrates the one attention call of layer ``layer`` under ``plan``."""

    def __init__(self, layer: int, plan: CalibrationPlan) -> None:
        super().__init__()
        self.layer, self.plan = layer, plan

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is _SDPA:
            return self._sdpa(out, _sdpa_arguments(args, kwargs))
        if func in _SOFTMAXES and isinstance(out, torch.Tensor) and out.dim() == 4 and _softmax_dim(args, kwargs) == 3:
            return self._softmax(out)
        return out

    def _halves(self, batch: int) -> int:
        """Where the calibrated rows start: 0, or ``N`` in the doubled batch of a dual plan."""
        n = self.plan.layout.calibrated.shape[0]
        if self.plan.dual_batch is not None:
            if batch == 2 * n:
                return n
        elif batch == n:
            return 0
        doubled = " doubled for dual encoding" if self.plan.dual_batch is not None else ""
        raise RuntimeError(
            f"layer {self.layer}'s attention has a batch of {batch}, but the plan describes {n} sequences{doubled}; "
            "the model changed its batch layout (packed or unpadded sequences) after loading"
        )

    def _sdpa(self, out: torch.Tensor, call: dict) -> torch.Tensor:
        start = self._halves(out.shape[0])

        def half(tensor):
            if tensor is None or tensor.dim() < 4 or tensor.shape[0] == 1:  # absent, or broadcast over the batch
                return tensor
            return tensor[start:]

        if call.get("dropout_p", 0.0):
            raise RuntimeError(
                f"layer {self.layer} calls F.scaled_dot_product_attention with dropout_p={call['dropout_p']}: "
                "calibrated encoding needs model.eval() and a model whose code passes no dropout in eval mode"
            )
        rows = calibrated_sdpa(
            out[start:],
            call["query"][start:],
            call["key"][start:],
            call["value"][start:],
            half(call.get("attn_mask")),
            call.get("scale"),
            call.get("is_causal", False),
            self.plan,
            self.layer,
        )
        return rows if start == 0 else torch.cat([out[:start], rows.to(out.dtype)])

    def _softmax(self, probs: torch.Tensor) -> torch.Tensor:
        start = self._halves(probs.shape[0])
        plan = self.plan
        calibrate_here = _calibrates(plan, self.layer)
        if probs.requires_grad:
            probs = probs.clone()  # an in-place edit would break backward through the original
        target = probs[start:]
        n, heads, queries, keys = target.shape
        if plan.pooling == "mean":
            if calibrate_here:
                rows = target.reshape(n, heads * queries, keys)
                target.copy_(calibrate_rows(rows, plan.layout, plan.config).view_as(target))
            return probs
        batch = torch.arange(n, device=probs.device)
        plain = target[batch, :, plan.pool_positions]  # [N, H, K]
        used = calibrate_rows(plain, plan.layout, plan.config) if calibrate_here else plain
        if plan.recorder is not None:
            plan.recorder(self.layer, plain.float(), used.float())
        if calibrate_here:
            target[batch, :, plan.pool_positions] = used
        return probs
