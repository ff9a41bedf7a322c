"""SEA (segment, embed, average): the chunk-and-average baseline, with chonkie doing the chunking.

Each document is split into chunks, every chunk is embedded with the plain model, the normalised chunk
vectors are averaged and the average is normalised. The default chunker is chonkie's semantic chunker
running on this package's own plain encoder (no download).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from posfair_llamaindex.options import DEFAULT_CHUNK_TOKENS, ChunkerKind

if TYPE_CHECKING:  # chonkie and the model's libraries load when SEA chunks, not when its settings are checked
    from posfair_llamaindex.encoding.encoder import PosFairEncoder


class ChunkerConfig(BaseModel):
    """Which chonkie chunker splits documents in SEA mode, and how.

    ``chunk_size`` counts tokens of the model's tokenizer without special tokens; None means 128
    (the paper's basket size, so SEA and calibration work at the same granularity), capped by what the
    model can take. ``threshold`` and ``similarity_window`` are for the semantic chunker, ``overlap``
    for the token and sentence chunkers.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ChunkerKind = Field(default="semantic", description="chonkie chunker.")
    chunk_size: Optional[StrictInt] = Field(default=None, ge=1, description="Maximum tokens per chunk.")
    threshold: float = Field(default=0.5, gt=0.0, lt=1.0, description="Semantic similarity threshold.")
    similarity_window: StrictInt = Field(default=3, ge=1, description="Sentences compared by the semantic chunker.")
    overlap: StrictInt = Field(default=0, ge=0, description="Overlapping tokens (token and sentence chunkers).")

    def tag(self, resolved_chunk_size: int) -> dict:
        data = {"kind": self.kind, "chunk_size": resolved_chunk_size}
        if self.kind == "semantic":
            data.update(threshold=self.threshold, similarity_window=self.similarity_window)
        if self.kind in ("token", "sentence"):
            data["overlap"] = self.overlap
        return data


@functools.cache
def _encoder_embeddings_class() -> type:
    """:class:`EncoderEmbeddings`, defined on first use: it subclasses chonkie's, and importing chonkie takes a
    noticeable part of a second that only SEA mode needs."""
    from chonkie import BaseEmbeddings

    class EncoderEmbeddings(BaseEmbeddings):
        """chonkie's embeddings interface over a plain :class:`PosFairEncoder`, so chunking downloads nothing."""

        def __init__(self, encoder: PosFairEncoder, batch_size: int = 32) -> None:
            super().__init__()
            self._encoder = encoder
            self._batch_size = batch_size

        def embed(self, text: str) -> np.ndarray:
            return self.embed_batch([text])[0]

        def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
            # chonkie may hand over whitespace-only fragments; they are encoded as the empty text
            cleaned = [text if text.strip() else "" for text in texts]
            vectors = np.empty((len(cleaned), self._encoder.dimension), dtype=np.float32)
            for start in range(0, len(cleaned), self._batch_size):
                batch = cleaned[start : start + self._batch_size]
                vectors[start : start + len(batch)] = self._encoder.encode_batch(batch, None)
            return list(vectors)

        @property
        def dimension(self) -> int:
            return self._encoder.dimension

        def get_tokenizer(self) -> Any:
            return self._encoder.tokenizer

    # found by name like a class written at module level (pickle, reprs): the module's __getattr__ answers
    EncoderEmbeddings.__qualname__ = EncoderEmbeddings.__name__
    return EncoderEmbeddings


def __getattr__(name: str) -> Any:
    """``EncoderEmbeddings`` stays importable from here; it is made by :func:`_encoder_embeddings_class`."""
    if name == "EncoderEmbeddings":
        return _encoder_embeddings_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SegmentEmbedAverage:
    """Embeds documents as the normalised mean of their normalised chunk embeddings."""

    def __init__(self, encoder: PosFairEncoder, config: Optional[ChunkerConfig] = None) -> None:
        self.encoder = encoder
        self.config = config or ChunkerConfig()
        limit = encoder.content_limit
        size = self.config.chunk_size if self.config.chunk_size is not None else min(DEFAULT_CHUNK_TOKENS, limit)
        if size > limit:
            raise ValueError(
                f"chunk_size={size} tokens does not fit {encoder.model_name}: at most {limit} "
                f"(max_length {encoder.max_length} minus {encoder.max_length - limit} special tokens)"
            )
        if self.config.kind in ("token", "sentence") and self.config.overlap >= size:
            raise ValueError(f"overlap={self.config.overlap} must be smaller than chunk_size={size}")
        self.chunk_size = size
        self.chunker = self._build_chunker()

    def _build_chunker(self):
        from chonkie import RecursiveChunker, SemanticChunker, SentenceChunker, TokenChunker

        kind, size, tokenizer = self.config.kind, self.chunk_size, self.encoder.tokenizer
        if kind == "semantic":
            return SemanticChunker(
                embedding_model=_encoder_embeddings_class()(self.encoder),
                threshold=self.config.threshold,
                chunk_size=size,
                similarity_window=self.config.similarity_window,
            )
        if kind == "sentence":
            return SentenceChunker(tokenizer=tokenizer, chunk_size=size, chunk_overlap=self.config.overlap)
        if kind == "recursive":
            return RecursiveChunker(tokenizer=tokenizer, chunk_size=size)
        return TokenChunker(tokenizer=tokenizer, chunk_size=size, chunk_overlap=self.config.overlap)

    def tag(self) -> dict:
        return self.config.tag(self.chunk_size)

    def split(self, text: str) -> list[str]:
        """The chunks of one document; a document chonkie leaves empty-handed is one chunk."""
        chunks = [chunk.text for chunk in self.chunker.chunk(text) if chunk.text.strip()]
        return chunks or [text]

    def encode(
        self,
        texts: Sequence[str],
        *,
        prompt: str = "",
        batch_size: Optional[int] = None,
        max_batch_tokens: Optional[int] = None,
        normalize: bool = True,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Embed documents: chunk, plain-encode every chunk (batched across documents), average.

        ``prompt`` goes in front of every chunk, since each chunk is encoded as a document of its own.
        """
        pieces = [self.split(text) for text in texts]
        flat = [chunk for chunks in pieces for chunk in chunks]
        chunk_vectors = self.encoder.encode(
            flat,
            None,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
            normalize=True,
            show_progress=show_progress,
            prompt=prompt,
        )
        result = np.empty((len(texts), self.encoder.dimension), dtype=np.float32)
        start = 0
        for row, chunks in enumerate(pieces):
            result[row] = chunk_vectors[start : start + len(chunks)].mean(axis=0)
            start += len(chunks)
        if normalize:
            result /= np.linalg.norm(result, axis=1, keepdims=True).clip(min=1e-12)
        return result
