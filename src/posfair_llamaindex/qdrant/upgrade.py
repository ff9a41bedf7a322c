"""Turn a collection written by LlamaIndex's ``QdrantVectorStore`` into a tagged posfair collection.

The node text is read from each point's payload (LlamaIndex stores the whole node there), so no source file
is needed. Before anything is written, a sample of at least 32 nodes is encoded again with the plain model
and compared with the stored vectors: unless they agree (cosine >= 0.9999), the collection was made with
other settings, and the upgrade refuses and says which settings differ where it can tell (a pooling, a token
limit, a precision that does reproduce them, or a node whose payload holds no text). A collection written through a
LlamaIndex embedding is upgraded over that same embedding (``PosFairEmbedding(embed_model=..., mode="windows")``):
its plain twin re-encodes the sample, and its windows are embedded through it. Where the new document
embedding starts with a plain vector (dual mode, windows mode with a plain or dual document) the stored vectors
become those plain vectors as they are, and only the rest is computed: the calibrated vectors, the windows.

The new collection is written beside the old one. Qdrant can add a named vector to an existing collection
(``create_vector_name``: checked with qdrant-client 1.20 in local mode, an unnamed-vector collection becomes
``{"": ..., "calibrated": ...}``), but it cannot rename LlamaIndex's unnamed vector to ``plain``, so an
in-place upgrade would leave a layout that no posfair store reads. Points are written in batches of complete
points, and a rerun skips those already written with the same text, so a killed upgrade resumes where it
stopped. A target that holds points the source does not have is refused: it is not an earlier run of this
upgrade, and merging into it would mix two corpora.

Writers may keep adding to the source while it is copied. After the copy, the source is read again (ids and
text, no vectors) and compared with the target by point id and text hash; points added or changed meanwhile
are copied in a catch-up pass, up to ``catch_up_rounds`` times. With ``replace=True`` the source is deleted only
after a pass that found every source point in the target with its text, followed at once by an exact count
of the source that still equals the number of points that pass read. What remains: Qdrant has no
"delete if unchanged", so a point written to the source between that count and ``delete_collection`` (one
request apart), or written into an already-read id range and offset by a deletion during the last pass, is
lost with the source. Stop the writers, or point them at the target, for a guarantee.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest
from tqdm.auto import tqdm

from posfair_llamaindex.errors import UpgradeIncompleteError, UpgradeRefusedError
from posfair_llamaindex.modes import DOCUMENT_KINDS, MODES_BY_NAME, PLAIN_VECTOR, document_mode
from posfair_llamaindex.options import POOLINGS, StorageType
from posfair_llamaindex.qdrant.collection import CollectionTagMismatchError, check_collection, collection_tag
from posfair_llamaindex.qdrant.retry import describe_client, with_retries
from posfair_llamaindex.tag import comparable_tag

# The model libraries load only once the cheap checks have passed (a missing collection is reported at once).
if TYPE_CHECKING:
    from llama_index.core.schema import BaseNode

    from posfair_llamaindex.embedding import PosFairEmbedding
    from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore

logger = logging.getLogger(__name__)

MIN_SAMPLE = 32
# points whose ids are read and compared at a time
ID_PAGE = 256
# ids named in a message
EXAMPLES = 3
# a re-encode this close is a rounding difference, not another model: reduced precisions are worth a try
PRECISION_CLOSE = 0.99


class UpgradeConfig(BaseModel):
    """What to upgrade into what, and how strictly the stored vectors are checked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    sample: int = Field(default=MIN_SAMPLE, ge=MIN_SAMPLE, description="nodes re-encoded by the check")
    min_cosine: float = Field(default=0.9999, gt=0.0, le=1.0)
    batch_size: int = Field(default=64, ge=1, description="points read, encoded and written at a time")
    replace: bool = Field(default=False, description="delete the source once the target is proven complete")
    catch_up_rounds: int = Field(
        default=3, ge=0, description="passes that copy points added or changed in the source during the upgrade"
    )
    vector_storage: Optional[StorageType] = Field(
        default=None,
        description="how the target keeps its dense vectors (default: the mode's, int8 for windows' multivector)",
    )

    @model_validator(mode="after")
    def _distinct(self) -> UpgradeConfig:
        if self.source == self.target:
            raise ValueError(f"the target must be a new collection, not the source {self.source!r} itself")
        return self


