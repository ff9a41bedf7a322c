"""The fused ranking of two scores per document, by brute force: what a dual or windows query must return."""

from __future__ import annotations

import asyncio

import numpy as np
from llama_index.core import StorageContext, VectorStoreIndex

from posfair_llamaindex.options import RRF_K
from posfair_llamaindex.qdrant import atagged_vector_store


def brute_force(ids, first, second, fusion, k):
    """The top ``k`` ids and fused scores of ``first`` and ``second`` (one score each per id) by ``fusion``."""
    if fusion == "max":
        fused = np.maximum(first, second)
    elif fusion == "sum":
        fused = first + second
    else:
        fused = np.zeros(len(ids))
        for scores in (first, second):
            for rank, index in enumerate(np.argsort(-scores)):
                fused[index] += 1.0 / (RRF_K + rank)
    order = np.argsort(-fused)[:k]
    return [ids[i] for i in order], fused[order]


def async_index_run(qdrant, embed_model, nodes, question, k):
    """Index ``nodes`` through an async client and retrieve ``question``: the hits and every stored point."""

    async def run():
        aclient = qdrant.make_aclient()
        name = qdrant.collection()
        store = await atagged_vector_store(aclient, name, embed_model)
        index = VectorStoreIndex(
            nodes,
            embed_model=embed_model,
            storage_context=StorageContext.from_defaults(vector_store=store),
            use_async=True,
        )
        hits = await index.as_retriever(similarity_top_k=k).aretrieve(question)
        points, _ = await aclient.scroll(name, limit=100, with_vectors=True)
        await aclient.close()
        return hits, points

    return asyncio.run(run())
