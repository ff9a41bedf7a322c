"""What the commands check about the store before any model loads: a Qdrant folder that is not there is
refused (not created) by every command that reads one, and a missing collection is reported without
importing torch or transformers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from qdrant_client import QdrantClient

from posfair_llamaindex.cli import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ["upgrade", "--collection", "docs", "--into", "docs-posfair"],
        ["query", "where is the lantern?", "--collection", "docs"],
        ["collections"],
        ["audit", "--collection", "docs"],
    ],
    ids=["upgrade", "query", "collections", "audit"],
)
def test_a_qdrant_folder_that_does_not_exist_is_refused_not_created(capsys, tmp_path, argv):
    mistyped = tmp_path / "posfair_qdrnat"
    code, _, err = run(capsys, *argv, "--qdrant-path", mistyped)
    assert code == 1
    assert f"the Qdrant folder {mistyped} (--qdrant-path) does not exist; nothing was created" in err
    assert not mistyped.exists()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store")
    code, _, err = run(capsys, *argv, "--qdrant-path", a_file)
    assert code == 1 and "is not a folder" in err


def test_the_default_folder_is_not_created_by_a_command_that_reads_it(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "collections")
    assert code == 1 and "posfair_qdrant (the default folder, no --qdrant-path given) does not exist" in err
    assert not (tmp_path / "posfair_qdrant").exists()


def test_ingest_still_creates_a_new_folder(capsys, tmp_path, tiny_model_dir):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The harbour lantern was kept by the old keeper of the town for forty years.")
    folder = tmp_path / "new-store"
    code, _, err = run(
        capsys, "ingest", docs, "--collection", "docs", "--qdrant-path", folder, "--model", tiny_model_dir("bert")
    )
    assert code == 0, err
    code, out, _ = run(capsys, "collections", "--qdrant-path", folder, "--json")
    assert code == 0 and [row["name"] for row in json.loads(out)] == ["docs"]


MODEL_LIBRARIES = ("torch", "transformers")


@pytest.mark.parametrize(
    "argv",
    [
        ["upgrade", "--collection", "nope", "--into", "b"],
        ["upgrade", "--collection", "tagged", "--into", "b"],  # already a posfair collection
        ["audit", "--collection", "nope"],
    ],
    ids=["upgrade-missing", "upgrade-tagged", "audit-missing"],
)
def test_a_collection_that_cannot_be_used_is_reported_before_any_model_library_loads(tmp_path, argv):
    """In a fresh interpreter: the refusal comes without torch or transformers ever being imported (they take
    seconds to load; the refusal alone about one)."""
    folder = tmp_path / "qdrant"
    client = QdrantClient(path=str(folder))
    from qdrant_client.http import models as rest

    client.create_collection(
        "tagged",
        vectors_config=rest.VectorParams(size=4, distance=rest.Distance.COSINE),
        metadata={"posfair": {"mode": "dual"}},
    )
    client.close()
    script = textwrap.dedent(
        f"""
        import sys
        from posfair_llamaindex.cli import main
        code = main({[*argv, "--qdrant-path", str(folder)]!r})
        print(code, sorted(name for name in {MODEL_LIBRARIES!r} if name in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.split("\n")[-2] == "1 []", (done.stdout, done.stderr)
    assert "does not exist" in done.stderr or "already a posfair collection" in done.stderr
