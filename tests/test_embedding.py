"""PosFairEmbedding as a LlamaIndex embedding: settings, bad input, payload, and VectorStoreIndex."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.modes import DUAL_DEFAULTS
from tests.utils import minilm_path, sample_texts

FACTS = [
    "The Danube flows through Vienna, Budapest and Belgrade before reaching the Black Sea.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen in plant leaves.",
    "The Rosetta Stone, found in 1799, carries the same decree in hieroglyphic, demotic and Greek scripts.",
    "Basalt forms when lava rich in iron and magnesium cools quickly at the surface of the earth.",
    "The violin has four strings tuned in fifths and is played with a bow strung with horsehair.",
]
QUESTIONS = [
    ("Which river reaches the Black Sea after Belgrade?", 0),
    ("How do plants turn light into sugar?", 1),
    ("Which stone helped decipher Egyptian hieroglyphs?", 2),
    ("What rock forms from quickly cooled lava?", 3),
    ("Which instrument has four strings played with a bow?", 4),
]


@pytest.fixture(scope="module")
def embedding():
    return PosFairEmbedding(minilm_path(), pooling="first", embed_batch_size=4)


def padded_nodes():
    """Each fact followed by a passage of shared filler, long enough to be calibrated."""
    filler = sample_texts(len(FACTS), seed=21, min_words=140, max_words=160)
    pairs = enumerate(zip(filler, FACTS, strict=True))
    return [TextNode(text=f"{fact} {pad}", id_=f"doc-{i}") for i, (pad, fact) in pairs]


def test_retrieves_the_right_node(embedding):
    index = VectorStoreIndex(padded_nodes(), embed_model=embedding)
    retriever = index.as_retriever(similarity_top_k=1)
    for question, expected in QUESTIONS:
        assert retriever.retrieve(question)[0].node.node_id == f"doc-{expected}"


def test_retrieves_the_right_node_async(embedding):
    async def run():
        index = VectorStoreIndex(padded_nodes(), embed_model=embedding, use_async=True)
        retriever = index.as_retriever(similarity_top_k=1)
        return [(await retriever.aretrieve(question))[0].node.node_id for question, _ in QUESTIONS]

    assert asyncio.run(run()) == [f"doc-{expected}" for _, expected in QUESTIONS]


def test_batch_matches_single_and_async(embedding):
    texts = sample_texts(7, seed=5, min_words=10, max_words=300)
    batch = np.array(embedding.get_text_embedding_batch(texts))
    singles = np.array([embedding.get_text_embedding(text) for text in texts])
    np.testing.assert_allclose(batch, singles, atol=2e-6)
    async_batch = np.array(asyncio.run(embedding.aget_text_embedding_batch(texts)))
    np.testing.assert_allclose(async_batch, batch, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_documents_are_calibrated_and_queries_are_not(embedding):
    plain = PosFairEmbedding(minilm_path(), pooling="first", mode="plain", encoder=embedding.encoder)
    text = sample_texts(1, seed=8, min_words=300, max_words=300)[0]
    assert np.abs(np.array(embedding.get_text_embedding(text)) - plain.get_text_embedding(text)).max() > 1e-3
    np.testing.assert_allclose(embedding.get_query_embedding(text), plain.get_query_embedding(text), atol=1e-6)


def test_bad_input_names_the_problem(embedding):
    with pytest.raises(ValueError, match="position 1 is empty"):
        embedding.get_text_embedding_batch(["fine", "  ", "fine"])
    with pytest.raises(TypeError, match="position 0 is NoneType"):
        embedding.get_text_embedding_batch([None])
    with pytest.raises(ValueError, match="query is empty"):
        embedding.get_query_embedding("")
    with pytest.raises(TypeError, match="query is int"):
        embedding.get_query_embedding(5)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="mode"):
        PosFairEmbedding(minilm_path(), mode="sideways")
    with pytest.raises(TypeError, match="CalibrationConfig"):
        PosFairEmbedding(minilm_path(), calibration={"strength": 0.5})
    with pytest.raises(ValueError, match="embed_batch_size"):
        PosFairEmbedding(minilm_path(), embed_batch_size=0)
    with pytest.raises(ValueError, match="cls_hard"):
        PosFairEmbedding(minilm_path(), calibration=CalibrationConfig(variant="cls_hard"))


def test_payload_and_tag_record_the_config(embedding):
    payload = embedding.to_payload()
    assert payload["class_name"] == "PosFairEmbedding"
    assert payload["calibration"] == CalibrationConfig().tag()
    assert payload["pooling"] == "first" and payload["mode"] == "calibrated"
    other = PosFairEmbedding(
        minilm_path(), pooling="first", calibration=CalibrationConfig(strength=0.3), encoder=embedding.encoder
    )
    assert other.fingerprint() != embedding.fingerprint()
    tag = embedding.tag()
    assert tag["dimension"] == 384 and tag["max_length"] == 512 and tag["normalize"] is True


def test_instructions_are_prefixed(embedding):
    instructed = PosFairEmbedding(
        minilm_path(),
        pooling="first",
        query_instruction="query: ",
        text_instruction="passage: ",
        encoder=embedding.encoder,
    )
    np.testing.assert_allclose(
        instructed.get_query_embedding("barley"), embedding.get_query_embedding("query: barley"), atol=1e-6
    )
    np.testing.assert_allclose(
        instructed.get_text_embedding("barley"), embedding.get_text_embedding("passage: barley"), atol=1e-6
    )


def test_show_progress_reports(embedding, capsys):
    embedding.get_text_embedding_batch(sample_texts(3), show_progress=True)
    assert "Generating embeddings" in capsys.readouterr().err


@pytest.mark.parametrize(
    "settings",
    [
        dict(calibration=CalibrationConfig(layers=(0, -1), isolated_tokens=("first", "last"), basket_size=64)),
        dict(calibration=CalibrationConfig(variant="cls_hard", hard_weight=0.2, layers="last")),
        dict(mode="plain"),
    ],
)
def test_settings_from_tag_rebuild_the_same_embedding(embedding, settings):
    """A tag read back from Qdrant's JSON gives an embedding with the same fingerprint."""
    import json

    from posfair_llamaindex.tag import settings_from_tag

    original = PosFairEmbedding(minilm_path(), pooling="first", encoder=embedding.encoder, **settings)
    stored = json.loads(json.dumps(original.tag()))  # what a collection's metadata gives back: tuples become lists
    recovered = settings_from_tag(stored)
    rebuilt = PosFairEmbedding(
        minilm_path(),
        calibration=CalibrationConfig(**recovered["calibration"]),
        mode=recovered["mode"],
        pooling=recovered["pooling"],
        max_length=recovered["max_length"],
        normalize=recovered["normalize"],
        text_instruction=recovered["text_instruction"],
        encoder=embedding.encoder,
    )
    assert rebuilt.fingerprint() == original.fingerprint()
    assert rebuilt.calibration == original.calibration


