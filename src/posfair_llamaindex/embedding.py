"""``PosFairEmbedding``: a LlamaIndex embedding whose documents are encoded position-fair.

Documents (``get_text_embedding*``) go through the calibrated encoder; queries
(``get_query_embedding``) through the plain one, so search costs nothing extra.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Optional, Union

import numpy as np
from llama_index.core.base.embeddings.base import DEFAULT_EMBED_BATCH_SIZE, BaseEmbedding, Embedding
from llama_index.core.callbacks import CallbackManager
from pydantic import Field, PrivateAttr

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.embedding_pickling import PicklesAsSettings
from posfair_llamaindex.encoding.encoder import PosFairEncoder, TokenizedTexts, check_texts
from posfair_llamaindex.encoding.load_config import LoadConfig
from posfair_llamaindex.encoding.passes import LOOKAHEAD_PASSES, Lookahead
from posfair_llamaindex.encoding.sea import ChunkerConfig, SegmentEmbedAverage
from posfair_llamaindex.encoding.windows import WindowConfig, WindowEmbedder
from posfair_llamaindex.encoding.wrapped import DEFAULT_CONCURRENCY, Precomputed, WrappedEncoder, check_wrapped_mode
from posfair_llamaindex.modes import DOCUMENT_KINDS, HOLDS_EVERY_MODE, DocumentMode, document_mode
from posfair_llamaindex.options import DEFAULT_BATCH_TOKENS, DType, Fusion, LengthLimit, Mode, Pooling
from posfair_llamaindex.tag import ENCODING_VERSION, TAG_SCHEMA, comparable_tag, fingerprint_of
from posfair_llamaindex.version import __version__


def _share_llamaindex_tiktoken_cache() -> None:
    """Point tiktoken at LlamaIndex's bundled cache for the whole process, unless the user chose a cache.

    LlamaIndex sets ``TIKTOKEN_CACHE_DIR`` only while it loads its default tokenizer. The spawned workers of
    ``IngestionPipeline(num_workers=...)`` inherit the environment without it, unpickle SentenceSplitter's
    tokenizer by fetching it from the network, and offline die while reading their task, which CPython's
    pool takes for a closed queue: ``run()`` then waits forever (docs/SCALE.md §4). With the variable set
    they read the same files LlamaIndex ships.
    """
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    import llama_index.core

    cache = os.path.join(os.path.dirname(os.path.abspath(llama_index.core.__file__)), "_static", "tiktoken_cache")
    if os.path.isdir(cache):
        os.environ["TIKTOKEN_CACHE_DIR"] = cache


def _check_setting_types(
    calibration: Optional[CalibrationConfig], chunker: Optional[ChunkerConfig], windows: Optional[WindowConfig]
) -> None:
    """Refuses a settings object of another class than its field's."""
    if calibration is not None and not isinstance(calibration, CalibrationConfig):
        raise TypeError(f"calibration must be a CalibrationConfig, got {type(calibration).__name__}")
    if chunker is not None and not isinstance(chunker, ChunkerConfig):
        raise TypeError(f"chunker must be a ChunkerConfig, got {type(chunker).__name__}")
    if windows is not None and not isinstance(windows, WindowConfig):
        raise TypeError(f"windows must be a WindowConfig, got {type(windows).__name__}")


def _refuse_own_model_settings(
    model_name: Optional[str],
    encoder: Optional[PosFairEncoder],
    *,
    pooling: Optional[str],
    dtype: Optional[str],
    device: Optional[str],
    trust_remote_code: bool,
    text_instruction: Optional[str],
    query_instruction: Optional[str],
    max_length: Union[int, LengthLimit, None],
) -> None:
    """With ``embed_model``: refuses a second model, and the settings of a model loaded here (the wrapped one decides
    them), before the wrapped model is called."""
    if model_name is not None or encoder is not None:
        raise ValueError("give model_name (a model this package loads) or embed_model, not both")
    given = [name for name, value in (("pooling", pooling), ("dtype", dtype), ("device", device)) if value]
    if trust_remote_code:
        given.append("trust_remote_code")
    if text_instruction is not None or query_instruction is not None or max_length is not None:
        given.append("text_instruction, query_instruction and max_length (the wrapped model's own)")
    if given:
        raise ValueError(f"{', '.join(given)} are not used with embed_model: the wrapped model decides them")


