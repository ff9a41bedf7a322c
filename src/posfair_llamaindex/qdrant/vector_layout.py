"""What a collection stores and how a query reads it: one description for single, dual and hybrid collections.

A :class:`VectorLayout` names the dense vectors of a point (their Qdrant params), the optional sparse vector,
how LlamaIndex's flat document embedding splits into those named vectors, and how a query fuses them. The
collection is created from it, points are built from it and the store's requests are built from it, so a new
kind of collection is a new layout, not a new copy of the plumbing.

A document embedding is the dense vectors' floats one after the other, in layout order. A vector whose params
carry a ``multivector_config`` takes the rest of the embedding, in rows of ``dimension`` floats (any number of
rows, none included); a query reaches it as the one-row multivector ``[query]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator
from qdrant_client.http import models as rest

from posfair_llamaindex.modes import WINDOWS_VECTOR, document_mode
from posfair_llamaindex.options import DEFAULT_WINDOW_DOCUMENT, FUSIONS, RRF_K, Fusion
from posfair_llamaindex.qdrant.vector_storage import (
    DEFAULT_WINDOWS_STORAGE,
    TAG_KEY,
    StorageChoice,
    VectorStorage,
    storage_by_name,
    stored_types,
)

if TYPE_CHECKING:  # reading a layout must not load torch
    from posfair_llamaindex.embedding import PosFairEmbedding

# the named vectors of dual and windows collections are the modes' own (modes.py); windows mode's multivector holds
# every window of a document, scored against a query by its best window (MaxSim)
# LlamaIndex's QdrantVectorStore names (a hybrid collection is read by its query code, so it must use them)
HYBRID_DENSE_VECTOR = "text-dense"
HYBRID_SPARSE_VECTOR = "text-sparse-new"
# the one dense vector of a dense-only collection has no name, as in LlamaIndex's store
UNNAMED_VECTOR = ""
# what the tag records as the sparse encoder when the user hands in sparse_doc_fn
CUSTOM_SPARSE_ENCODER = "custom"

# sum and rrf fuse this many candidates per dense vector; the maximum prefetches max(2k, max_candidates) hits per
# vector (exact top k would suffice for exact search; on HNSW the longer list, which also widens the beam, keeps the
# recall of the fused top k >= 0.99: benchmarks/bench_hnsw_recall.py, RESULTS.md §9.2)
DEFAULT_FUSION_CANDIDATES = 100
DEFAULT_MAX_CANDIDATES = 100
MAX_PREFETCH_FACTOR = 2
# The beam a windows multivector is searched with on an HNSW index unless the query says otherwise. Qdrant's default
# beam finds 0.939 of the exact MaxSim top 10 nodes at 100,000 windows and 0.858 at 1,000,000; a beam of 512 finds
# 0.979 (3.8 ms) and 0.954 (4.7 ms) on Qdrant Edge, 2 cores (benchmarks/bench_edge_scale.py, RESULTS.md §9.6). Below
# the indexing threshold the search is exact and the beam does nothing. The request is the same on a server.
MULTIVECTOR_HNSW_EF = 512
# what a formula counts for a document that one prefetch did not return: below any cosine (or any dot product of
# unit vectors); unnormalised dot products get a far lower floor
MISSING_SCORE = -1.0
MISSING_UNBOUNDED_SCORE = -1e9
# distances whose score grows with similarity: the only ones a maximum or a sum of scores can fuse
HIGHER_IS_BETTER = (rest.Distance.COSINE, rest.Distance.DOT)

# how a hybrid query fuses its dense ranking with the sparse one: "relative" is LlamaIndex's rule (both lists
# fetched in one batch request, then ``hybrid_fusion_fn``, relative-score fusion by default, with ``alpha``);
# "rrf" and "dbsf" fuse on the server, in the same request as the dense fusion
HybridRule = Literal["relative", "rrf", "dbsf"]
HYBRID_RULES: tuple = ("relative", "rrf", "dbsf")
# Left unchosen, a dual + hybrid collection fuses by DBSF, the best of the three on SQuAD-LongPosQ and SciFact with
# mean and first-token pooling (benchmarks/bench_dual_hybrid.py, docs/RESULTS.md §3.5); a query that gives ``alpha``
# asks for a weighting DBSF does not have, and gets LlamaIndex's relative-score fusion instead
DEFAULT_HYBRID_RULE = "dbsf"
WEIGHTED_DEFAULT_HYBRID_RULE = "relative"


class DenseVector(BaseModel):
    """One named dense vector of a point and its Qdrant params (size, distance, on_disk, HNSW, quantization).

    ``storage`` (None: as ``params`` say, float32 unless they set a datatype) is how its floats are kept:
    :attr:`stored_params` are ``params`` with it applied, what the collection is created with.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    params: rest.VectorParams
    storage: Optional[VectorStorage] = None

    @model_validator(mode="after")
    def _storage_fits(self) -> DenseVector:
        _ = self.stored_params  # refuses a storage that dense_config already decides otherwise
        return self

    @property
    def is_multivector(self) -> bool:
        return self.params.multivector_config is not None

    @property
    def stored_params(self) -> rest.VectorParams:
        return self.params if self.storage is None else self.storage.apply(self.params, self.name)

    @property
    def storage_type(self) -> str:
        """float32, float16, int8 or binary: how this vector's floats are kept."""
        if self.storage is not None:
            return self.storage.type
        datatype = self.params.datatype
        return datatype.value if datatype is not None and datatype != rest.Datatype.UINT8 else "float32"

    def search_params(self, params: Optional[rest.SearchParams]) -> Optional[rest.SearchParams]:
        """What a search of this vector runs with: the caller's params, with a multivector's beam widened to
        :data:`MULTIVECTOR_HNSW_EF` where they set neither a beam nor exact search, and a quantized vector's
        rescoring (``QuantizationSearchParams``) where they set none."""
        if self.storage is not None:
            params = self.storage.search_params(params)
        if not self.is_multivector or (params is not None and (params.hnsw_ef is not None or params.exact)):
            return params
        if params is None:
            return rest.SearchParams(hnsw_ef=MULTIVECTOR_HNSW_EF)
        return params.model_copy(update={"hnsw_ef": MULTIVECTOR_HNSW_EF})

    def describe(self) -> str:
        """What must match in an existing collection: size, distance, and a multivector's comparator."""
        return describe_params(self.params)