def test_dual_mode_documents_carry_both_vectors_and_queries_stay_plain(embedding):
    dual = PosFairEmbedding(minilm_path(), pooling="first", mode="dual", encoder=embedding.encoder)
    default = DUAL_DEFAULTS["first"]["strength"]
    assert dual.fusion == "max" and dual.calibration.strength == default  # the first-token dual defaults
    assert dual.dimension == 384 and dual.document_dimension == 768
    text = sample_texts(1, seed=8, min_words=300, max_words=300)[0]
    vector = dual.get_text_embedding(text)
    plain_half, calibrated_half = dual.split_dual(vector)
    plain = PosFairEmbedding(minilm_path(), pooling="first", mode="plain", encoder=embedding.encoder)
    calibrated = PosFairEmbedding(
        minilm_path(), pooling="first", calibration=CalibrationConfig(strength=default), encoder=embedding.encoder
    )
    assert np.dot(plain_half, plain.get_text_embedding(text)) >= 0.99999
    assert np.dot(calibrated_half, calibrated.get_text_embedding(text)) >= 0.99999
    np.testing.assert_allclose(dual.get_query_embedding(text), plain.get_query_embedding(text), atol=1e-6)


def test_dual_tag_records_mode_settings_and_fusion(embedding):
    dual = PosFairEmbedding(minilm_path(), pooling="first", mode="dual", fusion="rrf", encoder=embedding.encoder)
    tag = dual.tag()
    assert tag["mode"] == "dual" and tag["fusion"] == "rrf"
    assert tag["calibration"]["strength"] == DUAL_DEFAULTS["first"]["strength"]
    other_fusion = PosFairEmbedding(
        minilm_path(), pooling="first", mode="dual", fusion="max", encoder=embedding.encoder
    )
    # the fusion is chosen at query time: it is recorded, but the stored vectors (and fingerprint) are the same
    assert other_fusion.fingerprint() == dual.fingerprint()
    single = PosFairEmbedding(
        minilm_path(), pooling="first", calibration=CalibrationConfig(strength=0.85), encoder=embedding.encoder
    )
    assert single.fingerprint() != dual.fingerprint() and "fusion" not in single.tag()


def test_dual_settings_are_checked(embedding):
    with pytest.raises(ValueError, match="fusion is only used by modes 'dual' and 'windows', not 'calibrated'"):
        PosFairEmbedding(minilm_path(), pooling="first", fusion="max", encoder=embedding.encoder)
    with pytest.raises(ValueError, match="fusion"):
        PosFairEmbedding(minilm_path(), pooling="first", mode="dual", fusion="mean", encoder=embedding.encoder)
    with pytest.raises(ValueError, match="strength 0"):
        PosFairEmbedding(
            minilm_path(),
            pooling="first",
            mode="dual",
            calibration=CalibrationConfig(strength=0.0),
            encoder=embedding.encoder,
        )
    dual = PosFairEmbedding(minilm_path(), pooling="first", mode="dual", encoder=embedding.encoder)
    with pytest.raises(ValueError, match="768 floats"):
        dual.split_dual([0.0] * 384)
    with pytest.raises(ValueError, match="two halves"):
        embedding.split_dual([0.0] * 768)
