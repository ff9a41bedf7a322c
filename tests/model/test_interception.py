"""The interception door: models computing attention in their own code, against the float64 reference.

A tiny random MPNet (eager softmax with a relative position bias) and three remote-code stand-ins the
tests write themselves: SDPA with rotary, eager softmax with an additive bias and rotary, and one whose
``unpad_inputs`` switch the loader must turn off.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.embedding import PosFairEmbedding
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.model.attention import PLAN_KWARG
from tests.utils import (
    STANDIN_SWITCHES,
    check_threads_keep_their_plans,
    eager_standin,
    sample_texts,
    save_standin_model,
    save_tiny_mpnet,
    torch_reference_vectors,
)

KINDS = ("mpnet", *STANDIN_SWITCHES)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {"mpnet": save_tiny_mpnet(tmp_path_factory.mktemp("mpnet"))}
    for kind, switches in STANDIN_SWITCHES.items():
        made[kind] = save_standin_model(tmp_path_factory.mktemp(kind), **switches)
    return made


@pytest.fixture(scope="module")
def encoders(folders):
    """Factory: one encoder per (kind, pooling, padding side), loaded once for the module."""
    loaded = {}

    def get(kind, pooling="first", padding="right"):
        key = (kind, pooling, padding)
        if key not in loaded:
            loaded[key] = PosFairEncoder(
                folders[kind], pooling=pooling, padding_side=padding, trust_remote_code=kind != "mpnet"
            )
        return loaded[key]

    return get


@pytest.fixture(scope="module")
def references(folders):
    """Each kind built without the package: MPNet by transformers, stand-ins by their own constructor."""
    built = {}

    def get(kind):
        if kind not in built:
            if kind == "mpnet":
                built[kind] = AutoModel.from_pretrained(folders[kind]).eval()
            else:  # the padded path is the ground truth: calibration is defined per sequence
                built[kind] = eager_standin(folders[kind], unpad_inputs=False)
        return built[kind]

    return get


reference_vectors = torch_reference_vectors


def assert_cosine(got, expected, threshold=0.99999):
    cosine = torch.nn.functional.cosine_similarity(torch.as_tensor(np.asarray(got)), expected, dim=-1)
    assert cosine.min().item() >= threshold, cosine


TEXTS = sample_texts(3, seed=7, min_words=20, max_words=60)


def config_for(variant, pooling):
    # mean pooling recalibrates every row; one layer keeps the row-by-row reference quick
    return CalibrationConfig(variant=variant, strength=0.8, basket_size=8, layers="last" if pooling == "mean" else 0.5)


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("pooling", ["first", "mean"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_variant_matches_the_float64_reference(encoders, references, kind, pooling, padding):
    encoder = encoders(kind, pooling, padding)
    assert encoder.attention_door == "interception"
    plain = encoder.encode_batch(TEXTS, None)
    assert_cosine(plain, reference_vectors(references(kind), encoder, TEXTS, None))
    for variant in ("uniform", "cls_soft", "cls_hard"):
        if pooling == "mean" and variant == "cls_hard":
            continue
        config = config_for(variant, pooling)
        got = encoder.encode_batch(TEXTS, config)
        assert_cosine(got, reference_vectors(references(kind), encoder, TEXTS, config))
        assert np.abs(got - plain).max() > 1e-4, variant  # calibration really changed the vectors


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("pooling", ["first", "mean"])
@pytest.mark.parametrize("kind", KINDS)
def test_dual_halves_equal_the_single_modes(encoders, kind, pooling, padding):
    encoder = encoders(kind, pooling, padding)
    config = config_for("cls_soft", pooling)
    dual = encoder.encode_batch(TEXTS, config, dual=True)
    width = encoder.dimension
    np.testing.assert_allclose(dual[:, :width], encoder.encode_batch(TEXTS, None), atol=2e-6)
    np.testing.assert_allclose(dual[:, width:], encoder.encode_batch(TEXTS, config), atol=2e-6)


@pytest.mark.parametrize("mode", ["calibrated", "dual"])
@pytest.mark.parametrize("pooling", ["first", "mean"])
@pytest.mark.parametrize("kind", ["mpnet", "sdpa", "softmax"])
def test_embedding_equals_the_reference(folders, encoders, references, kind, pooling, mode):
    encoder = encoders(kind, pooling)
    config = config_for("uniform", pooling)
    embedding = PosFairEmbedding(
        folders[kind], calibration=config, mode=mode, pooling=pooling, encoder=encoder, embed_batch_size=2
    )
    vectors = np.asarray(embedding.get_text_embedding_batch(TEXTS))
    expected = reference_vectors(references(kind), encoder, TEXTS, config)
    if mode == "dual":
        plain, vectors = vectors[:, : encoder.dimension], vectors[:, encoder.dimension :]
        assert_cosine(plain, reference_vectors(references(kind), encoder, TEXTS, None))
    assert_cosine(vectors, expected)


def test_a_forward_without_a_plan_is_the_models_own(encoders, references):
    """No plan, no mode pushed: the hooked model computes exactly what the bare one does."""
    encoder = encoders("softmax")
    batch = encoder.tokenize(TEXTS)
    with torch.no_grad():
        hooked = encoder.model(**batch).last_hidden_state
        bare = references("softmax")(**batch).last_hidden_state
    assert torch.equal(hooked, bare)


def test_the_recorder_sees_every_layer_and_only_calibrated_ones_change(encoders):
    encoder = encoders("mpnet")
    seen = []
    batch = encoder.tokenize(TEXTS)
    plan = encoder.plan_for(
        batch["attention_mask"],
        CalibrationConfig(basket_size=8, layers="last"),
        recorder=lambda layer, plain, used: seen.append((layer, torch.equal(plain, used), tuple(plain.shape))),
    )
    with torch.no_grad():
        encoder.model(**batch, **{PLAN_KWARG: plan})
    width = batch["input_ids"].shape[1]
    assert seen == [(i, i != 3, (3, 4, width)) for i in range(4)]


def test_a_failing_forward_leaves_no_mode_behind(encoders):
    encoder = encoders("sdpa")
    before = encoder.encode_batch(TEXTS, None)
    batch = encoder.tokenize(TEXTS)
    wrong = encoder.plan_for(encoder.tokenize(TEXTS[:2])["attention_mask"], CalibrationConfig(basket_size=8))
    with pytest.raises(RuntimeError, match="plan describes 2 sequences"), torch.no_grad():
        encoder.model(**batch, **{PLAN_KWARG: wrong})
    assert torch._C._len_torch_function_stack() == 0  # the forward hooks (always_call) popped every mode
    assert np.array_equal(encoder.encode_batch(TEXTS, None), before)


def test_threads_with_different_plans_stay_apart(encoders):
    encoder = encoders("softmax")
    texts = sample_texts(6, seed=3, min_words=20, max_words=60)
    configs = [
        CalibrationConfig(basket_size=8),
        CalibrationConfig(variant="uniform", strength=1.0, basket_size=8),
        None,
    ]
    check_threads_keep_their_plans(lambda config: encoder.encode(texts, config, batch_size=2), configs)


# each class once, the poolings and padding sides spread over them to keep the suite quick
NATIVE_WITHOUT_LAYER_IDX = [
    ("GteConfig", "first", "right"),
    ("NomicBertConfig", "mean", "left"),
    ("JinaEmbeddingsV3Config", "mean", "right"),
]


@pytest.mark.parametrize("config_name,pooling,padding", NATIVE_WITHOUT_LAYER_IDX)
def test_native_classes_without_layer_idx_take_the_interception(tmp_path, config_name, pooling, padding):
    """transformers' own GteModel, NomicBertModel and JinaEmbeddingsV3Model call the AttentionInterface without
    a layer_idx; the interception sees the SDPA call transformers makes for them inside each layer."""
    import copy

    import transformers
    from transformers import AutoTokenizer

    from tests.utils import _COMMON, minilm_path

    config = getattr(transformers, config_name)(**_COMMON, max_position_embeddings=512)
    torch.manual_seed(0)
    AutoModel.from_config(copy.deepcopy(config)).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(tmp_path)
    encoder = PosFairEncoder(str(tmp_path), pooling=pooling, padding_side=padding)
    assert encoder.attention_door == "interception"
    calibration = config_for("cls_soft", pooling)
    reference = AutoModel.from_pretrained(str(tmp_path), attn_implementation="sdpa").eval()
    got = encoder.encode_batch(TEXTS, calibration)
    assert_cosine(got, reference_vectors(reference, encoder, TEXTS, calibration))
    assert np.abs(got - encoder.encode_batch(TEXTS, None)).max() > 1e-4


def test_sea_prompts_tag_and_pickling_work_on_the_interception(folders, encoders):
    """The rest of the package sits above the door: SEA, prompts, the tag and pickling need nothing new."""
    import pickle

    from posfair_llamaindex.encoding.sea import ChunkerConfig

    encoder = encoders("softmax", "mean")
    sea = PosFairEmbedding(
        folders["softmax"], mode="sea", chunker=ChunkerConfig(kind="token", chunk_size=16), encoder=encoder
    )
    vector = np.asarray(sea.get_text_embedding(TEXTS[0]))
    assert vector.shape == (encoder.dimension,) and np.isfinite(vector).all()
    assert np.abs(vector - encoder.encode(TEXTS[:1], None)[0]).max() > 1e-4  # chunked, not one pass

    config = config_for("cls_soft", "mean")
    prompted = encoder.encode(TEXTS, config, prompt="passage: ")
    np.testing.assert_allclose(prompted, encoder.encode(["passage: " + t for t in TEXTS], config), atol=2e-6)

    embedding = PosFairEmbedding(
        folders["softmax"], calibration=config, pooling="mean", trust_remote_code=True, encoder=encoder
    )
    assert embedding.tag()["model_weights"].startswith("sha256:")
    received = pickle.loads(pickle.dumps(embedding))  # reloads the model in the receiver, remote code included
    np.testing.assert_allclose(
        received.get_text_embedding_batch(TEXTS), embedding.get_text_embedding_batch(TEXTS), atol=2e-6
    )
    assert received.fingerprint() == embedding.fingerprint()
