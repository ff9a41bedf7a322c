"""The encoder: plain/calibrated paths, invariances, threads, limits and refusals."""

from __future__ import annotations

import copy
import threading
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer, MPNetConfig

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder, UnsupportedModelError, check_texts
from tests.utils import check_threads_keep_their_plans, minilm_path, sample_texts, save_standin_model


@pytest.fixture(scope="module")
def minilm_first():
    return PosFairEncoder(minilm_path(), pooling="first")


@pytest.fixture(scope="module")
def long_texts():
    return sample_texts(6, seed=11, min_words=150, max_words=400)


def test_minilm_is_detected_as_mean_pooled_with_full_window():
    encoder = PosFairEncoder(minilm_path())
    assert encoder.pooling == "mean"
    assert encoder.max_length == 512
    assert encoder.content_limit == 510  # [CLS] and [SEP] take two of the 512 positions
    assert encoder.num_layers == 6
    assert encoder.dimension == 384
    assert encoder.files.normalize


def test_strength_zero_equals_plain(minilm_first, long_texts):
    plain = minilm_first.encode(long_texts, None)
    zero = minilm_first.encode(long_texts, CalibrationConfig(strength=0.0))
    assert np.array_equal(plain, zero)
    calibrated = minilm_first.encode(long_texts, CalibrationConfig())
    assert np.abs(calibrated - plain).max() > 1e-3


def test_short_document_equals_plain(minilm_first):
    short = ["A short passage about the river city museum and its maps."]
    assert len(minilm_first.tokenize(short)["input_ids"][0]) - 1 < 128
    plain = minilm_first.encode(short, None)
    assert np.array_equal(minilm_first.encode(short, CalibrationConfig(strength=1.0)), plain)


def test_short_document_in_a_mixed_batch_equals_plain(minilm_first, long_texts):
    short = "A short passage about barley."
    mixed = minilm_first.encode_batch([long_texts[0], short, long_texts[1]], CalibrationConfig())
    alone = minilm_first.encode_batch([short], None)
    np.testing.assert_allclose(mixed[1], alone[0], atol=2e-6)


def test_mean_pooled_short_document_in_mixed_batch_equals_plain():
    encoder = PosFairEncoder(minilm_path())
    texts = sample_texts(2, seed=3, min_words=200, max_words=300) + ["barley near the bridge"]
    mixed = encoder.encode_batch(texts, CalibrationConfig())
    np.testing.assert_allclose(mixed[2], encoder.encode_batch(texts[2:], None)[0], atol=2e-6)
    assert np.abs(mixed[0] - encoder.encode_batch(texts[:1], None)[0]).max() > 1e-3


def test_batch_composition_and_order_change_nothing(minilm_first, long_texts):
    config = CalibrationConfig()
    together = minilm_first.encode(long_texts, config, batch_size=6)
    alone = np.stack([minilm_first.encode([text], config)[0] for text in long_texts])
    np.testing.assert_allclose(together, alone, atol=2e-6)
    shuffled = minilm_first.encode(long_texts[::-1], config, batch_size=4)[::-1]
    np.testing.assert_allclose(together, shuffled, atol=2e-6)


@pytest.mark.parametrize("family,pooling", [("qwen3", "last"), ("xlm-roberta", "first"), ("modernbert", "mean")])
def test_padding_side_changes_nothing(tiny_model_dir, family, pooling):
    folder = tiny_model_dir(family, pooling)
    texts = sample_texts(5, seed=9, min_words=5, max_words=150)
    config = CalibrationConfig(basket_size=16, strength=0.8)
    right = PosFairEncoder(folder, padding_side="right").encode(texts, config, batch_size=5)
    left = PosFairEncoder(folder, padding_side="left").encode(texts, config, batch_size=5)
    np.testing.assert_allclose(right, left, atol=2e-5)


def test_query_path_is_never_calibrated(minilm_first, long_texts):
    from posfair_llamaindex.embedding import PosFairEmbedding

    embedding = PosFairEmbedding(minilm_path(), pooling="first", encoder=minilm_first)
    query = embedding.get_query_embedding(long_texts[0])
    np.testing.assert_allclose(query, minilm_first.encode(long_texts[:1], None)[0], atol=1e-6)
    document = embedding.get_text_embedding(long_texts[0])
    assert np.abs(np.array(document) - np.array(query)).max() > 1e-3


def test_threads_do_not_see_each_others_plans(minilm_first, long_texts):
    configs = [CalibrationConfig(), CalibrationConfig(variant="uniform", strength=1.0), None]
    check_threads_keep_their_plans(lambda config: minilm_first.encode(long_texts, config, batch_size=3), configs)


