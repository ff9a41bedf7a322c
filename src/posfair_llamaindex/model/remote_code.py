"""What remote code written for transformers 4 needs to run on transformers 5 (DESIGN.md §2.8).

Two things transformers 5 no longer does for such code, both repaired on the loaded model only:

- the ``PreTrainedModel`` mask and head-mask helpers it removed (``get_extended_attention_mask``,
  ``invert_attention_mask``, ``create_extended_attention_mask_for_decoder``, ``get_head_mask``,
  ``_convert_head_mask_to_5d``), which gte's ``NewModel`` and nomic-bert call in their forward: each module
  of a remote-code class that lacks one gets transformers 4's version bound to it; nothing in transformers
  and no other class is touched;
- non-persistent buffers (rotary ``inv_freq``, ``position_ids``) that transformers 5 leaves uninitialised
  unless ``_init_weights`` fills them: rebuilt from the model's own constructor.
"""

from __future__ import annotations

import copy
import logging
import types
from typing import Optional

import torch
from torch import Tensor
from transformers import PreTrainedModel

logger = logging.getLogger(__name__)


def is_remote_code(module: torch.nn.Module) -> bool:
    """A class defined outside transformers and torch: a folder's own modeling code."""
    return type(module).__module__.split(".")[0] not in ("transformers", "torch")


# transformers 4's ModuleUtilsMixin semantics, written from its documented behaviour: a mask of ones (attend)
# and zeros (ignore) becomes an additive bias of 0 and the dtype's smallest value, broadcastable over heads.


def _causal_padding_mask(input_shape, attention_mask: Tensor, device: Optional[torch.device] = None) -> Tensor:
    """Decoder masks: query ``i`` sees keys ``<= i`` and not padding; past keys (a longer mask) are all seen."""
    device = attention_mask.device if device is None else device
    batch, length = input_shape
    positions = torch.arange(length, device=device)
    causal = (positions[None, None, :].repeat(batch, length, 1) <= positions[None, :, None]).to(attention_mask.dtype)
    past = attention_mask.shape[1] - causal.shape[1]
    if past > 0:
        seen = torch.ones((batch, length, past), device=device, dtype=causal.dtype)
        causal = torch.cat([seen, causal], dim=-1)
    return causal[:, None, :, :] * attention_mask[:, None, None, :]


