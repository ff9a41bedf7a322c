"""Whole models: the SDPA + pooled-row calibration against a naive eager-matrix calibrated forward."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.model.attention import PLAN_KWARG
from tests.reference import NAIVE_ATTENTION, naive_pool
from tests.utils import FAMILY_CASES, sample_texts


def naive_embeddings(folder, encoder, texts, config):
    """Embed with the eager reference: full attention matrix, rows calibrated one by one."""
    model = AutoModel.from_pretrained(folder, attn_implementation=NAIVE_ATTENTION).eval()
    batch = encoder.tokenize(texts)
    plan = {
        "layers": set(config.resolve_layers(encoder.num_layers)),
        "valid": batch["attention_mask"].bool(),
        "pooling": encoder.pooling,
        "variant": config.variant,
        "strength": config.strength,
        "basket_size": config.basket_size,
        "hard_weight": config.hard_weight,
        "isolated_tokens": config.isolated_tokens,
    }
    with torch.no_grad():
        hidden = model(**batch, naive_plan=plan, use_cache=False).last_hidden_state
    return naive_pool(hidden, batch["attention_mask"], encoder.pooling)


def assert_cosine(got, expected, threshold=0.99999):
    cosine = torch.nn.functional.cosine_similarity(torch.as_tensor(got), expected, dim=-1)
    assert cosine.min().item() >= threshold, cosine


@pytest.mark.parametrize("family,pooling,padding", FAMILY_CASES)
@pytest.mark.parametrize("variant", ["uniform", "cls_soft", "cls_hard"])
def test_tiny_models_match_eager_reference(tiny_model_dir, family, pooling, padding, variant):
    if pooling == "mean" and variant == "cls_hard":
        pytest.skip("cls_hard needs a pooling token")
    folder = tiny_model_dir(family, pooling)
    encoder = PosFairEncoder(folder, padding_side=padding)
    assert encoder.pooling == pooling  # detected from the sentence-transformers files
    texts = sample_texts(4, seed=1, min_words=3, max_words=120)
    config = CalibrationConfig(variant=variant, strength=0.7, basket_size=16, layers=0.5)
    got = encoder.encode_batch(texts, config)
    expected = naive_embeddings(folder, encoder, texts, config)
    assert_cosine(got, expected)
    # and calibration really changed something for the long texts
    plain = torch.as_tensor(encoder.encode_batch(texts, None))
    assert (torch.as_tensor(got) - plain).abs().max() > 1e-4


@pytest.mark.parametrize("variant", ["uniform", "cls_soft", "cls_hard"])
def test_minilm_first_token_matches_eager_reference(minilm, variant):
    encoder = PosFairEncoder(minilm, pooling="first")
    texts = sample_texts(3, seed=2, min_words=300, max_words=420)
    config = CalibrationConfig(variant=variant)  # paper defaults: B=128, lam=0.5, last 50% of layers
    got = encoder.encode_batch(texts, config)
    expected = naive_embeddings(minilm, encoder, texts, config)
    assert_cosine(got, expected)


def test_layer_lists_and_isolated_tokens_match_reference(tiny_model_dir):
    folder = tiny_model_dir("bert", "first")
    encoder = PosFairEncoder(folder)
    texts = sample_texts(3, seed=5, min_words=40, max_words=150)
    config = CalibrationConfig(layers=(0, -1), isolated_tokens=("first", "last"), basket_size=8, strength=1.0)
    assert_cosine(encoder.encode_batch(texts, config), naive_embeddings(folder, encoder, texts, config))


def test_plan_reaches_only_the_selected_layers(tiny_model_dir):
    encoder = PosFairEncoder(tiny_model_dir("bert", "first"))
    seen = []
    batch = encoder.tokenize(sample_texts(2, min_words=100))
    plan = encoder.plan_for(
        batch["attention_mask"],
        CalibrationConfig(basket_size=8, layers="last"),
        recorder=lambda layer, plain, used: seen.append((layer, torch.equal(plain, used))),
    )
    with torch.no_grad():
        encoder.model(**batch, **{PLAN_KWARG: plan})
    # every layer is recorded, and only the last one is changed
    assert seen == [(0, True), (1, True), (2, True), (3, False)]


def test_recorded_rows_are_distributions(tiny_model_dir):
    encoder = PosFairEncoder(tiny_model_dir("qwen3", "last"), padding_side="left")
    assert encoder.num_layers == 4
    rows = []
    batch = encoder.tokenize(sample_texts(3, seed=4, min_words=20, max_words=90))
    config = CalibrationConfig(basket_size=8)  # layers 0.5: the last two of four
    plan = encoder.plan_for(batch["attention_mask"], config, lambda layer, p, u: rows.append((layer, p, u)))
    assert bool(plan.layout.calibrated.all())  # every text has at least one basket of content
    with torch.no_grad():
        encoder.model(**batch, **{PLAN_KWARG: plan})
    # exactly one row set per layer, in layer order
    assert [layer for layer, _, _ in rows] == [0, 1, 2, 3]
    valid = batch["attention_mask"].bool()
    n, width = valid.shape
    for layer, plain, used in rows:
        assert plain.shape == used.shape == (n, 4, width)  # [texts, heads, keys]
        for probs in (plain, used):
            torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:2]), atol=1e-5, rtol=0)
            # padding keys get nothing
            assert torch.all(probs[~valid[:, None, :].expand_as(probs)] == 0)
            assert torch.all(probs >= 0)
        if layer in (2, 3):
            # every text's pooling row is calibrated in the selected layers
            assert (used - plain).abs().amax(dim=(1, 2)).min() > 1e-4
        else:
            assert torch.equal(used, plain)
