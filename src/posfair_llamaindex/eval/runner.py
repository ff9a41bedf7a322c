"""Running encoder configurations over a benchmark through the public API.

Queries are plain in every configuration, so their embeddings are computed once per pooling and
shared. Documents are embedded with ``PosFairEmbedding.get_text_embedding_batch`` per configuration,
optionally cached on disk by the embedding's fingerprint.

The encoder may also be a wrapped LlamaIndex embedding (:class:`~posfair_llamaindex.encoding.wrapped.WrappedEncoder`,
passed in ``encoders``): then plain, windows (window source ``windows``) and SEA configurations run over it, its
queries go through its own query path, and configurations that need the model's attention or its hidden states
(calibrated, dual, a calibrated or dual document beside windows, the ``late`` and ``nodes`` window sources) are
refused by name before any model call. Its fingerprints name the wrapped class, so cached vectors never mix with a
loaded model's.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from tqdm.auto import tqdm

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.load_config import DEFAULT_LOAD, LoadConfig
from posfair_llamaindex.encoding.sea import ChunkerConfig
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.eval.benchmark_data import Benchmark, RetrievalTask
from posfair_llamaindex.eval.fusion import fuse, per_document_choice
from posfair_llamaindex.eval.metrics import bootstrap, ndcg_at_k, paired_difference, recall_at_k
from posfair_llamaindex.eval.window_vectors import max_sim, window_vectors
from posfair_llamaindex.modes import DOCUMENT_KINDS, PLAIN_VECTOR, document_mode, fused_modes
from posfair_llamaindex.options import FUSIONS, WINDOW_SOURCES


@dataclass(frozen=True)
class EvalConfig:
    """One way of encoding the documents."""

    name: str
    mode: str = "calibrated"
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    chunker: Optional[ChunkerConfig] = None
    pooling: Optional[str] = None
    # dual mode: the rule that fuses the document's scores (fusion.ALL_FUSIONS), and research variants that
    # fuse further calibrated vectors with it (``calibration`` is always the first calibrated one)
    fusion: Optional[str] = None
    more_calibrations: tuple = ()
    # windows mode: the windows and the document vector(s) beside them, and where the window vectors come
    # from (eval.windows.WINDOW_SOURCES: the mode itself, or the alternatives it is measured against)
    windows: Optional[WindowConfig] = None
    window_source: str = "windows"

    def __post_init__(self) -> None:
        mode = document_mode(self.mode)
        if mode.fused != (self.fusion is not None):
            fused = " and ".join(repr(name) for name in fused_modes())
            raise ValueError(f"{self.name}: a fusion rule goes with modes {fused} and only with them")
        if self.more_calibrations and self.mode != "dual":
            raise ValueError(f"{self.name}: more calibrated vectors need mode 'dual'")
        if mode.windows != (self.windows is not None):
            raise ValueError(f"{self.name}: window settings go with mode 'windows' and only with it")
        if self.window_source not in WINDOW_SOURCES:
            raise ValueError(f"{self.name}: window source must be one of {WINDOW_SOURCES}, got {self.window_source!r}")

    @property
    def calibrates(self) -> bool:
        """Whether ``calibration`` shapes some of this config's vectors."""
        return document_mode(self.mode).document_kind(self.windows and self.windows.document).calibrated

    @classmethod
    def plain(cls, pooling: Optional[str] = None, name: str = "plain") -> EvalConfig:
        return cls(name, mode="plain", pooling=pooling)


@dataclass
class ConfigResult:
    config: EvalConfig
    pooling: str
    fingerprint: str
    seconds: Optional[float]  # document embedding time; None when every document came from the cache
    ndcg: dict[str, np.ndarray]  # group -> per-query nDCG@10
    recall: dict[str, np.ndarray]  # group -> per-query Recall@10
    summary: dict[str, tuple] = field(default_factory=dict)  # metric -> (point, low, high), nDCG x100
    recall_summary: dict[str, tuple] = field(default_factory=dict)
    # aggregate nDCG@10 minus the first plain configuration's, paired over the same queries (x100)
    delta_vs_plain: Optional[tuple] = None
    # vectors stored per document (windows mode: document vectors and windows), averaged over the corpus
    vectors_per_document: float = 1.0


