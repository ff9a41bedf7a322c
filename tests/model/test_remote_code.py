"""Remote code written for transformers 4, on transformers 5: the removed PreTrainedModel helpers, the dtype that
runs, SDPA revisions, causal remote code, and weights that do not fit the class that loads them.

The stand-ins (tests/standin/modeling_standin.py) call the helpers the way gte's NewModel and nomic-bert do;
tests/published/ runs the published files themselves when they are on the machine.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertModel, PreTrainedModel

from posfair_llamaindex.encoding.encoder import PosFairEncoder, UnsupportedModelError
from posfair_llamaindex.model.attention import PROBE_KWARG
from posfair_llamaindex.model.loading import honour_dtype
from posfair_llamaindex.model.remote_code import REMOVED_HELPERS, restore_transformers4_helpers
from posfair_llamaindex.model.weights_fit import MismatchedWeightsError
from tests.utils import (
    eager_standin,
    sample_texts,
    save_standin_model,
    save_tiny_model,
    standin_module,
    torch_reference_vectors,
)

MIN32 = torch.finfo(torch.float32).min
TEXTS = sample_texts(3, seed=11, min_words=20, max_words=60)


def standin(tmp_path: Path, name: str, **switches) -> str:
    folder = tmp_path / name
    folder.mkdir()
    return save_standin_model(folder, **switches)


@pytest.fixture
def model():
    """A bare stand-in instance (a remote-code class: defined outside transformers), helpers restored."""
    modeling = standin_module()
    config = modeling.StandInConfig(num_hidden_layers=3, num_attention_heads=4)
    config._attn_implementation = "eager"
    instance = modeling.StandInModel(config)
    restore_transformers4_helpers(instance)
    return instance


# ----------------------------------------------------------------------------- transformers 4's semantics


def test_the_extended_mask_is_an_additive_bias_in_the_models_dtype(model):
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    bias = model.get_extended_attention_mask(mask, mask.shape)
    assert bias.shape == (2, 1, 1, 3) and bias.dtype == torch.float32
    expected = torch.tensor([[0.0, 0.0, MIN32], [0.0, MIN32, MIN32]])[:, None, None, :]
    assert torch.equal(bias, expected)
    half = model.get_extended_attention_mask(mask, mask.shape, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16 and half[0, 0, 0, 2] == torch.finfo(torch.bfloat16).min
    model.to(torch.bfloat16)  # no dtype given: the model's own
    assert model.get_extended_attention_mask(mask, mask.shape).dtype == torch.bfloat16
    square = torch.tensor([[[1, 0], [1, 1]]])  # [B, Lq, Lk] is only made broadcastable over heads
    assert model.get_extended_attention_mask(square, (1, 2)).shape == (1, 1, 2, 2)
    with pytest.raises(ValueError, match="Wrong shape for input_ids"):
        model.get_extended_attention_mask(torch.ones(3), (3,))


def test_a_decoder_gets_the_causal_mask_and_past_keys_stay_visible(model):
    model.config.is_decoder = True
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])  # the first sequence padded on the left
    bias = model.get_extended_attention_mask(mask, mask.shape)
    assert bias.shape == (2, 1, 3, 3)
    seen = bias == 0
    assert seen[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert seen[0, 0].tolist() == [[False, False, False], [False, True, False], [False, True, True]]
    # two past keys (a mask longer than the queries): every query sees them
    longer = torch.ones(1, 4, dtype=torch.long)
    causal = model.create_extended_attention_mask_for_decoder((1, 2), longer)
    assert causal.tolist() == [[[[1, 1, 1, 0], [1, 1, 1, 1]]]]


def test_invert_attention_mask(model):
    inverted = model.invert_attention_mask(torch.tensor([[1, 0]]))
    assert inverted.shape == (1, 1, 1, 2) and inverted[0, 0, 0].tolist() == [0.0, MIN32]
    assert model.invert_attention_mask(torch.ones(1, 2, 2)).shape == (1, 1, 2, 2)


def test_head_masks_take_transformers_4s_shapes(model):
    assert model.get_head_mask(None, 3) == [None, None, None]
    every_layer = model.get_head_mask(torch.tensor([1.0, 0.0, 1.0, 1.0]), 3)
    assert every_layer.shape == (3, 1, 4, 1, 1) and every_layer[2, 0, :, 0, 0].tolist() == [1, 0, 1, 1]
    per_layer = model.get_head_mask(torch.eye(3, 4), 3)
    assert per_layer.shape == (3, 1, 4, 1, 1) and per_layer[1, 0, :, 0, 0].tolist() == [0, 1, 0, 0]
    assert model.get_head_mask(torch.ones(4), 3, is_attention_chunked=True).shape == (3, 1, 4, 1, 1, 1)
    model.to(torch.bfloat16)
    assert model.get_head_mask(torch.ones(4), 3).dtype == torch.bfloat16


def test_a_head_mask_reaches_the_heads_as_remote_code_applies_it(model):
    """The stand-in multiplies the probabilities by ``head_mask[i]``, as gte's eager attention does."""
    model.eval()
    ids = torch.randint(1000, 2000, (2, 9))
    with torch.no_grad():
        kept = model(ids, head_mask=torch.ones(4)).last_hidden_state
        assert torch.equal(kept, model(ids).last_hidden_state)
        assert not torch.allclose(kept, model(ids, head_mask=torch.tensor([1.0, 0.0, 1.0, 1.0])).last_hidden_state)


