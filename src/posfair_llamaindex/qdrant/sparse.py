"""An offline sparse encoder for hybrid search: BM25 term weights over the embedding model's own tokenizer.

LlamaIndex's default sparse encoders (fastembed's SPLADE or BM25) download their model files at first use; this
one needs nothing but the tokenizer the dense model already has. Documents get BM25's saturated term
frequency, ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_length))``, per word piece; queries get 1 per
distinct word piece; the inverse document frequency comes from Qdrant itself (``Modifier.IDF``, computed over
the collection at query time), so adding documents never changes the stored vectors.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from qdrant_client.http import models as rest

# Okapi BM25's usual constants; avg_length is fastembed's Qdrant/bm25 default (a corpus-independent length norm)
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75
DEFAULT_AVG_LENGTH = 256.0


class WordPieceBM25:
    """``documents`` and ``queries`` are LlamaIndex's ``sparse_doc_fn`` and ``sparse_query_fn``.

    Pass ``sparse_config=bm25.sparse_config()`` too, so that the collection applies IDF. The collection's tag
    records :attr:`posfair_sparse_tag` (the tokenizer's vocabulary hash and the constants), so a store with
    another tokenizer or other constants is refused on that collection.
    """

    def __init__(
        self, tokenizer: Any, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B, avg_length: float = DEFAULT_AVG_LENGTH
    ) -> None:
        if k1 < 0 or not 0 <= b <= 1 or avg_length <= 0:
            raise ValueError(f"need k1 >= 0, 0 <= b <= 1 and avg_length > 0, got k1={k1}, b={b}, avg={avg_length}")
        self.tokenizer, self.k1, self.b, self.avg_length = tokenizer, float(k1), float(b), float(avg_length)
        vocabulary = json.dumps(sorted(tokenizer.get_vocab().items()), separators=(",", ":"))
        digest = hashlib.sha256(vocabulary.encode("utf-8")).hexdigest()[:12]
        self.posfair_sparse_tag = f"wordpiece-bm25:vocab={digest}:k1={self.k1:g}:b={self.b:g}:avg={self.avg_length:g}"

    @classmethod
    def for_embedding(cls, embed_model: Any, **constants: float) -> WordPieceBM25:
        """The encoder over a ``PosFairEmbedding``'s tokenizer."""
        return cls(embed_model.encoder.tokenizer, **constants)

    @staticmethod
    def sparse_config() -> rest.SparseVectorParams:
        return rest.SparseVectorParams(index=rest.SparseIndexParams(), modifier=rest.Modifier.IDF)

    def _pieces(self, texts: list[str]) -> list[list[int]]:
        # every piece counts, however long the text: no truncation, no special tokens
        return self.tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]

    def documents(self, texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
        indices, values = [], []
        for ids in self._pieces(texts):
            counts = Counter(ids)
            norm = self.k1 * (1 - self.b + self.b * len(ids) / self.avg_length)
            ordered = sorted(counts)
            indices.append(ordered)
            values.append([counts[i] * (self.k1 + 1) / (counts[i] + norm) for i in ordered])
        return indices, values

    def queries(self, texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
        indices = [sorted(set(ids)) for ids in self._pieces(texts)]
        return indices, [[1.0] * len(i) for i in indices]