@dataclass
class EvalRun:
    benchmark: Benchmark
    model: str
    results: list[ConfigResult]
    query_seconds: dict[str, float]
    # the token limit the documents and queries were encoded at (every benchmark states its limit)
    max_length: Optional[int] = None


def evaluate(
    benchmark: Benchmark,
    configs: Sequence[EvalConfig],
    *,
    model: str,
    load: LoadConfig = DEFAULT_LOAD,
    cache_dir: Optional[Path] = None,
    bootstrap_samples: int = 1000,
    show_progress: bool = True,
    k: int = 10,
    encoders: Optional[Mapping[Optional[str], PosFairEncoder]] = None,
) -> EvalRun:
    """Embed the benchmark's documents under every config and score every query; see :class:`EvalRun`.

    ``load`` says how the model runs (its ``pooling`` is each configuration's own). ``encoders`` are models the
    caller already loaded, keyed by the configurations' ``pooling`` (None: the model's own), so that they are not
    loaded again. One may be a wrapped LlamaIndex embedding's ``WrappedEncoder`` (the ``encoder`` of
    ``PosFairEmbedding(embed_model=...)``): its configurations are checked to run over it before any model call
    (:func:`check_configs_over_wrapped`).
    """
    batch_size = load.batch_size
    if not configs:
        raise ValueError("give at least one configuration")
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"configuration names must be unique: {names}")
    encoders = dict(encoders or {})
    for pooling, encoder in encoders.items():
        if is_wrapped(encoder):
            check_configs_over_wrapped(encoder, [c for c in configs if c.pooling == pooling])
    query_vectors: dict[str, list[np.ndarray]] = {}
    query_seconds: dict[str, float] = {}
    memo: dict = {}  # document vectors computed in this run, shared by the configs that need them
    results = []
    for config in tqdm(configs, desc="configurations", disable=not show_progress):
        if config.pooling not in encoders:
            encoders[config.pooling] = load.with_pooling(config.pooling).encoder(model)
        encoder = encoders[config.pooling]
        embedding = PosFairEmbedding(
            model,
            # a wrapped model is never calibrated (check_configs_over_wrapped): its tag records no calibration
            calibration=None if is_wrapped(encoder) else config.calibration,
            mode=config.mode,
            chunker=config.chunker if config.mode == "sea" else None,
            windows=config.windows,
            fusion=config.fusion if config.fusion in FUSIONS else ("max" if config.mode == "dual" else None),
            encoder=encoder,
            embed_batch_size=batch_size,
        )
        vector_sets = _vector_sets(config, embedding, encoder, batch_size)
        queries_of = _query_key(encoder)
        if queries_of not in query_vectors:
            start = time.perf_counter()
            query_vectors[queries_of] = [_encode_queries(embedding, task, batch_size) for task in benchmark.tasks]
            query_seconds[queries_of] = time.perf_counter() - start
        start = time.perf_counter()
        computed = False
        ndcg: dict[str, list] = {g: [] for g in benchmark.groups}
        recall: dict[str, list] = {g: [] for g in benchmark.groups}
        stored = documents_seen = 0
        for task, queries in zip(benchmark.tasks, query_vectors[queries_of], strict=True):
            doc_ids = list(task.documents)
            members = []
            for member in vector_sets:
                documents, fresh = _document_vectors(member, task, doc_ids, cache_dir, show_progress, memo)
                computed = computed or fresh
                members.append(documents)
                stored += len(documents) if isinstance(documents, np.ndarray) else sum(len(w) for w in documents)
            documents_seen += len(doc_ids)
            if config.fusion == "perdoc":  # one vector per document (plain when every calibration drifts), then max
                members = [members[0], per_document_choice(members[0], members)]
            fused = fuse(
                [queries @ m.T if isinstance(m, np.ndarray) else max_sim(queries, m) for m in members],
                "max" if config.fusion == "perdoc" else config.fusion or "max",
            )
            for query, ranked in zip(task.queries, _top_k(fused, doc_ids, k), strict=True):
                ndcg[query.group].append(ndcg_at_k(ranked, query.relevant, k))
                recall[query.group].append(recall_at_k(ranked, query.relevant, k))
        result = ConfigResult(
            config,
            encoder.pooling,
            embedding.fingerprint(),
            time.perf_counter() - start if computed else None,
            {g: np.asarray(v) for g, v in ndcg.items()},
            {g: np.asarray(v) for g, v in recall.items()},
            vectors_per_document=stored / max(documents_seen, 1),
        )
        groups = [g for g in benchmark.groups if len(result.ndcg[g])]
        result.summary = _scaled(bootstrap(result.ndcg, groups, samples=bootstrap_samples))
        result.recall_summary = _scaled(bootstrap(result.recall, groups, samples=bootstrap_samples))
        results.append(result)
    _compare_with_plain(results, benchmark.groups, bootstrap_samples)
    limits = {encoder.max_length for encoder in encoders.values()}
    return EvalRun(benchmark, model, results, query_seconds, limits.pop() if len(limits) == 1 else None)


