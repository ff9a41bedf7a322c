"""Loading a model for calibration, and choosing the door through which its attention is reached.

First door: transformers' AttentionInterface (attention.py). The model loads with ``posfair_sdpa`` and a
probe checks that every layer calls it; such models keep exactly the path they had before the second
door existed. Second door: the torch-level interception (interception.py), for models whose attention
is computed in their own code. They load with their default attention, their remote code is repaired
where transformers 5 leaves it broken, their unpadding and kernel switches are turned to the padded
torch path, and a probe checks that each layer makes exactly one attention call (DESIGN.md §2.4, §2.7).
"""

from __future__ import annotations

import copy
import functools
import logging
from dataclasses import dataclass
from typing import Any, Optional

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from posfair_llamaindex import interception
from posfair_llamaindex.attention import ATTENTION_NAME, PROBE_KWARG
from posfair_llamaindex.layers import branch_dual_batch, plan_in_kwargs, stack_by_layer_index, stack_by_shape

logger = logging.getLogger(__name__)

SUPPORTED_FAMILIES = (
    "models whose attention goes through transformers' AttentionInterface (BERT, XLM-RoBERTa, ModernBERT, Qwen3, "
    "Gemma3, ...) and models that compute it in their own code with one F.scaled_dot_product_attention or one "
    "softmax over (batch, heads, queries, keys) per layer (MPNet, remote-code models on their padded torch path)"
)

# Config switches that route attention around torch's padded path, and the value that turns them back to it.
# Per family in DESIGN.md §2.8. A switch not listed here that looks like one is refused by name.
PADDED_TORCH_SWITCHES: dict[str, Any] = {
    "unpad_inputs": False,  # gte NewModel (gte-multilingual-base, gte-*-v1.5, stella): packs sequences into one row
    "use_memory_efficient_attention": False,  # NewModel: xformers' memory-efficient kernel
    "use_flash_attn": False,  # jina-embeddings-v3, nomic-bert: flash_attn's varlen kernels
}
_KERNEL_WORDS = ("unpad", "flash", "xformers", "memory_efficient", "triton")

DOORS = ("interface", "interception")


class UnsupportedModelError(ValueError):
    """The model's attention cannot be reached by either door, so it cannot be calibrated."""


@dataclass
class LoadedModel:
    """A model ready to encode: eval mode, on its device, its layer stack hooked for dual encoding."""

    tokenizer: Any
    model: torch.nn.Module
    layers: list
    door: str  # "interface" | "interception"

    @property
    def num_layers(self) -> int:
        return len(self.layers)


def unsupported(model_name: str, reason: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"{model_name} cannot be calibrated: {reason}. Supported: {SUPPORTED_FAMILIES}")


def load_tokenizer(model_name: str, trust_remote_code: bool):
    try:
        return AutoTokenizer.from_pretrained(model_name, trust_remote_code=trust_remote_code)
    except OSError as error:
        raise FileNotFoundError(
            f"no model at {model_name}: not a folder on this machine, and not a hub model in the local cache "
            f"({str(error).splitlines()[0]})"
        ) from None
    except ValueError as error:
        if "trust_remote_code" in str(error):
            raise _needs_trust(model_name) from None
        raise


def _needs_trust(model_name: str) -> ValueError:
    return ValueError(
        f"{model_name} ships its own model code (config.json's auto_map); it runs only with "
        "trust_remote_code=True (CLI --trust-remote-code), which executes that code: use it for code you trust"
    )


def load_model(
    model_name: str, tokenizer, *, dtype: torch.dtype, device: torch.device, trust_remote_code: bool
) -> LoadedModel:
    """Load ``model_name`` through the first door that reaches every layer's attention, or refuse."""
    config = _load_config(model_name, trust_remote_code)
    switches = padded_torch_switches(config)

    def overrides() -> dict:  # a fresh copy per load: from_pretrained writes its attention choice into the config
        return {"config": copy.deepcopy(config)} if switches else {}

    refusal = None
    try:
        model = AutoModel.from_pretrained(
            model_name,
            attn_implementation=ATTENTION_NAME,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            **overrides(),
        )
    except Exception as error:  # remote code may fail its own way on an attention name it does not know
        named = isinstance(error, ValueError) and (
            "attn_implementation" in str(error) or "attention" in str(error).lower()
        )
        if not named and not trust_remote_code:
            raise
        refusal, model = f"{type(error).__name__}: {str(error).split('. ')[0]}", None
    if model is not None:
        model = _prepared(model, device)
        layers = _interface_layers(model_name, model, tokenizer, device)
        if layers is not None:
            for index, layer in enumerate(layers):
                layer.register_forward_pre_hook(
                    functools.partial(branch_dual_batch, index, plan_in_kwargs), with_kwargs=True
                )
            return LoadedModel(tokenizer, model, layers, "interface")
        del model  # before the second load, so two copies of the weights never coexist for long
    if refusal is not None:
        logger.info("%s refused the AttentionInterface (%s); trying the interception", model_name, refusal)
    check_kernel_switches(model_name, config)
    model = AutoModel.from_pretrained(model_name, dtype=dtype, trust_remote_code=trust_remote_code, **overrides())
    model = _prepared(model, device)
    layers = stack_by_shape(model, _configured_layers(model.config))
    if layers is None:
        raise unsupported(model_name, "its layer stack could not be located (no ModuleList of one repeated layer)")
    interception.install(model, layers)
    for index, layer in enumerate(layers):
        layer.register_forward_pre_hook(
            functools.partial(branch_dual_batch, index, interception.current_plan), with_kwargs=True
        )
    probe_interception(model_name, model, tokenizer, device, len(layers))
    return LoadedModel(tokenizer, model, layers, "interception")


