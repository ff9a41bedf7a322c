"""Upgrading a collection that LlamaIndex's QdrantVectorStore wrote with plain all-MiniLM-L6-v2 (first-token
pooling): the sampled check, dual mode with no plain re-encodes, resuming after a crash, and refusals."""

from __future__ import annotations

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.cli import main
from posfair_llamaindex.qdrant import collection_tag, tagged_vector_store
from posfair_llamaindex.upgrade import UpgradeRefused, UpgradeSettings, upgrade_collection
from tests.utils import sample_texts

NODES = 34


def written_the_llamaindex_way(folder, embed_model, nodes) -> None:
    """Collection 'old' in an embedded Qdrant folder, from VectorStoreIndex + LlamaIndex's QdrantVectorStore."""
    client = QdrantClient(path=str(folder))
    store = QdrantVectorStore("old", client=client)
    VectorStoreIndex(
        [n.model_copy() for n in nodes],
        embed_model=embed_model,
        storage_context=StorageContext.from_defaults(vector_store=store),
    )
    client.close()


@pytest.fixture(scope="module")
def nodes():
    texts = sample_texts(NODES, seed=17, min_words=14, max_words=30)
    return [
        TextNode(id_=f"00000000-0000-4000-8000-{i:012d}", text=t, metadata={"file_name": f"f{i % 5}.txt"})
        for i, t in enumerate(texts)
    ]


# small baskets, so that these short texts are really calibrated
CALIBRATION = CalibrationConfig(basket_size=8, strength=0.85)


@pytest.fixture(scope="module")
def minilm_plain(minilm):
    return PosFairEmbedding(minilm, mode="plain", pooling="first", device="cpu")


@pytest.fixture(scope="module")
def minilm_dual(minilm_plain):
    # shares the loaded weights
    return PosFairEmbedding(minilm_plain.model_name, mode="dual", calibration=CALIBRATION, encoder=minilm_plain.encoder)


@pytest.fixture(scope="module")
def tiny_plain(tiny_model_dir):
    return PosFairEmbedding(tiny_model_dir("bert"), mode="plain", device="cpu")


@pytest.fixture(scope="module")
def tiny_dual(tiny_plain):
    return PosFairEmbedding(tiny_plain.model_name, mode="dual", calibration=CALIBRATION, encoder=tiny_plain.encoder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, minilm_plain, tiny_plain, nodes):
    made = {}
    for name, embed_model in (("minilm", minilm_plain), ("tiny", tiny_plain)):
        made[name] = tmp_path_factory.mktemp(name)
        written_the_llamaindex_way(made[name], embed_model, nodes)
    return made


def open_copy(folder, tmp_path):
    import shutil

    copy = tmp_path / f"copy-{folder.name}"
    shutil.copytree(folder, copy)
    return QdrantClient(path=str(copy)), copy


@pytest.fixture
def minilm_client(folders, tmp_path):
    client, _ = open_copy(folders["minilm"], tmp_path)
    yield client
    client.close()


@pytest.fixture
def tiny_client(folders, tmp_path):
    client, _ = open_copy(folders["tiny"], tmp_path)
    yield client
    client.close()


class EncodeSpy:
    """Counts the texts each embedding mode encodes."""

    def __init__(self, monkeypatch):
        self.texts: dict[str, int] = {}
        original = PosFairEmbedding._get_text_embeddings

        def spy(embedding, texts):
            self.texts[embedding.mode] = self.texts.get(embedding.mode, 0) + len(texts)
            return original(embedding, texts)

        monkeypatch.setattr(PosFairEmbedding, "_get_text_embeddings", spy)


def retrieve(store, embed_model, query, k=5):
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    return [(h.node.node_id, h.score) for h in index.as_retriever(similarity_top_k=k).retrieve(query)]


def test_dual_upgrade_reuses_the_stored_vectors_and_retrieves_like_a_fresh_dual_ingest(
    minilm_client, minilm_dual, nodes, monkeypatch
):
    client = minilm_client
    spy = EncodeSpy(monkeypatch)
    report = upgrade_collection(client, minilm_dual, UpgradeSettings(source="old", target="new"), show_progress=False)
    assert spy.texts == {"plain": 32, "calibrated": NODES}  # plain: the sampled check only
    assert (report.points, report.written, report.plain_reused, report.checked) == (NODES, NODES, NODES, 32)
    assert report.min_cosine >= 0.9999
    assert client.collection_exists("old") and client.count("old").count == NODES  # untouched
    assert collection_tag(client.get_collection("new"))["fingerprint"] == minilm_dual.fingerprint()
    # every node keeps its payload (text, metadata, document id), and its stored vector is now "plain"
    old_points = {str(p.id): p for p in client.scroll("old", limit=100, with_payload=True, with_vectors=True)[0]}
    new_points = {str(p.id): p for p in client.scroll("new", limit=100, with_payload=True, with_vectors=True)[0]}
    assert set(old_points) == set(new_points)
    for pid, point in new_points.items():
        ours = {k: v for k, v in point.payload.items() if not k.startswith("posfair_")}
        assert ours == old_points[pid].payload
        assert point.vector["plain"] == pytest.approx(old_points[pid].vector, abs=1e-6)

    upgraded = tagged_vector_store(client, "new", minilm_dual)
    fresh = tagged_vector_store(client, "fresh", minilm_dual)
    VectorStoreIndex(
        [n.model_copy() for n in nodes],
        embed_model=minilm_dual,
        storage_context=StorageContext.from_defaults(vector_store=fresh),
    )
    for query in ("ancient maps in the museum", "barley near the bridge", nodes[7].text[:80]):
        a, b = retrieve(upgraded, minilm_dual, query), retrieve(fresh, minilm_dual, query)
        assert [i for i, _ in a] == [i for i, _ in b]
        assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-5)


