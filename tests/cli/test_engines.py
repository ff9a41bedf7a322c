"""The embedded engines on the command line: a new folder is a Qdrant Edge store, a local-mode folder still opens
(with a note on how to move it), ``posfair migrate`` moves it, and ``posfair collections`` describes every mode."""

from __future__ import annotations

import json

import pytest
from qdrant_client import QdrantClient

from posfair_llamaindex import EdgeQdrantClient, PosFairEmbedding, WindowConfig, tagged_vector_store
from posfair_llamaindex.cli import main
from posfair_llamaindex.modes import MODES_BY_NAME
from posfair_llamaindex.qdrant.embedded import folder_engine
from tests.qdrant.conftest import make_nodes

DIM = 64


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def local_store(tmp_path, tiny_model_dir):
    """A local-mode folder with a tagged collection, as an older release of the package wrote it."""
    folder = tmp_path / "old"
    client = QdrantClient(path=str(folder))
    embed = PosFairEmbedding(tiny_model_dir("bert"), device="cpu")
    tagged_vector_store(client, "docs", embed).add(make_nodes(12, DIM, seed=4))
    client.close()
    return folder


def test_a_local_mode_folder_opens_with_a_note_and_migrate_moves_it(capsys, tmp_path, local_store):
    code, out, err = run(capsys, "collections", "--qdrant-path", local_store)
    assert code == 0 and "docs: 12 points" in out
    assert "local-mode folder" in err and f"posfair migrate --from-path {local_store}" in err
    new = tmp_path / "new"
    code, out, err = run(capsys, "migrate", "--from-path", local_store, "--to-path", new)
    assert code == 0, err
    assert "docs: 12 points" in out and "12 copied now, created" in out and "checked" in out
    assert folder_engine(new) == "edge" and folder_engine(local_store) == "local"  # the source is left as it was
    code, out, err = run(capsys, "collections", "--qdrant-path", new)
    assert code == 0 and "docs: 12 points" in out and "local-mode" not in err
    code, out, err = run(capsys, "migrate", "--from-path", local_store, "--to-path", new)  # again: nothing to do
    assert code == 0 and "0 copied now, resumed" in out


def test_migrate_refuses_what_it_cannot_do_in_one_line(capsys, tmp_path, local_store):
    code, _, err = run(capsys, "migrate", "--from-path", local_store, "--to-path", local_store)
    assert code == 1 and "same folder" in err
    code, _, err = run(capsys, "migrate", "--from-path", tmp_path / "nowhere", "--to-path", tmp_path / "x")
    assert code == 1 and "does not exist" in err and not (tmp_path / "x").exists()
    code, _, err = run(capsys, "migrate", "--from-path", local_store, "--to-path", tmp_path / "y", "--collection", "z")
    assert code == 1 and "no collection ['z']" in err


def test_a_folder_that_is_no_store_is_refused_and_left_alone(capsys, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    code, _, err = run(capsys, "collections", "--qdrant-path", folder)
    assert code == 1 and "holds no Qdrant store" in err and sorted(p.name for p in folder.iterdir()) == ["cat.jpg"]


def test_local_mode_is_one_option_away(capsys, tmp_path, tiny_model_dir):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The river meets the sea in a wide delta. " * 4)
    folder = tmp_path / "local"
    argv = ["ingest", docs, "--collection", "c", "--model", tiny_model_dir("bert"), "--qdrant-path", folder]
    code, out, err = run(capsys, *argv, "--qdrant-engine", "local")
    assert code == 0, err
    assert folder_engine(folder) == "local"
    code, out, err = run(capsys, "ingest", docs, "--collection", "c", "--model", tiny_model_dir("bert"),
                         "--qdrant-path", tmp_path / "edge")  # fmt: skip
    assert code == 0, err
    assert folder_engine(tmp_path / "edge") == "edge"


@pytest.mark.parametrize("mode", sorted(MODES_BY_NAME))
def test_collections_describes_every_modes_settings(capsys, tmp_path, tiny_model_dir, mode):
    extra = {"windows": WindowConfig(size=16, stride=8, document="plain")} if mode == "windows" else {}
    embed = PosFairEmbedding(tiny_model_dir("bert"), mode=mode, device="cpu", **extra)
    client = EdgeQdrantClient(path=str(tmp_path / "q"))
    tagged_vector_store(client, "c", embed)
    client.close()
    code, out, err = run(capsys, "collections", "--qdrant-path", tmp_path / "q")
    assert code == 0, err
    line = out.strip()
    assert f"mode {mode}" in line and "  " not in line and " ," not in line
    if embed.calibrates:
        assert f"strength {embed.calibration.strength}" in line and "baskets of" in line
    if mode == "sea":
        assert "chunker semantic" in line
    if mode == "windows":
        assert "windows of 16 tokens every 8, document vector plain" in line
    if mode in ("dual", "windows"):
        assert f"fusion {embed.fusion}" in line
    code, out, _ = run(capsys, "collections", "--qdrant-path", tmp_path / "q", "--json")
    assert json.loads(out)[0]["tag"]["mode"] == mode