@dataclass
class UpgradeReport:
    source: str
    target: str
    points: int  # in the source, as the final check read it
    written: int  # by this run's copy pass
    already_there: int  # written by an earlier, interrupted run
    checked: int  # nodes re-encoded plain by the sampled check
    min_cosine: float  # the lowest cosine the check found
    plain_reused: int  # stored vectors kept as plain vectors (dual, windows with a plain or dual document)
    computed: int  # nodes whose vectors beyond the stored one were encoded (calibrated vectors, windows)
    replaced: bool
    caught_up: int = 0  # points added or changed in the source during the run, copied by catch-up passes
    catch_up_passes: int = 0
    target_only: int = 0  # points in the target that the source no longer holds (deleted from it meanwhile)


@dataclass(frozen=True)
class SourceCollection:
    """What the checks found out about the source: its dense vector's name (None: unnamed), size and points."""

    vector: Optional[str]
    size: int
    points: int


@dataclass
class _Gap:
    """One comparison of the source with the target: source points read, and those the target lacks."""

    seen: int = 0
    missing: list = field(default_factory=list)  # source point ids not in the target
    changed: list = field(default_factory=list)  # in the target, with other text than the source holds now

    @property
    def todo(self) -> list:
        return self.missing + self.changed


# texts -> their calibrated vectors, in order (the driver's own encoder, or a pool of Ray actors)
Encode = Callable[[list[str]], list[list[float]]]


def upgrade_collection(
    client: QdrantClient,
    embed_model: PosFairEmbedding,
    settings: UpgradeConfig,
    *,
    show_progress: bool = True,
    encode: Optional[Encode] = None,
) -> UpgradeReport:
    """Write ``settings.target``, a tagged collection for ``embed_model`` (mode dual, calibrated, or windows with a
    plain or dual document), from the nodes of ``settings.source``. Raises :class:`UpgradeRefusedError` before writing
    anything when it cannot, and :class:`UpgradeIncompleteError` (source kept) when writers keep changing the source
    faster than it catches up.

    ``encode`` computes what the stored vectors do not give (:func:`computed_part`) for a page of texts; by default
    ``embed_model``'s own encoder (``posfair_llamaindex.jobs.distributed.ray_upgrade`` passes a pool of Ray actors)."""
    from posfair_llamaindex.qdrant.store import tagged_vector_store

    check_upgrade_mode(embed_model)
    source = inspect_source(client, settings.source)
    if source.size != embed_model.dimension:
        raise UpgradeRefusedError(
            f"collection {settings.source!r} holds {source.size}-dimensional vectors but {embed_model.model_name} "
            f"makes {embed_model.dimension}-dimensional ones: it was written by another model (settings that "
            "differ: model)"
        )
    _check_target(client, settings, embed_model)
    checked, lowest = _check_sample(client, settings, source, embed_model)
    store = tagged_vector_store(client, settings.target, embed_model, vector_storage=settings.vector_storage)
    encode = encode or computed_part(embed_model).get_text_embedding_batch
    report = UpgradeReport(settings.source, settings.target, source.points, 0, 0, checked, lowest, 0, 0, False)
    copy = _Copier(client, settings, source, store, embed_model, encode, report)
    offset: Any = None
    with tqdm(total=source.points, desc="Upgrading", unit="node", disable=not show_progress) as progress:
        while True:
            records, offset = _scroll(client, settings.source, settings.batch_size, offset, source.vector)
            written = copy.page(records)
            report.written += written
            report.already_there += len(records) - written
            progress.update(len(records))
            if offset is None:
                break
    _finish(copy)
    return report


