"""``--vector-storage`` on ingest and migrate: the choice reaches the collection and its tag."""

from __future__ import annotations

from posfair_llamaindex.cli import main
from posfair_llamaindex.qdrant import collection_tag
from posfair_llamaindex.qdrant.embedded import open_embedded


def test_ingest_and_migrate_store_the_vectors_as_asked(capsys, tmp_path, tiny_model_dir):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The harbour lantern was kept by the old keeper of the town for forty years.")
    folder, moved = tmp_path / "store", tmp_path / "moved"
    model = tiny_model_dir("bert")
    argv = ["ingest", str(docs), "--collection", "docs", "--qdrant-path", str(folder), "--model", model, "--mode"]
    assert main([*argv, "plain", "--vector-storage", "float16"]) == 0, capsys.readouterr().err
    assert main([*argv, "plain", "--vector-storage", "int8"]) == 1  # not how the collection stores them
    assert "vector_storage: stored None != requested {'': 'int8'}" in capsys.readouterr().err
    assert main([*argv, "plain"]) == 0  # left unset: as it is stored
    code = main(["migrate", "--from-path", str(folder), "--to-path", str(moved), "--vector-storage", "binary"])
    assert code == 0, capsys.readouterr().err
    client = open_embedded(moved)
    tag = collection_tag(client.get_collection("docs"))
    assert tag["vector_storage"] == {"": "binary"} and "datatype" not in tag
    assert client.get_collection("docs").config.params.vectors.quantization_config.binary is not None
    client.close()