def test_two_encoders_with_different_models_interleave(minilm_first, tiny_model_dir):
    tiny = PosFairEncoder(tiny_model_dir("bert", "first"))
    texts = sample_texts(3, seed=4, min_words=150, max_words=200)
    config = CalibrationConfig(basket_size=16)
    expected_tiny, expected_minilm = tiny.encode(texts, config), minilm_first.encode(texts, config)
    out = {}
    threads = [
        threading.Thread(target=lambda: out.__setitem__("tiny", tiny.encode(texts, config))),
        threading.Thread(target=lambda: out.__setitem__("minilm", minilm_first.encode(texts, config))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_allclose(out["tiny"], expected_tiny, atol=2e-6)
    np.testing.assert_allclose(out["minilm"], expected_minilm, atol=2e-6)


def test_truncation_warns_once(tiny_model_dir):
    encoder = PosFairEncoder(tiny_model_dir("bert", "first"), max_length=32)
    texts = sample_texts(3, seed=1, min_words=60, max_words=80)
    with pytest.warns(UserWarning, match="exceed max_length=32"):
        encoder.encode(texts, CalibrationConfig(basket_size=8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoder.encode(texts, CalibrationConfig(basket_size=8))


def test_half_precision_encodes_finite_vectors(tiny_model_dir):
    encoder = PosFairEncoder(tiny_model_dir("qwen3", "last"), dtype="bfloat16")
    texts = sample_texts(3, seed=2, min_words=40, max_words=150)
    vectors = encoder.encode(texts, CalibrationConfig(basket_size=16))
    assert np.isfinite(vectors).all()
    reference = PosFairEncoder(tiny_model_dir("qwen3", "last")).encode(texts, CalibrationConfig(basket_size=16))
    assert (vectors * reference).sum(1).min() > 0.97


def test_unsupported_model_is_refused_at_construction(tmp_path):
    # MPNet computes attention in its own code: the interception door takes it (tests/test_interception.py)
    config = MPNetConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    AutoModel.from_config(copy.deepcopy(config)).save_pretrained(tmp_path / "mpnet")
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(tmp_path / "mpnet")
    assert PosFairEncoder(str(tmp_path / "mpnet"), pooling="mean").attention_door == "interception"
    # two attention softmaxes per layer reach neither door
    (tmp_path / "twice").mkdir()
    folder = save_standin_model(tmp_path / "twice", attention="softmax", extra_softmax=True)
    with pytest.raises(UnsupportedModelError, match="Supported: models whose attention goes through"):
        PosFairEncoder(folder, trust_remote_code=True)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"pooling": "max"}, "pooling must be one of"),
        ({"max_length": 4096}, "exceeds what"),
        ({"max_length": 1}, "max_length must be an int >= 2"),
        ({"dtype": "float64"}, "dtype 'float64' is not supported"),
        ({"padding_side": "middle"}, "padding_side"),
        ({"device": "nonsense"}, "not a valid torch device"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PosFairEncoder(minilm_path(), **kwargs)


def test_layer_spec_beyond_model_is_refused(minilm_first):
    with pytest.raises(ValueError, match="more layers than the model has"):
        minilm_first.encode(["text"], CalibrationConfig(layers=7))
    with pytest.raises(ValueError, match="out of range"):
        minilm_first.encode(["text"], CalibrationConfig(layers=(0, 6)))


def test_cls_hard_is_refused_for_mean_pooling():
    encoder = PosFairEncoder(minilm_path())
    with pytest.raises(ValueError, match="cls_hard"):
        encoder.encode(["text"], CalibrationConfig(variant="cls_hard"))


def test_check_texts_names_the_position():
    with pytest.raises(ValueError, match="position 2"):
        check_texts(["a", "b", "   "])
    with pytest.raises(TypeError, match="position 1 is int"):
        check_texts(["a", 3])
    with pytest.raises(TypeError, match="single string"):
        check_texts("abc")


def test_dense_head_from_sentence_transformers_files(tmp_path, tiny_model_dir):
    import json
    import shutil

    from safetensors.torch import save_file

    folder = tmp_path / "dense"
    shutil.copytree(tiny_model_dir("bert", "first"), folder)
    modules = json.loads((folder / "modules.json").read_text())
    modules += [
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "config.json").write_text(
        json.dumps(
            {
                "in_features": 64,
                "out_features": 24,
                "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh",
            }
        )
    )
    torch.manual_seed(0)
    weight, bias = torch.randn(24, 64), torch.randn(24)
    save_file({"linear.weight": weight, "linear.bias": bias}, str(folder / "2_Dense" / "model.safetensors"))
    encoder = PosFairEncoder(str(folder))
    assert encoder.dimension == 24 and encoder.files.normalize
    texts = ["the river city museum"]
    plain = PosFairEncoder(tiny_model_dir("bert", "first")).encode(texts, None, normalize=False)
    expected = torch.nn.functional.normalize(torch.tanh(torch.as_tensor(plain) @ weight.T + bias), dim=-1)
    np.testing.assert_allclose(encoder.encode(texts, None), expected.numpy(), atol=1e-5)
