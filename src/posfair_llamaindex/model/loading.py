"""Loading a model for calibration, and choosing the door through which its attention is reached.

First door: transformers' AttentionInterface (attention.py). The model loads with ``posfair_sdpa`` and a
probe checks that every layer calls it; such models keep exactly the path they had before the second
door existed. Second door: the torch-level interception (interception.py), for models whose attention
is computed in their own code. They load with their default attention, their remote code is repaired
where transformers 5 leaves it broken, their unpadding and kernel switches are turned to the padded
torch path, and a probe checks that each layer makes exactly one attention call (DESIGN.md §2.4, §2.7).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from posfair_llamaindex.errors import UnsupportedModelError
from posfair_llamaindex.model import interception
from posfair_llamaindex.model.attention import ATTENTION_NAME, PROBE_KWARG
from posfair_llamaindex.model.layers import branch_dual_batch, plan_in_kwargs, stack_by_layer_index, stack_by_shape
from posfair_llamaindex.model.model_files import resolve_local_folder
from posfair_llamaindex.model.remote_code import is_remote_code, rebuild_unsaved_buffers, restore_transformers4_helpers
from posfair_llamaindex.model.weights_fit import MismatchedWeightsError, check_weights_fit

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


@contextlib.contextmanager
def loading_progress(show: bool) -> Iterator[None]:
    """transformers' "Loading weights" bar only when asked: a RAG application makes embeddings often, and a bar at
    each one reads as trouble. The switch is transformers' own (process-wide); its state is restored after."""
    from transformers.utils import logging as transformers_logging

    was_on = transformers_logging.is_progress_bar_enabled()
    if show != was_on:
        (transformers_logging.enable_progress_bar if show else transformers_logging.disable_progress_bar)()
    try:
        yield
    finally:
        if show != was_on:
            (transformers_logging.enable_progress_bar if was_on else transformers_logging.disable_progress_bar)()


def load_model(
    model_name: str,
    tokenizer,
    *,
    dtype: torch.dtype,
    device: torch.device,
    trust_remote_code: bool,
    show_progress: bool = False,
) -> LoadedModel:
    """Load ``model_name`` through the first door that reaches every layer's attention, or refuse."""
    config = _load_config(model_name, trust_remote_code)
    switches = padded_torch_switches(config)
    hint = _auto_map_policy(model_name, config, trust_remote_code)
    folder = resolve_local_folder(model_name)

    def loaded(**kwargs) -> torch.nn.Module:
        # a fresh config copy per load: from_pretrained writes its attention choice into the config
        with loading_progress(show_progress):
            result = AutoModel.from_pretrained(
                model_name,
                dtype=dtype,
                trust_remote_code=trust_remote_code,
                output_loading_info=True,
                **({"config": copy.deepcopy(config)} if switches else {}),
                **kwargs,
            )
        model, info = result if isinstance(result, tuple) else (result, None)  # own from_pretrained: no report
        _check_the_class(model_name, model, config, trust_remote_code)
        return _prepared(model_name, model, info, tokenizer, dtype=dtype, device=device, folder=folder, hint=hint)

    refusal = None
    try:
        model = loaded(attn_implementation=ATTENTION_NAME)
    except (MismatchedWeightsError, UnsupportedModelError):
        raise
    except Exception as error:  # remote code may fail its own way on an attention name it does not know
        named = isinstance(error, ValueError) and (
            "attn_implementation" in str(error) or "attention" in str(error).lower()
        )
        if not named and not trust_remote_code:
            raise
        refusal, model = f"{type(error).__name__}: {str(error).split('. ')[0]}", None
    if model is not None:
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
    model = loaded()  # the attention the model's own code chooses (gte's NewSdpaAttention where it declares SDPA)
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
    except OSError:
        upstream = sorted({ref for ref in _raw_auto_map(model_name).values() if "--" in str(ref)})
        if upstream and trust_remote_code:
            raise FileNotFoundError(
                f"{model_name}'s config.json (auto_map) takes its model code from another hub repository "
                f"({', '.join(upstream)}), which is not on this machine: put those .py files into the folder and "
                "point auto_map at them without the 'repository--' prefix"
            ) from None
        raise


def _raw_auto_map(model_name: str) -> dict:
    folder = resolve_local_folder(model_name)
    path = folder / "config.json" if folder is not None else None
    if path is None or not path.is_file():
        return {}
    return dict(json.loads(path.read_text()).get("auto_map") or {})