def _compare_with_plain(results: list[ConfigResult], groups: Sequence[str], samples: int) -> None:
    plain = next((r for r in results if r.config.mode == "plain"), None)
    if plain is None:
        return
    base = np.concatenate([plain.ndcg[g] for g in groups])
    for result in results:
        if result is not plain:
            ours = np.concatenate([result.ndcg[g] for g in groups])
            result.delta_vs_plain = tuple(v * 100 for v in paired_difference(ours, base, samples=max(samples, 1)))


def _scaled(summary: dict[str, tuple]) -> dict[str, tuple]:
    """nDCG and recall as percentages; PSI stays a ratio."""
    return {key: tuple(v if key == "psi" else v * 100 for v in values) for key, values in summary.items()}


def is_wrapped(encoder) -> bool:
    """Whether ``encoder`` is a wrapped LlamaIndex embedding (encoding/wrapped.py), not a model loaded here."""
    return bool(getattr(encoder, "is_wrapped", False))


def check_configs_over_wrapped(encoder, configs: Sequence[EvalConfig]) -> None:
    """Refuse, before any model call, the configurations a wrapped embedding cannot run: those that calibrate (the
    calibrated and dual modes, a calibrated or dual document beside windows) need its attention, and the ``late`` and
    ``nodes`` window sources its hidden states and its tokenizer's ids, none of which a LlamaIndex embedding
    exposes."""
    from posfair_llamaindex.errors import WrappedEmbeddingError

    what = encoder.describe() if callable(getattr(encoder, "describe", None)) else type(encoder).__name__
    for config in configs:
        if config.calibrates:
            raise WrappedEmbeddingError(
                f"configuration {config.name!r} (mode {config.mode!r}) cannot run over the wrapped embedding {what}: "
                "it needs the model's attention (calibration rewrites it), which a wrapped LlamaIndex embedding does "
                "not expose; plain, windows (document 'none' or 'plain') and sea run over it"
            )
        if config.windows is not None and config.window_source != "windows":
            raise WrappedEmbeddingError(
                f"configuration {config.name!r} (window source {config.window_source!r}) cannot run over the wrapped "
                f"embedding {what}: it needs the model's hidden states or token ids; use window source 'windows'"
            )


def _query_key(encoder) -> str:
    """What the queries' vectors depend on: a loaded model's pooling, or the wrapped model itself."""
    return f"wrapped:{encoder.describe()}" if is_wrapped(encoder) else encoder.pooling


def _encode_queries(embedding: PosFairEmbedding, task: RetrievalTask, batch_size: int) -> np.ndarray:
    texts = [q.text for q in task.queries]
    encoder = embedding.encoder
    if is_wrapped(encoder):  # the wrapped model's own query path (its query instruction, its query model)
        if not texts:
            return np.zeros((0, encoder.dimension), dtype=np.float32)
        return np.stack([encoder.encode_query(text, normalize=True) for text in texts])
    prompt = embedding.query_instruction or ""
    return encoder.encode(texts, None, batch_size=max(batch_size, 64), normalize=True, prompt=prompt)


