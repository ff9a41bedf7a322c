"""Upgrading a collection that LlamaIndex's QdrantVectorStore wrote with plain all-MiniLM-L6-v2 (first-token
pooling): the sampled check, dual mode with no plain re-encodes, resuming after a crash, refusals and what
they name, writers that change the source during the upgrade, and targets that are not the source's."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.cli import main
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.qdrant import collection_tag, tagged_vector_store
from posfair_llamaindex.qdrant.upgrade import (
    UpgradeConfig,
    UpgradeIncompleteError,
    UpgradeRefusedError,
    computed_part,
    upgrade_collection,
)
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
    report = upgrade_collection(client, minilm_dual, UpgradeConfig(source="old", target="new"), show_progress=False)
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


@pytest.mark.parametrize("document", ["plain", "dual"])
def test_a_windows_upgrade_keeps_the_stored_vector_as_the_document_vector(tiny_client, tiny_plain, nodes, document):
    windows = WindowConfig(size=8, document=document)
    embed_model = PosFairEmbedding(
        tiny_plain.model_name, mode="windows", windows=windows, calibration=CALIBRATION, encoder=tiny_plain.encoder
    )
    report = upgrade_collection(
        tiny_client, embed_model, UpgradeConfig(source="old", target="new"), show_progress=False
    )
    assert (report.written, report.plain_reused, report.computed) == (NODES, NODES, NODES)
    old = {str(p.id): p for p in tiny_client.scroll("old", limit=100, with_payload=True, with_vectors=True)[0]}
    new = {str(p.id): p for p in tiny_client.scroll("new", limit=100, with_payload=True, with_vectors=True)[0]}
    assert set(new) == set(old)
    names = {"plain", "windows"} | ({"calibrated"} if document == "dual" else set())
    for pid, point in new.items():
        assert set(point.vector) == names
        assert point.vector["plain"] == pytest.approx(old[pid].vector, abs=1e-6)
        text = TextNode.model_validate_json(point.payload["_node_content"]).get_content(
            metadata_mode=MetadataMode.EMBED
        )
        fresh = np.asarray(embed_model.get_text_embedding(text)).reshape(-1, tiny_plain.dimension)
        np.testing.assert_allclose(point.vector["windows"], fresh[len(names) - 1 :], atol=1e-5)
        if document == "dual":
            np.testing.assert_allclose(point.vector["calibrated"], fresh[1], atol=1e-5)
    assert collection_tag(tiny_client.get_collection("new"))["fingerprint"] == embed_model.fingerprint()


def test_a_windows_upgrade_needs_a_document_the_stored_vector_can_be(tiny_client, tiny_plain):
    for document in ("calibrated", "none"):
        embed_model = PosFairEmbedding(
            tiny_plain.model_name, mode="windows", windows=WindowConfig(document=document), encoder=tiny_plain.encoder
        )
        with pytest.raises(ValueError, match="must be 'plain' or 'dual'"):
            upgrade_collection(tiny_client, embed_model, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert not tiny_client.collection_exists("new")


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
    settings = UpgradeConfig(source="old", target="new", batch_size=16)
    with pytest.raises(RuntimeError, match="killed"):
        upgrade_collection(client, minilm_dual, settings, show_progress=False)
    assert client.count("new").count == 16
    monkeypatch.setattr(PosFairQdrantVectorStore, "add", original)
    report = upgrade_collection(client, minilm_dual, settings.model_copy(update={"replace": True}), show_progress=False)
    assert (report.already_there, report.written, report.computed) == (16, NODES - 16, NODES - 16)
    assert client.count("new").count == NODES
    assert report.replaced and not client.collection_exists("old")


def test_a_mismatched_pooling_is_refused_by_name_before_anything_is_written(tiny_client, tiny_plain):
    client = tiny_client
    mean_dual = PosFairEmbedding(tiny_plain.model_name, mode="dual", pooling="mean", device="cpu")
    with pytest.raises(
        UpgradeRefusedError, match="pooling: the stored vectors match pooling 'first'.*Nothing was written"
    ):
        upgrade_collection(client, mean_dual, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert not client.collection_exists("new")


def test_another_model_is_refused_before_anything_is_written(minilm_client, tiny_client, tiny_plain, minilm_plain):
    tiny = PosFairEmbedding(tiny_plain.model_name, mode="calibrated", encoder=tiny_plain.encoder)
    with pytest.raises(UpgradeRefusedError, match="384-dimensional.*64-dimensional.*settings that differ: model"):
        upgrade_collection(minilm_client, tiny, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert not minilm_client.collection_exists("new")
    # the same dimension, other weights: the tiny model with other random weights
    other = PosFairEmbedding(_other_tiny(tiny_plain), mode="calibrated", device="cpu")
    with pytest.raises(
        UpgradeRefusedError, match="model or encoding: no pooling of .*, token limit .* reproduces them"
    ):
        upgrade_collection(tiny_client, other, UpgradeConfig(source="old", target="new"), show_progress=False)
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
        UpgradeConfig(source="a", target="b", sample=8)
    with pytest.raises(ValueError, match="not the source"):
        UpgradeConfig(source="a", target="a")


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
    assert "--sample: Input should be greater than or equal to 32" in capsys.readouterr().err
    client = QdrantClient(path=str(folder))
    assert collection_tag(client.get_collection("cal"))["mode"] == "calibrated"
    assert collection_tag(client.get_collection("cal"))["calibration"]["basket_size"] == 8
    assert client.count("cal").count == NODES
    client.close()


def test_the_cli_upgrades_into_windows_mode_keeping_the_stored_vector_unless_told_otherwise(
    folders, tmp_path, tiny_plain, capsys
):
    """Windows alone is the library's default document, but an upgrade already holds the plain vector: the CLI keeps
    it (plain) unless --window-document says dual; `none` is not offered."""
    client, folder = open_copy(folders["tiny"], tmp_path)
    stored = {p.id: p.vector for p in client.scroll("old", limit=1000, with_vectors=True)[0]}
    client.close()
    argv = ["upgrade", "--qdrant-path", str(folder), "--collection", "old", "--model", tiny_plain.model_name]
    assert main([*argv, "--into", "win", "--mode", "windows", "--window-size", "8", "--device", "cpu"]) == 0
    assert f"{NODES} node(s), {NODES} written now" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*argv, "--into", "none", "--mode", "windows", "--window-document", "none"])
    assert "invalid choice: 'none'" in capsys.readouterr().err
    client = QdrantClient(path=str(folder))
    assert collection_tag(client.get_collection("win"))["windows"] == {"size": 8, "stride": 8, "document": "plain"}
    for point in client.scroll("win", limit=1000, with_vectors=True)[0]:
        np.testing.assert_allclose(point.vector["plain"], stored[point.id], atol=1e-6)
    client.close()


def test_upgrade_on_a_server(tiny_plain, tiny_dual, nodes):
    """Against the stub server (Qdrant's REST API, no random sampling: the check falls back to every n-th point)."""
    from tests.jobs.distributed.qdrant_stub import QdrantStub

    with QdrantStub() as stub:
        client = QdrantClient(url=stub.url)
        store = QdrantVectorStore("old", client=client)
        VectorStoreIndex(
            [n.model_copy() for n in nodes],
            embed_model=tiny_plain,
            storage_context=StorageContext.from_defaults(vector_store=store),
        )
        report = upgrade_collection(
            client, tiny_dual, UpgradeConfig(source="old", target="new", replace=True), show_progress=False
        )
        assert (report.checked, report.written, report.plain_reused) == (32, NODES, NODES)
        assert report.replaced and not client.collection_exists("old")
        assert collection_tag(client.get_collection("new"))["mode"] == "dual"
        assert stub.seen["scroll"] >= 2  # the sample and the copy
        client.close()


# ----------------------------------------------------------------------------- writers during the upgrade
def late_node(i: int, text: str = "") -> TextNode:
    """A node a writer adds while the upgrade runs (its id sorts after every node of the fixture)."""
    text = text or f"a late note {i} on the harbour lantern, the barley market and the old stone bridge"
    return TextNode(id_=f"00000000-0000-4000-8000-{900 + i:012d}", text=text, metadata={"file_name": "late.txt"})


def write_to_source(client, embed_model, nodes) -> None:
    """What another LlamaIndex process does meanwhile: embed nodes plain and add them to 'old'."""
    vectors = embed_model.get_text_embedding_batch([n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes])
    for node, vector in zip(nodes, vectors, strict=True):
        node.embedding = vector
    QdrantVectorStore("old", client=client).add(nodes)


def payload_text(point) -> str:
    return json.loads(point.payload["_node_content"])["text"]


def test_nodes_written_to_the_source_during_the_upgrade_reach_the_target_before_replace_deletes_it(
    tiny_client, tiny_dual, tiny_plain, nodes
):
    client, twin, calls = tiny_client, computed_part(tiny_dual), []
    edited = TextNode(id_=nodes[0].node_id, text="an edited note: the museum moved north", metadata={"file_name": "e"})

    def encode(texts):  # the calibrated vectors of one page; the writer acts between pages
        calls.append(len(texts))
        if len(calls) == 2:  # the first page is in the target: one of its nodes changes in the source
            write_to_source(client, tiny_plain, [edited])
        if len(calls) == 3:  # the source has been read to its end: five nodes arrive
            write_to_source(client, tiny_plain, [late_node(i) for i in range(5)])
        return twin.get_text_embedding_batch(texts)

    settings = UpgradeConfig(source="old", target="new", batch_size=16, replace=True)
    report = upgrade_collection(client, tiny_dual, settings, show_progress=False, encode=encode)
    assert calls[:3] == [16, 16, 2] and calls[3:] == [6]  # one catch-up page: five added, one changed
    assert (report.points, report.caught_up, report.catch_up_passes) == (NODES + 5, 6, 1)
    assert report.replaced and not client.collection_exists("old")
    target = {str(p.id): p for p in client.scroll("new", limit=100, with_payload=True, with_vectors=True)[0]}
    assert len(target) == NODES + 5
    late = [late_node(i) for i in range(5)]
    assert all(n.node_id in target for n in late)
    assert payload_text(target[nodes[0].node_id]) == edited.text
    # the late nodes' stored (plain) vectors were kept, as for every other node
    plain = tiny_plain.get_text_embedding_batch([n.get_content(metadata_mode=MetadataMode.EMBED) for n in late])
    for node, vector in zip(late, plain, strict=True):
        assert target[node.node_id].vector["plain"] == pytest.approx(vector, abs=1e-6)


def test_writers_that_never_stop_leave_the_source_in_place_and_the_missing_points_are_named(
    tiny_client, tiny_dual, tiny_plain
):
    client, twin, numbers = tiny_client, computed_part(tiny_dual), itertools.count()

    def encode(texts):  # every page, the copy's and the catch-up's, sees one more node arrive
        write_to_source(client, tiny_plain, [late_node(next(numbers))])
        return twin.get_text_embedding_batch(texts)

    settings = UpgradeConfig(source="old", target="new", batch_size=16, replace=True, catch_up_rounds=2)
    # three copy pages, two catch-up passes: five late nodes, the last of which the final comparison finds missing
    message = (
        r"1 point\(s\) of 'old' are not in 'new' \(e\.g\. 00000000-0000-4000-8000-000000000904\)\..*"
        r"2 catch-up pass\(es\)\. 'old' was not deleted"
    )
    with pytest.raises(UpgradeIncompleteError, match=message):
        upgrade_collection(client, tiny_dual, settings, show_progress=False, encode=encode)
    assert client.collection_exists("old") and client.count("old").count == NODES + 5
    assert client.count("new").count == NODES + 4


def test_a_point_written_while_the_final_comparison_runs_is_caught_by_the_count_before_delete(
    tiny_client, tiny_dual, tiny_plain, monkeypatch
):
    client, original, injected = tiny_client, tiny_client.scroll, []

    def scroll(name, **kwargs):
        records, offset = original(name, **kwargs)
        comparing = name == "old" and kwargs.get("with_vectors") is False and kwargs.get("with_payload") is True
        if comparing and offset is None and not injected:  # the comparison has just read the last page
            write_to_source(client, tiny_plain, [late_node(0)])
            injected.append(late_node(0).node_id)
        return records, offset

    monkeypatch.setattr(client, "scroll", scroll)
    settings = UpgradeConfig(source="old", target="new", replace=True)
    report = upgrade_collection(client, tiny_dual, settings, show_progress=False)
    assert injected, "the upgrade never compared the source with the target"
    assert (report.caught_up, report.catch_up_passes, report.points) == (1, 1, NODES + 1)
    assert report.replaced and not client.collection_exists("old")
    assert client.retrieve("new", ids=injected) and client.count("new").count == NODES + 1


def test_a_node_deleted_from_the_source_during_the_upgrade_is_kept_in_the_target_and_counted(
    tiny_client, tiny_dual, nodes
):
    client, twin, calls = tiny_client, computed_part(tiny_dual), []

    def encode(texts):
        calls.append(len(texts))
        if len(calls) == 2:  # already copied, then deleted from the source by a writer
            client.delete("old", points_selector=[nodes[0].node_id])
        return twin.get_text_embedding_batch(texts)

    settings = UpgradeConfig(source="old", target="new", batch_size=16, replace=True)
    report = upgrade_collection(client, tiny_dual, settings, show_progress=False, encode=encode)
    assert (report.points, report.target_only, report.caught_up) == (NODES - 1, 1, 0)
    assert report.replaced and client.count("new").count == NODES  # nothing is lost; the extra one is reported


# ----------------------------------------------------------------------------- targets that are not the source's
def test_a_target_holding_points_that_are_not_the_sources_is_refused(tiny_client, tiny_dual, nodes):
    client = tiny_client
    strangers = [
        TextNode(id_=f"00000000-0000-4000-9000-{i:012d}", text=f"someone else's note {i}", embedding=[0.1] * 128)
        for i in range(3)
    ]
    tagged_vector_store(client, "new", tiny_dual).add(strangers)
    message = (
        r"the target 'new' holds 3 point\(s\) that 'old' does not \(e\.g\. 00000000-0000-4000-9000-000000000000, .*"
        r"Nothing was written\. Upgrade into another collection \(`posfair upgrade --into NAME`"
    )
    with pytest.raises(UpgradeRefusedError, match=message):
        upgrade_collection(client, tiny_dual, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert client.count("new").count == 3
    # one stranger among the points of an earlier run of this very upgrade is refused as well
    client.delete("new", points_selector=[n.node_id for n in strangers[1:]])
    tagged_vector_store(client, "new", tiny_dual).add(
        [TextNode(id_=n.node_id, text=n.text, embedding=[0.1] * 128) for n in nodes[:5]]
    )
    with pytest.raises(UpgradeRefusedError, match=r"holds 1 point\(s\) that 'old' does not"):
        upgrade_collection(client, tiny_dual, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert client.count("new").count == 6


def test_a_target_made_for_other_settings_is_refused_with_advice_that_upgrade_can_follow(
    tiny_client, tiny_dual, tiny_plain
):
    other = PosFairEmbedding(
        tiny_plain.model_name, mode="dual", calibration=CalibrationConfig(basket_size=16), encoder=tiny_plain.encoder
    )
    tagged_vector_store(tiny_client, "new", other)
    with pytest.raises(UpgradeRefusedError) as refused:
        upgrade_collection(tiny_client, tiny_dual, UpgradeConfig(source="old", target="new"), show_progress=False)
    message = str(refused.value)
    assert "the target 'new' already exists and was not made for this embedding (calibration: it holds" in message
    assert "--into NAME" in message and "recreate" not in message  # upgrade has no --recreate
    assert tiny_client.count("new").count == 0


# ----------------------------------------------------------------------------- refusals that name the cause
def test_a_node_without_text_is_named_instead_of_another_model(minilm_client, minilm_dual, nodes):
    # MiniLM: the tiny random model's first token barely depends on the text
    client, emptied = minilm_client, nodes[5].node_id
    content = json.loads(client.retrieve("old", ids=[emptied], with_payload=True)[0].payload["_node_content"])
    content["text"] = ""
    client.set_payload("old", payload={"_node_content": json.dumps(content)}, points=[emptied])
    with pytest.raises(UpgradeRefusedError) as refused:
        upgrade_collection(
            client, minilm_dual, UpgradeConfig(source="old", target="new", sample=NODES), show_progress=False
        )
    message = str(refused.value)
    assert f"text: 1 of the sampled nodes hold no text in their payload (node {emptied})" in message
    assert "model or encoding" not in message and "another model" not in message
    assert not client.collection_exists("new")


def test_a_reduced_precision_is_named_as_the_difference(tiny_client, tiny_plain):
    # the tiny model's bfloat16 vectors stay within 0.99995 of float32's: a stricter check tells them apart
    bf16 = PosFairEmbedding(tiny_plain.model_name, mode="dual", calibration=CALIBRATION, dtype="bfloat16", device="cpu")
    settings = UpgradeConfig(source="old", target="new", min_cosine=0.99999)
    message = r"dtype: the stored vectors match float32 .*this embedding runs in bfloat16.*pass --dtype float32"
    with pytest.raises(UpgradeRefusedError, match=message):
        upgrade_collection(tiny_client, bf16, settings, show_progress=False)
    assert not tiny_client.collection_exists("new")


def test_the_token_limit_that_reproduces_the_stored_vectors_is_named_and_then_upgrades(minilm, tmp_path):
    """A collection written at the model card's max_seq_length (256, as sentence-transformers and LlamaIndex's
    HuggingFaceEmbedding truncate) from nodes of about 400 tokens, upgraded by an embedding at 512."""
    texts = sample_texts(4, seed=5, min_words=370, max_words=400)
    long_nodes = [TextNode(id_=f"00000000-0000-4000-8000-{i:012d}", text=t) for i, t in enumerate(texts)]
    at_256 = PosFairEmbedding(minilm, mode="plain", pooling="first", max_length=256, device="cpu")
    assert min(at_256.encoder.token_lengths(texts)) > 256 and at_256.encoder.files.max_seq_length == 256
    written_the_llamaindex_way(tmp_path / "st", at_256, long_nodes)
    client = QdrantClient(path=str(tmp_path / "st"))
    at_512 = PosFairEmbedding(minilm, mode="dual", pooling="first", max_length=512, calibration=CALIBRATION)
    message = (
        r"max_length: the stored vectors match max_length 256 \(the model card's limit, max_seq_length in "
        r"sentence_bert_config\.json, --max-length model_card\); this embedding uses 512: pass --max-length 256"
    )
    with pytest.raises(UpgradeRefusedError, match=message):
        upgrade_collection(client, at_512, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert not client.collection_exists("new")
    dual_256 = PosFairEmbedding(minilm, mode="dual", calibration=CALIBRATION, encoder=at_256.encoder)
    report = upgrade_collection(client, dual_256, UpgradeConfig(source="old", target="new"), show_progress=False)
    assert (report.checked, report.written) == (4, 4) and report.min_cosine >= 0.9999  # fewer than 32: all checked
    client.close()
