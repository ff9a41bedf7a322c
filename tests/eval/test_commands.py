"""posfair eval / sweep / diagnose through the command line."""

from __future__ import annotations

import json

import pytest

from posfair_llamaindex.cli import main
from tests.utils import SHARED_DATA, sample_texts

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "squad").is_dir(), reason="shared data folder not present")


def test_eval_command(capsys, tmp_path):
    code = main(
        [
            "eval",
            "--data",
            str(SHARED_DATA),
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
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "| default (cls_soft) | first |" in out
    assert "| custom (cls_soft, strength 0.85, basket 64, layers 0.5) | first |" in out
    report = json.loads((tmp_path / "squad-longposq-first.json").read_text())
    assert report["queries"] == 18 and (tmp_path / "squad-longposq-first.png").is_file()


def test_eval_rejects_unknown_names(capsys, tmp_path):
    assert main(["eval", "--data", str(SHARED_DATA), "--configs", "plain,fancy", "--out", str(tmp_path)]) == 1
    assert "unknown configuration 'fancy'" in capsys.readouterr().err
    assert main(["eval", "--data", str(SHARED_DATA), "--benchmark", "trec", "--out", str(tmp_path)]) == 1
    assert "unknown benchmark 'trec'" in capsys.readouterr().err
    assert main(["eval", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path)]) == 1
    assert "--data" in capsys.readouterr().err


def test_diagnose_command(capsys, tmp_path):
    text_file = tmp_path / "a.txt"
    text_file.write_text(sample_texts(1, seed=1, min_words=220, max_words=240)[0])
    literal = sample_texts(1, seed=2, min_words=220, max_words=240)[0]
    code = main(["diagnose", str(text_file), literal, "--pooling", "first", "--out", str(tmp_path / "d")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "segment profile      plain:" in out and "self-mass" in out
    assert (tmp_path / "d" / "self_mass.png").is_file()