# ----------------------------------------------------------------------------- the collections
def inspect_source(client: QdrantClient, name: str) -> SourceCollection:
    """Refuse a source that is missing, empty, already tagged, hybrid, or not one cosine vector.

    Needs no model, so the command line runs it before the model libraries load."""
    target = describe_client(client)
    if not with_retries(lambda: client.collection_exists(name), what="collection_exists", target=target):
        raise UpgradeRefusedError(f"collection {name!r} does not exist")
    info = with_retries(lambda: client.get_collection(name), what="get_collection", target=target)
    if collection_tag(info) is not None:
        raise UpgradeRefusedError(
            f"collection {name!r} is already a posfair collection (it has a tag); nothing to upgrade"
        )
    if info.config.params.sparse_vectors:
        raise UpgradeRefusedError(
            f"collection {name!r} is a hybrid collection (sparse vectors {sorted(info.config.params.sparse_vectors)}); "
            "upgrading hybrid collections is not supported yet"
        )
    vectors = info.config.params.vectors
    if isinstance(vectors, dict):
        if len(vectors) != 1:
            raise UpgradeRefusedError(
                f"collection {name!r} holds {len(vectors)} dense vectors {sorted(vectors)}; expected one"
            )
        ((vector, params),) = vectors.items()
    else:
        vector, params = None, vectors
    if params.distance != rest.Distance.COSINE:
        raise UpgradeRefusedError(
            f"collection {name!r} uses {params.distance} distance; posfair collections are cosine"
        )
    points = _count(client, name)
    if not points:
        raise UpgradeRefusedError(f"collection {name!r} is empty; there is nothing to upgrade")
    return SourceCollection(vector=vector or None, size=params.size, points=points)


def _check_target(client: QdrantClient, settings: UpgradeConfig, embed_model: PosFairEmbedding) -> None:
    """An existing target must be an earlier run of this upgrade: this embedding's tag, only the source's ids."""
    where = describe_client(client)
    if not with_retries(lambda: client.collection_exists(settings.target), what="collection_exists", target=where):
        return
    info = with_retries(lambda: client.get_collection(settings.target), what="get_collection", target=where)
    way_out = (
        f"Nothing was written. Upgrade into another collection (`posfair upgrade --into NAME`, "
        f"UpgradeConfig.target), or delete {settings.target!r} if its points may go, and run again."
    )
    try:
        check_collection(settings.target, info, embed_model, vector_storage=settings.vector_storage)
    except CollectionTagMismatchError as error:
        raise UpgradeRefusedError(
            f"the target {settings.target!r} already exists and was not made for this embedding "
            f"({_tag_difference(error)}), so it is not an earlier run of this upgrade. {way_out}"
        ) from None
    foreign, examples = _ids_missing_from(client, settings.target, settings.source)
    if foreign:
        raise UpgradeRefusedError(
            f"the target {settings.target!r} holds {foreign} point(s) that {settings.source!r} does not (e.g. "
            f"{', '.join(examples)}): it is not an earlier, interrupted run of this upgrade, or those nodes were "
            f"deleted from {settings.source!r} since it ran, and upgrading into it would mix them with "
            f"{settings.source!r}'s. {way_out}"
        )


def _tag_difference(error: CollectionTagMismatchError) -> str:
    if error.stored is None:
        return "it has no posfair tag"
    stored, requested = comparable_tag(error.stored), comparable_tag(error.requested)
    keys = sorted(key for key in set(stored) | set(requested) if stored.get(key) != requested.get(key))
    return "; ".join(f"{key}: it holds {stored.get(key)!r}, this embedding {requested.get(key)!r}" for key in keys)


def _ids_missing_from(client: QdrantClient, name: str, other: str) -> tuple[int, list[str]]:
    """How many point ids of ``name`` ``other`` lacks, and a few of them."""
    where = describe_client(client)
    missing, examples, offset = 0, [], None
    while True:
        records, offset = _scroll(client, name, ID_PAGE, offset, vectors=False, payload=False)
        ids = [record.id for record in records]
        found = with_retries(
            lambda ids=ids: client.retrieve(other, ids=ids, with_payload=False, with_vectors=False) if ids else [],
            what="retrieve",
            target=where,
        )
        there = {str(record.id) for record in found}
        absent = [str(i) for i in ids if str(i) not in there]
        missing += len(absent)
        examples.extend(absent[: EXAMPLES - len(examples)])
        if offset is None:
            return missing, examples


