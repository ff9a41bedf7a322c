"""What a sentence-transformers model folder says about its pipeline: pooling, dense heads, prompts.

Only the files are read (``modules.json``, ``1_Pooling/config.json``, ``2_Dense/...``,
``config_sentence_transformers.json``); sentence-transformers itself is not needed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from posfair_llamaindex.options import POOLINGS

if TYPE_CHECKING:  # torch loads with the first Dense head: checking that a model folder exists must not wait for it
    import torch

logger = logging.getLogger(__name__)

_ST_POOLING_FLAGS = {
    "pooling_mode_cls_token": "first",
    "pooling_mode_lasttoken": "last",
    "pooling_mode_mean_tokens": "mean",
}
_ST_POOLING_NAMES = {"cls": "first", "lasttoken": "last", "mean": "mean"}
# the Dense activations sentence-transformers writes, and their names in torch.nn
_ACTIVATIONS = {
    "torch.nn.modules.linear.Identity": "Identity",
    "torch.nn.modules.activation.Tanh": "Tanh",
    "torch.nn.modules.activation.ReLU": "ReLU",
    "torch.nn.modules.activation.GELU": "GELU",
    "torch.nn.modules.activation.Sigmoid": "Sigmoid",
}


@dataclass
class SentenceTransformerFiles:
    """The parts of a sentence-transformers pipeline this package reproduces."""

    pooling: Optional[str] = None
    dense: list[torch.nn.Module] = field(default_factory=list)
    normalize: bool = False
    prompts: dict[str, str] = field(default_factory=dict)
    max_seq_length: Optional[int] = None
    include_prompt: bool = True  # False: the prompt's tokens are left out of (mean) pooling


def read_sentence_transformer_files(folder: Optional[Path]) -> SentenceTransformerFiles:
    """Read a local model folder; a folder without ``modules.json`` gives an empty description."""
    found = SentenceTransformerFiles()
    if folder is None or not (folder / "modules.json").is_file():
        return found
    modules = json.loads((folder / "modules.json").read_text())
    for module in sorted(modules, key=lambda m: m.get("idx", 0)):
        kind = module.get("type", "").rsplit(".", 1)[-1]
        path = folder / module.get("path", "")
        if kind == "Transformer":
            continue
        if kind == "Pooling":
            pooling_config = json.loads((path / "config.json").read_text())
            found.pooling = _pooling_from_config(pooling_config, path)
            found.include_prompt = bool(pooling_config.get("include_prompt", True))
        elif kind == "Dense":
            found.dense.append(_load_dense(path))
        elif kind == "Normalize":
            found.normalize = True
        else:
            raise ValueError(
                f"{folder} uses sentence-transformers module {module.get('type')!r}, which posfair_llamaindex "
                "does not reproduce (supported: Transformer, Pooling, Dense, Normalize)"
            )
    bert_config = folder / "sentence_bert_config.json"
    if bert_config.is_file():
        found.max_seq_length = json.loads(bert_config.read_text()).get("max_seq_length")
    st_config = folder / "config_sentence_transformers.json"
    if st_config.is_file():
        found.prompts = dict(json.loads(st_config.read_text()).get("prompts") or {})
    return found


def _pooling_from_config(config: dict, path: Path) -> str:
    if "pooling_mode" in config and isinstance(config["pooling_mode"], str):
        name = _ST_POOLING_NAMES.get(config["pooling_mode"])
        if name is None:
            raise ValueError(
                f"{path}: pooling mode {config['pooling_mode']!r} is not supported (use one of {POOLINGS})"
            )
        return name
    chosen = [name for flag, name in _ST_POOLING_FLAGS.items() if config.get(flag)]
    others = [
        flag for flag, on in config.items() if flag.startswith("pooling_mode_") and on and flag not in _ST_POOLING_FLAGS
    ]
    if len(chosen) != 1 or others:
        raise ValueError(
            f"{path}: cannot reproduce pooling {sorted(flag for flag, on in config.items() if on is True)}; "
            f"posfair_llamaindex supports exactly one of {POOLINGS}"
        )
    return chosen[0]


def _load_dense(path: Path) -> torch.nn.Module:
    import torch

    config = json.loads((path / "config.json").read_text())
    activation_name = config.get("activation_function", "torch.nn.modules.linear.Identity")
    if activation_name not in _ACTIVATIONS:
        raise ValueError(f"{path}: Dense activation {activation_name!r} is not supported")
    linear = torch.nn.Linear(config["in_features"], config["out_features"], bias=config.get("bias", True))
    weights_file = path / "model.safetensors"
    if weights_file.is_file():
        from safetensors.torch import load_file

        state = load_file(str(weights_file))
    else:
        state = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    linear.load_state_dict({name.removeprefix("linear."): tensor for name, tensor in state.items()})
    return torch.nn.Sequential(linear, getattr(torch.nn, _ACTIVATIONS[activation_name])())


def looks_like_path(model_name: str) -> bool:
    """True for names that can only mean a folder: absolute, home-relative, dotted or with several parts.

    A hub id has at most one slash ("org/name"), so anything else cannot be looked up on the hub.
    """
    name = str(model_name)
    return name.startswith(("/", "~", ".", "\\")) or name.count("/") > 1 or "\\" in name or Path(name).is_absolute()


def check_model_exists(model_name: str) -> None:
    """Refuse a model that is neither a folder on this machine nor a hub id, before transformers tries it."""
    if looks_like_path(model_name) and not Path(model_name).expanduser().is_dir():
        raise FileNotFoundError(f"no model at {model_name}: there is no such folder")


def resolve_local_folder(model_name: str) -> Optional[Path]:
    """The local folder holding ``model_name``: the path itself, or its snapshot in the hub cache."""
    path = Path(model_name).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_name, local_files_only=True))
    except Exception:  # not cached: transformers will say what is missing when it loads
        logger.debug("no local snapshot of %s", model_name)
        return None


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def weights_identity(folder: Optional[Path]) -> str:
    """What identifies the weights: the hub revision of a cached snapshot, else a SHA-256 of the weight files.

    Paths differ between machines (a virtual environment, a cache), so the model's path cannot say whether
    two collections were embedded by the same model; its weights can.
    """
    if folder is None:
        return "unknown"
    folder = folder.resolve()
    if folder.parent.name == "snapshots" and len(folder.name) == 40:
        return f"revision:{folder.name}"
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        return "unknown"
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(folder)).encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()[:16]}"