# ----------------------------------------------------------------------------- where the helpers go, and the log


def test_helpers_go_to_the_loaded_instances_only(caplog, monkeypatch):
    from posfair_llamaindex.model import remote_code

    monkeypatch.setattr(remote_code, "_ANNOUNCED", set())  # as in a fresh process
    modeling = standin_module()
    config = modeling.StandInConfig(num_hidden_layers=2)
    config._attn_implementation = "eager"

    class KeepsItsOwn(modeling.StandInModel):
        def get_extended_attention_mask(self, attention_mask, input_shape):
            return "its own"

    first, second, own = modeling.StandInModel(config), modeling.StandInModel(config), KeepsItsOwn(config)
    with caplog.at_level(logging.INFO, logger="posfair_llamaindex.model.remote_code"):
        given = restore_transformers4_helpers(first)
        assert restore_transformers4_helpers(second) == given  # same class: given again, said once
    assert given == {"StandInModel": list(REMOVED_HELPERS)}
    said = [r.getMessage() for r in caplog.records if "transformers 5 removed" in r.getMessage()]
    assert len(said) == 1 and "StandInModel" in said[0] and "get_extended_attention_mask" in said[0]
    assert "get_extended_attention_mask" in vars(first)  # on the instance
    for name in REMOVED_HELPERS:  # nothing on the classes, nothing on transformers
        assert not hasattr(modeling.StandInModel, name) and not hasattr(PreTrainedModel, name)
    assert not hasattr(modeling.StandInModel(config), "get_extended_attention_mask")  # a fresh instance has none
    assert "get_extended_attention_mask" not in restore_transformers4_helpers(own)["KeepsItsOwn"]
    assert own.get_extended_attention_mask(None, None) == "its own"
    native = BertModel(BertModelConfig())
    assert restore_transformers4_helpers(native) == {} and not hasattr(native, "get_extended_attention_mask")


def BertModelConfig():
    from transformers import BertConfig

    return BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)


# ----------------------------------------------------------------------------- SDPA revisions and causal code


def test_an_sdpa_revision_runs_its_sdpa_class_through_the_sdpa_interception(tmp_path):
    folder = standin(tmp_path, "revision", attention="auto", rotary=True, auto_model="StandInSdpaModel")
    encoder = PosFairEncoder(folder, trust_remote_code=True)
    assert encoder.model.config._attn_implementation == "sdpa"
    assert {type(block.attention).__name__ for block in encoder.model.blocks} == {"SdpaAttention"}
    seen = []
    with torch.inference_mode():
        encoder.model(**encoder.tokenize(TEXTS), **{PROBE_KWARG: seen})
    assert [call.kind for call in seen] == ["sdpa"] * 4
    eager = standin(tmp_path, "eager-revision", attention="auto", rotary=True)  # no SDPA declared: eager
    assert type(PosFairEncoder(eager, trust_remote_code=True).model.blocks[0].attention).__name__ == "EagerAttention"


