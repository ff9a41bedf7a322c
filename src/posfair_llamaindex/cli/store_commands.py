"""``posfair ingest``, ``posfair query`` and ``posfair collections``."""

from __future__ import annotations

import json
import logging

from posfair_llamaindex.cli.arguments import (
    CliError,
    calibration_from_args,
    calibration_options,
    calibration_overrides,
    chunker_options,
    embedding_from_args,
    embedding_settings,
    encoder_options_given,
    load_config_from_args,
    mode_options,
    model_options,
    open_client,
    store_options,
    tag_settings,
    vector_storage_option,
)
from posfair_llamaindex.jobs.distributed import defaults as ray_defaults
from posfair_llamaindex.modes import MODES_BY_NAME

logger = logging.getLogger("posfair")


def register(commands) -> None:
    from posfair_llamaindex.cli.wrapped_options import wrapped_options

    store, model, calibration, chunker, mode, wrapped = (
        store_options(),
        model_options(),
        calibration_options(),
        chunker_options(),
        mode_options(),
        wrapped_options(),
    )
    ingest = commands.add_parser(
        "ingest",
        parents=[store, model, wrapped, mode, calibration, chunker],
        help="read .txt/.md files or folders into a collection",
        description="Split files into nodes, embed them as --mode says (calibrated by default) and upsert them into "
        "a tagged collection. Files with no usable text are skipped and listed; nodes already stored unchanged are "
        "not embedded again.",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (recursive)")
    ingest.add_argument("--collection", required=True, help="collection name")
    ingest.add_argument("--recreate", action="store_true", help="delete a collection whose tag differs, then ingest")
    ingest.add_argument(
        "--node-tokens",
        type=int,
        default=None,
        help="tokens per node (default: what one forward pass of the model takes, less the document prompt; "
        "windows mode also takes longer nodes)",
    )
    ingest.add_argument("--node-overlap", type=int, default=0, help="overlapping tokens between nodes (%(default)s)")
    ingest.add_argument("--max-file-mb", type=float, default=50.0, help="skip files larger than this (%(default)s MiB)")
    ingest.add_argument("--strict", action="store_true", help="refuse to ingest anything when a file would be skipped")
    vector_storage_option(ingest, "int8 for windows, float32 otherwise, and an existing collection as it is")
    _engine_options(ingest)
    ingest.set_defaults(handler=run_ingest)

    query = commands.add_parser(
        "query",
        parents=[store, model, wrapped, mode, calibration, chunker],
        help="search a collection",
        description="Embed the query with the plain model and print the nearest nodes. Without encoder options "
        "the encoder recorded in the collection's tag is used.",
    )
    query.add_argument("text", metavar="TEXT", help="the query")
    query.add_argument("--collection", required=True, help="collection name")
    query.add_argument("-k", "--top-k", type=int, default=5, help="number of hits (%(default)s)")
    query.add_argument("--json", action="store_true", help="print JSON instead of text")
    query.set_defaults(handler=run_query)

    collections = commands.add_parser(
        "collections",
        parents=[store],
        help="list collections and their tags",
        description="List the collections of the Qdrant instance with their point counts and posfair tags.",
    )
    collections.add_argument("--json", action="store_true", help="print JSON instead of a table")
    collections.set_defaults(handler=run_collections)


def run_ingest(args) -> int:
    if args.max_file_mb <= 0:
        raise CliError(f"--max-file-mb must be positive, got {args.max_file_mb}")
    _check_engine_options(args)
    from posfair_llamaindex.jobs.ingest import READABLE_SUFFIXES, candidate_files

    # what the command line alone shows cannot work (no file to read, options the model cannot take) is refused
    # at once: before a new folder is made, Qdrant is contacted or the model's libraries load
    candidate_files(args.paths, READABLE_SUFFIXES)
    embedding_settings(args)
    # then the server: a dead one fails in a second, before the model's libraries or weights load
    client = open_client(args, create=True)  # ingest may start a new folder
    if not args.recreate and client.collection_exists(args.collection):
        _precheck_tag(args, client)
    if args.engine == "ray":
        if getattr(args, "embedding", None) is not None:
            raise CliError("--engine ray loads the model in every actor; --embedding runs with --engine local only")
        if getattr(args, "vector_storage", None) is not None:
            raise CliError("--vector-storage is not available with --engine ray yet; use --engine local")
        return _run_ray_ingest(args, client)
    from posfair_llamaindex.jobs.ingest import ingest_documents, node_parser_for, read_documents
    from posfair_llamaindex.qdrant import tagged_vector_store

    read = read_documents(args.paths, max_file_bytes=int(args.max_file_mb * 1024 * 1024))
    if read.skipped and args.strict:
        raise CliError(
            f"--strict: nothing was ingested because {len(read.skipped)} file(s) cannot be: " + _skip_list(read.skipped)
        )
    if not read.documents:
        raise CliError(f"none of the {len(read.skipped)} file(s) has text to ingest: " + _skip_list(read.skipped))
    embed_model = embedding_from_args(args)
    store = tagged_vector_store(
        client,
        args.collection,
        embed_model,
        recreate=args.recreate,
        collection_options=_collection_options(args),
        vector_storage=getattr(args, "vector_storage", None),
    )
    parser = node_parser_for(embed_model, args.node_tokens, args.node_overlap)
    for item in read.skipped:
        if item.no_text:  # an emptied file: whatever it held before is stale now
            store.delete(str(item.path))
    report = ingest_documents(read.documents, embed_model, store, node_parser=parser, show_progress=True)
    _index(client, args.collection, report.embedded)
    total = client.count(args.collection, exact=True).count
    print(
        f"ingested {report.documents} document(s) as {report.nodes} node(s) into {args.collection!r}: "
        f"{report.embedded} embedded, {report.unchanged} already stored unchanged "
        f"({total} points, fingerprint {embed_model.fingerprint()})"
    )
    _print_skipped(read.skipped)
    return 0


# ----------------------------------------------------------------------------- --engine ray
ENGINES = ("local", "ray")
RAY_ONLY_OPTIONS = ("ray_address", "actors", "gpus_per_actor", "cpus_per_actor", "writers", "upload_points")
CLUSTER_OPTIONS = ("shard_number", "replication_factor", "write_consistency_factor")


def _engine_options(ingest) -> None:
    engine = ingest.add_argument_group("engine")
    engine.add_argument(
        "--engine",
        choices=ENGINES,
        default=ENGINES[0],
        help="local: this process (%(default)s); ray: Ray Data actors, see docs/SCALE.md. With ray, --batch-size is "
        "also the documents per actor batch",
    )
    engine.add_argument(
        "--ray-address", default=None, help="Ray cluster to join (default: RAY_ADDRESS, else a local Ray)"
    )
    engine.add_argument("--actors", type=int, default=None, help=f"embedding actors ({ray_defaults.ACTORS})")
    engine.add_argument(
        "--gpus-per-actor",
        type=float,
        default=None,
        help="GPUs per embedding actor (1 when the cluster has GPUs, else 0)",
    )
    engine.add_argument(
        "--cpus-per-actor",
        type=float,
        default=None,
        help="CPUs per embedding actor (1 with GPUs; without, what the cluster leaves, shared out)",
    )
    engine.add_argument(
        "--writers", type=int, default=None, help="most Qdrant write tasks at once (1 when the actors run on CPU)"
    )
    engine.add_argument(
        "--upload-points",
        type=int,
        default=None,
        help=f"points per Qdrant upsert request ({ray_defaults.UPLOAD_POINTS})",
    )
    cluster = ingest.add_argument_group("new collection on a Qdrant cluster (--qdrant-url)")
    cluster.add_argument("--shard-number", type=int, default=None, help="shards of the collection")
    cluster.add_argument("--replication-factor", type=int, default=None, help="copies of each shard")
    cluster.add_argument("--write-consistency-factor", type=int, default=None, help="replicas that confirm a write")


def _check_engine_options(args) -> None:
    """Refuse options that do not apply, and a missing Ray, before Qdrant is contacted or anything loads."""
    given = [name for name in RAY_ONLY_OPTIONS if getattr(args, name) is not None]
    if args.engine == "local" and given:
        raise CliError(f"--{given[0].replace('_', '-')} is used by --engine ray only")
    if args.qdrant_url is None and any(getattr(args, name) is not None for name in CLUSTER_OPTIONS):
        raise CliError("--shard-number, --replication-factor and --write-consistency-factor need --qdrant-url")
    if args.writers is not None and args.qdrant_url is None:
        raise CliError("--writers is for a Qdrant server (--qdrant-url); the driver writes an embedded folder")
    if args.engine != "ray":
        return
    from posfair_llamaindex.jobs.distributed.requirements import RAY_MISSING, ray_available

    if not ray_available():
        raise CliError(f"--engine ray: {RAY_MISSING}")
    if args.device is not None:
        raise CliError("--device is chosen per actor with --engine ray (cuda with --gpus-per-actor > 0, else cpu)")
    if args.actors is not None and args.actors < 1:
        raise CliError(f"--actors must be at least 1, got {args.actors}")
    if args.gpus_per_actor is not None and args.gpus_per_actor < 0:
        raise CliError(f"--gpus-per-actor must be >= 0, got {args.gpus_per_actor}")
    for name in ("writers", "upload_points"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise CliError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.cpus_per_actor is not None and args.cpus_per_actor <= 0:
        raise CliError(f"--cpus-per-actor must be positive, got {args.cpus_per_actor}")


def _collection_options(args) -> dict:
    return {name: getattr(args, name) for name in CLUSTER_OPTIONS if getattr(args, name) is not None}


def _run_ray_ingest(args, client) -> int:
    import argparse

    from posfair_llamaindex.cli.arguments import DEFAULT_QDRANT_PATH
    from posfair_llamaindex.jobs.distributed import QdrantTarget, RayIngestConfig, ray_ingest
    from posfair_llamaindex.jobs.distributed.pipeline import list_files
    from posfair_llamaindex.jobs.ingest import read_documents

    list_files(args.paths)  # a wrong path fails here, before the model loads
    max_file_bytes = int(args.max_file_mb * 1024 * 1024)
    if args.strict:  # the same check as one-process ingest, before anything is written
        skipped = read_documents(args.paths, max_file_bytes=max_file_bytes).skipped
        if skipped:
            raise CliError(
                f"--strict: nothing was ingested because {len(skipped)} file(s) cannot be: " + _skip_list(skipped)
            )
    # the driver's copy only gives the tag and the splitter: on the CPU, in full precision (the actors load
    # their own, on their device and in --dtype)
    embed_model = embedding_from_args(argparse.Namespace(**{**vars(args), "device": "cpu", "dtype": None}))
    target = QdrantTarget(
        collection=args.collection,
        url=args.qdrant_url,
        path=None if args.qdrant_url else str(args.qdrant_path or DEFAULT_QDRANT_PATH),
        api_key=args.api_key,
        timeout=max(1, int(args.timeout)),
        **_collection_options(args),
    )
    settings = RayIngestConfig(
        address=args.ray_address,
        actors=args.actors or ray_defaults.ACTORS,
        gpus_per_actor=args.gpus_per_actor,
        cpus_per_actor=args.cpus_per_actor,
        batch_size=args.batch_size,
        dtype=args.dtype,
        writers=args.writers,
        upload_points=args.upload_points or ray_defaults.UPLOAD_POINTS,
        show_progress=True,
    )
    report = ray_ingest(
        args.paths,
        embed_model,
        target,
        settings,
        client=client,
        recreate=args.recreate,
        node_tokens=args.node_tokens,
        node_overlap=args.node_overlap,
        max_file_bytes=max_file_bytes,
    )
    if not report.documents:
        raise CliError(f"none of the {len(report.skipped)} file(s) has text to ingest: " + _skip_list(report.skipped))
    total = client.count(args.collection, exact=True).count
    _index(client, args.collection, report.embedded)
    print(
        f"ingested {report.documents} document(s) as {report.nodes} node(s) into {args.collection!r}: "
        f"{report.embedded} embedded, {report.unchanged} already stored unchanged "
        f"({total} points, fingerprint {embed_model.fingerprint()}; engine ray, {settings.actors} actor(s))"
    )
    _print_skipped(report.skipped)
    return 0


def _precheck_tag(args, client) -> None:
    """Refuse, before any model loads, what the options alone show will not match the stored tag.

    The settings that need the model (weights, resolved pooling, dimension) are checked by
    ``tagged_vector_store`` once it has loaded; the ones given on the command line are checked here.
    """
    from posfair_llamaindex.qdrant.collection import CollectionTagMismatchError, collection_tag

    stored = collection_tag(client.get_collection(args.collection))
    if stored is None:
        raise CliError(
            f"collection {args.collection!r} has no posfair tag; use another name, or --recreate to replace it"
        )
    requested = dict(stored)
    requested["mode"] = args.mode or "calibrated"
    if args.pooling is not None:
        requested["pooling"] = args.pooling
    overrides = calibration_overrides(args)
    if requested["mode"] == "calibrated" or (requested["mode"] == "dual" and "strength" in overrides):
        requested["calibration"] = calibration_from_args(args).tag()
    elif requested["mode"] in ("plain", "sea"):
        requested["calibration"] = None
    if requested != stored:
        raise CollectionTagMismatchError(args.collection, stored, requested)


def _skip_list(skipped) -> str:
    return "; ".join(f"{item.path}: {item.reason}" for item in skipped)


def _print_skipped(skipped) -> None:
    if not skipped:
        return
    print(f"skipped {len(skipped)} file(s):")
    for item in skipped:
        print(f"  {item.path}: {item.reason}")


def run_query(args) -> int:
    if args.top_k < 1:
        raise CliError(f"-k must be at least 1, got {args.top_k}")
    if not args.text.strip():
        raise CliError("the query is empty or whitespace only")
    from posfair_llamaindex.cli.wrapped_options import WRAPPED_OPTIONS
    from posfair_llamaindex.encoding import query_process

    wrapped = any(getattr(args, name, None) is not None for name in WRAPPED_OPTIONS)
    if encoder_options_given(args) or wrapped:  # an embedding of the options' own: the store checks it against the tag
        query_process.discard_early()
        client = open_client(args)
        _query_tag(client, args.collection)
        embed_model = embedding_from_args(args)
        from posfair_llamaindex.qdrant.store import tagged_vector_store

        store = tagged_vector_store(client, args.collection, embed_model)
        return _print_hits(args, store, embed_model.get_query_embedding(args.text))
    # the collection's own settings: the query's model loads in a second process while this one opens the store
    client = open_client(args)
    tag = _query_tag(client, args.collection)
    if tag.get("embedding_source"):  # a wrapped LlamaIndex embedding: rebuilt from the tag, its own query path
        query_process.discard_early()
        embed_model = embedding_from_args(args, tag_settings(tag))
        from posfair_llamaindex.qdrant.store import tagged_vector_store

        store = tagged_vector_store(client, args.collection, embed_model)
        return _print_hits(args, store, embed_model.get_query_embedding(args.text))
    with query_process.take() as encoder:  # started before the command line loaded, unless refused since
        base = tag_settings(tag)
        request = query_process.query_request(embedding_settings(args, base), load_config_from_args(args, base))
        encoder.send(request, args.text)
        from posfair_llamaindex.qdrant.collection import check_encoder_facts
        from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore
        from posfair_llamaindex.qdrant.vector_layout import layout_of_tag

        store = PosFairQdrantVectorStore(
            args.collection, client=client, vector_layout=layout_of_tag(tag), posfair_tag=tag
        )
        vector, facts = encoder.receive()
    check_encoder_facts(args.collection, tag, facts)
    return _print_hits(args, store, vector)


def _query_tag(client, collection: str) -> dict:
    if not client.collection_exists(collection):
        raise CliError(f"collection {collection!r} does not exist (see `posfair collections`)")
    from posfair_llamaindex.qdrant.collection import collection_tag

    tag = collection_tag(client.get_collection(collection))
    if tag is None:
        raise CliError(f"collection {collection!r} has no posfair tag; it was not written by posfair")
    return tag


def _print_hits(args, store, vector: list) -> int:
    # the query a VectorStoreIndex's retriever sends, without building the index: that would load LlamaIndex's
    # default node parser and its tokenizer, which a search never uses
    from llama_index.core.vector_stores.types import VectorStoreQuery

    query = VectorStoreQuery(query_embedding=vector, similarity_top_k=args.top_k, query_str=args.text)
    rows = [
        {
            "rank": rank,
            "score": score,
            "node_id": node.node_id,
            "text": node.get_content(),
            "metadata": node.metadata,
        }
        for rank, (node, score) in enumerate(_hits(store.query(query)), start=1)
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


def _hits(found) -> list:
    """``(node, score)`` in rank order, as LlamaIndex's retriever makes them of a store's result: each node once."""
    seen, hits = set(), []
    for position, node in enumerate(found.nodes or []):
        if node.node_id not in seen:
            seen.add(node.node_id)
            hits.append((node, found.similarities[position] if found.similarities is not None else None))
    return hits


def run_collections(args) -> int:
    client = open_client(args)  # a folder that is not there is refused before qdrant-client loads
    from posfair_llamaindex.qdrant.collection import list_tagged_collections

    rows = list_tagged_collections(client)
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
        print(
            f"{row['name']}: {row['points']} points, fingerprint {tag.get('fingerprint')}, {describe_mode(tag)}, "
            f"pooling {tag.get('pooling')}, dim {tag.get('dimension')}, max length {tag.get('max_length')}, "
            f"model {tag.get('model')} ({tag.get('model_weights')}), posfair {tag.get('package_version')}"
        )
    return 0


def describe_mode(tag: dict) -> str:
    """The mode a tag records and the settings that mode keeps (a tag from a newer release may name a mode this
    one does not know: it is shown as written)."""
    if tag.get("mode") not in MODES_BY_NAME:
        return f"mode {tag.get('mode')}"
    return MODES_BY_NAME[tag["mode"]].describe(tag)


def _index(client, collection: str, written: int) -> None:
    """After a bulk write to a Qdrant Edge folder, build its indexes once (a server and local mode need nothing)."""
    if written:
        from posfair_llamaindex.qdrant.embedded import index_after_bulk_write

        index_after_bulk_write(client, collection)
