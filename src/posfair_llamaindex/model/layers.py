"""Finding a model's layer stack by structure, and the dual-mode hook that doubles the batch in it.

Both doors into attention need a handle on each layer: dual encoding doubles the batch where its two
branches part, and the interception door enters and leaves each calibrated layer. Nothing here names a
module path; the stack is recognised by its shape (DESIGN.md §2.6, §2.7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import torch

from posfair_llamaindex.model.attention import PLAN_KWARG, CalibrationPlan

# Reads the plan of the forward under way from a layer's keyword arguments (or from wherever the door keeps it).
PlanSource = Callable[[dict], Optional[CalibrationPlan]]


def stack_by_layer_index(model: torch.nn.Module, num_layers: int) -> Optional[list[torch.nn.Module]]:
    """The ModuleList whose i-th entry holds the attention module with ``layer_idx == i`` (the first door)."""
    for _, candidate in model.named_modules():
        if not isinstance(candidate, torch.nn.ModuleList) or len(candidate) != num_layers:
            continue
        if all(
            any(getattr(sub, "layer_idx", None) == index for sub in layer.modules())
            for index, layer in enumerate(candidate)
        ):
            return list(candidate)
    return None


def stack_by_shape(model: torch.nn.Module, num_layers: Optional[int]) -> Optional[list[torch.nn.Module]]:
    """For attention modules without ``layer_idx``: the heaviest ModuleList of one repeated layer class.

    With ``num_layers`` known (the config's ``num_hidden_layers``) only lists of that length count. The
    probe then checks that each entry makes exactly one attention call, so a wrong pick is refused, not used.
    """
    best, best_size = None, -1
    for _, candidate in model.named_modules():
        if not isinstance(candidate, torch.nn.ModuleList) or len(candidate) == 0:
            continue
        if num_layers is not None and len(candidate) != num_layers:
            continue
        if len({type(layer) for layer in candidate}) != 1:
            continue
        size = sum(parameter.numel() for parameter in candidate.parameters())
        if size > best_size:
            best, best_size = list(candidate), size
    return best


def branch_dual_batch(index: int, plan_of: PlanSource, module: torch.nn.Module, args: tuple, kwargs: dict):
    """Forward pre-hook of layer ``index``: under a dual plan, double the batch from the branch layer on.

    At the branch layer the hidden states arrive with the batch once and leave with it twice; in every
    layer from there on, whatever else the model hands its layers per sequence (the attention mask,
    rotary position embeddings, position ids, a relative position bias) is doubled to match. Forwards
    without a dual plan, and layers below the branch, are left alone.
    """
    plan = plan_of(kwargs)
    if plan is None or plan.dual_batch is None or index < plan.branch_layer:
        return None
    n = plan.dual_batch
    hidden = args[0] if args else kwargs["hidden_states"]
    if hidden.shape[0] not in (n, 2 * n):
        raise RuntimeError(f"layer {index} of a dual pass got a batch of {hidden.shape[0]}, expected {n} or {2 * n}")

    def doubled(value):
        if isinstance(value, torch.Tensor):
            return torch.cat([value, value]) if value.dim() >= 2 and value.shape[0] == n else value
        if isinstance(value, (tuple, list)):
            return type(value)(doubled(item) for item in value)
        if isinstance(value, dict):
            return {key: doubled(item) for key, item in value.items()}
        return value

    if hidden.shape[0] == n and n > 0:
        hidden = torch.cat([hidden, hidden])
    rest = tuple(doubled(item) for item in args[1:])
    kwargs = {key: (item if key in (PLAN_KWARG, "hidden_states") else doubled(item)) for key, item in kwargs.items()}
    if args:
        return (hidden, *rest), kwargs
    kwargs["hidden_states"] = hidden
    return rest, kwargs


def plan_in_kwargs(kwargs: dict) -> Optional[CalibrationPlan]:
    """Where the AttentionInterface door keeps the plan: in the forward keyword arguments."""
    return kwargs.get(PLAN_KWARG)