class SparseVector(BaseModel):
    """The sparse vector of a hybrid collection, and which encoder fills it (recorded in the tag)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default=HYBRID_SPARSE_VECTOR, min_length=1)
    params: rest.SparseVectorParams = Field(
        default_factory=lambda: rest.SparseVectorParams(index=rest.SparseIndexParams())
    )
    # a fastembed model name, "custom" for the user's own sparse_doc_fn (which no tag can identify), or what an
    # encoder that describes itself (``posfair_sparse_tag``) says it is
    encoder: str = Field(default=CUSTOM_SPARSE_ENCODER, min_length=1)

    @property
    def idf(self) -> bool:
        return self.params.modifier == rest.Modifier.IDF


class QueryFusion(BaseModel):
    """How a query fuses the dense vectors (``rule``, prefetch sizes) and, on a hybrid collection, the sparse one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: Optional[Fusion] = None  # None: one dense vector, nothing to fuse
    candidates: int = Field(default=DEFAULT_FUSION_CANDIDATES, ge=1)
    max_candidates: int = Field(default=DEFAULT_MAX_CANDIDATES, ge=1)
    missing_score: float = MISSING_SCORE
    hybrid_rule: Optional[HybridRule] = None  # None: DEFAULT_HYBRID_RULE, or with alpha WEIGHTED_DEFAULT_HYBRID_RULE

    def hybrid_rule_for(self, chosen: Optional[str], alpha: Optional[float]) -> str:
        """The hybrid rule of one query: the one it chose, else the collection's, else the default for its alpha.

        An ``alpha`` cannot weigh DBSF's rankings, so a query that gives one to a DBSF collection is refused.
        """
        rule = chosen or self.hybrid_rule
        if rule is None:
            return DEFAULT_HYBRID_RULE if alpha is None else WEIGHTED_DEFAULT_HYBRID_RULE
        if rule not in HYBRID_RULES:
            raise ValueError(f"hybrid_fusion must be one of {HYBRID_RULES}, got {rule!r}")
        if rule == "dbsf" and alpha is not None:
            raise ValueError(
                f"alpha={alpha} weighs the dense and the sparse ranking, which DBSF cannot: leave alpha unset, or "
                "choose hybrid_fusion='relative' (LlamaIndex's rule) or 'rrf'"
            )
        return rule


