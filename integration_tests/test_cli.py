"""The posfair command line end to end, on embedded Qdrant folders."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from posfair_llamaindex.cli import main
from posfair_llamaindex.modes import DUAL_DEFAULTS

# every example script in a child: scheduled first on two workers (conftest.py)
pytestmark = pytest.mark.heavy_group

FILES = {
    "danube.txt": "The Danube flows through Vienna, Budapest and Belgrade before it reaches the Black Sea.",
    "notes/violin.md": "# Violin\n\nThe violin has four strings tuned in fifths and is played with a bow of horsehair.",
    "notes/basalt.txt": "Basalt forms when lava rich in iron and magnesium cools quickly at the surface.",
}


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "docs"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "ignored.csv").write_text("a,b\n1,2\n")
    return root


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ingest_query_and_collections(capsys, tmp_path, corpus):
    store = ["--qdrant-path", str(tmp_path / "q")]
    code, out, err = run(capsys, "ingest", str(corpus), "--collection", "docs", *store)
    assert code == 0, err
    assert "ingested 3 document(s) as 3 node(s)" in out
    code, out, err = run(
        capsys, "query", "Which river reaches the Black Sea?", "--collection", "docs", "-k", "2", "--json", *store
    )
    assert code == 0, err
    hits = json.loads(out)
    assert len(hits) == 2 and hits[0]["metadata"]["file_name"] == "danube.txt"
    assert hits[0]["score"] >= hits[1]["score"]
    code, out, _ = run(capsys, "query", "instrument with a bow", "--collection", "docs", *store)
    assert code == 0 and out.startswith("1. ") and "violin.md" in out.splitlines()[0]
    # ingesting again changes nothing
    code, out, _ = run(capsys, "ingest", str(corpus), "--collection", "docs", *store)
    assert code == 0 and "(3 points," in out
    code, out, _ = run(capsys, "collections", "--json", *store)
    rows = json.loads(out)
    assert rows[0]["name"] == "docs" and rows[0]["points"] == 3 and rows[0]["tag"]["mode"] == "calibrated"
    code, out, _ = run(capsys, "collections", *store)
    assert out.startswith("docs: 3 points, fingerprint")


def test_mismatch_exits_non_zero_with_one_line(capsys, tmp_path, corpus):
    store = ["--qdrant-path", str(tmp_path / "q")]
    assert run(capsys, "ingest", str(corpus), "--collection", "docs", *store)[0] == 0
    code, out, err = run(capsys, "ingest", str(corpus), "--collection", "docs", "--strength", "0.2", *store)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("posfair: error: Qdrant collection 'docs' was not embedded")
    code, out, err = run(
        capsys, "ingest", str(corpus), "--collection", "docs", "--strength", "0.2", "--recreate", *store
    )
    assert code == 0, err
    # a query without encoder options uses the collection's own settings
    code, out, err = run(capsys, "query", "basalt lava", "--collection", "docs", "--json", *store)
    assert code == 0, err
    assert json.loads(out)[0]["metadata"]["file_name"] == "basalt.txt"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["ingest", "/no/such/folder", "--collection", "c"], "no such file or folder"),
        (["query", "x", "--collection", "missing"], "does not exist"),
        (["query", "x", "--collection", "c", "-k", "0"], "-k must be at least 1"),
        (["ingest", "{corpus}", "--collection", "c", "--strength", "1.5"], "strength"),
        (["ingest", "{corpus}", "--collection", "c", "--layers", "9"], "more layers than the model has"),
        (["ingest", "{corpus}/ignored.csv", "--collection", "c"], "only .txt, .md files"),
    ],
)
def test_failures_are_one_line(capsys, tmp_path, corpus, argv, message):
    argv = [a.replace("{corpus}", str(corpus)) for a in argv] + ["--qdrant-path", str(tmp_path / "q")]
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert err.startswith("posfair: error:") and message in err and err.count("\n") == 1


def test_locked_folder_gets_a_clear_error(capsys, tmp_path, corpus):
    folder = tmp_path / "q"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from qdrant_client import QdrantClient
            client = QdrantClient(path={str(folder)!r})
            print("open", flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        code, _, err = run(capsys, "collections", "--qdrant-path", str(folder))
        assert code == 1 and "open in another process" in err
    finally:
        holder.kill()
        holder.wait()


def test_unreachable_server_is_reported(capsys):
    code, _, err = run(capsys, "collections", "--qdrant-url", "http://127.0.0.1:9", "--timeout", "1")
    assert code == 1 and "did not answer" in err


def test_every_command_has_help():
    for command in ([], ["ingest"], ["query"], ["collections"]):
        done = subprocess.run(
            [sys.executable, "-m", "posfair_llamaindex.cli", *command, "--help"], capture_output=True, text=True
        )
        assert done.returncode == 0 and "usage: posfair" in done.stdout


STORE_EXAMPLES = ("index_with_qdrant.py", "dual_mode.py", "windows_mode.py")


@pytest.mark.parametrize("script", ["index_with_qdrant.py", "sea_mode.py", "dual_mode.py", "windows_mode.py"])
def test_examples_run(script, tmp_path, warm_python):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "examples"
    # sea_mode.py embeds its folder twice, the second time chunk by chunk: its history folder (8 of the 40 files) runs
    # the same code in a fifth of the time
    history = ["--docs", str(examples / "docs" / "history")]
    extra = ["--qdrant-path", str(tmp_path / "q")] if script in STORE_EXAMPLES else history
    done = warm_python.run([sys.executable, str(examples / script), *extra], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]  # an unclosed client's, at exit
    if script in STORE_EXAMPLES:
        assert "-> rivers.md" in done.stdout and "-> music.txt" in done.stdout
    else:
        assert "rosetta.txt" in done.stdout.splitlines()[-3] and "SEA tag" in done.stdout


def test_every_mode_has_an_example():
    from pathlib import Path

    from posfair_llamaindex.modes import MODES_BY_NAME

    texts = " ".join(p.read_text() for p in (Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
    for mode in MODES_BY_NAME:
        if mode not in ("calibrated", "plain"):  # the default names no mode; plain is its comparison
            assert f'mode="{mode}"' in texts, mode


def messy_folder(root):
    """Good files next to an empty file, a binary file and a latin-1 file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "danube.txt").write_text(FILES["danube.txt"])
    (root / "basalt.md").write_text(FILES["notes/basalt.txt"])
    (root / "empty.txt").write_bytes(b"")
    (root / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "latin.txt").write_bytes("Le café est très chaud.".encode("latin-1"))
    return root