@pytest.mark.parametrize("pooling,padding", [("last", "left"), ("last", "right"), ("mean", "right")])
def test_causal_remote_code_calibrates_exactly(tmp_path, pooling, padding):
    """A decoder (``is_decoder``): get_extended_attention_mask gives it transformers 4's causal bias."""
    from posfair_llamaindex.calibration.config import CalibrationConfig

    folder = standin(tmp_path, "decoder", attention="sdpa", rotary=True, is_decoder=True, pooling=pooling)
    encoder = PosFairEncoder(folder, pooling=pooling, padding_side=padding, trust_remote_code=True)
    truth = eager_standin(folder)
    plain = encoder.encode_batch(TEXTS, None)
    for variant in ("uniform", "cls_soft") + (("cls_hard",) if pooling == "last" else ()):
        config = CalibrationConfig(variant=variant, strength=0.8, basket_size=8, layers="last")
        got = encoder.encode_batch(TEXTS, config)
        expected = torch_reference_vectors(truth, encoder, TEXTS, config)
        cosine = torch.nn.functional.cosine_similarity(torch.as_tensor(got), expected)
        assert cosine.min() >= 0.99999, (variant, cosine)
        assert np.abs(got - plain).max() > 1e-4, variant


# ----------------------------------------------------------------------------- the dtype that runs


def test_the_dtype_asked_for_runs_when_the_code_reads_torch_dtype(tmp_path, caplog):
    folder = standin(tmp_path, "own-loader", attention="sdpa", rotary=True, auto_model="StandInOwnLoaderModel")
    with caplog.at_level(logging.WARNING, logger="posfair_llamaindex.model.loading"):
        encoder = PosFairEncoder(folder, dtype="bfloat16", trust_remote_code=True)
    assert type(encoder.model).__name__ == "StandInOwnLoaderModel"
    assert {p.dtype for p in encoder.model.parameters()} == {torch.bfloat16}
    assert any("reads another" in r.getMessage() and "cast them to bfloat16" in r.getMessage() for r in caplog.records)
    truth = eager_standin(folder).to(torch.bfloat16)
    cosine = torch.nn.functional.cosine_similarity(
        torch.as_tensor(encoder.encode_batch(TEXTS, None)), torch_reference_vectors(truth, encoder, TEXTS, None)
    )
    assert cosine.min() >= 0.999, cosine
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="posfair_llamaindex.model.loading"):
        PosFairEncoder(folder, trust_remote_code=True)  # float32 asked, float32 loaded: nothing to say
    assert not [r for r in caplog.records if "reads another" in r.getMessage()]


def test_a_model_that_cannot_take_the_dtype_is_refused():
    class Pinned(torch.nn.Linear):
        def _apply(self, fn, recurse=True):  # code that keeps its weights in float32 whatever it is asked
            return self

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), Pinned(2, 2))
    with pytest.raises(UnsupportedModelError, match="parameters stay in float32 after casting"):
        honour_dtype("pinned", model, torch.bfloat16)
    honour_dtype("fine", torch.nn.Linear(2, 2), torch.float32)  # nothing to do


# ----------------------------------------------------------------------------- weights that do not fit


def rewrite_config(folder: str, **changes) -> None:
    path = Path(folder) / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def rewrite_weights(folder: str, rename=None, drop=()) -> list[str]:
    path = Path(folder) / "model.safetensors"
    state = load_file(str(path))
    renamed = {}
    for key, value in state.items():
        if any(key.startswith(prefix) for prefix in drop):
            continue
        new = rename(key) if rename else key
        renamed[new] = value
    save_file(renamed, str(path), metadata={"format": "pt"})
    return sorted(set(state) - set(renamed))