class VectorLayout(BaseModel):
    """The named vectors of a collection's points, how a document embedding fills them, how a query fuses them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dimension: int = Field(ge=1)
    dense: tuple[DenseVector, ...] = Field(min_length=1)
    sparse: Optional[SparseVector] = None
    fusion: QueryFusion = Field(default_factory=QueryFusion)

    @model_validator(mode="after")
    def _consistent(self) -> VectorLayout:
        names = [v.name for v in self.dense]
        if len(set(names)) != len(names):
            raise ValueError(f"dense vector names must differ, got {names}")
        if UNNAMED_VECTOR in names and (len(names) > 1 or self.sparse is not None):
            raise ValueError("only a collection with one dense vector and no sparse one may leave it unnamed")
        if self.sparse is not None and self.sparse.name in names:
            raise ValueError(f"the sparse vector's name {self.sparse.name!r} is also a dense vector's")
        for vector in self.dense:
            if vector.params.size != self.dimension:
                raise ValueError(
                    f"vector {vector.name!r} has size {vector.params.size}, but the layout's dimension is "
                    f"{self.dimension}"
                )
        if sum(v.is_multivector for v in self.dense) > 1:
            raise ValueError("at most one dense vector may be a multivector (it takes the rest of the embedding)")
        if len(self.dense) > 1:
            if self.fusion.rule is None:
                raise ValueError(f"{len(self.dense)} dense vectors need a fusion rule, one of {FUSIONS}")
            distances = {v.params.distance for v in self.dense}
            if len(distances) > 1:
                raise ValueError(
                    f"the dense vectors of one collection must share a distance to be fused, got {sorted(distances)}"
                )
            (distance,) = distances
            if distance not in HIGHER_IS_BETTER:
                raise ValueError(
                    f"distance {distance.value} ranks by lowest score first, so a maximum or a sum of the "
                    f"{len(self.dense)} vectors' scores has no meaning: use Cosine or Dot"
                )
        elif self.fusion.rule is not None:
            raise ValueError("one dense vector has nothing to fuse: fusion rule must be None")
        return self

    # ------------------------------------------------------------------ the collection
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.dense)

    @property
    def is_fused(self) -> bool:
        """More than one dense vector per point (dual, windows): queries are fused on the server."""
        return len(self.dense) > 1

    @property
    def is_plain(self) -> bool:
        """One ordinary dense vector: LlamaIndex's own point and query code serve it unchanged."""
        return not self.is_fused and not self.dense[0].is_multivector

    @property
    def distance(self) -> rest.Distance:
        return self.dense[0].params.distance

    def vectors_config(self) -> Union[rest.VectorParams, dict[str, rest.VectorParams]]:
        if self.names == (UNNAMED_VECTOR,):
            return self.dense[0].stored_params
        return {v.name: v.stored_params for v in self.dense}

    def sparse_vectors_config(self) -> Optional[dict[str, rest.SparseVectorParams]]:
        return None if self.sparse is None else {self.sparse.name: self.sparse.params}

    def create_arguments(self) -> dict[str, Any]:
        """``create_collection``'s vector arguments, as LlamaIndex's store passes them (no sparse key without one)."""
        arguments: dict[str, Any] = {"vectors_config": self.vectors_config()}
        if self.sparse is not None:
            arguments["sparse_vectors_config"] = self.sparse_vectors_config()
        return arguments

    def describe(self) -> tuple[Any, Any]:
        """(dense, sparse) as :func:`describe_vectors` / :func:`describe_sparse` read them from a collection."""
        return describe_vectors(self.vectors_config()), describe_sparse(self.sparse_vectors_config())

    def tag(self) -> dict[str, Any]:
        """The keys this layout adds to the collection's tag, only where they change what is stored or scored.

        ``distance`` (when not Cosine: a Cosine collection stores unit vectors and scores by angle, a Dot one
        stores them as given) and ``datatype`` (when not float32: the stored values change) decide what a
        vector means; ``on_disk``, HNSW and quantization settings decide where and how fast, so they stay out.
        ``vector_storage`` (int8 or binary: a search reads a quantized copy) records a quantized
        :class:`VectorStorage`. ``hybrid`` records the sparse vector. Dense-only Cosine float32 layouts add
        nothing, so their tags and fingerprints stay as they were.
        """
        tag: dict[str, Any] = {}
        if self.distance != rest.Distance.COSINE:
            tag["distance"] = self.distance.value
        datatypes = {
            v.name: v.stored_params.datatype.value
            for v in self.dense
            if v.stored_params.datatype is not None and v.stored_params.datatype != rest.Datatype.FLOAT32
        }
        if datatypes:
            tag["datatype"] = datatypes
        quantized = {v.name: v.storage.type for v in self.dense if v.storage is not None and v.storage.quantized}
        if quantized:
            tag[TAG_KEY] = quantized
        if self.sparse is not None:
            hybrid: dict[str, Any] = {}
            if not self.is_fused:  # LlamaIndex's query code reads the one dense vector by this name
                hybrid["dense_vector"] = self.dense[0].name
            hybrid.update(sparse_vector=self.sparse.name, sparse_encoder=self.sparse.encoder, idf=self.sparse.idf)
            tag["hybrid"] = hybrid
        return tag

    def storage_types(self) -> dict[str, str]:
        """``{vector name: float32 | float16 | int8 | binary}``."""
        return {v.name: v.storage_type for v in self.dense}

    def with_stored_storage(self, tag: Optional[dict[str, Any]]) -> VectorLayout:
        """This layout with each dense vector stored as ``tag`` (a collection's) records it: float32 where it
        records nothing, as every collection made before the storage choice existed."""
        found = stored_types(tag, self.names)

        def restored(vector: DenseVector) -> DenseVector:
            kind = found[vector.name]
            if vector.storage_type == kind:
                return vector
            storage = None if kind == "float32" else VectorStorage(type=kind)
            return DenseVector(name=vector.name, params=vector.params, storage=storage)

        return self.model_copy(update={"dense": tuple(restored(v) for v in self.dense)})

    # ------------------------------------------------------------------ documents
    @property
    def fixed_size(self) -> int:
        """Floats a document embedding gives the vectors that take one row each."""
        return sum(self.dimension for v in self.dense if not v.is_multivector)

    def describe_embedding(self) -> str:
        parts = [f"{v.name or 'the vector'} ({self.dimension})" for v in self.dense if not v.is_multivector]
        parts += [f"{v.name} (k x {self.dimension}, k >= 0)" for v in self.dense if v.is_multivector]
        return " + ".join(parts)

    def expected_size(self) -> str:
        """The document embedding's length in words: ``"768"``, or ``"768 + k x 384"`` with a multivector."""
        if any(v.is_multivector for v in self.dense):
            return f"{self.fixed_size} + k x {self.dimension} floats"
        return f"{self.fixed_size} floats"

    def check_embedding(self, size: int) -> Optional[str]:
        """None when a document embedding of ``size`` floats fits this layout, else why it does not."""
        if any(v.is_multivector for v in self.dense):
            if size >= self.fixed_size and (size - self.fixed_size) % self.dimension == 0:
                return None
            return (
                f"a document embedding here is {self.fixed_size} floats plus any multiple of {self.dimension} "
                f"({self.describe_embedding()}), got {size}"
            )
        if size == self.fixed_size:
            return None
        return f"a document embedding here is {self.fixed_size} floats ({self.describe_embedding()}), got {size}"

    def split(self, embedding: Sequence[float]) -> dict[str, Any]:
        """A flat document embedding as ``{name: vector}``, a multivector as ``{name: [row, ...]}`` (maybe [])."""
        problem = self.check_embedding(len(embedding))
        if problem is not None:
            raise ValueError(problem)
        values = list(embedding)
        out: dict[str, Any] = {}
        start = 0
        for vector in self.dense:
            if vector.is_multivector:
                continue
            out[vector.name] = values[start : start + self.dimension]
            start += self.dimension
        for vector in self.dense:
            if vector.is_multivector:
                rest_ = values[start:]
                out[vector.name] = [rest_[i : i + self.dimension] for i in range(0, len(rest_), self.dimension)]
        return {name: out[name] for name in self.names}

    def point_vectors(self, embedding: Sequence[float], sparse: Optional[rest.SparseVector] = None) -> dict[str, Any]:
        """A point's ``vector`` argument: every named vector (a multivector with no rows is left out), and the
        sparse one when given."""
        vectors = {name: value for name, value in self.split(embedding).items() if value != []}
        if sparse is not None:
            if self.sparse is None:
                raise ValueError("this layout has no sparse vector")
            vectors[self.sparse.name] = sparse
        return vectors

    # ------------------------------------------------------------------ queries
    def query_vector(self, vector: DenseVector, embedding: Sequence[float]) -> Any:
        """What a one-vector query asks a named vector: the vector, or the one-row multivector [vector]."""
        return [list(embedding)] if vector.is_multivector else list(embedding)

    def check_query(self, embedding: Optional[Sequence[float]]) -> list[float]:
        size = None if embedding is None else len(embedding)
        if size != self.dimension:
            raise ValueError(f"this collection needs a {self.dimension}-dimensional query embedding, got {size}")
        return list(embedding)

    def prefetch_limit(self, top_k: int, rule: str, *, candidates: Any = None, max_candidates: Any = None) -> int:
        """Hits fetched per dense vector before fusing by ``rule`` (see :meth:`fused_dense`)."""
        if rule == "max":
            floor = _positive(
                self.fusion.max_candidates if max_candidates is None else max_candidates, "max_candidates"
            )
            return max(MAX_PREFETCH_FACTOR * top_k, floor)
        return max(top_k, _positive(self.fusion.candidates if candidates is None else candidates, "fusion_candidates"))

    def fused_dense(
        self,
        embedding: Sequence[float],
        top_k: int,
        *,
        query_filter: Any = None,
        params: Optional[rest.SearchParams] = None,
        rule: Optional[str] = None,
        candidates: Any = None,
        max_candidates: Any = None,
    ) -> dict[str, Any]:
        """The dense vectors' fused ranking as query-API arguments: ``prefetch`` (one per vector) and ``query``.

        For the maximum, prefetching the top k of each vector is exact: a document in the top k by the maximum is
        in the top k of the vector that gives its maximum, since otherwise k documents would beat it on that
        vector alone, and so on their maximum. On an HNSW index each prefetch is approximate, so the maximum
        prefetches ``max(2k, max_candidates)``. Sum and RRF fuse ``fusion_candidates`` hits per vector; a
        document missing from one list counts ``missing_score`` there (sum) or nothing (RRF).
        """
        rule = self.fusion.rule if rule is None else rule
        if rule not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {rule!r}")
        limit = self.prefetch_limit(top_k, rule, candidates=candidates, max_candidates=max_candidates)
        prefetch = [
            rest.Prefetch(
                query=self.query_vector(vector, embedding),
                using=vector.name,
                limit=limit,
                filter=query_filter,
                params=vector.search_params(params),
            )
            for vector in self.dense
        ]
        scores = [f"$score[{i}]" for i in range(len(self.dense))]
        if rule == "rrf":
            fused: Any = rest.RrfQuery(rrf=rest.Rrf(k=RRF_K))
        else:
            formula = rest.MaxExpression(max=scores) if rule == "max" else rest.SumExpression(sum=scores)
            fused = rest.FormulaQuery(formula=formula, defaults={s: self.fusion.missing_score for s in scores})
        return {"prefetch": prefetch, "query": fused}

    def dense_search(
        self,
        embedding: Sequence[float],
        top_k: int,
        *,
        query_filter: Any = None,
        params: Optional[rest.SearchParams] = None,
        rule: Optional[str] = None,
        candidates: Any = None,
        max_candidates: Any = None,
    ) -> dict[str, Any]:
        """The dense ranking as ``Prefetch`` / ``QueryRequest`` fields (``limit`` aside): the fused prefetches of
        several vectors (:meth:`fused_dense`), or the one vector's own query (a multivector's as ``[query]``)."""
        if self.is_fused:
            return self.fused_dense(
                embedding,
                top_k,
                query_filter=query_filter,
                params=params,
                rule=rule,
                candidates=candidates,
                max_candidates=max_candidates,
            )
        (vector,) = self.dense
        found = {
            "query": self.query_vector(vector, embedding),
            "using": vector.name,
            "filter": query_filter,
            "params": vector.search_params(params),
        }
        return {key: value for key, value in found.items() if value is not None}

    def sparse_prefetch(
        self, indices: list[int], values: list[float], limit: int, *, query_filter: Any = None, params: Any = None
    ) -> rest.Prefetch:
        if self.sparse is None:
            raise ValueError("this layout has no sparse vector")
        return rest.Prefetch(
            query=rest.SparseVector(indices=indices, values=values),
            using=self.sparse.name,
            limit=limit,
            filter=query_filter,
            params=params,
        )


