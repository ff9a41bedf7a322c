"""Does the loaded model hold its folder's weights? A class that does not fit its checkpoint is refused.

When a folder's weights do not fit the class that loads them (a config whose ``model_type`` names a built-in
class while the weights were written by the folder's own code, a renamed layer, a checkpoint of another model),
transformers prints its "newly initialized" table and goes on with random values; remote code with its own
``from_pretrained`` (nomic-bert's ``load_state_dict(strict=False)``) says nothing at all. The vectors would then
come from random weights. Here the keys are compared, and a model is refused, naming the keys, when

- a parameter that the encoder's output depends on is not in the checkpoint (a pooler head the output never
  uses may be missing: it is only logged), or
- the checkpoint holds weights inside a module the model has but at a name the class does not know (more layers
  than the config says, another architecture's layer); weights of heads the model does not build are ignored.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import torch

from posfair_llamaindex.errors import MismatchedWeightsError

logger = logging.getLogger(__name__)

_SHOWN = 8  # keys named in a message; the count says how many more


def checkpoint_keys(folder: Optional[Path]) -> Optional[set[str]]:
    """The tensor names a folder's checkpoint holds (read from headers or the shard index, not the weights)."""
    if folder is None:
        return None
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            return set(json.loads((folder / index).read_text())["weight_map"])
    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
            return set(handle.keys())
    if (folder / "pytorch_model.bin").is_file():
        return set(torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True, mmap=True))
    return None


def check_weights_fit(
    model_name: str,
    model: torch.nn.Module,
    loading_info: Optional[dict],
    folder: Optional[Path],
    sample_inputs: dict,
    hint: str = "",
) -> None:
    """Refuse ``model`` when its weights did not all come from the checkpoint (see the module docstring).

    ``loading_info`` is transformers' ``output_loading_info`` report; remote code whose ``from_pretrained``
    returns none (it loads the state dict itself, by exact names) is compared with ``folder``'s checkpoint.
    """
    if loading_info is not None:
        missing = set(loading_info.get("missing_keys", ()))
        unexpected = set(loading_info.get("unexpected_keys", ()))
        mismatched = [str(item[0]) if isinstance(item, (tuple, list)) else str(item) for item in
                      loading_info.get("mismatched_keys", ())]  # fmt: skip
    else:
        stored = checkpoint_keys(folder)
        if stored is None:
            logger.info("%s: no checkpoint file found to check the loaded weights against", model_name)
            return
        own = set(model.state_dict())
        missing, unexpected, mismatched = own - stored, stored - own, []
    parameters = dict(model.named_parameters())
    missing_parameters = sorted(name for name in missing if name in parameters)
    used = _used_by_the_output(model, missing_parameters, sample_inputs)
    unused = sorted(set(missing_parameters) - set(used))
    if unused:
        logger.info("%s: not in the checkpoint, and unused by the output the vectors pool: %s", model_name, unused)
    misplaced = sorted(key for key in unexpected if _inside_the_model(model, key))
    if not used and not misplaced and not mismatched:
        return
    problems = []
    if used:
        problems.append(f"{len(used)} parameters the encoder uses are not in the checkpoint, so they would be random: "
                        f"{_listed(used)}")  # fmt: skip
    if misplaced:
        problems.append(f"the checkpoint holds {len(misplaced)} weights inside the model where its class has none: "
                        f"{_listed(misplaced)}")  # fmt: skip
    if mismatched:
        problems.append(f"{len(mismatched)} weights have another shape than the class's: {_listed(mismatched)}")
    raise MismatchedWeightsError(
        f"the weights of {model_name} do not fit {type(model).__name__} ({type(model).__module__}): "
        + "; ".join(problems)
        + ". The folder's config.json (model_type, sizes) or its modeling code does not match its weights"
        + (f"; {hint}" if hint else "")
    )


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _inside_the_model(model: torch.nn.Module, key: str) -> bool:
    """A checkpoint key that lands in a module the model has, at a name the module does not know.

    A key under no module of the model belongs to a head it does not build (an LM head, a pooler left out); a key
    naming an attribute the module has (a buffer older code saved) is not misplaced either.
    """
    modules = dict(model.named_modules())
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        owner = modules.get(".".join(parts[:cut]))
        if owner is None:
            continue
        rest = parts[cut:]
        return not (len(rest) == 1 and hasattr(owner, rest[0]))
    return False


def _used_by_the_output(model: torch.nn.Module, names: list[str], sample_inputs: dict) -> list[str]:
    """Which of the parameters ``names`` the model's last hidden state depends on (one small forward, autograd)."""
    if not names:
        return []
    parameters = [model.get_parameter(name) for name in names]
    before = [parameter.requires_grad for parameter in parameters]
    try:
        for parameter in parameters:
            parameter.requires_grad_(True)
        with torch.enable_grad():
            output = model(**sample_inputs)
            hidden = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
            if not hidden.requires_grad:
                return []
            grads = torch.autograd.grad(hidden.float().sum(), parameters, allow_unused=True)
    except Exception as error:  # a forward that cannot run here: count every missing parameter as used
        logger.info("could not trace which missing parameters the output uses (%s: %s)", type(error).__name__, error)
        return list(names)
    finally:
        for parameter, flag in zip(parameters, before, strict=True):
            parameter.requires_grad_(flag)
    return [name for name, grad in zip(names, grads, strict=True) if grad is not None]