def _auto_map_policy(model_name: str, config, trust_remote_code: bool) -> str:
    """Honour config.json's ``auto_map`` whatever its ``model_type``, or say why not; returns a hint for errors.

    With trust on, an ``auto_map`` that names model classes but no ``AutoModel`` is refused by name (posfair loads
    the base model through ``AutoModel``). With trust off, a ``model_type`` transformers knows loads transformers'
    built-in class instead of the folder's code: said in the log, and the weights are checked against that class.
    """
    entries = dict(getattr(config, "auto_map", None) or {})
    model_entries = sorted(name for name in entries if name.startswith("AutoModel") or name == "AutoConfig")
    if not model_entries:
        return ""
    own = entries.get("AutoModel")
    if trust_remote_code and own is None:
        listed = ", ".join(f"{name} -> {entries[name]}" for name in model_entries)
        raise unsupported(
            model_name,
            f"its config.json's auto_map names its own code ({listed}) but no AutoModel class, and posfair loads "
            "the base model through AutoModel: add an AutoModel entry naming the base model class",
        )
    if own is None:
        return ""
    if not trust_remote_code:
        logger.warning(
            "%s ships its own model code (config.json's auto_map: AutoModel -> %s), and trust_remote_code is off: "
            "transformers' built-in class for model_type %r runs instead (its weights are checked against it)",
            model_name,
            own,
            getattr(config, "model_type", None),
        )
        return (
            f"its config.json's auto_map names its own code ({own}): with trust_remote_code=True (CLI "
            "--trust-remote-code) that code runs instead of transformers' built-in class"
        )
    return ""


def _check_the_class(model_name: str, model: torch.nn.Module, config, trust_remote_code: bool) -> None:
    """With trust on and an ``auto_map`` AutoModel entry, the folder's class must be the one that loaded."""
    own = (getattr(config, "auto_map", None) or {}).get("AutoModel")
    if trust_remote_code and own is not None and not is_remote_code(model):
        raise unsupported(
            model_name,
            f"its config.json's auto_map names {own} for AutoModel, but transformers loaded its built-in "
            f"{type(model).__name__} ({type(model).__module__})",
        )


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


def _prepared(
    model_name: str,
    model: torch.nn.Module,
    loading_info: Optional[dict],
    tokenizer,
    *,
    dtype: torch.dtype,
    device: torch.device,
    folder,
    hint: str,
) -> torch.nn.Module:
    """Repair remote code, hold the model to the dtype asked for and to its checkpoint, then eval on ``device``."""
    if is_remote_code(model):
        restore_transformers4_helpers(model)
        repaired = rebuild_unsaved_buffers(model)
        if repaired:
            logger.info("rebuilt buffers that loading left uninitialised: %s", repaired)
    honour_dtype(model_name, model, dtype)
    sample = dict(tokenizer(["probe text for the weights"], return_tensors="pt"))
    check_weights_fit(model_name, model, loading_info, folder, sample, hint=hint)
    if getattr(model.config, "use_cache", False):
        model.config.use_cache = False
    return model.eval().to(device)


def honour_dtype(model_name: str, model: torch.nn.Module, dtype: torch.dtype) -> None:
    """The dtype asked for is the dtype that runs, whatever keyword the model's own ``from_pretrained`` reads.

    Parameters the class keeps in float32 on purpose (``_keep_in_fp32_modules``) are left alone. Others in another
    dtype are cast, as the model's code would have cast them had it read ``dtype`` (nomic's reads ``torch_dtype``);
    a model whose parameters still differ after that is refused.
    """
    kept = set(getattr(model, "_keep_in_fp32_modules", None) or ()) | set(
        getattr(model, "_keep_in_fp32_modules_strict", None) or ()
    )

    def differing() -> list[str]:
        return sorted(
            {
                str(parameter.dtype).removeprefix("torch.")
                for name, parameter in model.named_parameters()
                if parameter.is_floating_point() and parameter.dtype != dtype and not kept & set(name.split("."))
            }
        )

    found = differing()
    if not found:
        return
    model.to(dtype)
    logger.warning(
        "%s: %s's from_pretrained left its parameters in %s although dtype=%s was asked (its code reads another "
        "keyword); cast them to %s",
        model_name,
        type(model).__name__,
        ", ".join(found),
        str(dtype).removeprefix("torch."),
        str(dtype).removeprefix("torch."),
    )
    still = differing()
    if still:
        raise unsupported(
            model_name,
            f"dtype={str(dtype).removeprefix('torch.')} was asked, but its parameters stay in {', '.join(still)} "
            "after casting (its code sets their dtype itself)",
        )


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
        if call.dropout:
            raise unsupported(
                model_name,
                f"layer {index} calls F.scaled_dot_product_attention with dropout_p={call.dropout} in eval mode (its "
                "code passes the config's attention dropout whether or not it trains), so its vectors would be "
                "random: set that dropout to 0 in config.json (nomic-bert: attn_pdrop)",
            )
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
