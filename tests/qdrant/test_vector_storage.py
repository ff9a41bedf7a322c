"""How a collection stores its vectors (``vector_storage``): the default for windows, old collections, refusals."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery
from qdrant_client.http import models as rest

from posfair_llamaindex import PosFairEmbedding, tagged_vector_store
from posfair_llamaindex.errors import CollectionTagMismatchError
from posfair_llamaindex.qdrant.collection import METADATA_KEY, collection_tag
from posfair_llamaindex.qdrant.vector_layout import MULTIVECTOR_HNSW_EF, layout_of_tag
from posfair_llamaindex.qdrant.vector_storage import (
    DEFAULT_OVERSAMPLING,
    VectorStorage,
    as_storage,
    storage_by_name,
    stored_types,
)
from tests.qdrant.conftest import make_nodes


@pytest.fixture(scope="module")
def tiny_windows(tiny_model_dir) -> PosFairEmbedding:
    from posfair_llamaindex.encoding.windows import WindowConfig

    return PosFairEmbedding(
        tiny_model_dir("bert"), mode="windows", windows=WindowConfig(size=16, document="none"), device="cpu"
    )


def windows_nodes(dimension: int, count: int = 6):
    nodes = make_nodes(count, 2 * dimension)  # two windows a node
    return nodes


def test_the_model_is_explicit_and_refuses_bad_values():
    assert as_storage("int8") == VectorStorage(type="int8")
    assert as_storage({"type": "binary", "oversampling": 3}).search_oversampling == 3.0
    assert VectorStorage(type="int8").search_oversampling == DEFAULT_OVERSAMPLING["int8"]
    with pytest.raises(ValueError, match="types: float32, float16, int8, binary"):
        as_storage("int4")
    with pytest.raises(ValueError, match="oversampling"):
        VectorStorage(type="float16", oversampling=2.0)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        as_storage({"type": "int8", "oversampling": 0.5})
    with pytest.raises(TypeError, match="vector_storage must be"):
        as_storage(8)
    with pytest.raises(ValueError, match="exactly this collection's dense vectors"):
        storage_by_name({"plain": "int8"}, ("plain", "calibrated"))
    assert storage_by_name({"plain": "int8", "calibrated": "float16"}, ("plain", "calibrated"))["calibrated"] == (
        VectorStorage(type="float16")
    )


def test_quantized_storage_is_collection_config_and_search_params():
    base = rest.VectorParams(size=8, distance=rest.Distance.COSINE)
    int8 = VectorStorage(type="int8").apply(base)
    assert int8.on_disk is True and int8.quantization_config.scalar.type == rest.ScalarType.INT8
    assert int8.quantization_config.scalar.always_ram is True
    assert VectorStorage(type="float16").apply(base).datatype == rest.Datatype.FLOAT16
    assert VectorStorage(type="binary").apply(base).quantization_config.binary.always_ram is True
    params = VectorStorage(type="binary", oversampling=6, rescore=False).search_params(None)
    assert params.quantization == rest.QuantizationSearchParams(rescore=False, oversampling=6.0)
    exact = rest.SearchParams(exact=True)
    assert VectorStorage(type="int8").search_params(exact) is exact  # an exact search reads the originals
    with pytest.raises(ValueError, match="give the storage in one place"):
        VectorStorage(type="int8").apply(base.model_copy(update={"datatype": rest.Datatype.FLOAT16}))


def test_a_new_windows_collection_is_int8_and_its_queries_rescore(engine, tiny_windows):
    client = engine.client()
    store = tagged_vector_store(client, "w", tiny_windows)
    params = client.get_collection("w").config.params.vectors["windows"]
    assert params.quantization_config.scalar.type == rest.ScalarType.INT8 and params.on_disk is True
    tag = collection_tag(client.get_collection("w"))
    assert tag["vector_storage"] == {"windows": "int8"}
    assert tag["fingerprint"] == tiny_windows.fingerprint()  # the storage is beside the fingerprint, not in it
    search = store.layout.dense[0].search_params(None)
    assert search.hnsw_ef == MULTIVECTOR_HNSW_EF and search.quantization.rescore is True
    assert search.quantization.oversampling == DEFAULT_OVERSAMPLING["int8"]
    nodes = windows_nodes(tiny_windows.dimension)
    store.add(nodes)
    found = store.query(
        VectorStoreQuery(query_embedding=nodes[0].embedding[: tiny_windows.dimension], similarity_top_k=2)
    )
    assert found.ids[0] == nodes[0].node_id
    assert layout_of_tag(tag).storage_types() == {"windows": "int8"}  # the CLI's query reads it as stored


def test_a_collection_made_before_the_choice_opens_as_float32_and_a_new_choice_is_refused(engine, tiny_windows):
    client = engine.client()
    tagged_vector_store(client, "old", tiny_windows, vector_storage="float32")  # what every earlier release made
    before = client.get_collection("old").config.metadata[METADATA_KEY]
    assert "vector_storage" not in before and before["fingerprint"] == tiny_windows.fingerprint()
    store = tagged_vector_store(client, "old", tiny_windows)  # default settings: read as it is
    assert store.layout.storage_types() == {"windows": "float32"}
    assert store.posfair_tag == before and store.fingerprint == before["fingerprint"]
    assert store.layout.dense[0].search_params(None).quantization is None
    assert client.get_collection("old").config.params.vectors["windows"].quantization_config is None
    with pytest.raises(
        CollectionTagMismatchError, match=r"vector_storage: stored None != requested \{'windows': 'int8'\}"
    ):
        tagged_vector_store(client, "old", tiny_windows, vector_storage="int8")
    # and the other way round: an int8 collection refuses an explicit float32
    tagged_vector_store(client, "new", tiny_windows)
    with pytest.raises(CollectionTagMismatchError, match="vector_storage"):
        tagged_vector_store(client, "new", tiny_windows, vector_storage="float32")
    assert tagged_vector_store(client, "new", tiny_windows, vector_storage=VectorStorage(type="int8", oversampling=3))


def test_plain_and_dual_keep_float32_by_default_and_take_the_option(engine, tiny_embed, tiny_dual):
    client = engine.client()
    plain = tagged_vector_store(client, "p", tiny_embed)
    assert plain.layout.storage_types() == {"": "float32"}
    assert "vector_storage" not in collection_tag(client.get_collection("p"))
    dual = tagged_vector_store(client, "d", tiny_dual, vector_storage={"plain": "int8", "calibrated": "float16"})
    tag = collection_tag(client.get_collection("d"))
    assert tag["vector_storage"] == {"plain": "int8"} and tag["datatype"] == {"calibrated": "float16"}
    assert stored_types(tag, ("plain", "calibrated")) == {"plain": "int8", "calibrated": "float16"}
    assert tagged_vector_store(client, "d", tiny_dual).layout.storage_types() == dual.layout.storage_types()
    quantized = tagged_vector_store(client, "q", tiny_embed, vector_storage="binary")
    nodes = make_nodes(5, tiny_embed.dimension)
    quantized.add(nodes)
    found = quantized.query(VectorStoreQuery(query_embedding=nodes[2].embedding, similarity_top_k=1))
    assert found.ids == [nodes[2].node_id]


def test_a_dense_config_that_decides_the_storage_too_is_refused(tiny_windows, tiny_embed):
    from posfair_llamaindex.qdrant.store import plan_store

    half = rest.VectorParams(size=tiny_windows.dimension, distance=rest.Distance.COSINE, datatype=rest.Datatype.FLOAT16)
    with pytest.raises(ValueError, match="give the storage in one place"):
        plan_store(tiny_embed, {"dense_config": half}, None, "int8")
    # a dense_config of its own (datatype) or a collection-wide quantization: no default storage beside it
    planned = plan_store(tiny_windows, {"dense_config": half}, None)
    assert planned.config.layout.storage_types() == {"windows": "float16"}
    scalar = rest.ScalarQuantization(scalar=rest.ScalarQuantizationConfig(type=rest.ScalarType.INT8))
    planned = plan_store(tiny_windows, {"quantization_config": scalar}, None)
    assert planned.config.layout.storage_types() == {"windows": "float32"}


def test_migrate_moves_a_float32_windows_collection_to_int8_with_a_coherent_tag(tmp_path, tiny_windows):
    from posfair_llamaindex import EdgeQdrantClient
    from posfair_llamaindex.errors import CopyRefusedError
    from posfair_llamaindex.qdrant.migrate import copy_collections

    source = EdgeQdrantClient(path=str(tmp_path / "old"))
    nodes = windows_nodes(tiny_windows.dimension)
    tagged_vector_store(source, "w", tiny_windows, vector_storage="float32").add(nodes)
    source.create_collection("raw", vectors_config=rest.VectorParams(size=4, distance=rest.Distance.COSINE))
    target = EdgeQdrantClient(path=str(tmp_path / "new"))
    with pytest.raises(CopyRefusedError, match="'raw' has no posfair tag"):
        copy_collections(source, target, ["raw"], vector_storage="int8", show_progress=False)
    (report,) = copy_collections(source, target, ["w"], vector_storage="int8", show_progress=False)
    assert report.points == len(nodes)
    old, new = collection_tag(source.get_collection("w")), collection_tag(target.get_collection("w"))
    assert new == {**old, "vector_storage": {"windows": "int8"}}  # same fingerprint, storage recorded
    assert target.get_collection("w").config.params.vectors["windows"].quantization_config is not None
    store = tagged_vector_store(target, "w", tiny_windows)  # the default reads it as int8
    assert store.layout.storage_types() == {"windows": "int8"}
    query = VectorStoreQuery(query_embedding=nodes[3].embedding[: tiny_windows.dimension], similarity_top_k=1)
    assert store.query(query).ids == [nodes[3].node_id]
    # a rerun resumes the same copy; a copy to another storage is not an earlier run of it
    assert copy_collections(source, target, ["w"], vector_storage="int8", show_progress=False)[0].copied == 0
    with pytest.raises(CopyRefusedError, match="another tag"):
        copy_collections(source, target, ["w"], show_progress=False)
    source.close()
    target.close()