def dense_vector(name: str, dimension: int, config: Optional[rest.VectorParams] = None) -> DenseVector:
    """A dense vector of ``dimension`` floats: Cosine by default, else ``config`` (its size must agree)."""
    if config is None:
        return DenseVector(name=name, params=rest.VectorParams(size=dimension, distance=rest.Distance.COSINE))
    if not isinstance(config, rest.VectorParams):
        raise TypeError(f"dense_config must be a qdrant VectorParams, got {type(config).__name__}")
    if config.size != dimension:
        raise ValueError(
            f"dense_config has size {config.size}, but this embedding's vectors have {dimension} floats; "
            "leave size at the model's dimension"
        )
    if config.multivector_config is not None:
        raise ValueError(
            "dense_config.multivector_config is not available: which vectors hold several rows per document is "
            "decided by the embedding's mode"
        )
    if config.datatype == rest.Datatype.UINT8:
        raise ValueError(
            "dense_config datatype uint8 stores integers 0..255; posfair vectors are floats in [-1, 1], so they "
            "would be destroyed. Use float32, float16, or quantization_config to save memory"
        )
    return DenseVector(name=name, params=config.model_copy(deep=True))


def describe_params(params: Any) -> str:
    text = f"{params.size}/{params.distance}"
    multivector = getattr(params, "multivector_config", None)
    if multivector is not None:
        text += f"/multi:{getattr(multivector.comparator, 'value', multivector.comparator)}"
    return text