def test_messy_folder_is_ingested_and_each_skipped_file_named(capsys, tmp_path):
    root = messy_folder(tmp_path / "messy")
    store = ["--qdrant-path", str(tmp_path / "q")]
    code, out, err = run(capsys, "ingest", str(root), "--collection", "docs", *store)
    assert code == 0, err
    assert "ingested 2 document(s) as 2 node(s)" in out and "2 embedded" in out
    skipped = {line.split(":")[0].strip(): line for line in out.splitlines() if line.startswith("  /")}
    assert set(skipped) == {str(root / name) for name in ("empty.txt", "image.md", "latin.txt")}
    assert "empty file" in skipped[str(root / "empty.txt")]
    assert "binary" in skipped[str(root / "image.md")]
    assert "not UTF-8" in skipped[str(root / "latin.txt")]
    code, out, _ = run(capsys, "query", "lava that cools quickly", "--collection", "docs", "--json", *store)
    assert code == 0 and json.loads(out)[0]["metadata"]["file_name"] == "basalt.md"
    # a rerun embeds nothing; --strict refuses before anything is written
    code, out, _ = run(capsys, "ingest", str(root), "--collection", "docs", *store)
    assert code == 0 and "0 embedded, 2 already stored unchanged (2 points," in out
    code, _, err = run(capsys, "ingest", str(root), "--collection", "strict", "--strict", *store)
    assert code == 1 and "--strict" in err and "latin.txt" in err
    code, out, _ = run(capsys, "collections", "--json", *store)
    assert [row["name"] for row in json.loads(out)] == ["docs"]


def test_an_emptied_file_loses_its_points(capsys, tmp_path, corpus):
    store = ["--qdrant-path", str(tmp_path / "q")]
    assert run(capsys, "ingest", str(corpus), "--collection", "docs", *store)[0] == 0
    (corpus / "danube.txt").write_text("   \n")
    code, out, err = run(capsys, "ingest", str(corpus), "--collection", "docs", *store)
    assert code == 0, err
    assert "(2 points," in out and "danube.txt: no text" in out


def test_missing_model_folder_is_named(capsys, tmp_path, corpus):
    code, _, err = run(
        capsys,
        "ingest",
        str(corpus),
        "--collection",
        "c",
        "--model",
        str(tmp_path / "nope"),
        "--qdrant-path",
        str(tmp_path / "q"),
    )
    assert code == 1 and f"no model at {tmp_path / 'nope'}" in err


