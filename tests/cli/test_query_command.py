"""``posfair query``: the query's model loads in a second process (encoding/query_process.py) while this one opens
the store, or in this one where torch is loaded already. The answer is the one an embedding in this process gives;
weights that changed since the collection was written are refused; the command's own process loads neither torch nor
transformers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from llama_index.core.schema import TextNode

from posfair_llamaindex.cli import main
from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.qdrant import EdgeQdrantClient, tagged_vector_store
from tests.cli.test_import_weight import probe
from tests.utils import save_tiny_model

TEXTS = [
    "The lighthouse keeper climbed the stairs every evening to light the lamp above the harbour.",
    "Wheat and barley were carried down the river on flat barges to the market town.",
    "The observatory on the hill recorded the passage of the comet for three nights.",
    "A ferry crossed the strait twice a day, weather permitting, with mail and passengers.",
]


def write(root: Path, modes: tuple = ("calibrated", "windows")) -> dict:
    """A tiny model in a folder of its own, and an Edge store with a collection per mode, named after it."""
    model = Path(save_tiny_model("bert", root / "model", "mean"))
    store = root / "store"
    client = EdgeQdrantClient(path=str(store))
    try:
        for name, mode in ((mode, mode) for mode in modes):
            embedding = PosFairEmbedding(str(model), mode=mode)
            nodes = [TextNode(id_=f"n{i}", text=text) for i, text in enumerate(TEXTS)]
            for node, vector in zip(nodes, embedding.get_text_embedding_batch(TEXTS), strict=True):
                node.embedding = vector
            tagged_vector_store(client, name, embedding).add(nodes)
    finally:
        client.close()
    return {"root": root, "model": model, "store": store}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict:
    return write(tmp_path_factory.mktemp("query-command"))


def query_json(capsys, store: Path, collection: str, *options: str) -> list:
    argv = ["query", "who lit the lamp?", "--collection", collection, "--qdrant-path", str(store), "--json"]
    code = main([*argv, *options])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    return json.loads(captured.out)


@pytest.mark.parametrize("collection,child", [("calibrated", False), ("windows", True)])
def test_the_answer_is_the_one_an_embedding_in_this_process_gives(capsys, monkeypatch, written, collection, child):
    """Options that change the vectors make the command embed in its own process, from the options alone (the older
    path); naming the collection's own model and mode is such a choice, so every path answers the same query here:
    the tag's settings encoded here (main() in a process that has torch already), the embedding built from the
    options and, once (a child costs a fresh torch import, and its query is plain whatever the collection), the
    child, as from a shell."""
    from posfair_llamaindex.encoding import query_process

    here = query_json(capsys, written["store"], collection)
    answers = [query_json(capsys, written["store"], collection, "--model", str(written["model"]), "--mode", collection)]
    if child:
        with monkeypatch.context() as patch:
            patch.setattr(query_process, "model_libraries_loaded", lambda: False)
            answers.append(query_json(capsys, written["store"], collection))
    for other in answers:
        assert [row["node_id"] for row in here] == [row["node_id"] for row in other]
        assert [row["score"] for row in here] == pytest.approx([row["score"] for row in other], abs=1e-5)
    assert len(here) == len(TEXTS)


def test_the_commands_own_process_loads_neither_torch_nor_transformers(written):
    argv = ["query", "who lit the lamp?", "--collection", "windows", "--qdrant-path", written["store"]]
    (report,), stderr = probe(argv)
    assert report["code"] == 0, stderr[-2000:]
    assert set(report["heavy"]) == {"llama_index.core", "qdrant_client"}, stderr[-2000:]


def test_weights_changed_since_the_collection_was_written_are_refused(capsys, tmp_path):
    """The folder the tag names now holds other weights (another seed): its queries cannot search the stored
    vectors. The encoder that loads the folder reports the weights it loaded (from a shell the second process; here,
    in this one) and the command compares them with the tag."""
    written = write(tmp_path, modes=("calibrated",))
    other = Path(save_tiny_model("bert", tmp_path / "other", "mean", seed=1))
    for weights in other.glob("*.safetensors"):
        shutil.copy(weights, written["model"] / weights.name)
    code = main(["query", "who lit the lamp?", "--collection", "calibrated", "--qdrant-path", str(written["store"])])
    assert code == 1
    assert "model_weights" in capsys.readouterr().err


def test_a_server_that_refuses_connections_is_told_apart_from_one_that_listens(monkeypatch):
    import socket

    from posfair_llamaindex.cli.arguments import server_refuses

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert not server_refuses(f"http://127.0.0.1:{port}")
    assert server_refuses(f"http://127.0.0.1:{port}")  # closed now: the connection is refused
    assert not server_refuses("not a url")  # no host: no verdict, the client's own refusal follows
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert not server_refuses(f"http://127.0.0.1:{port}")  # through a proxy: the client's own refusal follows


def test_a_dead_server_is_refused_before_qdrant_client_loads(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    argvs = [
        ["query", "x", "--collection", "c", "--qdrant-url", "http://127.0.0.1:9"],
        ["collections", "--qdrant-url", "http://127.0.0.1:9"],
    ]
    reports, stderr = probe(*argvs)
    assert [(r["code"], r["heavy"]) for r in reports] == [(1, []), (1, [])], stderr[-2000:]
    assert stderr.count("did not answer (get_collections) after 2 attempts: the connection was refused") == 2
