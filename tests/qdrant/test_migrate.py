"""Copying collections between clients (``posfair migrate``): local mode to Edge, resumed, refused, checked."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import VectorStoreQuery
from qdrant_client import QdrantClient
from qdrant_client.http import models as rest

from posfair_llamaindex.errors import CopyRefusedError
from posfair_llamaindex.qdrant import EdgeQdrantClient, collection_tag, tagged_vector_store
from posfair_llamaindex.qdrant.embedded import folder_engine, local_mode_note, open_embedded
from posfair_llamaindex.qdrant.migrate import copy_collections
from tests.qdrant.conftest import make_nodes

DIM = 64


def top_ids(store, node, k=5):
    return store.query(VectorStoreQuery(query_embedding=node.embedding[:DIM], similarity_top_k=k)).ids


@pytest.fixture
def local_folder(tmp_path, tiny_embed, tiny_dual):
    """A local-mode folder with a plain and a dual tagged collection, as an older release left it."""
    folder = tmp_path / "local"
    client = QdrantClient(path=str(folder))
    tagged_vector_store(client, "docs", tiny_embed).add(make_nodes(30, DIM, seed=1))
    tagged_vector_store(client, "dual", tiny_dual).add(make_nodes(20, DIM * 2, seed=2))
    client.close()
    return folder


def test_a_local_mode_folder_moves_to_edge_with_its_tags_and_answers_the_same(local_folder, tmp_path, tiny_embed):
    assert folder_engine(local_folder) == "local" and "posfair migrate" in local_mode_note(local_folder)
    source, target = open_embedded(local_folder), EdgeQdrantClient(path=str(tmp_path / "edge"))
    reports = copy_collections(source, target, show_progress=False)
    assert [(r.collection, r.points, r.copied, r.created) for r in reports] == [
        ("docs", 30, 30, True),
        ("dual", 20, 20, True),
    ]
    for name in ("docs", "dual"):
        assert collection_tag(target.get_collection(name)) == collection_tag(source.get_collection(name)) is not None
    nodes = make_nodes(30, DIM, seed=1)
    before = tagged_vector_store(source, "docs", tiny_embed)
    after = tagged_vector_store(target, "docs", tiny_embed)
    for node in nodes[:5]:
        assert top_ids(after, node) == top_ids(before, node)
    source.close()
    target.close()
    assert folder_engine(tmp_path / "edge") == "edge"
    reopened = open_embedded(tmp_path / "edge")
    assert isinstance(reopened, EdgeQdrantClient) and reopened.count("dual").count == 20
    reopened.close()


def test_a_stopped_copy_resumes_without_writing_twice(local_folder, tmp_path):
    source, target = open_embedded(local_folder), EdgeQdrantClient(path=str(tmp_path / "edge"))
    copy_collections(source, target, ["docs"], show_progress=False)
    some, _ = target.scroll("docs", limit=12)
    target.delete("docs", points_selector=[record.id for record in some])  # as if the first run had stopped
    [report] = copy_collections(source, target, ["docs"], show_progress=False)
    assert (report.points, report.copied, report.created) == (30, 12, False)
    assert target.count("docs", exact=True).count == 30
    source.close()
    target.close()


def test_an_unrelated_target_is_refused_before_anything_is_written(local_folder, tmp_path, tiny_embed, tiny_dual):
    source, target = open_embedded(local_folder), EdgeQdrantClient(path=str(tmp_path / "edge"))
    # "dual" exists in the target with the other embedding's tag: the whole copy is refused, "docs" included
    tagged_vector_store(target, "dual", tiny_embed).add(make_nodes(3, DIM, seed=9))
    with pytest.raises(CopyRefusedError, match="another tag"):
        copy_collections(source, target, show_progress=False)
    assert not target.collection_exists("docs") and target.count("dual").count == 3
    # the same tag, but points the source never had: not an earlier copy of it
    target.delete_collection("dual")
    tagged_vector_store(target, "dual", tiny_dual).add(make_nodes(2, DIM * 2, seed=7))
    with pytest.raises(CopyRefusedError, match="2 points the source does not"):
        copy_collections(source, target, ["dual"], show_progress=False)
    with pytest.raises(CopyRefusedError, match="no collection"):
        copy_collections(source, target, ["nowhere"], show_progress=False)
    source.close()
    target.close()


def test_an_engine_asked_for_a_folder_the_other_wrote_is_refused(local_folder, tmp_path):
    with pytest.raises(ValueError, match="posfair migrate"):
        open_embedded(local_folder, engine="edge")
    local = open_embedded(tmp_path / "new", engine="local")
    local.create_collection("c", vectors_config=rest.VectorParams(size=4, distance=rest.Distance.COSINE))
    assert not isinstance(local, EdgeQdrantClient) and folder_engine(tmp_path / "new") == "local"
    local.close()
    again = open_embedded(tmp_path / "new")  # the folder's own engine
    assert not isinstance(again, EdgeQdrantClient)
    again.close()