def test_auto_map_is_honoured_whatever_the_model_type(tmp_path):
    """A model_type transformers knows ("bert") with the folder's own code: trust on runs the folder's class;
    trust off runs the built-in BertModel, which the stand-in's weights do not fit, and is refused by key."""
    folder = standin(tmp_path, "known-type", attention="softmax", rotary=True)
    rewrite_config(folder, model_type="bert")
    assert type(PosFairEncoder(folder, trust_remote_code=True).model).__name__ == "StandInModel"
    with pytest.raises(MismatchedWeightsError) as refused:
        PosFairEncoder(folder)
    message = str(refused.value)
    assert "do not fit BertModel" in message and "would be random" in message
    assert "embeddings.word_embeddings.weight" in message or "encoder.layer" in message
    assert "auto_map names its own code (modeling_standin.StandInModel)" in message and "--trust-remote-code" in message


def test_an_auto_map_without_an_automodel_entry_is_refused_by_name(tmp_path):
    folder = standin(tmp_path, "masked-lm-only", attention="softmax")
    rewrite_config(folder, auto_map={"AutoModelForMaskedLM": "modeling_standin.StandInModel"}, model_type="bert")
    with pytest.raises(
        UnsupportedModelError, match="AutoModelForMaskedLM -> modeling_standin.StandInModel.*no AutoModel"
    ):
        PosFairEncoder(folder, trust_remote_code=True)


def test_code_in_another_hub_repository_is_named(tmp_path):
    folder = standin(tmp_path, "upstream", attention="softmax")
    rewrite_config(
        folder,
        auto_map={
            "AutoConfig": "someone/their-code--modeling_standin.StandInConfig",
            "AutoModel": "someone/their-code--modeling_standin.StandInModel",
        },
    )
    with pytest.raises(FileNotFoundError, match="another hub repository .*someone/their-code--"):
        PosFairEncoder(folder, trust_remote_code=True)


def test_a_renamed_weight_is_refused_naming_both_keys(tmp_path):
    folder = save_tiny_model("bert", tmp_path)
    query = next(k for k in load_file(str(Path(folder) / "model.safetensors")) if k.endswith("query.weight"))
    renamed = query.replace("query.weight", "renamed_query.weight")
    rewrite_weights(folder, rename=lambda key: renamed if key == query else key)
    with pytest.raises(MismatchedWeightsError) as refused:
        PosFairEncoder(folder)
    assert f"would be random: {query}" in str(refused.value) and renamed in str(refused.value)


def test_a_checkpoint_with_more_layers_than_the_config_is_refused(tmp_path):
    folder = save_tiny_model("bert", tmp_path)
    rewrite_config(folder, num_hidden_layers=3)
    with pytest.raises(
        MismatchedWeightsError, match="the checkpoint holds .* weights inside the model where its class"
    ):
        PosFairEncoder(folder)


def test_a_missing_head_the_output_never_uses_is_only_logged(tmp_path, caplog):
    folder = save_tiny_model("bert", tmp_path)
    dropped = rewrite_weights(folder, drop=("pooler.",))
    assert dropped  # BertModel builds a pooler; the vectors pool the last hidden state, not its output
    with caplog.at_level(logging.INFO, logger="posfair_llamaindex.model.weights_fit"):
        PosFairEncoder(folder)
    assert any("unused by the output" in r.getMessage() and "pooler" in r.getMessage() for r in caplog.records)


def test_a_loader_of_its_own_that_skips_weights_is_refused(tmp_path):
    """nomic-bert loads with ``load_state_dict(strict=False)`` and prints the incompatible keys: nothing stops it."""
    folder = standin(tmp_path, "own-loader", attention="sdpa", rotary=True, auto_model="StandInOwnLoaderModel")
    rewrite_weights(folder, rename=lambda key: key.replace("blocks.1.qkv.", "blocks.1.qkv_old."))
    with pytest.raises(MismatchedWeightsError, match=r"blocks\.1\.qkv\.bias, blocks\.1\.qkv\.weight"):
        PosFairEncoder(folder, trust_remote_code=True)


def test_sdpa_dropout_in_eval_mode_is_refused(tmp_path):
    """nomic-bert passes its attention dropout to F.scaled_dot_product_attention in eval mode too."""
    folder = standin(tmp_path, "dropout", attention="sdpa", attention_dropout=0.1)
    with pytest.raises(UnsupportedModelError, match=r"dropout_p=0\.1 in eval mode .*attn_pdrop"):
        PosFairEncoder(folder, trust_remote_code=True)
