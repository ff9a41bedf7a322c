"""The published remote code itself: gte's NewModel (Alibaba-NLP's new-impl) and nomic-bert, tiny random weights.

These files are not ours and are not in the repository. The tier runs when $POSFAIR_PUBLISHED_CODE names a folder
holding ``gte/modeling.py``, ``gte/configuration.py``, ``nomic/modeling_hf_nomic_bert.py`` and
``nomic/configuration_hf_nomic_bert.py`` as published (nomic's needs ``einops``), and skips, saying why, otherwise.
Each folder is built here with an ``auto_map`` pointing at the files, a small config shaped like the released
models' (gte-multilingual-base: rope with NTK scaling, ``unpad_inputs`` and xformers on; nomic-embed-text-v1.5:
swiglu, full rotary, ``use_flash_attn`` on) and random weights. "gte-sdpa" is a revision that declares SDPA support,
written here as a two-line subclass, so that the published ``NewSdpaAttention`` runs.

The reference is the same class built by its own constructor with the folder's weights, the mask helpers from
tests/utils.py, and float64 attention calibrated row by row (tests/reference.py).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from tests.utils import give_reference_helpers, minilm_path, sample_texts, torch_reference_vectors, write_st_pooling

PUBLISHED = os.environ.get("POSFAIR_PUBLISHED_CODE")
FILES = {
    "gte": ("modeling.py", "configuration.py"),
    "nomic": ("modeling_hf_nomic_bert.py", "configuration_hf_nomic_bert.py"),
}
MISSING = (
    "set POSFAIR_PUBLISHED_CODE to a folder with the published gte/ and nomic/ modeling files"
    if not PUBLISHED
    else next(
        (
            f"{Path(PUBLISHED) / family / name} is missing"
            for family, names in FILES.items()
            for name in names
            if not (Path(PUBLISHED) / family / name).is_file()
        ),
        None,
    )
)
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"published remote code: {MISSING}")

SIZES = dict(num_hidden_layers=4, num_attention_heads=4)
GTE_CONFIG = dict(
    model_type="new",
    vocab_size=30522,
    hidden_size=64,
    intermediate_size=128,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.0,
    max_position_embeddings=512,
    type_vocab_size=1,
    layer_norm_type="layer_norm",
    layer_norm_eps=1e-12,
    position_embedding_type="rope",
    rope_theta=160000,
    rope_scaling={"type": "ntk", "factor": 2.0},
    pack_qkv=True,
    unpad_inputs=True,
    use_memory_efficient_attention=True,
    logn_attention_scale=False,
    logn_attention_clip1=False,
    pad_token_id=0,
    **SIZES,
)
NOMIC_CONFIG = dict(
    model_type="nomic_bert",
    activation_function="swiglu",
    n_embd=64,
    n_head=4,
    n_layer=4,
    n_inner=128,
    n_positions=8192,
    rotary_emb_fraction=1.0,
    rotary_emb_base=1000,
    rotary_emb_interleaved=False,
    qkv_proj_bias=False,
    mlp_fc1_bias=False,
    mlp_fc2_bias=False,
    prenorm=False,
    causal=False,
    type_vocab_size=2,
    use_flash_attn=True,
    attn_pdrop=0.0,
    embd_pdrop=0.0,
    resid_pdrop=0.0,
    summary_first_dropout=0.0,
    layer_norm_epsilon=1e-12,
    vocab_size=30528,
    pad_vocab_size_multiple=64,
    fused_bias_fc=True,
    fused_dropout_add_ln=True,
    dense_seq_output=True,
    max_trained_positions=2048,
    use_rms_norm=False,
    pad_token_id=0,
)
SDPA_REVISION = (
    "from .modeling import NewModel as Published\n\n\nclass NewModel(Published):\n    _supports_sdpa = True\n"
)
SWITCHES = ("unpad_inputs", "use_memory_efficient_attention", "use_flash_attn")
KINDS = ("gte", "gte-sdpa", "nomic")


def build(kind: str, folder: Path) -> str:
    """A folder as a user would have it: the published files, config.json with auto_map, random weights."""
    family = kind.split("-")[0]
    if family == "nomic":
        pytest.importorskip("einops", reason="nomic-bert's modeling file imports einops")
    for name in FILES[family]:
        shutil.copy(Path(PUBLISHED) / family / name, folder / name)
    modeling, configuration = (name.removesuffix(".py") for name in FILES[family])
    config = dict(GTE_CONFIG if family == "gte" else NOMIC_CONFIG)
    model_class = "NewModel" if family == "gte" else "NomicBertModel"
    config_class = "NewConfig" if family == "gte" else "NomicBertConfig"
    config["auto_map"] = {"AutoConfig": f"{configuration}.{config_class}", "AutoModel": f"{modeling}.{model_class}"}
    if kind == "gte-sdpa":
        (folder / "sdpa_revision.py").write_text(SDPA_REVISION)
        config["auto_map"]["AutoModel"] = "sdpa_revision.NewModel"
    (folder / "config.json").write_text(json.dumps(config))
    loaded = AutoConfig.from_pretrained(str(folder), trust_remote_code=True)
    for name in SWITCHES:  # the released configs switch on kernels that need xformers or flash_attn to build
        if hasattr(loaded, name):
            setattr(loaded, name, False)
    torch.manual_seed(0)
    AutoModel.from_config(loaded, trust_remote_code=True).save_pretrained(str(folder))
    (folder / "config.json").write_text(
        json.dumps(
            {**json.loads((folder / "config.json").read_text()), **{k: config[k] for k in SWITCHES if k in config}}
        )
    )
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(str(folder))
    write_st_pooling(folder, "first")
    return str(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {kind: build(kind, tmp_path_factory.mktemp(kind)) for kind in KINDS}


@pytest.fixture(scope="module")
def encoders(folders):
    loaded = {}

    def get(kind, pooling="first", padding="right"):
        if (kind, pooling, padding) not in loaded:
            loaded[kind, pooling, padding] = PosFairEncoder(
                folders[kind], pooling=pooling, padding_side=padding, trust_remote_code=True
            )
        return loaded[kind, pooling, padding]

    return get


@pytest.fixture(scope="module")
def references(folders, encoders):
    built = {}

    def get(kind):
        if kind not in built:
            from safetensors.torch import load_file

            loaded = encoders(kind).model
            # the author's constructor computes every buffer; the weights are the folder's, every key of them
            model = type(loaded)(copy.deepcopy(loaded.config))
            model.load_state_dict(load_file(str(Path(folders[kind]) / "model.safetensors")), strict=True)
            built[kind] = give_reference_helpers(model.eval())
        return built[kind]

    return get


TEXTS = sample_texts(3, seed=5, min_words=20, max_words=60)
CONFIGS = {
    "cls_soft 0.5": dict(variant="cls_soft", strength=0.5),
    "uniform 1.0": dict(variant="uniform", strength=1.0),
    "cls_hard 0.5": dict(variant="cls_hard", strength=0.5),
}


def config_for(name: str, pooling: str) -> CalibrationConfig:
    return CalibrationConfig(**CONFIGS[name], basket_size=8, layers=0.5)


def reference_vectors(model, encoder, config):
    return torch_reference_vectors(model, encoder, TEXTS, config)


def min_cosine(got, expected) -> float:
    got = torch.as_tensor(np.asarray(got), dtype=torch.float64)
    return torch.nn.functional.cosine_similarity(got, expected.double(), dim=-1).min().item()


EXACT = 1 - 1e-11  # float32 against float64 gives 1 - cos of about 1e-14; plain against calibrated, 1e-9 and more


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("pooling", ["first", "mean"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_published_code_calibrates_exactly(encoders, references, kind, pooling, padding, record_property):
    encoder = encoders(kind, pooling, padding)
    assert encoder.attention_door == "interception"
    assert type(encoder.model).__module__.startswith("transformers_modules.")  # the folder's code, auto_map honoured
    plain = encoder.encode_batch(TEXTS, None)
    cosines = {"plain": min_cosine(plain, reference_vectors(references(kind), encoder, None))}
    for name in CONFIGS:
        if pooling == "mean" and name.startswith("cls_hard"):
            continue
        config = config_for(name, pooling)
        got = encoder.encode_batch(TEXTS, config)
        expected = reference_vectors(references(kind), encoder, config)
        cosines[name] = min_cosine(got, expected)
        assert min_cosine(plain, expected) < EXACT, name  # the check would see a calibration left out
    dual_config = config_for("cls_soft 0.5", pooling)
    dual = encoder.encode_batch(TEXTS, dual_config, dual=True)
    width = encoder.dimension
    cosines["dual plain half"] = min_cosine(dual[:, :width], reference_vectors(references(kind), encoder, None))
    cosines["dual calibrated half"] = min_cosine(
        dual[:, width:], reference_vectors(references(kind), encoder, dual_config)
    )
    record_property("min_cosines", cosines)
    print(f"{kind} {pooling} {padding}, 1 - min cosine: " + ", ".join(f"{k} {1 - v:.1e}" for k, v in cosines.items()))
    assert min(cosines.values()) >= EXACT, cosines


def test_the_repairs_are_the_ones_the_published_files_need(folders, caplog, monkeypatch):
    from posfair_llamaindex.model import remote_code

    monkeypatch.setattr(remote_code, "_ANNOUNCED", set())  # said once per process: as in a fresh one
    with caplog.at_level(logging.INFO):
        gte = PosFairEncoder(folders["gte"], trust_remote_code=True)
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "get_extended_attention_mask" in said and "transformers 5 removed" in said
    for buffer in ("position_ids", "rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached"):
        assert buffer in said, buffer
    assert "set ['unpad_inputs', 'use_memory_efficient_attention'] to the padded torch path" in said
    assert gte.model.config._attn_implementation == "eager"
    sdpa = PosFairEncoder(folders["gte-sdpa"], trust_remote_code=True)
    assert {type(layer.attention).__name__ for layer in sdpa._layers} == {"NewSdpaAttention"}


def test_nomic_runs_in_the_dtype_asked_for_though_it_reads_torch_dtype(folders, caplog):
    with caplog.at_level(logging.WARNING, logger="posfair_llamaindex.model.loading"):
        encoder = PosFairEncoder(folders["nomic"], dtype="bfloat16", trust_remote_code=True)
    assert {p.dtype for p in encoder.model.parameters()} == {torch.bfloat16}
    assert any("reads another keyword" in r.getMessage() for r in caplog.records)
    assert np.isfinite(encoder.encode_batch(TEXTS, config_for("cls_soft 0.5", "first"))).all()
