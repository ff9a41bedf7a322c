"""``--embedding``: windows and SEA over a LlamaIndex embedding the command line builds (encoding/wrapped.py).

    posfair ingest DIR --collection docs --mode windows --embedding openai-like --api-base URL --embedding-model NAME \
        --tokenizer MODEL_FOLDER
    posfair query "..." --collection docs      # the embedding is rebuilt from the collection's tag

What the tag records to rebuild it (``embedding_source``: the kind, the model's name, the API base, the tokenizer
given) is informational, out of the fingerprint; the vectors' identity is the tag's ``embedding`` entry. An API key
is read from the environment (``POSFAIR_EMBEDDING_API_KEY``, else ``OPENAI_API_KEY``), never from the command line,
and never written to the tag.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Optional

from posfair_llamaindex.errors import CliError

# the --embedding kinds: the LlamaIndex class each builds, and the package that holds it
EMBEDDING_KINDS = {
    "openai": ("llama_index.embeddings.openai", "OpenAIEmbedding", "llama-index-embeddings-openai"),
    "openai-like": ("llama_index.embeddings.openai_like", "OpenAILikeEmbedding", "llama-index-embeddings-openai-like"),
    "huggingface": ("llama_index.embeddings.huggingface", "HuggingFaceEmbedding", "llama-index-embeddings-huggingface"),
    "ollama": ("llama_index.embeddings.ollama", "OllamaEmbedding", "llama-index-embeddings-ollama"),
}
API_KEY_VARIABLES = ("POSFAIR_EMBEDDING_API_KEY", "OPENAI_API_KEY")
WRAPPED_OPTIONS = ("embedding", "api_base", "embedding_model", "tokenizer", "max_input_tokens")


def wrapped_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("a LlamaIndex embedding instead of --model (windows and sea modes)")
    group.add_argument(
        "--embedding",
        choices=tuple(EMBEDDING_KINDS),
        default=None,
        help="embed windows or chunks through this LlamaIndex embedding; a key comes from $"
        + " or $".join(API_KEY_VARIABLES),
    )
    group.add_argument("--api-base", default=None, help="the server's URL (openai-like, ollama)")
    group.add_argument("--embedding-model", default=None, help="the model's name at the server, or its folder")
    group.add_argument(
        "--tokenizer",
        default=None,
        help="the model's tokens for cutting windows: a model folder (tokenizer.json) or a tiktoken encoding name",
    )
    group.add_argument("--max-input-tokens", type=int, default=None, help="the model's tokens per input")
    return parent


def wrapped_source(args, base: Optional[dict[str, Any]] = None) -> Optional[dict[str, Any]]:
    """What builds the wrapped embedding: the options, over what a tag recorded (``embedding_source``); None when
    neither names one."""
    recorded = dict((base or {}).get("embedding_source") or {})
    given = {
        "kind": getattr(args, "embedding", None),
        "model": getattr(args, "embedding_model", None),
        "api_base": getattr(args, "api_base", None),
        "tokenizer": getattr(args, "tokenizer", None),
        "max_input_tokens": getattr(args, "max_input_tokens", None),
    }
    if given["kind"] is None and not recorded:
        named = [f"--{name.replace('_', '-')}" for name in WRAPPED_OPTIONS if getattr(args, name, None) is not None]
        if named:
            raise CliError(f"{', '.join(named)} go with --embedding, which was not given")
        return None
    if given["kind"] is not None and getattr(args, "model", None) is not None:
        raise CliError("--model and --embedding name two models: give one")
    source = {**recorded, **{key: value for key, value in given.items() if value is not None}}
    if not source.get("model"):
        raise CliError(f"--embedding {source['kind']} needs --embedding-model (the model's name or folder)")
    return source


def api_key() -> Optional[str]:
    for name in API_KEY_VARIABLES:
        if os.environ.get(name):
            return os.environ[name]
    return None


def build_wrapped(source: dict[str, Any]) -> Any:
    """The LlamaIndex embedding ``source`` describes (imports its package, which may load a model)."""
    import importlib

    module_name, class_name, package = EMBEDDING_KINDS[source["kind"]]
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ImportError as error:
        raise CliError(f"--embedding {source['kind']} needs the package {package} (pip install {package})") from error
    kind, model, base = source["kind"], source["model"], source.get("api_base")
    key = api_key()
    if kind == "openai":
        return cls(model=model, **({"api_key": key} if key else {}), **({"api_base": base} if base else {}))
    if kind == "openai-like":
        if not base:
            raise CliError("--embedding openai-like needs --api-base (the server's URL)")
        return cls(model_name=model, api_base=base, api_key=key or "fake")
    if kind == "ollama":
        return cls(model_name=model, **({"base_url": base} if base else {}))
    return cls(model_name=model)
