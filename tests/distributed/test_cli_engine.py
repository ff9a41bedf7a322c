"""``posfair ingest --engine ray`` writes exactly the collection ``--engine local`` writes, and resumes."""

from __future__ import annotations

import json

from qdrant_client import QdrantClient

from posfair_llamaindex.cli import main
from tests.distributed.conftest import NODE_TOKENS, assert_same_collection


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_engine_ray_equals_engine_local_and_a_rerun_embeds_nothing(
    ray_cluster, capsys, corpus, tiny_model_dir, tmp_path
):
    common = [str(corpus), "--collection", "docs", "--model", tiny_model_dir("bert"), "--node-tokens", str(NODE_TOKENS)]
    code, local_out, err = run(capsys, "ingest", *common, "--qdrant-path", str(tmp_path / "local"))
    assert code == 0, err
    ray_store = ["--qdrant-path", str(tmp_path / "ray")]
    code, out, err = run(capsys, "ingest", *common, *ray_store, "--engine", "ray", "--actors", "2", "--batch-size", "3")
    assert code == 0, err
    # the same summary: documents, nodes, embedded, points, fingerprint; and the skipped files
    summary = next(line for line in local_out.splitlines() if line.startswith("ingested"))
    assert f"{summary[:-1]}; engine ray, 2 actor(s))" in out.splitlines(), (out, local_out)
    assert out.split("skipped 2 file(s):")[1] == local_out.split("skipped 2 file(s):")[1]
    local, ray_client = QdrantClient(path=str(tmp_path / "local")), QdrantClient(path=str(tmp_path / "ray"))
    try:
        count = assert_same_collection(local, ray_client, "docs")
    finally:
        local.close(), ray_client.close()
    code, out, err = run(capsys, "ingest", *common, *ray_store, "--engine", "ray", "--actors", "1")
    assert code == 0, err
    assert f"0 embedded, {count} already stored unchanged ({count} points" in out
    code, out, _ = run(capsys, "collections", "--json", *ray_store)
    assert json.loads(out)[0]["points"] == count


def test_ray_options_are_refused_where_they_do_not_apply(capsys, corpus, tmp_path):
    store = ["--qdrant-path", str(tmp_path / "q")]
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "c", *store, "--actors", "2")
    assert code == 1 and "--actors is used by --engine ray only" in err
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "c", *store, "--shard-number", "3")
    assert code == 1 and "need --qdrant-url" in err
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "c", *store, "--engine", "ray", "--device", "cpu")
    assert code == 1 and "--device is chosen per actor" in err


def test_engine_ray_without_ray_names_the_extra(capsys, corpus, tmp_path, monkeypatch):
    real_find_spec = __import__("importlib.util").util.find_spec

    def no_ray(name, *args, **kwargs):
        return None if name == "ray" or name.startswith("ray.") else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr("importlib.util.find_spec", no_ray)
    code, _, err = run(
        capsys, "ingest", str(corpus), "--collection", "c", "--qdrant-path", str(tmp_path / "q"), "--engine", "ray"
    )
    assert code == 1 and "pip install 'posfair-llamaindex[ray]'" in err
    assert not (tmp_path / "q").exists()  # refused before Qdrant was opened


def test_the_library_imports_without_ray(monkeypatch):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['ray'] = None; sys.modules['ray.data'] = None\n"
        "import posfair_llamaindex, posfair_llamaindex.cli, posfair_llamaindex.distributed\n"
        "from posfair_llamaindex.distributed import QdrantTarget, ray_available\n"
        "try:\n    from posfair_llamaindex.distributed import ray_ingest\nexcept ImportError as error:\n"
        "    print(error)\nelse:\n    raise SystemExit('imported without ray')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pip install 'posfair-llamaindex[ray]'" in done.stdout
