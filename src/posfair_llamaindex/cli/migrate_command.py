"""``posfair migrate``: copy collections, with their tags, from one Qdrant to another (local mode to Edge, Edge to
a server), checked by count and ids, resumable."""

from __future__ import annotations

from posfair_llamaindex.cli.arguments import CliError, vector_storage_option


def register(commands) -> None:
    migrate = commands.add_parser(
        "migrate",
        help="copy collections with their tags from one Qdrant to another (e.g. a local-mode folder to Qdrant Edge)",
        description="Copy every collection (or those named) with its vectors, payloads, tag and payload indexes, then "
        "check the copy by count and point ids. Run it again to resume a copy that stopped; a target collection "
        "that is not an earlier copy of the same source is refused before anything is written. The source is never "
        "changed. A folder is opened with the engine that wrote it; a new target folder is a Qdrant Edge store.",
    )
    source = migrate.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-path", default=None, help="the embedded folder to copy from")
    source.add_argument("--from-url", default=None, help="the Qdrant server to copy from")
    target = migrate.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-path", default=None, help="the embedded folder to copy into (a new one: Qdrant Edge)")
    target.add_argument("--to-url", default=None, help="the Qdrant server to copy into")
    migrate.add_argument("--from-api-key", default=None, help="API key of the source server")
    migrate.add_argument("--to-api-key", default=None, help="API key of the target server")
    migrate.add_argument(
        "--collection", action="append", default=None, help="a collection to copy (repeat; default: every one)"
    )
    migrate.add_argument("--batch-size", type=int, default=256, help="points read and written at a time (%(default)s)")
    vector_storage_option(migrate, "as the source stores them")
    migrate.set_defaults(handler=run_migrate)


def run_migrate(args) -> int:
    from pathlib import Path

    if args.batch_size < 1:
        raise CliError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.from_path and args.to_path and Path(args.from_path).resolve() == Path(args.to_path).resolve():
        raise CliError("--from-path and --to-path are the same folder; copy into another one")
    if args.from_path and not Path(args.from_path).is_dir():
        raise CliError(f"the source folder {args.from_path} does not exist; nothing was copied")
    source = _open(args.from_path, args.from_url, args.from_api_key)
    try:
        target = _open(args.to_path, args.to_url, args.to_api_key)
        try:
            from posfair_llamaindex.errors import CopyRefusedError
            from posfair_llamaindex.qdrant.migrate import copy_collections

            try:
                reports = copy_collections(
                    source, target, args.collection, batch_size=args.batch_size, vector_storage=args.vector_storage
                )
            except CopyRefusedError as error:
                raise CliError(str(error)) from None
        finally:
            target.close()
    finally:
        source.close()
    where = args.to_path or args.to_url
    for report in reports:
        state = "created" if report.created else "resumed"
        print(f"{report.collection}: {report.points} points in {where} ({report.copied} copied now, {state}), checked")
    if not reports:
        print("the source has no collections")
    return 0


def _open(path, url, api_key):
    if url:
        from qdrant_client import QdrantClient

        from posfair_llamaindex.qdrant.retry import RetryConfig, with_retries

        client = QdrantClient(url=url, api_key=api_key)
        with_retries(client.get_collections, what="get_collections", target=url, policy=RetryConfig(retries=2))
        return client
    from posfair_llamaindex.qdrant.embedded import open_embedded

    return open_embedded(path)
