"""``posfair audit``: how position-biased your own corpus is, measured without labelled queries."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from posfair_llamaindex.cli.arguments import (
    CALIBRATION_OPTIONS,
    MODEL_OPTIONS,
    CliError,
    calibration_from_args,
    calibration_options,
    comma_floats,
    embedding_from_args,
    for_terminal,
    load_config_from_args,
    model_options,
    open_client,
    store_options,
    tag_settings,
)
from posfair_llamaindex.options import AUDIT_DESIGNS, AUDIT_MIN_DOCUMENTS, AUDIT_STRENGTHS

# points read from a collection per audited document: enough to sample from, bounded for huge collections
SCAN_PER_DOCUMENT = 10


def register(commands) -> None:
    from posfair_llamaindex.cli.wrapped_options import wrapped_options

    audit = commands.add_parser(
        "audit",
        parents=[store_options(), model_options(), wrapped_options(), calibration_options(without=("strength",))],
        help="measure position bias on your own documents, without labelled queries",
        description="Make pseudo-queries from your documents' own sentences (one from the beginning, middle and "
        "end third of each, with half its words dropped; --design ict cuts the sentence from the document "
        "instead) and score plain, calibrated at several strengths and dual mode: nDCG@10 per third, HM and PSI "
        "with bootstrap intervals, as a table, JSON and the trade-off chart. Over a LlamaIndex embedding "
        "(--embedding, or a collection written through one) plain and windows are scored: calibrated and dual need "
        "the model's attention, which it does not expose.",
    )
    audit.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (.txt/.md), split as ingest does")
    audit.add_argument("--collection", default=None, help="audit a collection's nodes instead, read from the payload")
    audit.add_argument(
        "--max-documents", type=int, default=300, help="documents sampled; bounds the time (%(default)s)"
    )
    audit.add_argument("--seed", type=int, default=0, help="which documents and sentences (%(default)s)")
    audit.add_argument(
        "--strengths",
        default=",".join(f"{s:g}" for s in AUDIT_STRENGTHS),
        help="calibrated strengths to score (%(default)s)",
    )
    audit.add_argument("--no-dual", action="store_true", help="leave dual mode out")
    audit.add_argument(
        "--no-windows",
        action="store_true",
        help="leave windows mode out (scored with its defaults, or with the audited collection's own windows)",
    )
    audit.add_argument(
        "--design", choices=AUDIT_DESIGNS, default=AUDIT_DESIGNS[0], help="pseudo-query design (%(default)s)"
    )
    audit.add_argument("--recommend", action="store_true", help="suggest a mode and strength, and say why")
    audit.add_argument("--json", action="store_true", help="print the table as JSON, one object per configuration")
    audit.add_argument("--out", default="posfair_audit", help="folder for markdown, JSON and PNG (%(default)s)")
    audit.add_argument("--cache-dir", default=None, help="reuse document embeddings across runs")
    audit.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples (%(default)s)")
    audit.add_argument(
        "--node-tokens",
        type=int,
        default=None,
        help="PATHs: tokens per node (default: what one forward pass of the model takes, less the document prompt)",
    )
    audit.set_defaults(handler=run_audit)


def _strengths(text: str) -> list[float]:
    values = comma_floats(text, "--strengths")
    if not values or any(not 0.0 < v <= 1.0 for v in values):
        raise CliError(f"--strengths must be numbers in (0, 1], got {text!r}")
    return values


def _check(args) -> None:
    if bool(args.paths) == (args.collection is not None):
        raise CliError("give PATHs to audit, or --collection NAME, not both and not neither")
    if args.max_documents < 20:
        raise CliError(
            f"--max-documents must be at least 20 (a top-10 ranking among fewer says little), got {args.max_documents}"
        )
    if args.bootstrap < 1:
        raise CliError(f"--bootstrap must be at least 1, got {args.bootstrap}")
    if args.collection is not None and args.node_tokens is not None:
        raise CliError("--node-tokens splits PATHs; a collection's nodes are audited as stored")


def _collection_texts(args):
    """The collection's node texts, the model settings its tag records unless model options were given, and its
    windows (a windows collection's own are what the audit scores windows mode with)."""
    from posfair_llamaindex.qdrant import collection_tag

    client = open_client(args)
    if not client.collection_exists(args.collection):
        raise CliError(f"collection {args.collection!r} does not exist (see `posfair collections`)")
    from posfair_llamaindex.qdrant.texts import node_texts  # LlamaIndex loads once the collection is known

    tag = collection_tag(client.get_collection(args.collection))
    base = None
    windows = (tag or {}).get("windows")
    if tag is not None and not any(getattr(args, name) is not None for name in MODEL_OPTIONS):
        base = tag_settings(tag)
        # the audit compares modes and strengths itself: only what identifies the model carries over
        dropped = ("mode", "fusion", "calibration", "chunker", "windows")
        base = {key: value for key, value in base.items() if key not in dropped}
    try:
        texts = node_texts(client, args.collection, limit=args.max_documents * SCAN_PER_DOCUMENT)
    except ValueError as error:
        raise CliError(str(error)) from None
    if not texts:
        raise CliError(f"collection {args.collection!r} holds no points to audit")
    if len(texts) < AUDIT_MIN_DOCUMENTS:  # screening only removes documents: refused before the model loads
        raise CliError(
            f"too few documents to audit: collection {args.collection!r} holds {len(texts)} node text(s); the audit "
            f"needs at least {AUDIT_MIN_DOCUMENTS} auditable documents (a top-10 ranking among fewer says little)"
        )
    return texts, base, windows


def _folder_texts(args, embed_model):
    from llama_index.core.schema import MetadataMode

    from posfair_llamaindex.jobs.ingest import node_parser_for, read_documents

    read = read_documents(args.paths)
    if not read.documents:
        raise CliError("no readable documents under " + ", ".join(args.paths))
    parser = node_parser_for(embed_model, args.node_tokens)
    texts = {}
    for node in parser.get_nodes_from_documents(read.documents):
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        if text.strip():
            texts[f"{node.metadata.get('file_path', node.ref_doc_id)}#{len(texts)}"] = text
    return texts


def _wrapped(args, base) -> bool:
    """Whether the audit runs over a wrapped LlamaIndex embedding: --embedding, or a collection written through one
    (its tag's ``embedding_source``) audited without --model."""
    return getattr(args, "embedding", None) is not None or bool((base or {}).get("embedding_source"))


def _check_wrapped(args) -> None:
    """Calibration settings other than the basket (which sets the shortest document audited) have nothing to act on
    over a wrapped embedding, and without windows plain has nothing to be compared with: refused by name, before the
    model is built."""
    if args.no_windows:
        raise CliError(
            "--no-windows leaves plain alone to score over a LlamaIndex embedding (calibrated and dual need the "
            "model's attention, which a wrapped embedding does not expose): an audit compares plain with windows"
        )
    given = [name for name in CALIBRATION_OPTIONS if name != "basket_size" and getattr(args, name, None) is not None]
    if given:
        options = ", ".join("--" + name.replace("_", "-") for name in given)
        raise CliError(
            f"{options}: an audit over a LlamaIndex embedding scores plain and windows only (calibrated and dual need "
            "the model's attention, which a wrapped embedding does not expose), so there is nothing to calibrate"
        )


def _windows(settings):
    """The windows an audit scores: the audited collection's own (its tag's ``windows``), or the defaults."""
    from posfair_llamaindex.encoding.windows import WindowConfig

    return WindowConfig(**(settings or {}))


def run_audit(args) -> int:
    _check(args)
    strengths = _strengths(args.strengths)
    windows = None  # a folder's audit scores windows mode with its defaults
    if args.collection is not None:
        # a dead server, a missing folder or collection fails before the model libraries load
        texts, base, windows = _collection_texts(args)
    else:
        base = None
    wrapped = _wrapped(args, base)
    if wrapped:
        _check_wrapped(args)
        # the audit compares modes itself: the embedding only names the model, in a mode that runs over it
        base = {**(base or {}), "mode": "plain"}
    from posfair_llamaindex.errors import WrappedEmbeddingError
    from posfair_llamaindex.eval import plots
    from posfair_llamaindex.eval.audit import audit_markdown, audit_texts, chart_rows, recommend
    from posfair_llamaindex.eval.pseudo_queries import AuditCorpusError

    embed_model = embedding_from_args(args, base)
    if args.collection is None:
        texts = _folder_texts(args, embed_model)
    encoder = embed_model.encoder
    try:
        report = audit_texts(
            texts,
            embed_model.model_name,
            # over a wrapped model the calibration settings only set the shortest document audited (its basket)
            calibration=calibration_from_args(args) if wrapped else embed_model.calibration,
            strengths=strengths,
            design=args.design,
            max_documents=args.max_documents,
            seed=args.seed,
            load=load_config_from_args(args).model_copy(
                update={"pooling": encoder.pooling, "max_length": encoder.max_length}
            ),
            cache_dir=args.cache_dir,
            bootstrap_samples=args.bootstrap,
            encoder=encoder,
            dual=not args.no_dual,
            windows=None if args.no_windows else _windows(windows),
        )
    except (AuditCorpusError, WrappedEmbeddingError) as error:
        raise CliError(str(error)) from None
    rows = report.rows
    advice = recommend(rows) if args.recommend else None
    for row in rows:
        row["recommended"] = advice is not None and row["name"] == advice["name"]
        # --json prints the rows alone: the recommended one carries the reason with it
        row["reason"] = advice["reason"] if row["recommended"] else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "audit-wrapped" if report.wrapped is not None else f"audit-{report.pooling}"
    table = audit_markdown(report)
    (out / f"{stem}.md").write_text(
        table + "\n" + (f"\nRecommendation: {advice['name']}: {advice['reason']}\n" if advice else "")
    )
    (out / f"{stem}.json").write_text(
        json.dumps(
            {
                "rows": rows,
                "recommendation": advice,
                "corpus": report.screen.describe(),
                "embedding": report.wrapped,
                "notes": report.notes,
            },
            indent=2,
        )
        + "\n"
    )
    chart = plots.trade_off(
        chart_rows(rows),
        f"Position audit of {report.screen.sampled} documents, "
        + (report.wrapped if report.wrapped is not None else f"{report.pooling} pooling"),
        xlabel="pseudo-query nDCG@10 change vs plain (points; right is better)",
        ylabel="PSI over the three thirds (lower is fairer)",
    )
    png = plots.save_png(chart, out / f"{stem}.png")
    if args.json:
        print(json.dumps(rows, indent=2))
        for note in report.notes:  # the rows alone go to stdout; what was left out is said beside them
            print(f"posfair: note: {note}", file=sys.stderr)
        return 0
    print(for_terminal(table))
    if advice is not None:
        print(f"\nrecommendation: {advice['name']} ({advice['reason']})")
    print(f"wrote {out / (stem + '.md')}, {out / (stem + '.json')}, {png}")
    return 0
