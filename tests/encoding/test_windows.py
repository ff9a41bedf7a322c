"""Windows mode's encoding side: where windows fall, what each one holds, and the document embedding's layout."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from pydantic import ValidationError

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.windows import WindowConfig, WindowEmbedder, WindowSplitter, window_spans
from posfair_llamaindex.tag import settings_from_tag
from tests.utils import minilm_path, sample_texts


@pytest.fixture(scope="module")
def plain():
    return PosFairEmbedding(minilm_path(), mode="plain")


@pytest.fixture(scope="module")
def long_text():
    return sample_texts(1, seed=3, min_words=700, max_words=700)[0]  # about 900 tokens: past the 512 limit


def words_of(lengths):
    return [word for word, length in enumerate(lengths) for _ in range(length)]


@pytest.mark.parametrize("seed", range(40))
def test_windows_cover_every_token_start_at_word_starts_and_hold_at_most_size(seed):
    rng = random.Random(seed)
    words = words_of([rng.choice([1, 1, 2, 3, 7]) if rng.random() > 0.02 else 90 for _ in range(rng.randint(1, 400))])
    size = rng.choice([8, 16, 64])
    stride = rng.randint(1, size)
    spans = window_spans(words, size, stride)
    covered = set()
    for first, end in spans:
        assert 0 <= first < end <= len(words) and end - first <= size
        # a window starts at a word start unless it lies inside a word longer than the stride
        assert first == 0 or words[first] != words[first - 1] or words.count(words[first]) > stride
        covered.update(range(first, end))
    assert covered == set(range(len(words)))
    assert spans[-1][1] == len(words)
    assert all(b[0] > a[0] and b[0] <= a[1] for a, b in zip(spans, spans[1:], strict=False))


def test_stride_and_the_full_last_window():
    assert window_spans(list(range(10)), 4, 4) == [(0, 4), (4, 8), (6, 10)]
    assert window_spans(list(range(10)), 4, 2) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert window_spans(list(range(3)), 4, 4) == [(0, 3)]
    # a word of three tokens at 3..5 is not cut: the first window ends before it, the next starts with it
    assert window_spans([0, 1, 2, 3, 3, 3, 4, 5, 6, 7], 4, 4)[:2] == [(0, 3), (3, 7)]


def test_a_window_retokenizes_into_the_tokens_it_was_cut_from(plain, long_text):
    splitter = WindowSplitter(plain.encoder, WindowConfig(size=64, stride=32))
    (windows,) = splitter.split([long_text])
    tokenizer = plain.encoder.tokenizer
    whole = tokenizer(long_text, add_special_tokens=False)["input_ids"]
    assert len(whole) > 512
    pieces = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in windows]
    assert all(len(p) <= 64 for p in pieces)
    assert pieces[0] == whole[: len(pieces[0])] and pieces[-1] == whole[-len(pieces[-1]) :]
    joined = " ".join(windows)
    assert all(word in joined for word in long_text.split()[-20:])  # the end of the text is in a window


def test_a_text_within_one_window_is_its_own_window_and_equals_the_plain_vector(plain):
    short = "The museum opened a new wing for ancient maps."
    windows = PosFairEmbedding(
        minilm_path(), mode="windows", windows=WindowConfig(document="none"), encoder=plain.encoder
    )
    assert windows.get_text_embedding(short) == pytest.approx(plain.get_text_embedding(short), abs=1e-6)


def test_the_document_embedding_is_the_document_vectors_then_every_window(plain, long_text):
    encoder = plain.encoder
    config = WindowConfig(size=128, document="dual")
    embedding = PosFairEmbedding(minilm_path(), mode="windows", windows=config, encoder=encoder)
    assert embedding.document_vectors == 2 and embedding.calibration.strength == 0.85  # the mean-pooling dual default
    vector = np.asarray(embedding.get_text_embedding(long_text))
    windows = WindowEmbedder(encoder, config).encode([long_text])[0]
    dual = encoder.encode([long_text], embedding.calibration, dual=True)[0]
    assert vector.shape == (384 * (2 + len(windows)),) and len(windows) >= 6
    np.testing.assert_allclose(vector[: 2 * 384], dual, atol=1e-6)
    np.testing.assert_allclose(vector[2 * 384 :].reshape(-1, 384), windows, atol=1e-6)
    # each window is the plain vector of its own text
    texts = WindowSplitter(encoder, config).split([long_text])[0]
    np.testing.assert_allclose(windows, plain.get_text_embedding_batch(texts), atol=1e-5)


def test_windows_cost_the_documents_of_each_kind(plain, long_text):
    for document, count in (("none", 0), ("plain", 1), ("calibrated", 1)):
        config = WindowConfig(size=256, document=document)
        embedding = PosFairEmbedding(minilm_path(), mode="windows", windows=config, encoder=plain.encoder)
        assert len(embedding.get_text_embedding(long_text)) % 384 == 0
        assert embedding.document_vectors == count
        assert (embedding.tag()["calibration"] is not None) == (document == "calibrated")


def test_the_tag_records_the_windows_and_every_setting_changes_the_fingerprint(plain):
    def make(**settings):
        return PosFairEmbedding(minilm_path(), mode="windows", windows=WindowConfig(**settings), encoder=plain.encoder)

    base = make()
    tag = base.tag()
    assert tag["mode"] == "windows" and tag["windows"] == {"size": 128, "stride": 128, "document": "none"}
    assert tag["fusion"] == "max" and tag["calibration"] is None
    prints = {base.fingerprint(), make(size=64).fingerprint(), make(stride=64).fingerprint()}
    prints |= {make(document="plain").fingerprint(), plain.fingerprint()}
    assert len(prints) == 5
    # the fusion rule is the collection's default, not part of what the vectors mean
    other_rule = PosFairEmbedding(minilm_path(), mode="windows", fusion="rrf", encoder=plain.encoder)
    assert other_rule.fingerprint() == base.fingerprint()
    # the tag gives the settings back
    settings = settings_from_tag(tag)
    again = PosFairEmbedding(
        minilm_path(), mode=settings["mode"], windows=WindowConfig(**settings["windows"]), encoder=plain.encoder
    )
    assert again.fingerprint() == base.fingerprint()
    # modes without windows keep the tags they had
    assert "windows" not in plain.tag()


def test_windows_that_do_not_fit_the_model_are_refused_before_encoding(plain):
    with pytest.raises(ValueError, match="do not fit"):
        PosFairEmbedding(minilm_path(), mode="windows", windows=WindowConfig(size=600), encoder=plain.encoder)
    with pytest.raises(ValidationError, match="stride"):
        WindowConfig(size=64, stride=65)
    with pytest.raises(ValidationError):
        WindowConfig(size=4)
    with pytest.raises(ValueError, match="only used by mode 'windows'"):
        PosFairEmbedding(minilm_path(), mode="dual", windows=WindowConfig(), encoder=plain.encoder)
    with pytest.raises(TypeError, match="WindowConfig"):
        PosFairEmbedding(minilm_path(), mode="windows", windows={"size": 64}, encoder=plain.encoder)
    with pytest.raises(ValueError, match="strength 0"):
        PosFairEmbedding(
            minilm_path(),
            mode="windows",
            windows=WindowConfig(document="dual"),
            calibration=CalibrationConfig(strength=0.0),
            encoder=plain.encoder,
        )


def test_a_pickled_windows_embedding_makes_the_same_vectors(plain, long_text):
    embedding = PosFairEmbedding(
        minilm_path(), mode="windows", windows=WindowConfig(size=64, stride=32), encoder=plain.encoder
    )
    received = pickle.loads(pickle.dumps(embedding))
    assert received.windows == embedding.windows
    assert received.get_text_embedding(long_text) == pytest.approx(embedding.get_text_embedding(long_text), abs=1e-6)
    assert received.fingerprint() == embedding.fingerprint()
