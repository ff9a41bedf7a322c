"""Window vectors in the evaluation: MaxSim, late chunking, nodes, and windows configurations end to end."""

from __future__ import annotations

import numpy as np
import pytest

from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.windows import WindowConfig
from posfair_llamaindex.eval import benchmark_data as data
from posfair_llamaindex.eval.runner import EvalConfig, evaluate
from posfair_llamaindex.eval.window_vectors import late_chunked, max_sim, node_split, window_vectors
from tests.utils import minilm_path, sample_texts


@pytest.fixture(scope="module")
def encoder():
    return PosFairEncoder(minilm_path(), max_length=256)


def test_max_sim_is_each_documents_best_window():
    rng = np.random.default_rng(0)
    queries = rng.normal(size=(5, 8))
    windows = [rng.normal(size=(n, 8)) for n in (1, 4, 2, 7)]
    expected = np.array([[max(q @ w.T) for w in windows] for q in queries])
    np.testing.assert_allclose(max_sim(queries, windows), expected)
    with pytest.raises(ValueError, match="at least one window"):
        max_sim(queries, [*windows, np.zeros((0, 8))])


def test_late_chunking_sees_only_what_fits_and_nodes_see_everything(encoder):
    text = sample_texts(1, seed=9, min_words=400, max_words=400)[0]  # about 500 tokens, twice the limit
    config = WindowConfig(size=64)
    late = late_chunked(encoder, [text], config, "", 8)[0]
    own = window_vectors("windows", encoder, [text], config, "", 8)[0]
    nodes = node_split(encoder, [text], config, "", 8)[0]
    assert len(late) == 4  # 254 text tokens fit: windows over them only
    assert len(own) >= 7 and len(nodes) >= 7  # the whole text
    for vectors in (late, own, nodes):
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="window source"):
        window_vectors("chunks", encoder, [text], config, "", 8)


def test_windows_configurations_run_share_their_vectors_and_come_back_from_the_cache(fake_data, tokenizer, tmp_path):
    bench = data.squad_longposq(fake_data, tokenizer, token_budget=128, max_documents=6, questions_per_group=4)
    windows = WindowConfig(size=32, document="plain")
    configs = [
        EvalConfig.plain(),
        EvalConfig(
            "windows only", mode="windows", windows=windows.model_copy(update={"document": "none"}), fusion="max"
        ),
        EvalConfig("windows + plain", mode="windows", windows=windows, fusion="max"),
        EvalConfig("late + plain", mode="windows", windows=windows, fusion="max", window_source="late"),
    ]
    first = evaluate(bench, configs, model=minilm_path(), cache_dir=tmp_path, bootstrap_samples=20, show_progress=False)
    plain, only, both, late = first.results
    assert plain.vectors_per_document == 1.0
    assert only.vectors_per_document > 2 and both.vectors_per_document == pytest.approx(only.vectors_per_document + 1)
    assert both.seconds is None  # its windows were computed for "windows only", its plain vectors for "plain"
    assert late.fingerprint == both.fingerprint  # the same stored layout; the source is a research choice
    # max fusion can only raise a document's score: with the plain vector beside them, windows lose nothing
    for group in bench.groups:
        assert both.recall[group].mean() >= min(plain.recall[group].mean(), only.recall[group].mean()) - 1e-9
    again = evaluate(bench, configs, model=minilm_path(), cache_dir=tmp_path, bootstrap_samples=20, show_progress=False)
    for before, after in zip(first.results, again.results, strict=True):
        assert after.seconds is None
        for group in bench.groups:
            np.testing.assert_array_equal(before.ndcg[group], after.ndcg[group])


def test_windows_settings_go_with_windows_mode_only():
    with pytest.raises(ValueError, match="window settings"):
        EvalConfig("x", mode="dual", windows=WindowConfig(), fusion="max")
    with pytest.raises(ValueError, match="fusion rule"):
        EvalConfig("x", mode="windows", windows=WindowConfig())
    with pytest.raises(ValueError, match="window source"):
        EvalConfig("x", mode="windows", windows=WindowConfig(), fusion="max", window_source="chunks")
