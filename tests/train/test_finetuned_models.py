"""A fine-tuned folder loads into PosFairEmbedding as sentence-transformers runs it: pooling, prompts, prompt
exclusion; its [DUMP] tokens are isolated under calibration; the tag records all of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from posfair_llamaindex import CalibrationConfig, PosFairEmbedding
from posfair_llamaindex.calibration.config import CalibrationConfig as Config
from posfair_llamaindex.model.prompts import prompt_span
from posfair_llamaindex.train.finetune import FinetuneConfig, finetune
from tests.train import write_fake_squad
from tests.utils import sample_texts, save_tiny_model

QUERY = "Who kept the old harbour lantern?"
DOCUMENTS = sample_texts(5, seed=3, min_words=20, max_words=120)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """Two tiny BERTs fine-tuned for two steps with 2 [DUMP] tokens: mean and CLS pooling."""
    root = tmp_path_factory.mktemp("finetuned")
    base = Path(save_tiny_model("bert", root / "base", "mean"))
    data = write_fake_squad(root / "data")
    folders = {}
    for pooling in ("mean", "cls"):
        settings = FinetuneConfig(
            base_model=base,
            pooling=pooling,
            output=root / pooling,
            data_dir=data,
            examples=8,
            token_budget=200,
            max_length=256,
            batch_size=4,
            steps=2,
            learning_rate=1e-3,
            dump_tokens=2,
            use_cpu=True,
        )
        folders[pooling] = finetune(settings).output
    return folders


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_plain_vectors_equal_sentence_transformers(trained, pooling):
    from sentence_transformers import SentenceTransformer

    folder = trained[pooling]
    reference = SentenceTransformer(str(folder), device="cpu")
    embedding = PosFairEmbedding(folder, mode="plain", device="cpu")
    assert embedding.pooling == ("mean" if pooling == "mean" else "first")
    assert embedding.query_instruction == embedding.text_instruction == "[DUMP0][DUMP1]"
    query = np.asarray(embedding.get_query_embedding(QUERY))
    documents = np.asarray(embedding.get_text_embedding_batch(DOCUMENTS))
    np.testing.assert_allclose(query, reference.encode_query([QUERY])[0], atol=1e-5)
    np.testing.assert_allclose(documents, reference.encode_document(DOCUMENTS), atol=1e-5)
    # and the prompt matters: without it (and without leaving it out of the mean) the vectors differ
    bare = embedding.encoder.encode(DOCUMENTS, None)
    assert not np.allclose(bare, documents, atol=1e-4)


def test_mean_pooling_leaves_cls_and_dump_tokens_out(trained):
    embedding = PosFairEmbedding(trained["mean"], mode="plain", device="cpu")
    encoder = embedding.encoder
    assert encoder.include_prompt is False
    span = encoder.prompt_span("[DUMP0][DUMP1]")
    assert (span.length, span.dump_tokens) == (3, 2)  # [CLS] + 2 dump tokens, as sentence-transformers counts
    batch = encoder.tokenize(["[DUMP0][DUMP1]" + DOCUMENTS[0]])
    with torch.inference_mode():
        hidden = encoder.model(**batch).last_hidden_state[0]
    expected = torch.nn.functional.normalize(hidden[3:].mean(dim=0), dim=-1).numpy()
    np.testing.assert_allclose(embedding.get_text_embedding(DOCUMENTS[0]), expected, atol=1e-5)


def test_tag_records_prompts_and_prompt_exclusion(trained):
    mean = PosFairEmbedding(trained["mean"], calibration=CalibrationConfig(strength=0.5), device="cpu").tag()
    cls = PosFairEmbedding(trained["cls"], calibration=CalibrationConfig(strength=0.5), device="cpu").tag()
    for tag in (mean, cls):
        assert tag["text_instruction"] == tag["query_instruction"] == "[DUMP0][DUMP1]"
        assert tag["dump_tokens"] == 2
    assert mean["prompt_in_pooling"] is False and "prompt_in_pooling" not in cls
    assert mean["pooling"] == "mean" and cls["pooling"] == "first"
    # the same weights without their [DUMP] prompt make other vectors, so they get another fingerprint
    calibration = CalibrationConfig(strength=0.5)
    with_dump = PosFairEmbedding(trained["cls"], calibration=calibration, device="cpu")
    without = PosFairEmbedding(trained["cls"], calibration=calibration, text_instruction="", device="cpu")
    assert "dump_tokens" not in without.tag() and without.fingerprint() != with_dump.fingerprint()


def test_untrained_folders_keep_their_fingerprints(tmp_path):
    """The new tag keys appear only where they apply: a model without prompts has the same tag as before."""
    folder = save_tiny_model("bert", tmp_path / "m", "mean")
    tag = PosFairEmbedding(folder, device="cpu").tag()
    assert "dump_tokens" not in tag and "prompt_in_pooling" not in tag and tag["query_instruction"] is None


@pytest.mark.parametrize("variant", ["uniform", "cls_soft", "cls_hard"])
def test_calibration_leaves_dump_attention_alone(trained, variant):
    """In every calibrated layer the pooling row keeps its mass on the [DUMP] positions (cls_hard: unless a
    too-heavy sink must shrink); the baskets start after them."""
    embedding = PosFairEmbedding(trained["cls"], mode="plain", device="cpu")
    encoder = embedding.encoder
    config = Config(variant=variant, strength=1.0, basket_size=4)
    rows = []
    span = encoder.prompt_span("[DUMP0][DUMP1]")
    texts = ["[DUMP0][DUMP1]" + text for text in DOCUMENTS[:3]]
    calibrated = set(config.resolve_layers(encoder.num_layers))

    def record(layer, plain, used):
        if layer in calibrated:
            rows.append((plain, used))

    encoder.encode_batch(texts, config, recorder=record, prompt=span)
    assert len(rows) == len(calibrated)
    lengths = encoder.tokenize(texts)["attention_mask"].sum(dim=1).tolist()
    for plain, used in rows:
        if variant != "cls_hard":
            torch.testing.assert_close(used[..., 1:3], plain[..., 1:3], atol=1e-6, rtol=0)
        torch.testing.assert_close(used.sum(-1), torch.ones_like(used.sum(-1)), atol=1e-5, rtol=0)
        for b, length in enumerate(lengths):
            # at strength 1 every basket of the content (position 3 on, in fours) holds the same mass
            totals = torch.stack([used[b, :, i : min(i + 4, length)].sum(-1) for i in range(3, length, 4)], -1)
            torch.testing.assert_close(totals, totals[..., :1].expand_as(totals), atol=1e-5, rtol=0)
    if variant == "cls_hard":
        assert all(torch.allclose(used[..., 0], torch.full_like(used[..., 0], config.hard_weight)) for _, used in rows)


def test_sea_chunks_carry_the_prompt(trained):
    """SEA encodes every chunk as a document, prompt included: a one-chunk text equals its plain vector."""
    sea = PosFairEmbedding(trained["mean"], mode="sea", device="cpu")
    plain = PosFairEmbedding(trained["mean"], mode="plain", device="cpu", encoder=sea.encoder)
    short = "The lantern was kept by the harbour master."
    assert len(sea.segmenter.split(short)) == 1
    np.testing.assert_allclose(sea.get_text_embedding(short), plain.get_text_embedding(short), atol=1e-6)


def test_misplaced_dump_tokens_are_refused(trained):
    encoder = PosFairEmbedding(trained["cls"], mode="plain", device="cpu").encoder
    with pytest.raises(ValueError, match="must follow the first token"):
        prompt_span(encoder.tokenizer, "note: [DUMP0][DUMP1]")
    assert prompt_span(encoder.tokenizer, "query: ").dump_tokens == 0
