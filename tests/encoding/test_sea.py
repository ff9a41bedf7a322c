"""SEA mode: chunk with chonkie, embed chunks plain, average."""

from __future__ import annotations

import numpy as np
import pytest

from posfair_llamaindex import PosFairEmbedding
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.encoding.sea import ChunkerConfig, EncoderEmbeddings, SegmentEmbedAverage
from tests.utils import minilm_path

PARAGRAPHS = [
    "The Danube is Europe's second-longest river. It flows through ten countries, including Austria, "
    "Hungary and Serbia, and it empties into the Black Sea through a wide delta in Romania.",
    "Photosynthesis takes place in chloroplasts. Light energy splits water molecules, releasing oxygen, "
    "and the Calvin cycle fixes carbon dioxide into sugars that feed the plant.",
    "The violin family includes the viola, the cello and the double bass. Violins have four strings tuned "
    "in perfect fifths and are played with a bow strung with horsehair.",
]


@pytest.fixture(scope="module")
def encoder():
    return PosFairEncoder(minilm_path())


def test_one_chunk_document_equals_plain(encoder):
    sea = SegmentEmbedAverage(encoder, ChunkerConfig(kind="recursive", chunk_size=200))
    text = PARAGRAPHS[0]
    assert sea.split(text) == [text]
    np.testing.assert_allclose(sea.encode([text]), encoder.encode([text], None), atol=1e-6)


@pytest.mark.parametrize("kind", ["semantic", "sentence", "recursive", "token"])
def test_average_of_normalised_chunks(encoder, kind):
    sea = SegmentEmbedAverage(encoder, ChunkerConfig(kind=kind, chunk_size=40))
    document = " ".join(PARAGRAPHS)
    chunks = sea.split(document)
    assert len(chunks) >= 2
    limit = 40 + 2
    assert all(len(encoder.tokenizer(chunk)["input_ids"]) <= limit for chunk in chunks)
    vectors = encoder.encode(chunks, None)
    expected = vectors.mean(axis=0)
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(sea.encode([document])[0], expected, atol=1e-5)


def test_several_documents_in_one_call(encoder):
    sea = SegmentEmbedAverage(encoder, ChunkerConfig(kind="sentence", chunk_size=30))
    documents = [" ".join(PARAGRAPHS), PARAGRAPHS[1], " ".join(PARAGRAPHS[::-1])]
    together = sea.encode(documents, batch_size=3)
    alone = np.stack([sea.encode([d])[0] for d in documents])
    np.testing.assert_allclose(together, alone, atol=2e-6)


def test_semantic_chunker_runs_on_the_models_own_encoder(encoder):
    embeddings = EncoderEmbeddings(encoder)
    assert embeddings.dimension == 384
    assert embeddings.get_tokenizer() is encoder.tokenizer
    vectors = embeddings.embed_batch(["a sentence", "   ", "another"])
    assert len(vectors) == 3 and all(np.isfinite(v).all() for v in vectors)
    np.testing.assert_allclose(embeddings.embed("a sentence"), encoder.encode(["a sentence"], None)[0], atol=1e-6)


def test_chunk_size_is_bounded_by_the_model(encoder):
    with pytest.raises(ValueError, match="does not fit"):
        SegmentEmbedAverage(encoder, ChunkerConfig(chunk_size=600))
    with pytest.raises(ValueError, match="overlap"):
        SegmentEmbedAverage(encoder, ChunkerConfig(kind="token", chunk_size=20, overlap=20))
    assert SegmentEmbedAverage(encoder).chunk_size == 128


def test_sea_mode_in_the_embedding(encoder):
    sea = PosFairEmbedding(
        minilm_path(), mode="sea", chunker=ChunkerConfig(kind="sentence", chunk_size=30), encoder=encoder
    )
    plain = PosFairEmbedding(minilm_path(), mode="plain", encoder=encoder)
    document = " ".join(PARAGRAPHS)
    assert np.abs(np.array(sea.get_text_embedding(document)) - plain.get_text_embedding(document)).max() > 1e-3
    np.testing.assert_allclose(sea.get_query_embedding(document), plain.get_query_embedding(document), atol=1e-6)
    tag = sea.tag()
    assert tag["mode"] == "sea" and tag["chunker"] == {"kind": "sentence", "chunk_size": 30, "overlap": 0}
    assert tag["calibration"] is None
    other = PosFairEmbedding(
        minilm_path(), mode="sea", chunker=ChunkerConfig(kind="token", chunk_size=30), encoder=encoder
    )
    assert other.fingerprint() != sea.fingerprint()


def test_chunker_settings_need_sea_mode():
    with pytest.raises(ValueError, match="only used by mode 'sea'"):
        PosFairEmbedding(minilm_path(), chunker=ChunkerConfig())