def test_a_killed_upgrade_resumes_without_encoding_again(tiny_client, tiny_dual, monkeypatch):
    client, minilm_dual = tiny_client, tiny_dual
    from posfair_llamaindex.qdrant.store import PosFairQdrantVectorStore

    original, calls = PosFairQdrantVectorStore.add, []

    def crash_on_second_batch(store, batch, **kwargs):
        calls.append(len(batch))
        if len(calls) == 2:
            raise RuntimeError("killed")
        return original(store, batch, **kwargs)

    monkeypatch.setattr(PosFairQdrantVectorStore, "add", crash_on_second_batch)
    settings = UpgradeSettings(source="old", target="new", batch_size=16)
    with pytest.raises(RuntimeError, match="killed"):
        upgrade_collection(client, minilm_dual, settings, show_progress=False)
    assert client.count("new").count == 16
    monkeypatch.setattr(PosFairQdrantVectorStore, "add", original)
    report = upgrade_collection(client, minilm_dual, settings.model_copy(update={"replace": True}), show_progress=False)
    assert (report.already_there, report.written, report.calibrated_computed) == (16, NODES - 16, NODES - 16)
    assert client.count("new").count == NODES
    assert report.replaced and not client.collection_exists("old")


def test_a_mismatched_pooling_is_refused_by_name_before_anything_is_written(tiny_client, tiny_plain):
    client = tiny_client
    mean_dual = PosFairEmbedding(tiny_plain.model_name, mode="dual", pooling="mean", device="cpu")
    with pytest.raises(UpgradeRefused, match="pooling: the stored vectors match pooling 'first'.*Nothing was written"):
        upgrade_collection(client, mean_dual, UpgradeSettings(source="old", target="new"), show_progress=False)
    assert not client.collection_exists("new")


def test_another_model_is_refused_before_anything_is_written(minilm_client, tiny_client, tiny_plain, minilm_plain):
    tiny = PosFairEmbedding(tiny_plain.model_name, mode="calibrated", encoder=tiny_plain.encoder)
    with pytest.raises(UpgradeRefused, match="384-dimensional.*64-dimensional.*settings that differ: model"):
        upgrade_collection(minilm_client, tiny, UpgradeSettings(source="old", target="new"), show_progress=False)
    assert not minilm_client.collection_exists("new")
    # the same dimension, other weights: the tiny model with other random weights
    other = PosFairEmbedding(_other_tiny(tiny_plain), mode="calibrated", device="cpu")
    with pytest.raises(UpgradeRefused, match="model or encoding: no pooling of .* reproduces them"):
        upgrade_collection(tiny_client, other, UpgradeSettings(source="old", target="new"), show_progress=False)
    assert not tiny_client.collection_exists("new")


def _other_tiny(tiny_plain) -> str:
    from pathlib import Path

    from tests.utils import save_tiny_model

    folder = Path(tiny_plain.model_name).parent / "other-weights"
    if not folder.exists():
        save_tiny_model("bert", folder, seed=1)
    return str(folder)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="greater than or equal to 32"):
        UpgradeSettings(source="a", target="b", sample=8)
    with pytest.raises(ValueError, match="not the source"):
        UpgradeSettings(source="a", target="a")


def test_the_cli_upgrades_into_calibrated_mode(folders, tmp_path, tiny_plain, capsys):
    client, folder = open_copy(folders["tiny"], tmp_path)
    client.close()
    argv = [
        "upgrade",
        "--qdrant-path",
        str(folder),
        "--collection",
        "old",
        "--into",
        "cal",
        "--model",
        tiny_plain.model_name,
    ]
    assert main([*argv, "--mode", "calibrated", "--basket-size", "8", "--device", "cpu"]) == 0
    assert f"{NODES} node(s), {NODES} written now" in capsys.readouterr().out
    assert main([*argv, "--mode", "calibrated", "--sample", "4"]) == 1
    assert "greater than or equal to 32" in capsys.readouterr().err
    client = QdrantClient(path=str(folder))
    assert collection_tag(client.get_collection("cal"))["mode"] == "calibrated"
    assert collection_tag(client.get_collection("cal"))["calibration"]["basket_size"] == 8
    assert client.count("cal").count == NODES
    client.close()


def test_upgrade_on_a_server(tiny_plain, tiny_dual, nodes):
    """Against the stub server (Qdrant's REST API, no random sampling: the check falls back to every n-th point)."""
    from tests.distributed.qdrant_stub import QdrantStub

    with QdrantStub() as stub:
        client = QdrantClient(url=stub.url)
        store = QdrantVectorStore("old", client=client)
        VectorStoreIndex(
            [n.model_copy() for n in nodes],
            embed_model=tiny_plain,
            storage_context=StorageContext.from_defaults(vector_store=store),
        )
        report = upgrade_collection(
            client, tiny_dual, UpgradeSettings(source="old", target="new", replace=True), show_progress=False
        )
        assert (report.checked, report.written, report.plain_reused) == (32, NODES, NODES)
        assert report.replaced and not client.collection_exists("old")
        assert collection_tag(client.get_collection("new"))["mode"] == "dual"
        assert stub.seen["scroll"] >= 2  # the sample and the copy
        client.close()