def describe_vectors(vectors: Any) -> Any:
    """The dense vectors' sizes and distances (the part of a collection that must match), by name."""
    if isinstance(vectors, rest.VectorParams):
        return describe_params(vectors)
    if isinstance(vectors, dict):
        return {name: describe_vectors(params) for name, params in sorted(vectors.items())}
    return repr(vectors)


def describe_sparse(sparse: Any) -> Any:
    if not sparse:
        return None
    return {name: str(params.modifier) if params.modifier else None for name, params in sorted(sparse.items())}


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def mode_vectors(embed_model: PosFairEmbedding) -> tuple[str, ...]:
    """The dense vectors an embedding's mode names (dual: plain and calibrated; windows: its document vector(s)
    and ``windows``), or ``()`` for a single vector, whose name follows LlamaIndex's store."""
    mode = document_mode(embed_model.mode)
    return mode.collection_vectors(embed_model.windows.document if mode.windows else None)


def layout_for(
    embed_model: PosFairEmbedding,
    *,
    sparse: Optional[SparseVector] = None,
    dense_config: Any = None,
    dense_vector_name: Optional[str] = None,
    fusion_candidates: Optional[int] = None,
    max_candidates: Optional[int] = None,
    hybrid_rule: Optional[str] = None,
    vector_storage: StorageChoice = None,
    default_storage: bool = True,
) -> VectorLayout:
    """The layout of a collection for ``embed_model``: one unnamed vector, a dual embedding's ``plain`` and
    ``calibrated``, or a windows embedding's document vector(s) and its ``windows`` multivector (MaxSim), with
    ``sparse`` beside them on a hybrid collection.

    ``dense_config`` (a ``VectorParams``, or ``{name: VectorParams}`` naming every dense vector) sets each dense
    vector's params; its size must be the model's dimension. ``vector_storage`` (a :class:`VectorStorage`, its type
    name, or ``{name: ...}`` naming every dense vector) says how their floats are kept; left unset, a windows
    multivector is kept as :data:`DEFAULT_WINDOWS_STORAGE` and the rest as float32, except where
    ``dense_config`` sets a datatype or a quantization or ``default_storage`` is False (a collection-wide
    quantization_config).
    """
    window_document = embed_model.windows.document if document_mode(embed_model.mode).windows else None
    return _layout(
        embed_model.dimension,
        embed_model.mode,
        window_document,
        normalize=embed_model.normalize,
        fusion_rule=embed_model.fusion,
        sparse=sparse,
        dense_config=dense_config,
        dense_vector_name=dense_vector_name,
        fusion_candidates=fusion_candidates,
        max_candidates=max_candidates,
        hybrid_rule=hybrid_rule,
        vector_storage=vector_storage,
        default_storage=default_storage,
    )