def _count(client: QdrantClient, name: str) -> int:
    return with_retries(lambda: client.count(name, exact=True).count, what="count", target=describe_client(client))


def _scroll(
    client: QdrantClient,
    name: str,
    limit: int,
    offset: Any,
    vector: Optional[str] = None,
    *,
    vectors=True,
    payload=True,
):
    """One page of ``name``; with its dense vector (``vector``: its name, None for the unnamed one) or none."""
    with_vectors: Any = ([vector] if vector else True) if vectors else False
    return with_retries(
        lambda: client.scroll(name, limit=limit, offset=offset, with_payload=payload, with_vectors=with_vectors),
        what="scroll",
        target=describe_client(client),
    )


def _node(record: Any, collection: str) -> BaseNode:
    from llama_index.core.vector_stores.utils import metadata_dict_to_node

    try:
        return metadata_dict_to_node(record.payload or {})
    except Exception as error:  # a point not written by LlamaIndex (no _node_content)
        raise UpgradeRefusedError(
            f"point {record.id} of {collection!r} holds no LlamaIndex node in its payload ({error}); only "
            "collections written by LlamaIndex's QdrantVectorStore can be upgraded"
        ) from error


def _embedded_text(node: BaseNode) -> str:
    from llama_index.core.schema import MetadataMode

    return node.get_content(metadata_mode=MetadataMode.EMBED)


def _has_text(node: BaseNode) -> bool:
    from llama_index.core.schema import MetadataMode

    return bool(node.get_content(metadata_mode=MetadataMode.NONE).strip())


def _stored_vector(record: Any, source: SourceCollection) -> list[float]:
    vector = record.vector
    return list(vector[source.vector] if isinstance(vector, dict) else vector)