def _refuse_wrapped_settings(model_name: Optional[str], wrapped_settings: dict[str, Any]) -> None:
    """Without ``embed_model``: asks for a model, and refuses the settings only a wrapped model takes."""
    if model_name is None:
        raise TypeError("give model_name (a model folder or hub id) or embed_model (a LlamaIndex embedding)")
    given = [name for name, value in wrapped_settings.items() if value is not None]
    if given:
        raise ValueError(f"{', '.join(given)} go with embed_model (a wrapped LlamaIndex embedding)")


def _check_shared_encoder(
    encoder: PosFairEncoder, pooling: Optional[str], max_length: Union[int, LengthLimit, None]
) -> None:
    """A shared encoder is used as loaded: refused when it pools or cuts texts otherwise than was asked."""
    if (
        pooling is not None
        and encoder.pooling != pooling
        or max_length is not None
        and encoder.max_length != encoder.resolve_max_length(max_length)
    ):
        raise ValueError("a shared encoder must already have the requested pooling and max_length")


class PosFairEmbedding(PicklesAsSettings, BaseEmbedding):
    """Position-fair document embeddings with plain queries, on any model either door reaches (DESIGN.md §2.4).

    Args:
        model_name: hub id or local folder of a transformers (optionally sentence-transformers) model.
        calibration: how document attention is calibrated; paper defaults when omitted (in dual mode the
            defaults of :data:`~posfair_llamaindex.modes.DUAL_DEFAULTS` for the model's pooling).
        mode: ``"calibrated"`` (documents calibrated), ``"plain"`` (the unmodified model, for comparison),
            ``"sea"`` (documents chunked with chonkie, chunks embedded plain and averaged), ``"dual"``
            (a plain and a calibrated vector per document from one shared pass, fused at query time) or
            ``"windows"`` (the document vector(s) of ``windows.document`` and a plain vector per window of the
            text, however long; a query scores a document by its best window and its document vector, fused).
        fusion: dual mode's rule for combining a document's two scores: ``"max"``, ``"rrf"`` or ``"sum"``.
            In dual mode a document embedding is the plain vector followed by the calibrated one
            (``2 * dimension`` floats); :func:`~posfair_llamaindex.tagged_vector_store` stores them as two
            named vectors and fuses at query time. A store that holds one vector per node cannot do this.
        chunker: the SEA chunker settings (semantic chunker on the model itself by default).
        windows: windows mode's window size, stride and document vector (:class:`WindowConfig`).
        pooling: ``"first"``, ``"last"`` or ``"mean"``; detected from sentence-transformers files when None.
        max_length: tokens per text, or ``"model_card"`` (sentence-transformers' ``max_seq_length``: what
            ``SentenceTransformer.encode`` and LlamaIndex's ``HuggingFaceEmbedding`` use) or ``"positions"`` (the
            most the model takes); None: ``options.DEFAULT_LENGTH_LIMIT``. Longer texts are truncated with a
            warning (windows mode covers them whole). The number in force is recorded here and in the tag.
        normalize: L2-normalise the vectors.
        query_instruction / text_instruction: prefixes for queries / documents; the model's
            sentence-transformers prompts ("query", "document" or "passage") when None.
        embed_batch_size: how many nodes LlamaIndex hands over per call (its own setting). It does not size the
            forward passes: the texts, windows or chunks of consecutive calls share passes of up to
            ``max_batch_tokens`` padded tokens, longest first.
        max_batch_tokens: padded tokens per forward pass (rows x the longest row); a text longer than this is a
            pass of its own. The default, :data:`~posfair_llamaindex.options.DEFAULT_BATCH_TOKENS`, was chosen on
            two CPU cores (docs/RESULTS.md §8.9); on a GPU a larger budget may pay.
        device / dtype: where and in which precision the model runs (``"float32"``, ``"float16"``, ``"bfloat16"``).
        trust_remote_code: run the model's own code from its folder (``config.json``'s ``auto_map``); off by
            default, since that code executes with your permissions.
        embed_model: any LlamaIndex ``BaseEmbedding`` (``OpenAIEmbedding``, ``OpenAILikeEmbedding``,
            ``HuggingFaceEmbedding``, ...) in place of ``model_name``, for modes ``"windows"``, ``"sea"`` and
            ``"plain"``: it makes each window's (chunk's) plain vector and each query's, through its own query path.
            Calibrated and dual need the model's attention and are refused (encoding/wrapped.py).
        tokenizer / max_input_tokens: the wrapped model's tokens and its tokens per input, where they cannot be
            read off it (a folder or its ``tokenizer.json``, a tiktoken encoding name, or a callable giving a text's
            token spans; :class:`~posfair_llamaindex.encoding.wrapped.WrappedEncoder`).
        max_request_inputs / max_request_tokens / max_concurrency: what one request to the wrapped model carries
            (OpenAI: 2,048 inputs, 300,000 tokens) and how many run at once on the async path.
    """

    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig, description="Calibration settings.")
    mode: Mode = Field(default="calibrated", description="How documents are encoded.")
    chunker: Optional[ChunkerConfig] = Field(default=None, description="SEA chunker settings (mode 'sea').")
    windows: Optional[WindowConfig] = Field(default=None, description="Window settings (mode 'windows').")
    fusion: Optional[Fusion] = Field(default=None, description="Score fusion rule (modes 'dual' and 'windows').")
    pooling: Optional[Pooling] = Field(default=None, description="Pooling; detected if None.")
    max_length: Optional[Union[Annotated[int, Field(ge=2)], LengthLimit]] = Field(
        default=None, description="Tokens per text, or which limit: 'model_card' or 'positions'."
    )
    normalize: bool = Field(default=True, description="Whether vectors are L2-normalised.")
    query_instruction: Optional[str] = Field(default=None, description="Prefix for queries.")
    text_instruction: Optional[str] = Field(default=None, description="Prefix for documents.")
    device: Optional[str] = Field(default=None, description="Torch device; CUDA when available if None.")
    dtype: Optional[DType] = Field(default=None, description="Model precision.")
    trust_remote_code: bool = Field(default=False, description="Allow model code from the hub.")
    max_batch_tokens: int = Field(
        default=DEFAULT_BATCH_TOKENS, ge=1, description="Padded tokens per forward pass (rows x the longest row)."
    )
    max_input_tokens: Optional[int] = Field(default=None, description="A wrapped model's tokens per input.")
    max_request_inputs: Optional[int] = Field(default=None, description="Inputs per request to a wrapped model.")
    max_request_tokens: Optional[int] = Field(default=None, description="Tokens per request to a wrapped model.")
    max_concurrency: int = Field(
        default=DEFAULT_CONCURRENCY, ge=1, description="Requests in flight to a wrapped model (async)."
    )

    _encoder: PosFairEncoder = PrivateAttr()
    _sea: Optional[SegmentEmbedAverage] = PrivateAttr(default=None)
    _windows: Optional[WindowEmbedder] = PrivateAttr(default=None)

    def __init__(
        self,
        model_name: Union[str, os.PathLike, None] = None,
        calibration: Optional[CalibrationConfig] = None,
        mode: Mode = "calibrated",
        chunker: Optional[ChunkerConfig] = None,
        fusion: Optional[Fusion] = None,
        pooling: Optional[Pooling] = None,
        max_length: Union[int, LengthLimit, None] = None,
        normalize: bool = True,
        query_instruction: Optional[str] = None,
        text_instruction: Optional[str] = None,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        max_batch_tokens: int = DEFAULT_BATCH_TOKENS,
        windows: Optional[WindowConfig] = None,
        device: Optional[str] = None,
        dtype: Optional[DType] = None,
        trust_remote_code: bool = False,
        callback_manager: Optional[CallbackManager] = None,
        encoder: Optional[PosFairEncoder] = None,
        embed_model: Optional[BaseEmbedding] = None,
        tokenizer: Any = None,
        max_input_tokens: Optional[int] = None,
        max_request_inputs: Optional[int] = None,
        max_request_tokens: Optional[int] = None,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        **kwargs: Any,
    ) -> None:
        # set here, not at import: importing the package leaves the environment alone, and a pipeline's workers
        # start after the embedding they are handed was made
        _share_llamaindex_tiktoken_cache()
        if isinstance(model_name, os.PathLike):
            model_name = os.fspath(model_name)
        _check_setting_types(calibration, chunker, windows)
        spec = document_mode(mode)
        wrapped_settings = dict(
            tokenizer=tokenizer,
            max_input_tokens=max_input_tokens,
            max_request_inputs=max_request_inputs,
            max_request_tokens=max_request_tokens,
        )
        if embed_model is not None:
            # refused by name before the wrapped model is called (it may be a paid API)
            check_wrapped_mode(embed_model, mode, windows.document if windows is not None else None)
            _refuse_own_model_settings(
                model_name,
                encoder,
                pooling=pooling,
                dtype=dtype,
                device=device,
                trust_remote_code=trust_remote_code,
                text_instruction=text_instruction,
                query_instruction=query_instruction,
                max_length=max_length,
            )
            model_name = str(getattr(embed_model, "model_name", None) or type(embed_model).__name__)
        else:
            _refuse_wrapped_settings(model_name, wrapped_settings)
        spec.check_settings(chunker=chunker, windows=windows, fusion=fusion)
        # validate the cheap settings before loading any weights
        super().__init__(
            model_name=model_name,
            calibration=calibration or CalibrationConfig(),
            mode=mode,
            chunker=chunker if chunker is not None or spec.settings != "chunker" else ChunkerConfig(),
            windows=windows if windows is not None or spec.settings != "windows" else WindowConfig(),
            fusion=fusion,
            pooling=pooling,
            max_length=max_length,
            normalize=normalize,
            query_instruction=query_instruction,
            text_instruction=text_instruction,
            embed_batch_size=embed_batch_size,
            max_batch_tokens=max_batch_tokens,
            device=device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            callback_manager=callback_manager,
            max_input_tokens=max_input_tokens,
            max_request_inputs=max_request_inputs,
            max_request_tokens=max_request_tokens,
            max_concurrency=max_concurrency,
            **kwargs,
        )
        if embed_model is not None:
            encoder = WrappedEncoder(embed_model, max_concurrency=max_concurrency, **wrapped_settings)
        elif encoder is None:
            encoder = self.load_config.encoder(model_name)
        else:
            _check_shared_encoder(encoder, pooling, max_length)
        self._resolve_after_load(encoder, calibration_given=calibration is not None)

    def _resolve_after_load(self, encoder: PosFairEncoder, calibration_given: bool) -> None:
        """Fill in what the model decides, now that it is loaded: the mode's defaults for its pooling (strength and
        fusion, where none were given), then pooling, max_length and the two prompts, so the tag says what ran."""
        spec = self.document_mode
        window_document = self.windows.document if self.windows is not None else None
        defaults = spec.defaults(encoder.pooling, window_document)
        if defaults.strength is not None and not calibration_given:
            self.calibration = CalibrationConfig(strength=defaults.strength)
        if defaults.fusion is not None and self.fusion is None:
            self.fusion = defaults.fusion
        spec.check_strength(self.calibration.strength, window_document)
        if self.calibrates:
            encoder.check_calibration(self.calibration)
        self._encoder = encoder
        if spec.settings == "chunker":
            self._sea = SegmentEmbedAverage(encoder, self.chunker)
        if spec.windows:
            self._windows = WindowEmbedder(encoder, self.windows)
        # record what was resolved, so the tag says what actually ran
        self.pooling = encoder.pooling
        self.max_length = encoder.max_length
        query_prompt, document_prompt = encoder.default_prompts
        if self.query_instruction is None:
            self.query_instruction = query_prompt
        if self.text_instruction is None:
            self.text_instruction = document_prompt
        if self._windows is not None:
            self._windows.splitter.check_fits(self.text_instruction or "")

    @classmethod
    def class_name(cls) -> str:
        return "PosFairEmbedding"

    @property
    def is_wrapped(self) -> bool:
        """Whether a LlamaIndex embedding (``embed_model``) makes the vectors, rather than a model loaded here."""
        # read without loading: an embedding received pickled is never a wrapped one (embedding_pickling.py)
        private = object.__getattribute__(self, "__pydantic_private__") or {}
        return isinstance(private.get("_encoder"), WrappedEncoder)

    @property
    def embed_model(self) -> Optional[BaseEmbedding]:
        """The wrapped LlamaIndex embedding, or None."""
        return self._encoder.embed_model if self.is_wrapped else None

    @property
    def encoder(self) -> PosFairEncoder:
        """The loaded encoder; share it between embeddings of one model to load the weights once."""
        return self._encoder

    @property
    def dimension(self) -> int:
        """Size of one vector (a query's, and each of a dual document's two)."""
        return self._encoder.dimension

    @property
    def load_config(self) -> LoadConfig:
        """How this embedding's model is loaded and run, as the one value evaluation, audits and upgrades take."""
        return LoadConfig(
            pooling=self.pooling,
            max_length=self.max_length,
            device=self.device,
            dtype=self.dtype,
            trust_remote_code=self.trust_remote_code,
            batch_size=self.embed_batch_size,
            max_batch_tokens=self.max_batch_tokens,
        )

    @property
    def document_mode(self) -> DocumentMode:
        """What this mode stores and how its document embedding is laid out (:mod:`posfair_llamaindex.modes`)."""
        return document_mode(self.mode)

    @property
    def is_dual(self) -> bool:
        return self.mode == "dual"

    @property
    def document_kind(self) -> str:
        """The vector(s) kept for a whole document: the mode's own, or in windows mode ``windows.document``."""
        return self.document_mode.document or self.windows.document

    @property
    def calibrates(self) -> bool:
        """Whether some document vector is calibrated (so ``calibration`` is part of what the vectors mean)."""
        return DOCUMENT_KINDS[self.document_kind].calibrated

    @property
    def document_vectors(self) -> int:
        """How many whole-document vectors lead a document embedding (windows follow in windows mode)."""
        return DOCUMENT_KINDS[self.document_kind].count

    @property
    def document_dimension(self) -> int:
        """Size of what ``get_text_embedding`` returns: ``2 * dimension`` in dual mode. In windows mode the
        document vectors are followed by a varying number of windows; this is then the size of the first part."""
        return self.dimension * self.document_vectors

    def split_dual(self, embedding: Embedding) -> tuple:
        """A dual document embedding as ``(plain, calibrated)``."""
        if not self.is_dual:
            raise ValueError(f"only dual embeddings have two halves; this one is mode {self.mode!r}")
        if len(embedding) != self.document_dimension:
            raise ValueError(f"a dual embedding has {self.document_dimension} floats, got {len(embedding)}")
        return list(embedding[: self.dimension]), list(embedding[self.dimension :])

    @property
    def segmenter(self) -> Optional[SegmentEmbedAverage]:
        """The SEA chunk-and-average embedder (mode ``"sea"`` only), e.g. to inspect ``segmenter.split(text)``."""
        return self._sea

    # ------------------------------------------------------------------ what produced the vectors
    def tag(self) -> dict[str, Any]:
        """Everything that decides what a document vector means, plus where it came from.

        Keys in :data:`INFORMATIONAL_TAG_KEYS` (package version, model path) are recorded but do not take
        part in :meth:`fingerprint`: the same weights loaded from another folder make the same vectors.
        """
        tag = {
            "schema": TAG_SCHEMA,
            "encoding_version": ENCODING_VERSION,
            "package_version": __version__,
            "model": self.model_name,
            "mode": self.mode,
            "calibration": self.calibration.tag() if self.calibrates else None,
            "chunker": self._sea.tag() if self._sea is not None else None,
            "normalize": self.normalize,
            "text_instruction": self.text_instruction,
            "query_instruction": self.query_instruction,
            # model_weights, pooling, dimension, max_length; prompt_in_pooling and dump_tokens where they apply
            **self._encoder.tag_facts(self.text_instruction or ""),
        }
        # the keys below appear only where they apply, so that every other tag (and fingerprint) stays as it was
        if self.fusion is not None:
            tag["fusion"] = self.fusion
        if self.windows is not None:
            tag["windows"] = self.windows.tag()
        if self.is_wrapped:  # how the command line rebuilds it (informational: tag.INFORMATIONAL_TAG_KEYS)
            tag["embedding_source"] = self._encoder.source()
        return tag

    def fingerprint(self) -> str:
        return fingerprint_of(comparable_tag(self.tag()))

    def to_payload(self) -> dict[str, Any]:
        payload = super().to_payload()
        payload.update(mode=self.mode, pooling=self.pooling, posfair_fingerprint=self.fingerprint())
        payload["calibration"] = self.calibration.tag() if self.calibrates else None
        if self.fusion is not None:
            payload["fusion"] = self.fusion
        if self.windows is not None:
            payload["windows"] = self.windows.tag()
        return payload

    # ------------------------------------------------------------------ embedding
    def _documents(self, texts: list[str]) -> list[Embedding]:
        """Document embeddings; inside a batch call, served by its lookahead (see :meth:`get_text_embedding_batch`)."""
        batch = _BATCH.get(_NO_BATCH)
        if batch.owner is self and batch.lookahead is not None and batch.lookahead.holds(texts):
            return batch.lookahead.embed(texts)
        return self._encode_documents(texts, batch)

    def _encode_documents(self, texts: list[str], batch: _Batch) -> list[Embedding]:
        prompt = self.text_instruction or ""
        budget = self.max_batch_tokens
        if self._sea is not None:
            checked = check_texts(texts)
            return self._sea.encode(checked, prompt=prompt, max_batch_tokens=budget, normalize=self.normalize).tolist()
        texts = check_texts(texts)
        vectors = np.zeros((len(texts), 0), dtype=np.float32)
        if self.document_vectors:
            vectors = self._encoder.encode(
                texts,
                self.calibration if self.calibrates else None,
                max_batch_tokens=budget,
                normalize=self.normalize,
                dual=self.document_kind == "dual",
                prompt=prompt,
                tokenized=batch.tokens_of(self, texts, prompt),
            )
        if self._windows is None:
            return vectors.tolist()
        named = {"owners": batch.positions(texts)} if self.is_wrapped else {}
        windows = self._windows.encode(texts, prompt=prompt, max_batch_tokens=budget, normalize=self.normalize, **named)
        return [np.concatenate([d, w.ravel()]).tolist() for d, w in zip(vectors, windows, strict=True)]

    async def _aencode_wrapped(self, texts: list[str], batch: _Batch) -> list[Embedding]:
        """A wrapped embedding's document embeddings on its async path: concurrent requests (windows and plain);
        SEA chunks with chonkie, which is synchronous, in a worker thread."""
        if self._sea is not None:
            return await asyncio.to_thread(self._encode_documents, texts, batch)
        owners = batch.positions(texts)
        vectors = np.zeros((len(texts), 0), dtype=np.float32)
        if self.document_vectors:
            vectors = await self._encoder.aencode(texts, normalize=self.normalize, owners=owners)
        if self._windows is None:
            return vectors.tolist()
        windows = await self._windows.aencode(texts, normalize=self.normalize, owners=owners)
        return [np.concatenate([d, w.ravel()]).tolist() for d, w in zip(vectors, windows, strict=True)]

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._encoder.encode_query(query, self.query_instruction or "", normalize=self.normalize).tolist()

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._documents([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._documents(texts)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        if self.is_wrapped:
            return (await self._encoder.aencode_query(query, normalize=self.normalize)).tolist()
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)

    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """LlamaIndex batching (its events, cache and rate limiter per ``embed_batch_size`` slice), over texts
        sorted by length, with forward passes sized by tokens across the slices.

        The texts are tokenized once here. The first slice is encoded together with the texts after it, up to
        a few passes' worth of tokens, and later slices are served from that, so that ten short nodes per slice
        still make full passes.
        """
        self._refuse_a_single_vector_store()
        order, batch = self._batch_plan(texts)
        context = _BATCH.set(batch)
        try:
            vectors = super().get_text_embedding_batch([texts[i] for i in order], show_progress=show_progress, **kwargs)
        finally:
            _BATCH.reset(context)
        return _unsort(vectors, order)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        self._refuse_a_single_vector_store()
        order, batch = self._batch_plan(texts)
        if self.is_wrapped and self.embeddings_cache is None:
            # every request of the call up front, concurrently; LlamaIndex's slices are then served from them
            ordered = list(dict.fromkeys(texts[i] for i in order))
            done = await self._aencode_wrapped(ordered, batch)
            batch = dataclasses.replace(batch, lookahead=Precomputed(ordered, done))
        context = _BATCH.set(batch)  # the worker threads of each slice see it too (copied context)
        try:
            vectors = await super().aget_text_embedding_batch(
                [texts[i] for i in order], show_progress=show_progress, **kwargs
            )
        finally:
            _BATCH.reset(context)
        return _unsort(vectors, order)

    def _refuse_a_single_vector_store(self) -> None:
        """Dual and windows embeddings are several vectors per document, which only a posfair Qdrant store holds.

        Handed to any other store (LlamaIndex's in-memory one, say) they would be encoded in full and then fail at
        the first query, far from the cause. So when LlamaIndex's index or ingestion pipeline is the caller, its
        store is looked at before the first document is encoded (read from the caller's frame: LlamaIndex passes
        the embedding no store)."""
        mode = self.document_mode
        if not mode.named_vectors:
            return
        store = _calling_vector_store()
        if store is None or getattr(store, HOLDS_EVERY_MODE, False):
            return
        holds = mode.vectors_per_document(self.windows.document if mode.windows else None)
        raise ValueError(
            f"PosFairEmbedding(mode={self.mode!r}) makes {holds} per document, but the index's vector store is "
            f"{type(store).__name__}, which keeps one vector per node: its queries would fail after the whole corpus "
            "was encoded, so nothing was encoded. Store the index in a posfair Qdrant collection: "
            "StorageContext.from_defaults(vector_store=tagged_vector_store(EdgeQdrantClient(path='./posfair_qdrant'), "
            "'docs', embed_model)), or use mode='calibrated' with a one-vector store"
        )

    def _batch_plan(self, texts: list[str]) -> tuple[list[int], _Batch]:
        """The order LlamaIndex is handed the texts in (longest first) and the call's tokens and lookahead."""
        # checked up front: a bad text anywhere fails the call before any batch is embedded
        prompt = self.text_instruction or ""
        checked = check_texts(texts)
        tokenized = None
        if self.is_wrapped:  # the wrapped model's tokens, counted to order the texts and plan its requests
            lengths = self._encoder.token_lengths(checked)
        elif self._sea is not None:  # SEA tokenizes its chunks, not the documents: the lengths are all it needs
            lengths = self._encoder.token_lengths([prompt + text for text in checked])
        else:
            tokenized = self._encoder.tokenize_texts(checked, prompt)
            lengths = tokenized.lengths
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        # what a text costs a pass: its tokens, cut at the limit unless windows or chunks cover it whole
        whole = self._windows is not None or self._sea is not None
        costs = [lengths[i] if whole else min(lengths[i], self._encoder.max_length) for i in order]
        batch = _Batch(self, prompt, tokenized, {text: i for i, text in enumerate(texts)}, None)
        if self.embeddings_cache is None:  # with LlamaIndex's cache a slice holds only what the cache lacks
            encode = functools.partial(self._encode_documents, batch=batch)
            stretch = LOOKAHEAD_PASSES * self.max_batch_tokens
            if self.is_wrapped:  # the whole call at once: its windows go in the fewest requests the model takes
                stretch = sum(costs) + 1
            batch = dataclasses.replace(batch, lookahead=Lookahead([texts[i] for i in order], costs, stretch, encode))
        return order, batch

    # crossing a process boundary as settings, never as weights: embedding_pickling.py
    _unpickled: Optional[dict[str, Any]] = PrivateAttr(default=None)

    def constructor_settings(self) -> dict[str, Any]:
        """Keyword arguments that rebuild this embedding, with what was resolved at load time made explicit."""
        if self.is_wrapped:
            wrapped = self._encoder
            return {
                "embed_model": wrapped.embed_model,
                "mode": self.mode,
                "chunker": self.chunker,
                "windows": self.windows,
                "fusion": self.fusion,
                "normalize": self.normalize,
                "embed_batch_size": self.embed_batch_size,
                "tokenizer": wrapped.tokenizer_setting,
                "max_input_tokens": self.max_input_tokens,
                "max_request_inputs": self.max_request_inputs,
                "max_request_tokens": self.max_request_tokens,
                "max_concurrency": self.max_concurrency,
            }
        return {
            "model_name": self.model_name,
            "calibration": self.calibration,
            "mode": self.mode,
            "chunker": self.chunker,
            "windows": self.windows,
            "fusion": self.fusion,
            "pooling": self.pooling,
            "max_length": self.max_length,
            "normalize": self.normalize,
            "query_instruction": self.query_instruction,
            "text_instruction": self.text_instruction,
            "embed_batch_size": self.embed_batch_size,
            "max_batch_tokens": self.max_batch_tokens,
            "device": self.device,
            "dtype": self.dtype,
            "trust_remote_code": self.trust_remote_code,
        }


@dataclass(frozen=True)
class _Batch:
    """One ``get_text_embedding_batch`` call: its texts' tokens and the lookahead that serves LlamaIndex's slices."""

    owner: Optional[PosFairEmbedding]
    prompt: str
    tokenized: Optional[TokenizedTexts]
    index: dict
    lookahead: Optional[Lookahead]

    def tokens_of(self, embedding: PosFairEmbedding, texts: list[str], prompt: str) -> Optional[TokenizedTexts]:
        """These texts' tokens when this call holds all of them (for this embedding and prompt), else None."""
        if (
            self.owner is not embedding
            or self.tokenized is None
            or self.prompt != prompt
            or not all(text in self.index for text in texts)
        ):
            return None
        return self.tokenized.select([self.index[text] for text in texts])

    def positions(self, texts: list[str]) -> list[int]:
        """Where these texts stand in the call (the nodes a failed request names); their own order outside one."""
        if not all(text in self.index for text in texts):
            return list(range(len(texts)))
        return [self.index[text] for text in texts]


_NO_BATCH = _Batch(None, "", None, {}, None)
# set for the length of a get_text_embedding_batch call; a context variable, so threads and tasks stay apart
_BATCH: ContextVar[_Batch] = ContextVar("posfair_batch", default=_NO_BATCH)


def _calling_vector_store() -> Optional[Any]:
    """The vector store of the LlamaIndex index or ingestion pipeline up the call stack, or None when neither calls.

    LlamaIndex's modules are looked up only if already imported: a caller that is one of them has loaded it."""
    index = sys.modules.get("llama_index.core.indices.vector_store.base")
    pipeline = sys.modules.get("llama_index.core.ingestion.pipeline")
    callers = tuple(
        cls
        for cls in (getattr(index, "VectorStoreIndex", None), getattr(pipeline, "IngestionPipeline", None))
        if cls is not None
    )
    if not callers:
        return None
    frame = sys._getframe(2)
    for _ in range(_CALLER_DEPTH):
        if frame is None:
            return None
        caller = frame.f_locals.get("self")
        if isinstance(caller, callers):
            # an index keeps its store in _vector_store; a pipeline in vector_store (None: it stores nothing)
            return getattr(caller, "_vector_store", None) or getattr(caller, "vector_store", None)
        frame = frame.f_back
    return None


_CALLER_DEPTH = 40  # frames between LlamaIndex's index or pipeline and this embedding's batch call (about 10)


def _unsort(values: list[Embedding], order: list[int]) -> list[Embedding]:
    result: list[Embedding] = [None] * len(order)  # type: ignore[list-item]
    for sorted_position, original_position in enumerate(order):
        result[original_position] = values[sorted_position]
    return result
