"""``posfair upgrade``: a collection written by LlamaIndex's QdrantVectorStore becomes a tagged posfair one."""

from __future__ import annotations

from posfair_llamaindex.cli.arguments import (
    CliError,
    calibration_options,
    embedding_from_args,
    embedding_settings,
    model_options,
    open_client,
    store_options,
    vector_storage_option,
    window_options,
)
from posfair_llamaindex.options import FUSIONS

UPGRADE_MODES = ("dual", "calibrated", "windows")
UPGRADE_WINDOW_DOCUMENTS = ("plain", "dual")


def register(commands) -> None:
    from posfair_llamaindex.cli.wrapped_options import wrapped_options

    upgrade = commands.add_parser(
        "upgrade",
        parents=[store_options(), model_options(), wrapped_options(), calibration_options()],
        help="turn a LlamaIndex QdrantVectorStore collection into a posfair collection",
        description="Read every node's text from the payload of a collection that LlamaIndex's QdrantVectorStore "
        "wrote with the same model, and write a new tagged collection. A sample of at least 32 nodes is encoded "
        "again first and must reproduce the stored vectors, or nothing is written. In dual and windows modes the "
        "stored vectors are kept as the plain (document) vectors and only the calibrated vectors and the windows are "
        "computed. A rerun resumes. A collection LlamaIndex wrote through a LlamaIndex embedding is upgraded over "
        "the same one (--embedding ... --mode windows): its windows are embedded through it.",
    )
    upgrade.add_argument("--collection", required=True, help="the existing collection")
    upgrade.add_argument("--into", required=True, help="the new posfair collection")
    upgrade.add_argument("--mode", choices=UPGRADE_MODES, default=UPGRADE_MODES[0], help="(%(default)s)")
    upgrade.add_argument(
        "--fusion", choices=FUSIONS, default=None, help="dual and windows modes' fusion rule (their default)"
    )
    # the stored vector becomes the windows' document vector: a plain or a dual document (plain when unset)
    window_options(upgrade.add_argument_group("windows mode"), documents=UPGRADE_WINDOW_DOCUMENTS, document="plain")
    upgrade.add_argument(
        "--replace",
        action="store_true",
        help="delete the old collection once a check by point id finds every one of its points in the new one",
    )
    upgrade.add_argument("--sample", type=int, default=32, help="nodes the check encodes again (at least 32)")
    vector_storage_option(upgrade, "int8 for windows, float32 otherwise")
    upgrade.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: this process (%(default)s); ray: the calibrated vectors on Ray actors, the driver writes",
    )
    upgrade.add_argument("--ray-address", default=None, help="--engine ray: the cluster (default: a local Ray)")
    upgrade.add_argument("--actors", type=int, default=None, help="--engine ray: encoder actors (1)")
    upgrade.set_defaults(handler=run_upgrade)


def run_upgrade(args) -> int:
    from pydantic import ValidationError

    # imports no model library: everything that can be refused without the model is, at once
    from posfair_llamaindex.qdrant.upgrade import UpgradeConfig, inspect_source

    try:
        settings = UpgradeConfig(
            source=args.collection,
            target=args.into,
            sample=args.sample,
            replace=args.replace,
            vector_storage=args.vector_storage,
        )
    except ValidationError as error:
        # the settings' fields are the options' names (collection and into aside)
        options = {"source": "--collection", "target": "--into"}
        raise CliError(
            "; ".join(
                f"{options.get(str(e['loc'][0]), '--' + str(e['loc'][0]))}: {e['msg']}" if e["loc"] else e["msg"]
                for e in error.errors()
            )
        ) from None
    if args.engine == "local" and (args.ray_address is not None or args.actors is not None):
        raise CliError("--ray-address and --actors are used by --engine ray only")
    if args.engine == "ray" and args.embedding is not None:
        raise CliError(
            "--engine ray loads posfair's own model on its actors; a LlamaIndex embedding (--embedding) is called "
            "from this process: use --engine local"
        )
    if args.engine == "ray":
        from posfair_llamaindex.jobs.distributed.requirements import RAY_MISSING, ray_available

        if not ray_available():
            raise CliError(f"--engine ray: {RAY_MISSING}")
        if args.actors is not None and args.actors < 1:
            raise CliError(f"--actors must be at least 1, got {args.actors}")
    if args.fusion is not None and args.mode not in ("dual", "windows"):
        raise CliError("--fusion is used by --mode dual and windows only")
    if args.mode == "windows" and args.window_document is None:
        args.window_document = UPGRADE_WINDOW_DOCUMENTS[0]  # the stored vector is there: keeping it costs nothing
    embedding_settings(args)  # options the model cannot take: refused before Qdrant is contacted
    client = open_client(args)  # a dead server, or a folder that does not exist, fails before the model loads
    if not client.collection_exists(args.collection):
        raise CliError(f"collection {args.collection!r} does not exist (see `posfair collections`)")
    inspect_source(client, args.collection)  # tagged, hybrid, empty: refused before the model libraries load
    embed_model = embedding_from_args(args)
    if args.engine == "ray":
        from posfair_llamaindex.jobs.distributed import RayIngestConfig
        from posfair_llamaindex.jobs.distributed.ray_upgrade import ray_upgrade

        ray_config = RayIngestConfig(
            address=args.ray_address, actors=args.actors or 1, batch_size=args.batch_size, dtype=args.dtype
        )
        report = ray_upgrade(client, embed_model, settings, ray_config, show_progress=True)
    else:
        from posfair_llamaindex.qdrant.upgrade import upgrade_collection

        report = upgrade_collection(client, embed_model, settings, show_progress=True)
    if report.written:
        from posfair_llamaindex.qdrant.embedded import index_after_bulk_write

        index_after_bulk_write(client, args.into)  # a Qdrant Edge folder builds its indexes once, now
    print(
        f"upgraded {args.collection!r} into {args.into!r} ({args.mode}): {report.points} node(s), {report.written} "
        f"written now, {report.already_there} already there; checked {report.checked} node(s), lowest cosine "
        f"{report.min_cosine:.6f}; {report.plain_reused} stored vector(s) kept as plain, "
        f"{report.computed} encoded (calibrated vectors, windows)"
        + (
            f"; {report.caught_up} added or changed in {args.collection!r} during the upgrade, copied"
            if report.caught_up
            else ""
        )
        + (
            f"; {report.target_only} in {args.into!r} that {args.collection!r} no longer holds, kept"
            if report.target_only
            else ""
        )
        + (f"; {args.collection!r} deleted, every one of its points being in {args.into!r}" if report.replaced else "")
    )
    return 0