def layout_of_tag(tag: dict[str, Any]) -> VectorLayout:
    """The layout :func:`layout_for` gives the embedding a tag records, read from the tag alone (no model loads):
    how the command line queries a collection while the query's model loads elsewhere. Hybrid collections and
    non-default vector params are not rebuilt; checking the collection against this layout refuses them."""
    mode = tag.get("mode")
    windows = tag.get("windows") or {}
    return _layout(
        tag.get("dimension"),
        mode,
        windows.get("document", DEFAULT_WINDOW_DOCUMENT) if document_mode(mode).windows else None,
        normalize=tag.get("normalize", True),
        fusion_rule=tag.get("fusion"),
        default_storage=False,
    ).with_stored_storage(tag)


def _layout(
    dimension: int,
    mode: str,
    window_document: Optional[str],
    *,
    normalize: bool,
    fusion_rule: Optional[str],
    sparse: Optional[SparseVector] = None,
    dense_config: Any = None,
    dense_vector_name: Optional[str] = None,
    fusion_candidates: Optional[int] = None,
    max_candidates: Optional[int] = None,
    hybrid_rule: Optional[str] = None,
    vector_storage: StorageChoice = None,
    default_storage: bool = True,
) -> VectorLayout:
    """:func:`layout_for`'s work, from what an embedding or its tag says."""
    names = document_mode(mode).collection_vectors(window_document) or (
        (dense_vector_name or HYBRID_DENSE_VECTOR,) if sparse is not None else (UNNAMED_VECTOR,)
    )
    if isinstance(dense_config, dict):
        if set(dense_config) != set(names):
            raise ValueError(
                f"dense_config by name must name exactly this collection's dense vectors {list(names)}, got "
                f"{sorted(dense_config)}"
            )
        configs = {name: dense_config[name] for name in names}
    else:
        configs = {name: dense_config for name in names}
    dense = tuple(dense_vector(name, dimension, configs[name]) for name in names)
    if document_mode(mode).windows:  # every window a row of one multivector, scored by its best row
        max_sim = rest.MultiVectorConfig(comparator=rest.MultiVectorComparator.MAX_SIM)
        windows = dense[-1].params.model_copy(update={"multivector_config": max_sim})
        dense = (*dense[:-1], DenseVector(name=WINDOWS_VECTOR, params=windows))
    chosen = storage_by_name(vector_storage, tuple(v.name for v in dense))
    if chosen is None and default_storage:
        chosen = {
            v.name: VectorStorage(type=DEFAULT_WINDOWS_STORAGE)
            for v in dense
            if v.is_multivector and v.params.quantization_config is None and v.params.datatype is None
        }
    if chosen:
        dense = tuple(
            DenseVector(name=v.name, params=v.params, storage=chosen[v.name]) if v.name in chosen else v for v in dense
        )
    distance = dense[0].params.distance
    bounded = distance == rest.Distance.COSINE or (distance == rest.Distance.DOT and normalize)
    fusion = QueryFusion(
        rule=fusion_rule if len(dense) > 1 else None,
        candidates=DEFAULT_FUSION_CANDIDATES
        if fusion_candidates is None
        else _positive(fusion_candidates, "fusion_candidates"),
        max_candidates=DEFAULT_MAX_CANDIDATES
        if max_candidates is None
        else _positive(max_candidates, "max_candidates"),
        missing_score=MISSING_SCORE if bounded else MISSING_UNBOUNDED_SCORE,
        hybrid_rule=hybrid_rule,
    )
    return VectorLayout(dimension=dimension, dense=dense, sparse=sparse, fusion=fusion)