def _load_config(model_name: str, trust_remote_code: bool):
    try:
        return AutoConfig.from_pretrained(model_name, trust_remote_code=trust_remote_code)
    except ValueError as error:
        if "trust_remote_code" in str(error):
            raise _needs_trust(model_name) from None
        raise


def padded_torch_switches(config) -> dict[str, Any]:
    """Turn the model's own unpadding and kernel switches to the padded torch path; returns what changed."""
    changed = {}
    for name, padded in PADDED_TORCH_SWITCHES.items():
        if hasattr(config, name) and getattr(config, name) != padded:
            changed[name] = getattr(config, name)
            setattr(config, name, padded)
    if changed:
        logger.info("set %s to the padded torch path (were %s)", sorted(changed), changed)
    return changed


def check_kernel_switches(model_name: str, config) -> None:
    """Refuse a switched-on config option that looks like an unpadding or kernel switch this module does not know."""
    for name, value in sorted(config.to_dict().items()):
        lowered = name.lower()
        if name in PADDED_TORCH_SWITCHES or not any(word in lowered for word in _KERNEL_WORDS):
            continue
        if value is True or (isinstance(value, str) and value.lower() not in ("", "none", "false", "eager", "sdpa")):
            raise unsupported(
                model_name,
                f"its config switch {name}={value!r} looks like it routes attention through packed sequences or a "
                f"kernel that bypasses torch, and posfair does not know the value that turns it off "
                f"(known switches: {sorted(PADDED_TORCH_SWITCHES)})",
            )


def _prepared(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    if _is_remote_code(model):
        repaired = rebuild_unsaved_buffers(model)
        if repaired:
            logger.info("rebuilt buffers that loading left uninitialised: %s", repaired)
    if getattr(model.config, "use_cache", False):
        model.config.use_cache = False
    return model.eval().to(device)


def _is_remote_code(model: torch.nn.Module) -> bool:
    return type(model).__module__.split(".")[0] != "transformers"


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


def _interface_layers(model_name: str, model, tokenizer, device) -> Optional[list]:
    """The layer stack when every layer calls the registered function; None when none does."""
    seen: list[Optional[int]] = []
    ids = tokenizer("probe", return_tensors="pt")
    try:
        with torch.inference_mode():
            model(**ids.to(device), **{PROBE_KWARG: seen})
    except TypeError as error:  # a forward that takes no extra keyword arguments never reaches the interface
        logger.info("%s rejected the probe keyword (%s)", model_name, error)
        return None
    if not seen:
        return None
    if any(layer is None for layer in seen):
        # the calls cannot be told apart by layer (native GteModel, NomicBertModel, JinaEmbeddingsV3Model);
        # their default attention reaches torch's SDPA, which the interception sees inside each layer
        logger.info("%s calls the AttentionInterface without layer_idx; trying the interception", model_name)
        return None
    expected = _configured_layers(model.config)
    layers = sorted(set(seen))
    if layers != list(range(len(layers))) or (expected is not None and len(layers) != expected):
        raise unsupported(model_name, f"only layers {layers} of {expected} went through the AttentionInterface")
    stack = stack_by_layer_index(model, len(layers))
    if stack is None:
        raise unsupported(model_name, "its layer stack could not be located for dual encoding")
    return stack


def probe_interception(model_name: str, model, tokenizer, device, num_layers: int) -> None:
    """Two texts of different lengths, padded: each layer must make exactly one attention call over them."""
    seen: list[interception.AttentionCall] = []
    ids = tokenizer(["probe", "a longer probe text for the layers"], padding=True, return_tensors="pt")
    batch, length = ids["input_ids"].shape
    with torch.inference_mode():
        model(**ids.to(device), **{PROBE_KWARG: seen})
    for index in range(num_layers):
        calls = [call for call in seen if call.layer == index]
        attention = [call for call in calls if call.is_attention]
        listed = "; ".join(call.describe() for call in calls) or "no softmax and no F.scaled_dot_product_attention"
        if len(attention) != 1:
            bypass = " (a kernel that bypasses torch, such as xformers or flash_attn?)" if not calls else ""
            raise unsupported(
                model_name,
                f"layer {index} made {len(attention)} attention calls where exactly one is needed; "
                f"seen: {listed}{bypass}",
            )
        call = attention[0]
        keys_ok = call.kind == "sdpa" or call.shape[3] == length
        if call.shape[0] != batch or call.shape[2] != length or not keys_ok:
            raise unsupported(
                model_name,
                f"layer {index} computes attention as {call.describe()} for a padded batch of {batch} x {length} "
                "tokens: it packs (unpads) sequences, which calibration cannot follow; seen: " + listed,
            )


def _configured_layers(config) -> Optional[int]:
    value = getattr(config, "num_hidden_layers", None)
    return int(value) if isinstance(value, int) else None
