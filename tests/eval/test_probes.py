"""The training-side diagnostics: evidence moving through a document, and the [DUMP] effect."""

from __future__ import annotations

import numpy as np
import pytest

from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.eval.benchmark_data import heldout_article_indices, squad_longposq
from posfair_llamaindex.eval.probes import (
    MovingSet,
    dump_effect,
    evidence_moving_cosine,
    moved_documents,
    moving_summary,
    squad_moving_sets,
)
from posfair_llamaindex.train.training_pairs import heldout_split
from tests.train import write_fake_squad
from tests.utils import minilm_path


@pytest.fixture(scope="module")
def squad_dir(tmp_path_factory):
    return write_fake_squad(tmp_path_factory.mktemp("probe-data"), articles=10)


@pytest.fixture(scope="module")
def encoder():
    return PosFairEncoder(minilm_path(), pooling="first", device="cpu")


def test_evidence_moves_from_the_start_to_the_end():
    fillers = (" ".join(f"w{i}" for i in range(14)), " ".join(f"x{i}" for i in range(17)))
    item = MovingSet("q", "EVIDENCE HERE", fillers)
    documents = moved_documents(item, slots=10)
    assert len(documents) == 10 and documents[0].startswith("EVIDENCE HERE") and documents[-1].endswith("EVIDENCE HERE")
    positions = [d.index("EVIDENCE") for d in documents]
    assert positions == sorted(positions) and len(set(positions)) == 10
    fillers = {d.replace("EVIDENCE HERE", "").split() == " ".join(item.fillers).split() for d in documents}
    assert fillers == {True}  # only the evidence moves; the filler keeps its words and their order


def test_moving_sets_use_heldout_articles_and_leave_the_answer_out_of_fillers(squad_dir, encoder):
    held = heldout_article_indices(squad_dir, 0.2, 0)
    assert held == frozenset(heldout_split(squad_dir, 0.2, 0).heldout_indices)  # the split fine-tuning uses
    sets = squad_moving_sets(squad_dir, encoder.tokenizer, count=5, token_budget=200, articles=held)
    assert 0 < len(sets) <= 5
    for item in sets:
        article = int(item.query.split()[3].split("-")[0])  # "Who kept site A-P (k)?"
        assert article in held
        answer = "Keeper" + item.query.split()[3].replace("-", "x")
        assert answer in item.evidence and not any(answer in f for f in item.fillers)


def test_evidence_moving_cosine_and_its_summary(squad_dir, encoder):
    from posfair_llamaindex.calibration.config import CalibrationConfig

    sets = squad_moving_sets(squad_dir, encoder.tokenizer, count=3, token_budget=200)
    plain = evidence_moving_cosine(encoder, sets, None)
    calibrated = evidence_moving_cosine(encoder, sets, CalibrationConfig(strength=0.85))
    assert plain.shape == calibrated.shape == (len(sets), 10) and not np.allclose(plain, calibrated)
    query = encoder.encode([sets[0].query])[0]
    first = encoder.encode([moved_documents(sets[0])[0]])[0]
    assert plain[0, 0] == pytest.approx(float(query @ first), abs=1e-5)
    summary = moving_summary(plain)
    curve = plain.mean(axis=0)
    assert summary["delta_x1000"] == pytest.approx((curve.max() - curve.min()) * 1000)
    assert curve[summary["peak_slot"] - 1] == curve.max() and summary["sets"] == len(sets)


def test_heldout_split_builds_squad_from_heldout_articles_only(squad_dir, encoder):
    held = heldout_article_indices(squad_dir, 0.2, 0)
    benchmark = squad_longposq(squad_dir, encoder.tokenizer, token_budget=200, articles=held, max_documents=None)
    articles = {int(doc_id.split("-")[1]) for doc_id in benchmark.tasks[0].documents}
    assert articles and articles <= held
    everything = squad_longposq(squad_dir, encoder.tokenizer, token_budget=200, max_documents=None)
    assert len(everything.tasks[0].documents) > len(benchmark.tasks[0].documents)


def test_dump_effect_without_dump_tokens_reports_none(encoder):
    effect = dump_effect(encoder, ["The bridge of the town is old and it was built in the spring."])
    assert effect["dump_tokens"] == 0 and effect["mean_norm"]["dump"] is None
    assert effect["stopword_attention"]["to_dump"] is None
    assert effect["mean_norm"]["cls"] > 0 and 0 < effect["stopword_attention"]["to_cls"] < 1
