"""Loading: which door a model takes, remote-code repair, unpadding and kernel switches, probe refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModel

from posfair_llamaindex.encoding.encoder import PosFairEncoder, UnsupportedModelError
from posfair_llamaindex.model.loading import padded_torch_switches
from posfair_llamaindex.model.remote_code import rebuild_unsaved_buffers, restore_transformers4_helpers
from tests.utils import STANDIN_SWITCHES, eager_standin, minilm_path, save_standin_model, save_tiny_mpnet


def standin(tmp_path: Path, name: str, **switches) -> str:
    folder = tmp_path / name
    folder.mkdir()
    return save_standin_model(folder, **switches)


def test_interface_models_keep_the_interface_door(tiny_model_dir):
    assert PosFairEncoder(minilm_path()).attention_door == "interface"
    assert PosFairEncoder(tiny_model_dir("qwen3", "last")).attention_door == "interface"


def test_mpnet_goes_through_the_interception_with_its_own_stack(tmp_path):
    encoder = PosFairEncoder(save_tiny_mpnet(tmp_path))
    assert encoder.attention_door == "interception"
    assert encoder.num_layers == 4
    # found by structure, not by name: the ModuleList of MPNet's layers
    assert encoder._layers == list(encoder.model.encoder.layer)


def test_remote_code_needs_to_be_trusted(tmp_path):
    folder = standin(tmp_path, "softmax", **STANDIN_SWITCHES["softmax"])
    with pytest.raises(ValueError, match="trust_remote_code=True \\(CLI --trust-remote-code\\)"):
        PosFairEncoder(folder)


def test_buffers_left_uninitialised_by_loading_are_rebuilt(tmp_path):
    folder = standin(tmp_path, "softmax", **STANDIN_SWITCHES["softmax"])
    eager = eager_standin(folder)
    loaded = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    inv_freq = "blocks.0.rotary.inv_freq"
    # the fact this repairs: transformers 5 does not compute non-persistent buffers that _init_weights skips
    assert not torch.equal(dict(loaded.named_buffers())[inv_freq], dict(eager.named_buffers())[inv_freq])
    restore_transformers4_helpers(loaded)  # its forward calls get_extended_attention_mask
    rebuilt = rebuild_unsaved_buffers(loaded)
    assert inv_freq in rebuilt and "blocks.3.slopes" in rebuilt
    ids = torch.randint(1000, 2000, (2, 30))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden_state, eager(ids).last_hidden_state)
    assert rebuild_unsaved_buffers(loaded) == []  # nothing left to repair


def test_the_unpadding_switch_is_turned_to_the_padded_path(tmp_path):
    folder = standin(tmp_path, "unpad", **STANDIN_SWITCHES["unpad"])
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    assert padded_torch_switches(config) == {"unpad_inputs": True} and config.unpad_inputs is False
    encoder = PosFairEncoder(folder, trust_remote_code=True)
    assert encoder.model.config.unpad_inputs is False


def test_an_unknown_kernel_switch_is_refused_by_name(tmp_path):
    folder = Path(standin(tmp_path, "kernel", **STANDIN_SWITCHES["softmax"]))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "use_triton_flash_kernels": True}))
    with pytest.raises(UnsupportedModelError, match="config switch use_triton_flash_kernels=True"):
        PosFairEncoder(str(folder), trust_remote_code=True)


def test_packing_without_a_known_switch_is_refused_by_the_probe(tmp_path):
    folder = standin(tmp_path, "packed", attention="softmax", sequence_layout="packed")
    with pytest.raises(UnsupportedModelError, match=r"layer 0 computes attention as softmax\(dim=3\) over \(1, 4, "):
        PosFairEncoder(folder, trust_remote_code=True)


def test_a_second_attention_softmax_in_a_layer_is_refused(tmp_path):
    folder = standin(tmp_path, "twice", attention="softmax", extra_softmax=True)
    with pytest.raises(UnsupportedModelError, match="layer 0 made 2 attention calls where exactly one is needed"):
        PosFairEncoder(folder, trust_remote_code=True)