# ----------------------------------------------------------------------------- the sampled check
def _check_sample(
    client: QdrantClient, settings: UpgradeConfig, source: SourceCollection, embed_model: PosFairEmbedding
) -> tuple[int, float]:
    """Re-encode up to ``settings.sample`` nodes spread over the collection plain; refuse unless they match."""
    records = _sample(client, settings.source, source, settings.sample)
    if not records:
        raise UpgradeRefusedError(f"collection {settings.source!r} is empty; there is nothing to upgrade")
    if len(records) < settings.sample:
        logger.warning("collection %r holds only %d nodes: all of them are checked", settings.source, len(records))
    nodes = [_node(r, settings.source) for r in records]
    texts = [_embedded_text(n) for n in nodes]
    stored = [_stored_vector(r, source) for r in records]
    plain = _plain_twin(embed_model)
    encodable = [i for i, text in enumerate(texts) if text.strip()]
    cosines = [-1.0] * len(texts)
    if encodable:
        encoded = plain.get_text_embedding_batch([texts[i] for i in encodable])
        for i, cosine in zip(encodable, _cosines(encoded, [stored[i] for i in encodable]), strict=True):
            cosines[i] = cosine
    lowest = min(cosines)
    if lowest < settings.min_cosine:
        failing = [i for i, cosine in enumerate(cosines) if cosine < settings.min_cosine]
        blank = [i for i in failing if not _has_text(nodes[i])]
        differs = []
        if blank:
            differs.append(
                f"text: {len(blank)} of the sampled nodes hold no text in their payload (node "
                f"{', '.join(nodes[i].node_id for i in blank[:EXAMPLES])}), so their vectors were made from text "
                "the payload does not keep and cannot be encoded again"
            )
        if len(blank) < len(failing):  # the nodes with text say what else differs
            known = [i for i in encodable if i not in blank]
            low = min(cosines[i] for i in known)
            differs.append(
                _what_differs(embed_model, [texts[i] for i in known], [stored[i] for i in known], settings, low)
            )
        median = sorted(cosines)[len(cosines) // 2]
        raise UpgradeRefusedError(
            f"re-encoding {len(records)} sampled nodes of {settings.source!r} with {_describe(plain)} does not "
            f"reproduce the stored vectors (lowest cosine {lowest:.6f}, median {median:.6f}; needs >= "
            f"{settings.min_cosine}). Settings that differ: {'; '.join(differs)}. Nothing was written."
        )
    return len(records), lowest


def _sample(client: QdrantClient, name: str, source: SourceCollection, count: int) -> list[Any]:
    """Points spread over the collection: a random sample where the engine offers one, else every n-th point."""
    with_vectors: Any = [source.vector] if source.vector else True
    try:
        response = client.query_points(
            name,
            query=rest.SampleQuery(sample=rest.Sample.RANDOM),
            limit=count,
            with_payload=True,
            with_vectors=with_vectors,
        )
        return list(response.points)
    except Exception as error:  # an engine without sampling: every n-th point in id order
        logger.debug("random sample not available (%s); taking every n-th point", error)
    step = max(1, source.points // count)
    picked, offset = [], None
    while len(picked) < count:
        records, offset = _scroll(client, name, step * count, offset, source.vector)
        picked.extend(records[::step])
        if offset is None:
            break
    return picked[:count]


def _cosines(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> list[float]:
    out = []
    for x, y in zip(a, b, strict=True):
        dot = sum(p * q for p, q in zip(x, y, strict=True))
        out.append(dot / (math.sqrt(sum(p * p for p in x)) * math.sqrt(sum(q * q for q in y)) or 1.0))
    return out


def _what_differs(embed_model: PosFairEmbedding, texts, stored, settings: UpgradeConfig, lowest: float) -> str:
    """Try the settings that most often differ, one at a time (precision, token limit, pooling), then pooling with
    each other token limit; name the first that reproduces every stored vector and how to ask for it."""
    if embed_model.is_wrapped:  # its pooling, token limit and precision are the wrapped model's own, not ours to try
        return (
            f"model or encoding: {embed_model.encoder.describe()} does not reproduce them, so the collection was "
            "written by another model, or by this one with other settings of its own (its pooling, token limit, "
            "precision or text instruction): build the embedding as the collection's writer did"
        )
    precision = _dtype_name(embed_model)
    lengths = _other_token_limits(embed_model, texts)
    poolings = [p for p in POOLINGS if p != embed_model.pooling]
    candidates: list[tuple[dict[str, Any], str]] = []
    if precision != "float32":
        candidates.append(({"dtype": "float32"}, ""))
    candidates += [({"max_length": length}, why) for length, why in lengths]
    candidates += [({"pooling": pooling}, "") for pooling in poolings]
    candidates += [({"pooling": p, "max_length": length}, why) for p in poolings for length, why in lengths]
    if precision == "float32" and lowest >= PRECISION_CLOSE:
        candidates += [({"dtype": dtype}, "") for dtype in ("bfloat16", "float16")]
    for changes, why in candidates:
        try:
            other = _plain_variant(embed_model, **changes)
            matches = min(_cosines(other.get_text_embedding_batch(texts), stored)) >= settings.min_cosine
        except Exception as error:  # a setting this model (or device) cannot run
            logger.debug("%s not tried: %s", changes, error)
            continue
        if matches:
            return _name_difference(embed_model, changes, why, lowest)
    tried_lengths = ", ".join(str(length) for length, _ in lengths) or "none other applies to these texts"
    return (
        f"model or encoding: no pooling of {embed_model.model_name} ({', '.join(POOLINGS)}), token limit "
        f"({embed_model.max_length}; tried {tried_lengths}) or precision reproduces them, so the collection was "
        f"written by another model or with another document prefix (this one: {embed_model.text_instruction!r})"
    )


def _name_difference(embed_model: PosFairEmbedding, changes: dict[str, Any], why: str, lowest: float) -> str:
    if set(changes) == {"dtype"}:
        dtype = changes["dtype"]
        return (
            f"dtype: the stored vectors match {dtype} (the sample encoded again in {dtype}); this embedding runs in "
            f"{_dtype_name(embed_model)}, whose rounding alone moves them (lowest cosine {lowest:.6f}): pass "
            f"--dtype {dtype} (dtype={dtype!r})"
        )
    if set(changes) == {"max_length"}:
        length = changes["max_length"]
        return (
            f"max_length: the stored vectors match max_length {length} ({why}); this embedding uses "
            f"{embed_model.max_length}: pass --max-length {length} (max_length={length})"
        )
    if set(changes) == {"pooling"}:
        pooling = changes["pooling"]
        return (
            f"pooling: the stored vectors match pooling {pooling!r}, this embedding uses {embed_model.pooling!r}: "
            f"pass --pooling {pooling} (pooling={pooling!r})"
        )
    pooling, length = changes["pooling"], changes["max_length"]
    return (
        f"pooling and max_length: the stored vectors match pooling {pooling!r} with max_length {length} ({why}); "
        f"this embedding uses {embed_model.pooling!r} with {embed_model.max_length}: pass --pooling {pooling} "
        f"--max-length {length}"
    )


def _other_token_limits(embed_model: PosFairEmbedding, texts: Sequence[str]) -> list[tuple[int, str]]:
    """The plausible token limits other than this embedding's (the model card's ``max_seq_length``, which
    sentence-transformers and LlamaIndex's HuggingFaceEmbedding truncate at, and the model's position limit),
    those that would change at least one of ``texts``."""
    encoder = embed_model.encoder
    limits = encoder.length_limits
    named = {
        "model_card": "the model card's limit, max_seq_length in sentence_bert_config.json, --max-length model_card",
        "positions": "the model's position limit, --max-length positions",
    }
    found = [(limits[name], why) for name, why in named.items() if limits[name] is not None]
    prompt = embed_model.text_instruction or ""
    longest = max(encoder.token_lengths([prompt + text for text in texts]), default=0)
    out, seen = [], {embed_model.max_length}
    for length, why in found:
        # a limit that no sampled text reaches encodes them as this embedding does: nothing to learn from it
        if length >= 2 and length not in seen and longest > min(length, embed_model.max_length):
            seen.add(length)
            out.append((length, why))
    return out


def _dtype_name(embed_model: PosFairEmbedding) -> str:
    return str(embed_model.encoder.dtype).removeprefix("torch.")


def _describe(embedding: PosFairEmbedding) -> str:
    if embedding.is_wrapped:
        return embedding.encoder.describe()
    return (
        f"{embedding.model_name} (pooling {embedding.pooling!r}, max_length {embedding.max_length}, "
        f"text prefix {embedding.text_instruction!r}, {_dtype_name(embedding)})"
    )


# ----------------------------------------------------------------------------- the embeddings
def _plain_twin(embed_model: PosFairEmbedding) -> PosFairEmbedding:
    """The plain encoder of ``embed_model`` on its loaded weights (what LlamaIndex's store was given)."""
    return _twin(embed_model, "plain")


def check_upgrade_mode(embed_model: PosFairEmbedding) -> None:
    """Upgrades write calibrated, dual and windows collections; a windows collection keeps the stored vector as its
    document vector, so its document must be plain or dual."""
    mode = document_mode(embed_model.mode)
    if not mode.upgradable:
        writes = ", ".join(name for name, spec in MODES_BY_NAME.items() if spec.upgradable)
        raise ValueError(f"upgrade writes a collection of mode {writes}, not mode {embed_model.mode!r}")
    if mode.windows and not keeps_stored_vector(embed_model):
        raise ValueError(
            f"an upgrade into windows mode keeps the stored vector as the document vector, so the windows' document "
            f"must be 'plain' or 'dual', not {embed_model.document_kind!r} (WindowConfig(document='plain'), "
            f"--window-document plain)"
        )


def keeps_stored_vector(embed_model: PosFairEmbedding) -> bool:
    """Whether the new document embedding starts with the plain vector the source already holds."""
    return DOCUMENT_KINDS[embed_model.document_kind].vectors[:1] == (PLAIN_VECTOR,)


def computed_part(embed_model: PosFairEmbedding) -> PosFairEmbedding:
    """The embedding whose document embedding is what the upgrade computes: ``embed_model``'s without the stored
    plain vector in front (a dual embedding's calibrated half, windows with the plain document left out), or the
    calibrated embedding itself."""
    if not keeps_stored_vector(embed_model):
        return embed_model
    if embed_model.mode == "dual":
        return _twin(embed_model, "calibrated")
    rest = "none" if embed_model.document_kind == "plain" else "calibrated"
    return _twin(embed_model, "windows", windows=embed_model.windows.model_copy(update={"document": rest}))


def _twin(embed_model: PosFairEmbedding, mode: str, windows=None) -> PosFairEmbedding:
    from posfair_llamaindex.embedding import PosFairEmbedding

    if embed_model.is_wrapped:  # the same LlamaIndex embedding, with its own tokenizer and request settings
        settings = embed_model.constructor_settings()
        settings.update(mode=mode, windows=windows, chunker=None, fusion=None)
        return PosFairEmbedding(**settings)
    return PosFairEmbedding(
        embed_model.model_name,
        calibration=embed_model.calibration if mode != "plain" else None,
        windows=windows,
        mode=mode,
        max_length=embed_model.max_length,
        normalize=embed_model.normalize,
        text_instruction=embed_model.text_instruction,
        query_instruction=embed_model.query_instruction,
        embed_batch_size=embed_model.embed_batch_size,
        encoder=embed_model.encoder,
    )


def _plain_variant(embed_model: PosFairEmbedding, **changes: Any) -> PosFairEmbedding:
    """A plain embedding of the same model with some settings changed (its own weights: another pooling,
    token limit or precision is another encoder)."""
    from posfair_llamaindex.embedding import PosFairEmbedding

    settings: dict[str, Any] = dict(
        mode="plain",
        pooling=embed_model.pooling,
        max_length=embed_model.max_length,
        normalize=embed_model.normalize,
        text_instruction=embed_model.text_instruction,
        query_instruction=embed_model.query_instruction,
        embed_batch_size=embed_model.embed_batch_size,
        device=str(embed_model.encoder.device),
        dtype=_dtype_name(embed_model),
        trust_remote_code=embed_model.trust_remote_code,
    )
    settings.update(changes)
    return PosFairEmbedding(embed_model.model_name, **settings)


# ----------------------------------------------------------------------------- writing
@dataclass
class _Copier:
    """Writes source points into the target, and compares the two until the target holds the whole source."""

    client: QdrantClient
    settings: UpgradeConfig
    source: SourceCollection
    store: PosFairQdrantVectorStore
    embed_model: PosFairEmbedding
    encode: Encode
    report: UpgradeReport

    def page(self, records: Sequence[Any]) -> int:
        """Write those of ``records`` the target lacks or holds with other text; returns how many."""
        from posfair_llamaindex.qdrant.store import embedded_text_hash

        nodes = [_node(record, self.settings.source) for record in records]
        stored = self.store.stored_text_hashes([n.node_id for n in nodes]) if nodes else {}
        todo = [(r, n) for r, n in zip(records, nodes, strict=True) if stored.get(n.node_id) != embedded_text_hash(n)]
        if not todo:
            return 0
        texts = [_embedded_text(node) for _, node in todo]
        vectors = self.encode(texts)
        if len(vectors) != len(texts):
            raise RuntimeError(f"the calibrated encoder returned {len(vectors)} vectors for {len(texts)} texts")
        reuse = keeps_stored_vector(self.embed_model)
        for (record, node), vector in zip(todo, vectors, strict=True):
            node.embedding = (_stored_vector(record, self.source) + list(vector)) if reuse else list(vector)
        self.store.add([node for _, node in todo])
        self.report.computed += len(todo)
        self.report.plain_reused += len(todo) if reuse else 0
        return len(todo)

    def compare(self) -> _Gap:
        """Read the whole source (ids and payload, no vectors) and find what the target lacks, by point id and
        text hash: a point added to the source or changed in it since it was copied."""
        from posfair_llamaindex.qdrant.store import embedded_text_hash

        gap, offset = _Gap(), None
        while True:
            records, offset = _scroll(self.client, self.settings.source, ID_PAGE, offset, vectors=False)
            nodes = [_node(record, self.settings.source) for record in records]
            stored = self.store.stored_text_hashes([n.node_id for n in nodes]) if nodes else {}
            for record, node in zip(records, nodes, strict=True):
                held = stored.get(node.node_id)
                if held is None:
                    gap.missing.append(record.id)
                elif held != embedded_text_hash(node):
                    gap.changed.append(record.id)
            gap.seen += len(records)
            if offset is None:
                return gap

    def catch_up(self, ids: Sequence[Any]) -> int:
        """Copy these source points (read again, with their vectors, as they are now); returns how many."""
        where = describe_client(self.client)
        with_vectors: Any = [self.source.vector] if self.source.vector else True
        written = 0
        for start in range(0, len(ids), self.settings.batch_size):
            chunk = list(ids[start : start + self.settings.batch_size])
            records = with_retries(
                lambda chunk=chunk: self.client.retrieve(
                    self.settings.source, ids=chunk, with_payload=True, with_vectors=with_vectors
                ),
                what="retrieve",
                target=where,
            )
            written += self.page(records)  # a point deleted from the source meanwhile is simply not there
        return written


def _finish(copy: _Copier) -> None:
    """Compare the source with the target, catch up with what writers added or changed, and with ``replace``
    delete the source only right after a comparison found nothing missing and an exact count found the source
    still at the size that comparison read."""
    settings, report, client = copy.settings, copy.report, copy.client
    moved: Optional[int] = None
    for round_ in range(settings.catch_up_rounds + 1):
        gap = copy.compare()
        report.points = gap.seen
        if not gap.todo:
            report.target_only = max(0, _count(client, settings.target) - gap.seen)
            if report.target_only:
                logger.warning(
                    "%r holds %d point(s) that %r no longer does (deleted from it during the upgrade?); they were kept",
                    settings.target,
                    report.target_only,
                    settings.source,
                )
            if not settings.replace:
                return
            # the final check: a writer that added or removed a point during the comparison changed the count
            now = _count(client, settings.source)
            if now == gap.seen:
                with_retries(
                    lambda: client.delete_collection(settings.source),
                    what="delete_collection",
                    target=describe_client(client),
                )
                report.replaced = True
                return
            moved = now
            continue
        if round_ == settings.catch_up_rounds:
            break
        logger.info(
            "%d point(s) added to %r and %d changed during the upgrade: copying them",
            len(gap.missing),
            settings.source,
            len(gap.changed),
        )
        report.caught_up += copy.catch_up(gap.todo)
        report.catch_up_passes += 1
        moved = None
    raise UpgradeIncompleteError(_incomplete(settings, gap, moved))


def _incomplete(settings: UpgradeConfig, gap: _Gap, moved: Optional[int]) -> str:
    source, target = settings.source, settings.target
    if gap.todo:
        found = [f"{len(gap.missing)} point(s) of {source!r} are not in {target!r}"]
        if gap.missing:
            found[0] += f" (e.g. {', '.join(str(i) for i in gap.missing[:EXAMPLES])})"
        if gap.changed:
            found.append(
                f"{len(gap.changed)} hold other text in {source!r} than in {target!r} (e.g. "
                f"{', '.join(str(i) for i in gap.changed[:EXAMPLES])})"
            )
        what = "; ".join(found)
    else:
        what = (
            f"every point the last comparison read ({gap.seen}) is in {target!r}, but {source!r} holds {moved} "
            "now: a writer changed it during the comparison"
        )
    return (
        f"{target!r} is not yet a complete copy of {source!r}: {what}. Writers kept changing {source!r} through "
        f"{settings.catch_up_rounds} catch-up pass(es)."
        + (f" {source!r} was not deleted." if settings.replace else "")
        + " Stop the writers (or point them at the target) and run the upgrade again: it resumes."
    )


__all__ = (
    "Encode",
    "SourceCollection",
    "UpgradeIncompleteError",
    "UpgradeRefusedError",
    "UpgradeReport",
    "UpgradeConfig",
    "check_upgrade_mode",
    "computed_part",
    "keeps_stored_vector",
    "inspect_source",
    "upgrade_collection",
)