def _as_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    mask = mask.to(dtype=dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


def get_extended_attention_mask(
    self, attention_mask: Tensor, input_shape, device: Optional[torch.device] = None, dtype=None
) -> Tensor:
    """``[B, L]`` or ``[B, Lq, Lk]`` ones/zeros -> additive ``[B, 1, 1 or Lq, Lk]`` bias (causal for decoders)."""
    dtype = self.dtype if dtype is None else dtype
    if attention_mask.dim() == 3:
        extended = attention_mask[:, None, :, :]
    elif attention_mask.dim() == 2:
        if getattr(self.config, "is_decoder", False):
            extended = _causal_padding_mask(input_shape, attention_mask, device)
        else:
            extended = attention_mask[:, None, None, :]
    else:
        raise ValueError(
            f"Wrong shape for input_ids (shape {tuple(input_shape)}) or attention_mask (shape "
            f"{tuple(attention_mask.shape)})"
        )
    return _as_bias(extended, dtype)


def invert_attention_mask(self, encoder_attention_mask: Tensor) -> Tensor:
    """An encoder's ``[B, L]`` or ``[B, Lq, Lk]`` ones/zeros -> additive bias in the model's dtype."""
    if encoder_attention_mask.dim() == 3:
        extended = encoder_attention_mask[:, None, :, :]
    elif encoder_attention_mask.dim() == 2:
        extended = encoder_attention_mask[:, None, None, :]
    else:
        raise ValueError(f"an encoder attention mask has 2 or 3 dimensions, not {encoder_attention_mask.dim()}")
    return _as_bias(extended, self.dtype)


def create_extended_attention_mask_for_decoder(input_shape, attention_mask: Tensor, device=None) -> Tensor:
    """The decoder case of :func:`get_extended_attention_mask` as ones/zeros (a static method in transformers 4)."""
    return _causal_padding_mask(input_shape, attention_mask, device)


def _convert_head_mask_to_5d(self, head_mask: Tensor, num_hidden_layers: int) -> Tensor:
    """``[heads]`` (every layer) or ``[layers, heads]`` -> ``[layers, 1, heads, 1, 1]`` in the model's dtype."""
    if head_mask.dim() == 1:
        head_mask = head_mask[None, None, :, None, None].expand(num_hidden_layers, -1, -1, -1, -1)
    elif head_mask.dim() == 2:
        head_mask = head_mask[:, None, :, None, None]
    if head_mask.dim() != 5:
        raise ValueError(f"head_mask.dim != 5, instead {head_mask.dim()}")
    return head_mask.to(dtype=self.dtype)


def get_head_mask(self, head_mask: Optional[Tensor], num_hidden_layers: int, is_attention_chunked: bool = False):
    """1.0 keeps a head, 0.0 drops it; no mask is a list of ``None``, one per layer."""
    if head_mask is None:
        return [None] * num_hidden_layers
    head_mask = self._convert_head_mask_to_5d(head_mask, num_hidden_layers)
    return head_mask.unsqueeze(-1) if is_attention_chunked else head_mask


_BOUND_HELPERS = {
    "get_extended_attention_mask": get_extended_attention_mask,
    "invert_attention_mask": invert_attention_mask,
    "get_head_mask": get_head_mask,
    "_convert_head_mask_to_5d": _convert_head_mask_to_5d,
}
_STATIC_HELPERS = {"create_extended_attention_mask_for_decoder": create_extended_attention_mask_for_decoder}
REMOVED_HELPERS = (*_BOUND_HELPERS, *_STATIC_HELPERS)

_ANNOUNCED: set[str] = set()  # what the log already said, so a repair is said once per process


def restore_transformers4_helpers(model: torch.nn.Module) -> dict[str, list[str]]:
    """Bind the removed helpers to every remote-code ``PreTrainedModel`` in ``model`` whose class lacks them.

    Only the instances change (their ``__dict__``); the classes, transformers and every other model stay as they
    were. Said once in the log per set of classes. Returns ``{class name: [helpers given]}``.
    """
    given: dict[str, list[str]] = {}
    for module in model.modules():
        if not isinstance(module, PreTrainedModel) or not is_remote_code(module):
            continue
        names = [name for name in REMOVED_HELPERS if not hasattr(type(module), name)]
        for name in names:
            helper = _BOUND_HELPERS.get(name)
            object.__setattr__(module, name, types.MethodType(helper, module) if helper else _STATIC_HELPERS[name])
        if names:
            given.setdefault(type(module).__name__, names)
    key = ", ".join(f"{name}: {'/'.join(names)}" for name, names in given.items())
    if given and key not in _ANNOUNCED:
        _ANNOUNCED.add(key)
        helpers = sorted({name for names in given.values() for name in names})
        logger.info(
            "%s: remote code written for transformers 4; gave it transformers 4's %s, which transformers 5 removed "
            "from PreTrainedModel (on this model's modules only)",
            ", ".join(given),
            ", ".join(helpers),
        )
    return given


def rebuild_unsaved_buffers(model: torch.nn.Module) -> list[str]:
    """Rebuild the buffers that no checkpoint holds (non-persistent ones) from the model's own constructor.

    transformers 5 leaves them uninitialised unless the model's ``_init_weights`` fills them, which code
    written for transformers 4 does not (rotary ``inv_freq``, ``position_ids``): the model then computes
    garbage. ``type(model)(config)`` computes them as the model's author meant. Returns the names rebuilt.
    """
    saved = set(model.state_dict())
    unsaved = [(name, buffer) for name, buffer in model.named_buffers() if name not in saved]
    if not unsaved:
        return []
    fresh = dict(type(model)(copy.deepcopy(model.config)).named_buffers())
    rebuilt = []
    for name, buffer in unsaved:
        value = fresh.get(name)
        if value is None or value.is_meta:
            continue
        value = value.to(device=buffer.device, dtype=buffer.dtype if buffer.is_floating_point() else value.dtype)
        if value.shape == buffer.shape and torch.equal(value, buffer):
            continue
        owner, _, leaf = name.rpartition(".")
        model.get_submodule(owner).register_buffer(leaf, value, persistent=False)
        rebuilt.append(name)
    return rebuilt
