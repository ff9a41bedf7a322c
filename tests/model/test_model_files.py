"""Reading sentence-transformers model folders written by hand, and identifying weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from posfair_llamaindex.model.model_files import read_sentence_transformer_files, weights_identity

TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}
DENSE = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
NORMALIZE = {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}


def write_folder(folder: Path, modules, pooling_config=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "modules.json").write_text(json.dumps(modules))
    if pooling_config is not None:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 4, **pooling_config}))
    return folder


def flags(cls=False, mean=False, last=False, max_=False, **extra):
    return {
        "pooling_mode_cls_token": cls,
        "pooling_mode_mean_tokens": mean,
        "pooling_mode_lasttoken": last,
        "pooling_mode_max_tokens": max_,
        **extra,
    }


@pytest.mark.parametrize(
    "config,expected",
    [
        (flags(cls=True), "first"),
        (flags(mean=True), "mean"),
        (flags(last=True), "last"),
        ({"pooling_mode": "cls"}, "first"),
        ({"pooling_mode": "mean"}, "mean"),
        ({"pooling_mode": "lasttoken"}, "last"),
        ({"pooling_mode": "lasttoken", "pooling_mode_cls_token": True}, "last"),  # the string wins over flags
    ],
)
def test_pooling_from_flags_and_mode_strings(tmp_path, config, expected):
    folder = write_folder(tmp_path / "model", [TRANSFORMER, POOLING], config)
    found = read_sentence_transformer_files(folder)
    assert found.pooling == expected
    assert found.dense == [] and found.normalize is False and found.prompts == {} and found.max_seq_length is None


@pytest.mark.parametrize(
    "config,message",
    [
        (flags(cls=True, mean=True), "cannot reproduce pooling"),
        (flags(), "cannot reproduce pooling"),
        (flags(max_=True), "cannot reproduce pooling"),
        (flags(mean=True, pooling_mode_mean_sqrt_len_tokens=True), "pooling_mode_mean_sqrt_len_tokens"),
        (flags(mean=True, pooling_mode_weightedmean_tokens=True), "cannot reproduce pooling"),
        ({"pooling_mode": "max"}, "pooling mode 'max' is not supported"),
    ],
)
def test_unsupported_pooling_is_refused(tmp_path, config, message):
    folder = write_folder(tmp_path / "model", [TRANSFORMER, POOLING], config)
    with pytest.raises(ValueError, match=message) as error:
        read_sentence_transformer_files(folder)
    assert str(folder / "1_Pooling") in str(error.value)


def test_unsupported_module_names_the_folder(tmp_path):
    folder = write_folder(
        tmp_path / "odd-model",
        [TRANSFORMER, {"idx": 1, "path": "1_LayerNorm", "type": "sentence_transformers.models.LayerNorm"}],
    )
    with pytest.raises(ValueError, match="LayerNorm") as error:
        read_sentence_transformer_files(folder)
    assert str(folder) in str(error.value) and "supported: Transformer, Pooling, Dense, Normalize" in str(error.value)


def write_dense(folder: Path, activation="torch.nn.modules.activation.Tanh", bias=True, weights="safetensors"):
    dense = folder / "2_Dense"
    dense.mkdir(parents=True, exist_ok=True)
    config = {"in_features": 4, "out_features": 3, "bias": bias, "activation_function": activation}
    (dense / "config.json").write_text(json.dumps(config))
    state = {"linear.weight": torch.arange(12, dtype=torch.float32).view(3, 4) / 10}
    if bias:
        state["linear.bias"] = torch.tensor([0.5, -0.5, 0.0])
    if weights == "safetensors":
        save_file(state, str(dense / "model.safetensors"))
    else:
        torch.save(state, dense / "pytorch_model.bin")
    return state


@pytest.mark.parametrize("weights", ["safetensors", "bin"])
def test_dense_head_and_normalize(tmp_path, weights):
    folder = write_folder(
        tmp_path / "model", [NORMALIZE, DENSE, POOLING, TRANSFORMER], flags(mean=True)
    )  # order by idx
    state = write_dense(folder, weights=weights)
    found = read_sentence_transformer_files(folder)
    assert found.pooling == "mean" and found.normalize is True and len(found.dense) == 1
    linear, activation = found.dense[0]
    assert isinstance(linear, torch.nn.Linear) and isinstance(activation, torch.nn.Tanh)
    torch.testing.assert_close(linear.weight, state["linear.weight"])
    torch.testing.assert_close(linear.bias, state["linear.bias"])
    x = torch.tensor([[1.0, 0.0, -1.0, 2.0]])
    torch.testing.assert_close(found.dense[0](x), torch.tanh(x @ state["linear.weight"].T + state["linear.bias"]))


def test_dense_without_bias_and_unknown_activation(tmp_path):
    folder = write_folder(tmp_path / "model", [TRANSFORMER, POOLING, DENSE], flags(cls=True))
    write_dense(folder, activation="torch.nn.modules.linear.Identity", bias=False)
    ((linear, activation),) = read_sentence_transformer_files(folder).dense
    assert linear.bias is None and isinstance(activation, torch.nn.Identity)
    write_dense(folder, activation="torch.nn.modules.activation.Softplus")
    with pytest.raises(ValueError, match="Softplus"):
        read_sentence_transformer_files(folder)


def test_prompts_and_max_seq_length(tmp_path):
    folder = write_folder(tmp_path / "model", [TRANSFORMER, POOLING], flags(last=True))
    prompts = {"query": "Instruct: find the passage\nQuery: ", "document": ""}
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": prompts, "default_prompt_name": None})
    )
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 384, "do_lower_case": False}))
    found = read_sentence_transformer_files(folder)
    assert found.prompts == prompts and found.max_seq_length == 384 and found.pooling == "last"
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": None}))
    assert read_sentence_transformer_files(folder).prompts == {}


def test_folder_without_modules_gives_empty_defaults(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    for folder in (tmp_path, None):
        found = read_sentence_transformer_files(folder)
        assert (found.pooling, found.dense, found.normalize, found.prompts, found.max_seq_length) == (
            None,
            [],
            False,
            {},
            None,
        )


def test_weights_identity(tmp_path):
    one, two, other = tmp_path / "a" / "model", tmp_path / "b" / "copy", tmp_path / "other"
    for folder, payload in ((one, b"weights-1"), (two, b"weights-1"), (other, b"weights-2")):
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(payload)
        (folder / "README.md").write_text(str(folder))  # not a weight file: ignored
    identity = weights_identity(one)
    assert identity.startswith("sha256:") and len(identity) == len("sha256:") + 16
    assert weights_identity(two) == identity  # same bytes, another path
    assert weights_identity(other) != identity
    assert weights_identity(tmp_path / "a" / ".." / "a" / "model") == identity
    (two / "2_Dense").mkdir()
    (two / "2_Dense" / "model.safetensors").write_bytes(b"dense")
    assert weights_identity(two) != identity  # every weight file counts


def test_weights_identity_of_a_hub_snapshot_and_of_nothing(tmp_path):
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "models--org--name" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").write_bytes(b"weights")
    assert weights_identity(snapshot) == f"revision:{revision}"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    assert weights_identity(empty) == "unknown" and weights_identity(None) == "unknown"
