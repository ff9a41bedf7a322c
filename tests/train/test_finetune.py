"""Fine-tuning a tiny BERT for two steps: the saved folder, dump tokens and prompts, repeatability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from posfair_llamaindex.train.finetune import (
    LOSS_LOG,
    TRAINING_FILE,
    FinetuneConfig,
    build_model,
    finetune,
)
from tests.train import write_fake_squad
from tests.utils import save_tiny_model

PROBE = "Who kept the old harbour lantern?"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return Path(save_tiny_model("bert", tmp_path_factory.mktemp("tiny-bert"), "mean"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return write_fake_squad(tmp_path_factory.mktemp("fake-data"))


def config(base: Path, output: Path, data_dir: Path, **changes) -> FinetuneConfig:
    values = dict(
        base_model=base,
        pooling="mean",
        output=output,
        data_dir=data_dir,
        setup="uniform",
        examples=12,
        token_budget=300,
        max_length=320,
        batch_size=4,
        steps=2,
        use_cpu=True,
    )
    return FinetuneConfig(**{**values, **changes})


def test_config_is_validated(base, tmp_path, data_dir):
    with pytest.raises(ValidationError, match="exactly one of steps and epochs"):
        config(base, tmp_path, data_dir, epochs=1.0)
    with pytest.raises(ValidationError, match="exactly one of steps and epochs"):
        config(base, tmp_path, data_dir, steps=None)
    with pytest.raises(ValidationError, match="max_length 1024 exceeds the limit 512"):
        config(base, tmp_path, data_dir, max_length=1024)
    with pytest.raises(ValidationError, match="dump_tokens"):
        config(base, tmp_path, data_dir, dump_tokens=17)
    with pytest.raises(ValidationError, match="token_budget 310 \\+ dump_tokens 16 exceeds max_length 320"):
        config(base, tmp_path, data_dir, token_budget=310, dump_tokens=16)
    with pytest.raises(ValidationError, match="pairs_file and filler_dir"):
        config(base, tmp_path, data_dir, pairs_file=tmp_path / "p.jsonl")
    with pytest.raises(ValidationError, match="not a local model folder"):
        config(tmp_path / "nowhere", tmp_path, data_dir)
    with pytest.raises(ValidationError, match="'top'"):
        config(base, tmp_path, data_dir, setup="top")
    settings = config(base, tmp_path, data_dir)
    with pytest.raises(ValidationError):
        settings.seed = 3  # frozen
    assert FinetuneConfig.model_validate_json(settings.model_dump_json()) == settings


@pytest.mark.parametrize("count", [1, 4])
def test_dump_prompt_tokenizes_to_cls_then_dump_ids(base, tmp_path, data_dir, count):
    model, prefix = build_model(config(base, tmp_path, data_dir, dump_tokens=count))
    tokenizer = model.tokenizer
    dump_ids = tokenizer.convert_tokens_to_ids([f"[DUMP{i}]" for i in range(count)])
    assert len(set(dump_ids)) == count and tokenizer.unk_token_id not in dump_ids
    assert model[0].auto_model.get_input_embeddings().num_embeddings == len(tokenizer)
    assert model.prompts == {"query": prefix, "document": prefix}
    plain = tokenizer(PROBE)["input_ids"]
    assert tokenizer(prefix + PROBE)["input_ids"] == [tokenizer.cls_token_id, *dump_ids, *plain[1:]]
    assert model[0].preprocess([PROBE], prompt=prefix)["prompt_length"] == count + 1


def test_cls_pooling_with_dump_tokens_still_pools_cls(base, tmp_path, data_dir):
    """include_prompt stays True for cls: sentence-transformers would otherwise pool the first text token."""
    model, prefix = build_model(config(base, tmp_path, data_dir, pooling="cls", dump_tokens=2))
    assert model[1].include_prompt is True
    encoded = model.tokenizer(prefix + PROBE, return_tensors="pt")
    with torch.no_grad():
        hidden = model[0].auto_model(**encoded).last_hidden_state[0, 0]
    expected = torch.nn.functional.normalize(hidden, dim=-1)
    vector = model.encode_document([PROBE], convert_to_tensor=True)[0]
    torch.testing.assert_close(vector, expected, atol=1e-5, rtol=1e-4)


def test_two_steps_with_dump_tokens_save_a_loadable_folder(base, tmp_path, data_dir):
    from sentence_transformers import SentenceTransformer

    output = tmp_path / "dumped"
    result = finetune(config(base, output, data_dir, dump_tokens=2, hard_negatives=True))
    assert result.steps == 2 and len(result.losses) == 2 and all(loss > 0 for loss in result.losses)
    log = [json.loads(line) for line in (output / LOSS_LOG).read_text().splitlines()]
    assert [row["step"] for row in log] == [1, 2]
    prefix = "[DUMP0][DUMP1]"
    st_config = json.loads((output / "config_sentence_transformers.json").read_text())
    assert st_config["prompts"] == {"query": prefix, "document": prefix}
    assert json.loads((output / "1_Pooling" / "config.json").read_text())["include_prompt"] is False
    summary = json.loads((output / TRAINING_FILE).read_text())
    assert summary["data"]["slot_counts"] == {"begin": 4, "middle": 4, "end": 4}
    assert summary["data"]["articles"]["train"] == 6 and summary["data"]["articles"]["heldout"] == 2
    assert summary["dump_tokens"]["prompt"] == prefix and summary["config"]["dump_tokens"] == 2

    loaded = SentenceTransformer(str(output), device="cpu")
    dump_ids = loaded.tokenizer.convert_tokens_to_ids(["[DUMP0]", "[DUMP1]"])
    assert dump_ids == summary["dump_tokens"]["token_ids"] and loaded.tokenizer.unk_token_id not in dump_ids
    assert loaded.prompts["query"] == prefix and loaded[1].include_prompt is False
    assert [type(m).__name__ for m in loaded] == ["Transformer", "Pooling", "Normalize"]
    vector = loaded.encode_query([PROBE], convert_to_tensor=True)[0]
    assert torch.isclose(vector.norm(), torch.tensor(1.0), atol=1e-5)
    with pytest.raises(FileExistsError, match="not empty"):
        finetune(config(base, output, data_dir, dump_tokens=2))


def test_runs_repeat_with_the_same_seed_and_set_no_prompt_without_dump(base, tmp_path, data_dir):
    from sentence_transformers import SentenceTransformer

    vectors = []
    for name in ("first", "second"):
        finetune(config(base, tmp_path / name, data_dir, learning_rate=1e-3))
        loaded = SentenceTransformer(str(tmp_path / name), device="cpu")
        assert not loaded.prompts.get("query") and not loaded.prompts.get("document")
        assert json.loads((tmp_path / name / "1_Pooling" / "config.json").read_text())["include_prompt"] is True
        vectors.append(loaded.encode([PROBE], convert_to_tensor=True)[0])
    torch.testing.assert_close(vectors[0], vectors[1], atol=0, rtol=0)
    untrained, _ = build_model(config(base, tmp_path / "x", data_dir))
    assert not torch.allclose(untrained.encode([PROBE], convert_to_tensor=True)[0], vectors[0])
