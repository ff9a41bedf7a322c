"""``posfair ingest --engine ray`` writes exactly the collection ``--engine local`` writes, and resumes a
killed run; its options are refused where they do not apply."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from posfair_llamaindex.cli import main
from posfair_llamaindex.qdrant.embedded import open_embedded
from tests.jobs.distributed.conftest import NODE_TOKENS, assert_same_collection
from tests.jobs.distributed.qdrant_stub import QdrantStub


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_killed_engine_ray_ingest_resumes_to_what_engine_local_writes(ray_cluster, capsys, corpus, tmp_path):
    """``posfair ingest --engine ray`` against a Qdrant server, on the default offline all-MiniLM-L6-v2.

    A first run is killed (``kill -9``) after its first upsert; the rerun, facing a server that refuses
    at first, writes exactly the collection ``--engine local`` writes and embeds only what was missing;
    one-process ingest then finds every node stored unchanged (a third Ray job would cost 20 s of actor
    start-up to show what the rerun already shows: stored nodes are not embedded again).
    """
    tokens = ["--node-tokens", str(NODE_TOKENS)]
    code, local_out, err = run(capsys, "ingest", str(corpus), "--collection", "docs", *tokens, "--qdrant-path",
                               str(tmp_path / "local"))  # fmt: skip
    assert code == 0, err
    with QdrantStub(stall_after={"upsert": 1}) as stub:
        server = ["--collection", "docs", *tokens, "--qdrant-url", stub.url, "--engine", "ray"]
        argv = [sys.executable, "-m", "posfair_llamaindex.cli", "ingest", str(corpus), *server, "--ray-address",
                ray_cluster, "--batch-size", "2"]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        with open(tmp_path / "killed.err", "w") as stderr:
            child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
            # wait for the event (its first upsert applied, the next held), however slow a busy machine makes
            # Ray's start; a safety bound only turns a child that never gets there into a clear failure
            waited = 0
            while not stub.stalled.wait(timeout=1.0) and child.poll() is None:
                waited += 1
                if waited > 1800:
                    child.kill()
                    pytest.fail("the Ray ingest reached no upsert in 30 minutes")
            child.kill()  # SIGKILL: the driver dies with its writes held by the server
            child.wait(timeout=60)
        stub.release()
        assert child.returncode == -signal.SIGKILL, (tmp_path / "killed.err").read_text()[-3000:]
        survived = stub.read(lambda local: local.count("docs", exact=True).count)
        assert survived > 0

        stub.refuse.update({"upsert": 2, "retrieve": 1})  # as a busy server does
        code, out, err = run(capsys, "ingest", str(corpus), *server, "--batch-size", "3")
        assert code == 0, err
        assert stub.refused["upsert"] == 2 and stub.refused["retrieve"] == 1
        local = open_embedded(tmp_path / "local")
        try:
            count = assert_same_collection(local, stub.local, "docs")
        finally:
            local.close()
        summary = next(line for line in local_out.splitlines() if line.startswith("ingested"))
        resumed = summary.replace(f"{count} embedded, 0 already", f"{count - survived} embedded, {survived} already")
        assert f"{resumed[:-1]}; engine ray, 1 actor(s))" in out.splitlines(), (out, local_out)
        assert survived < count
        assert out.split("skipped 2 file(s):")[1] == local_out.split("skipped 2 file(s):")[1]

        code, out, err = run(capsys, "ingest", str(corpus), *server[: server.index("--engine")])
        assert code == 0, err
        assert f"0 embedded, {count} already stored unchanged ({count} points" in out
        code, out, _ = run(capsys, "collections", "--json", "--qdrant-url", stub.url)
        assert json.loads(out)[0]["points"] == count


def test_ray_options_are_refused_where_they_do_not_apply(capsys, corpus, tmp_path):
    store = ["--qdrant-path", str(tmp_path / "q")]
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "c", *store, "--actors", "2")
    assert code == 1 and "--actors is used by --engine ray only" in err
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "c", *store, "--shard-number", "3")
    assert code == 1 and "need --qdrant-url" in err
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "c", *store, "--engine", "ray", "--writers", "2")
    assert code == 1 and "--writers is for a Qdrant server" in err
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
        "import posfair_llamaindex, posfair_llamaindex.cli, posfair_llamaindex.jobs.distributed\n"
        "from posfair_llamaindex.jobs.distributed import QdrantTarget, ray_available\n"
        "try:\n    from posfair_llamaindex.jobs.distributed import ray_ingest\nexcept ImportError as error:\n"
        "    print(error)\nelse:\n    raise SystemExit('imported without ray')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pip install 'posfair-llamaindex[ray]'" in done.stdout
