"""``posfair finetune`` then ``posfair ingest --model DIR`` and ``posfair query``: the issue's round trip, tiny."""

from __future__ import annotations

import json

import pytest

from posfair_llamaindex.cli import main
from tests.train import write_fake_squad
from tests.utils import save_tiny_model


@pytest.fixture(scope="module")
def base_and_data(tmp_path_factory) -> tuple:
    root = tmp_path_factory.mktemp("cli-finetune")
    return save_tiny_model("bert", root / "base", "mean"), write_fake_squad(root / "data")


def test_finetune_ingest_query_round_trip(base_and_data, tmp_path, capsys):
    base, data = base_and_data
    out = tmp_path / "model"
    common = ["--steps", "2", "--examples", "8", "--batch-size", "4", "--token-budget", "200", "--max-length", "256"]
    args = ["finetune", "--model", base, "--data", str(data), "--setup", "uniform", "--pooling", "cls"]
    assert main([*args, "--dump-tokens", "4", "--out", str(out), "--cpu", *common]) == 0
    printed = capsys.readouterr().out
    assert "trained 2 step(s)" in printed and f"--model {out}" in printed
    assert json.loads((out / "config_sentence_transformers.json").read_text())["prompts"]["document"] == (
        "[DUMP0][DUMP1][DUMP2][DUMP3]"
    )

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The harbour lantern was kept by the old keeper of the town for forty years.")
    (docs / "b.txt").write_text("Barley grows in the meadow near the stone bridge in a cold spring season.")
    store = ["--qdrant-path", str(tmp_path / "qdrant"), "--collection", "docs", "--model", str(out)]
    assert main(["ingest", str(docs), *store]) == 0
    assert "2 embedded" in capsys.readouterr().out
    assert main(["collections", "--qdrant-path", str(tmp_path / "qdrant"), "--json"]) == 0
    tag = json.loads(capsys.readouterr().out)[0]["tag"]
    assert tag["dump_tokens"] == 4 and tag["pooling"] == "first"
    assert tag["text_instruction"] == tag["query_instruction"] == "[DUMP0][DUMP1][DUMP2][DUMP3]"
    assert main(["query", "who kept the lantern?", "--json", *store]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 2 and {h["metadata"]["file_name"] for h in hits} == {"a.txt", "b.txt"}


def test_finetune_refuses_bad_settings_in_one_line(base_and_data, tmp_path, capsys):
    base, data = base_and_data
    args = ["finetune", "--model", base, "--data", str(data), "--pooling", "cls", "--out", str(tmp_path / "m")]
    assert main([*args, "--dump-tokens", "17"]) == 1
    assert "invalid fine-tuning settings: dump_tokens" in capsys.readouterr().err
    assert main([*args, "--token-budget", "600", "--max-length", "512"]) == 1
    assert "exceeds max_length 512" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--steps", "2", "--epochs", "1"])
