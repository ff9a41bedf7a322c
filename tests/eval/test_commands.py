"""posfair eval / sweep / diagnose through the command line, on generated data (always) and the real data."""

from __future__ import annotations

import json

import pytest

from posfair_llamaindex.cli import main
from tests.utils import HAS_SQUAD, NO_SHARED_DATA, SHARED_DATA, sample_texts

SMALL = ["--token-budget", "128", "--max-documents", "8", "--questions-per-group", "6", "--bootstrap", "20"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_eval_command_on_generated_data(capsys, tmp_path, fake_data):
    out = run(
        capsys,
        "eval",
        "--data",
        fake_data,
        "--benchmark",
        "all",
        "--configs",
        "plain,default,custom,dual,multi,windows",
        "--window-size",
        "32",
        "--window-stride",
        "half",
        "--window-document",
        "none,dual",
        "--pooling",
        "first",
        "--basket-size",
        "16",
        "--strength",
        "0.85",
        "--fusion",
        "max,rrf",
        "--dual-strengths",
        "0.5,1.0",
        "--max-sets",
        "4",
        *SMALL,
        "--out",
        tmp_path,
    )
    assert "| default (cls_soft) | first |" in out
    assert "| custom (cls_soft, strength 0.85, basket 16, layers 0.5) | first |" in out
    for name in ("dual max 0.5", "dual rrf 0.5", "dual max 1", "dual rrf 1", "max(plain, 0.5, 1)"):
        assert f"| {name} | first |" in out, name
    written = sorted(p.name for p in tmp_path.glob("*.json") if not p.name.startswith("per-query-"))
    assert written == [
        "nq-oracle-positions-first.json",
        "scifact-first.json",
        "squad-evidence-moving-first.json",
        "squad-longposq-first.json",
    ]
    assert sorted(p.name for p in tmp_path.glob("per-query-*.json")) == [f"per-query-{name}" for name in written]
    report = json.loads((tmp_path / "squad-longposq-first.json").read_text())
    assert report["queries"] == 18 and (tmp_path / "squad-longposq-first.png").stat().st_size > 5000
    dual = next(r for r in report["results"] if r["name"] == "dual rrf 1")
    assert dual["mode"] == "dual" and dual["fusion"] == "rrf" and dual["calibration"]["strength"] == 1.0
    assert report["max_length"] == 512 and "at 512 tokens" in out
    # windows: the grid of --window-* and every plain --fusion rule for a document beside the windows
    names = [r["name"] for r in report["results"] if r["mode"] == "windows"]
    assert names == ["windows 32/16 + none", "windows 32/16 + dual (max)", "windows 32/16 + dual (rrf)"]
    windows = next(r for r in report["results"] if r["name"] == "windows 32/16 + dual (max)")
    assert (
        windows["windows"] == {"size": 32, "stride": 16, "document": "dual"}
        and windows["calibration"]["strength"] == 0.85
    )
    assert windows["vectors_per_document"] > 4


def test_sweep_commands_on_generated_data(capsys, tmp_path, fake_data):
    common = ["--data", fake_data, "--pooling", "first", "--basket-size", "16", *SMALL, "--out", tmp_path]
    out = run(capsys, "sweep", "strength", "--strengths", "0.5,1.0", *common)
    assert "| strength 0.50 | first |" in out and (tmp_path / "sweep-strength-first-deltas.png").is_file()
    findings = json.loads((tmp_path / "sweep-strength-first-findings.json").read_text())
    assert findings["best_hm"]["name"] in ("strength 0.50", "strength 1.00")
    out = run(capsys, "sweep", "dual", "--strengths", "0.5,1.0", "--fusion", "max,sum", *common)
    assert "| dual sum 1 |" in out and (tmp_path / "sweep-dual-first.png").stat().st_size > 5000
    summary = json.loads((tmp_path / "sweep-dual-first.json").read_text())
    assert [row["name"] for row in summary["rows"]][:3] == ["plain", "calibrated 0.5", "dual max 0.5"]


def test_grid_sweep_on_generated_data(capsys, tmp_path, fake_data):
    out = run(
        capsys,
        "sweep",
        "grid",
        "--data",
        fake_data,
        "--pooling",
        "first",
        "--strength",
        "0.7",
        *SMALL,
        "--out",
        tmp_path,
    )
    table = (tmp_path / "sweep-grid-first-table.md").read_text()
    assert "**uniform**" in table and "B=256" in table and out.count("| cls_hard layers=") == 12
    report = json.loads((tmp_path / "sweep-grid-first.json").read_text())
    assert {r["calibration"]["strength"] for r in report["results"] if r["calibration"]} == {0.7}


def test_eval_rejects_unknown_names(capsys, tmp_path, fake_data):
    assert main(["eval", "--data", str(fake_data), "--configs", "plain,fancy", "--out", str(tmp_path)]) == 1
    assert "unknown configuration 'fancy'" in capsys.readouterr().err
    assert main(["eval", "--data", str(fake_data), "--benchmark", "trec", "--out", str(tmp_path)]) == 1
    assert "unknown benchmark 'trec'" in capsys.readouterr().err
    assert (
        main(["eval", "--data", str(fake_data), "--configs", "dual", "--fusion", "median", "--out", str(tmp_path)]) == 1
    )
    assert "--fusion takes a comma list" in capsys.readouterr().err
    assert main(["eval", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path)]) == 1
    assert "--data" in capsys.readouterr().err


def test_diagnose_command(capsys, tmp_path):
    text_file = tmp_path / "a.txt"
    text_file.write_text(sample_texts(1, seed=1, min_words=220, max_words=240)[0])
    literal = sample_texts(1, seed=2, min_words=220, max_words=240)[0]
    out = run(capsys, "diagnose", text_file, literal, "--pooling", "first", "--out", tmp_path / "d")
    assert "segment profile      plain:" in out and "self-mass" in out
    assert (tmp_path / "d" / "self_mass.png").is_file()


@pytest.mark.skipif(not HAS_SQUAD, reason=NO_SHARED_DATA)
def test_eval_command_on_real_data(capsys, tmp_path):
    out = run(
        capsys,
        "eval",
        "--data",
        SHARED_DATA,
        "--benchmark",
        "squad",
        "--configs",
        "plain,default,custom",
        "--pooling",
        "first",
        "--strength",
        "0.85",
        "--basket-size",
        "64",
        "--max-documents",
        "16",
        "--questions-per-group",
        "6",
        "--bootstrap",
        "50",
        "--out",
        tmp_path,
    )
    assert "| custom (cls_soft, strength 0.85, basket 64, layers 0.5) | first |" in out
    report = json.loads((tmp_path / "squad-longposq-first.json").read_text())
    assert report["queries"] == 18 and (tmp_path / "squad-longposq-first.png").is_file()