@dataclass(frozen=True)
class _WindowMember:
    """The window vectors of a windows configuration: ``[windows, dim]`` per document, scored by MaxSim."""

    embedding: PosFairEmbedding  # windows mode with document "none": its fingerprint says what the windows are
    source: str
    batch_size: int

    def key(self) -> str:
        return f"{self.embedding.fingerprint()}-{self.source}"

    def compute(self, texts: list[str]) -> list[np.ndarray]:
        e = self.embedding
        return window_vectors(self.source, e.encoder, texts, e.windows, e.text_instruction or "", self.batch_size)


def _document_vectors(member, task, doc_ids, cache_dir, show_progress, memo: dict) -> tuple:
    """The task's document vectors (a list of per-document window arrays for a window member), and whether they
    were computed (False: from the cache or this run's memo)."""
    texts = [task.documents[d] for d in doc_ids]
    digest = hashlib.sha256("\x1e".join(doc_ids + texts).encode("utf-8")).hexdigest()[:16]
    windowed = isinstance(member, _WindowMember)
    key = f"{member.key() if windowed else member.fingerprint()}-{digest}"
    if key in memo:
        return memo[key], False
    path = Path(cache_dir) / f"{key}.{'npz' if windowed else 'npy'}" if cache_dir is not None else None
    if path is not None and path.is_file():
        memo[key] = _load_windows(path) if windowed else np.load(path)
        return memo[key], False
    if windowed:
        vectors = member.compute(texts)
    else:
        vectors = np.asarray(member.get_text_embedding_batch(texts, show_progress=show_progress), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if windowed:
            np.savez(path, vectors=np.concatenate(vectors), counts=np.array([len(w) for w in vectors]))
        else:
            np.save(path, vectors)
    memo[key] = vectors
    return vectors, True


def _load_windows(path: Path) -> list[np.ndarray]:
    with np.load(path) as stored:
        return np.split(stored["vectors"], np.cumsum(stored["counts"])[:-1])


def _vector_sets(config: EvalConfig, embedding: PosFairEmbedding, encoder: PosFairEncoder, batch_size: int) -> list:
    """What a config scores: itself, or the members of a dual or windows config.

    A dual config is scored from its plain and calibrated members, each encoded (and cached) on its own;
    the shared pass gives the same vectors (tests/test_dual_encoding.py), and members are shared between
    fusion rules and with the single-vector configurations of the same run. A windows config is scored from
    its document member(s) and its window vectors (MaxSim), shared likewise between configs.
    """
    if not document_mode(config.mode).fused:
        return [embedding]
    kind = DOCUMENT_KINDS[embedding.document_kind]
    members: list = []
    if PLAIN_VECTOR in kind.vectors:
        members.append(
            PosFairEmbedding(embedding.model_name, mode="plain", encoder=encoder, embed_batch_size=batch_size)
        )
    if kind.calibrated:  # never over a wrapped model (check_configs_over_wrapped)
        for calibration in (config.calibration, *config.more_calibrations):
            members.append(
                PosFairEmbedding(
                    embedding.model_name, calibration=calibration, encoder=encoder, embed_batch_size=batch_size
                )
            )
    if config.windows is not None:
        windows_only = config.windows.model_copy(update={"document": "none"})
        only = PosFairEmbedding(
            embedding.model_name, mode="windows", windows=windows_only, encoder=encoder, embed_batch_size=batch_size
        )
        members.append(_WindowMember(only, config.window_source, batch_size))
    return members


def _top_k(scores: np.ndarray, doc_ids: list[str], k: int) -> list[list[str]]:
    top = torch.from_numpy(np.ascontiguousarray(scores)).topk(min(k, len(doc_ids)), dim=1).indices.tolist()
    return [[doc_ids[i] for i in row] for row in top]