def test_dead_server_fails_before_the_model_libraries_load(tmp_path, corpus):
    code = textwrap.dedent(f"""
        import sys
        from posfair_llamaindex.cli import main
        argv = ["ingest", {str(corpus)!r}, "--collection", "c", "--qdrant-url", "http://127.0.0.1:9"]
        rc = main(argv + ["--timeout", "1"])
        assert rc == 1, rc
        loaded = [name for name in ("torch", "transformers", "llama_index.core") if name in sys.modules]
        assert not loaded, loaded
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "did not answer" in done.stderr


def test_dual_ingest_and_query(capsys, tmp_path, corpus):
    store = ["--qdrant-path", str(tmp_path / "q")]
    dual = ["--collection", "dual", "--mode", "dual", "--pooling", "first"]
    code, out, err = run(capsys, "ingest", str(corpus), *dual, *store)
    assert code == 0, err
    code, out, _ = run(capsys, "collections", "--json", *store)
    tag = json.loads(out)[0]["tag"]
    assert tag["mode"] == "dual" and tag["fusion"] == "max"
    assert tag["calibration"]["strength"] == DUAL_DEFAULTS["first"]["strength"]
    # without encoder options the collection's own settings are used, fused by its own rule or another one
    for fusion in ([], ["--fusion", "rrf"]):
        question = "Which river reaches the Black Sea?"
        code, out, err = run(capsys, "query", question, "--collection", "dual", "--json", *fusion, *store)
        assert code == 0, err
        assert json.loads(out)[0]["metadata"]["file_name"] == "danube.txt"
    # a single-vector ingest into it is refused, and --fusion outside dual mode is an error
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "dual", "--pooling", "first", *store)
    assert code == 1 and "mode: stored 'dual' != requested 'calibrated'" in err
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "x", "--fusion", "max", *store)
    assert code == 1 and "--fusion is used by --mode dual and windows only" in err


def test_windows_ingest_and_query_find_text_past_the_token_limit(capsys, tmp_path, corpus):
    store = ["--qdrant-path", str(tmp_path / "q")]
    filler = " ".join(["the museum opened a new wing for ancient maps"] * 70)  # about 630 tokens
    late = (
        "A lighthouse keeper named Orwell catalogued seventeen shipwrecks along the cliffs of Varkness. Each winter "
        "he rowed out to the wrecks, sketched their hulls and wrote the names of the sailors in a leather ledger."
    )
    (corpus / "long.txt").write_text(f"{filler} {late}")
    windows = ["--collection", "win", "--mode", "windows", "--window-size", "64", "--node-tokens", "1024"]
    code, out, err = run(capsys, "ingest", str(corpus), *windows, *store)
    assert code == 0, err
    code, out, _ = run(capsys, "collections", "--json", *store)
    tag = json.loads(out)[0]["tag"]
    assert tag["mode"] == "windows" and tag["windows"] == {"size": 64, "stride": 64, "document": "none"}
    assert tag["fusion"] == "max" and tag["max_length"] == 512
    for fusion in ([], ["--fusion", "rrf"]):  # the collection's own settings, fused by its rule or another one
        question = "Which lighthouse keeper kept a ledger of the shipwrecks at Varkness?"
        code, out, err = run(capsys, "query", question, "--collection", "win", "--json", "-k", "1", *fusion, *store)
        assert code == 0, err
        assert json.loads(out)[0]["metadata"]["file_name"] == "long.txt"
    # other window settings are another collection; window options outside windows mode are an error
    code, _, err = run(capsys, "ingest", str(corpus), *windows[:-4], "--window-size", "128", *store)
    assert code == 1 and "windows: stored" in err
    code, _, err = run(capsys, "ingest", str(corpus), "--collection", "x", "--window-size", "64", *store)
    assert code == 1 and "are used by --mode windows only" in err


def test_a_mismatched_tag_is_refused_before_the_model_libraries_load(capsys, tmp_path, corpus):
    folder = tmp_path / "q"
    assert run(capsys, "ingest", str(corpus), "--collection", "docs", "--qdrant-path", str(folder))[0] == 0
    code = textwrap.dedent(f"""
        import sys
        from posfair_llamaindex.cli import main
        argv = ["ingest", {str(corpus)!r}, "--collection", "docs", "--qdrant-path", {str(folder)!r}]
        rc = main(argv + ["--strength", "0.2"])
        assert rc == 1, rc
        loaded = [name for name in ("torch", "transformers", "llama_index.core") if name in sys.modules]
        assert not loaded, loaded
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "strength" in done.stderr and "was not embedded with this configuration" in done.stderr
