"""Fine-tune a local encoder on position-controlled pairs with sentence-transformers.

The model is assembled from the base folder's transformer (never a hub download): Transformer + Pooling
(``cls`` or ``mean``) + Normalize, trained with ``MultipleNegativesRankingLoss`` (scale 20; in-batch
negatives, plus the hard negative column when there is one). The result is an ordinary sentence-transformers
folder, with ``posfair_training.json`` (config, data summary) and ``loss_log.jsonl`` (one line per step).

``dump_tokens=K`` adds ``[DUMP0]``..``[DUMP{K-1}]``: special tokens prepended to every query and document
right after ``[CLS]`` as the prompts ``"query"`` and ``"document"``. They give attention a place to park
mass that is not the start of the text, and are kept out of pooling:

* ``mean`` pooling saves ``include_prompt=False``; sentence-transformers then averages only the tokens after
  the prompt (its prompt length counts ``[CLS]`` too, so ``[CLS]`` is left out of the mean as well);
* ``cls`` pooling keeps ``include_prompt=True``: it reads position 0 only, so the dump tokens are never
  pooled anyway, while ``include_prompt=False`` would make sentence-transformers pool the first token
  *after* the prompt instead of ``[CLS]``.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from posfair_llamaindex.model.prompts import MAX_DUMP_TOKENS, dump_token_names
from posfair_llamaindex.train.training_pairs import (
    SETUPS,
    PairBuildConfig,
    TrainingData,
    squad_training_data,
    to_dataset,
    user_training_data,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

DEFAULT_DATA = Path("../shared/data")
PROMPT_NAMES = ("query", "document")
TRAINING_FILE = "posfair_training.json"
LOSS_LOG = "loss_log.jsonl"
_PROBE = "a probe sentence about the river museum"


# ----------------------------------------------------------------------------- settings
def model_length_limit(folder: Path) -> Optional[int]:
    """The longest input the model takes: the smaller of ``max_position_embeddings`` and the tokenizer's
    ``model_max_length`` (RoBERTa-style configs list 514 positions for 512 usable ones); None when unknown."""
    limits = []
    config = folder / "config.json"
    if config.is_file():
        positions = json.loads(config.read_text()).get("max_position_embeddings")
        if isinstance(positions, int) and positions > 0:
            limits.append(positions)
    tokenizer_config = folder / "tokenizer_config.json"
    if tokenizer_config.is_file():
        length = json.loads(tokenizer_config.read_text()).get("model_max_length")
        if isinstance(length, int) and 0 < length < 1_000_000:
            limits.append(length)
    return min(limits) if limits else None


class FinetuneConfig(BaseModel):
    """One training run. Exactly one of ``steps`` and ``epochs``; user pairs replace SQuAD when given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_model: Path
    pooling: Literal["cls", "mean"]
    output: Path
    setup: Literal[SETUPS] = "uniform"  # type: ignore[valid-type]
    examples: int = Field(10_000, ge=1)
    data_dir: Path = DEFAULT_DATA
    pairs_file: Optional[Path] = None
    filler_dir: Optional[Path] = None
    token_budget: int = Field(450, ge=8)
    min_paragraphs: int = Field(3, ge=1)
    max_length: int = Field(512, ge=16)
    batch_size: int = Field(32, ge=2, description="in-batch negatives need at least two pairs per batch")
    learning_rate: float = Field(2e-5, gt=0)
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    steps: Optional[int] = Field(None, ge=1)
    epochs: Optional[float] = Field(None, gt=0)
    seed: int = 0
    split_seed: int = Field(0, description="the article split; kept apart from seed so repeats share a held-out set")
    dump_tokens: int = Field(0, ge=0, le=MAX_DUMP_TOKENS)
    hard_negatives: bool = False
    heldout_fraction: float = Field(0.2, ge=0, lt=1)
    bf16: bool = False
    use_cpu: bool = False
    overwrite: bool = False

    @field_validator("base_model")
    @classmethod
    def _local_folder(cls, value: Path) -> Path:
        if not (value / "config.json").is_file():
            raise ValueError(f"base_model {str(value)!r} is not a local model folder with a config.json")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> FinetuneConfig:
        if (self.steps is None) == (self.epochs is None):
            raise ValueError(f"give exactly one of steps and epochs (got steps={self.steps}, epochs={self.epochs})")
        if (self.pairs_file is None) != (self.filler_dir is None):
            raise ValueError(f"pairs_file and filler_dir go together (got {self.pairs_file!r} and {self.filler_dir!r})")
        limit = model_length_limit(self.base_model)
        if limit is not None and self.max_length > limit:
            raise ValueError(f"max_length {self.max_length} exceeds the limit {limit} of {self.base_model}")
        if self.token_budget + self.dump_tokens > self.max_length:
            raise ValueError(
                f"token_budget {self.token_budget} + dump_tokens {self.dump_tokens} exceeds max_length "
                f"{self.max_length}: documents would be truncated"
            )
        return self

    def build_settings(self) -> PairBuildConfig:
        return PairBuildConfig(
            setup=self.setup,
            examples=self.examples,
            seed=self.seed,
            token_budget=self.token_budget,
            min_paragraphs=self.min_paragraphs,
            hard_negatives=self.hard_negatives,
        )


@dataclass(frozen=True)
class FinetuneResult:
    """Where the model went, how many optimiser steps ran and the loss of each."""

    output: Path
    steps: int
    losses: tuple[float, ...]
    summary: dict[str, Any] = field(hash=False)


# ----------------------------------------------------------------------------- the model
def dump_prefix(tokenizer: PreTrainedTokenizerBase, count: int) -> str:
    """The prompt string that tokenizes to exactly the ``count`` dump ids, right after the start token.

    Joined tokens work for WordPiece; a trailing space is tried for tokenizers that would otherwise glue a
    word piece to the last dump token. The first candidate that passes a probe is returned.
    """
    names = dump_token_names(count)
    ids = tokenizer.convert_tokens_to_ids(names)
    if tokenizer.unk_token_id is not None and tokenizer.unk_token_id in ids:
        raise ValueError(f"the tokenizer does not know {names}: add them with add_dump_tokens first")
    plain = tokenizer(_PROBE)["input_ids"]
    for candidate in ("".join(names), "".join(names) + " "):
        if tokenizer(candidate + _PROBE)["input_ids"] == plain[:1] + ids + plain[1:]:
            return candidate
    raise ValueError(f"no prompt string puts {names} alone after the first token for {type(tokenizer).__name__}")


def add_dump_tokens(model: SentenceTransformer, count: int) -> str:
    """Add ``[DUMP*]`` special tokens (keeping existing ones), resize the embeddings, return the prompt."""
    transformer = model[0]
    tokenizer = transformer.tokenizer
    names = dump_token_names(count)
    known = {str(t) for t in getattr(tokenizer, "extra_special_tokens", None) or []}
    if any(name not in known for name in names):
        # the v4 key, which transformers 5 maps to extra_special_tokens; existing extra tokens are kept
        tokenizer.add_special_tokens({"additional_special_tokens": names}, replace_extra_special_tokens=False)
        transformer.auto_model.resize_token_embeddings(len(tokenizer))
    return dump_prefix(tokenizer, count)


def build_model(config: FinetuneConfig) -> tuple[SentenceTransformer, Optional[str]]:
    """Transformer + Pooling + Normalize from the base folder, with dump tokens and prompts when asked.

    Returns the model and its dump prompt (None without dump tokens). Seeds first: resizing the embeddings
    draws the new rows at random.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import set_seed

    set_seed(config.seed)
    transformer = Transformer(str(config.base_model), max_seq_length=config.max_length)
    include_prompt = not (config.dump_tokens and config.pooling == "mean")
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=config.pooling, include_prompt=include_prompt)
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu" if config.use_cpu else None)
    if not config.dump_tokens:
        return model, None
    prefix = add_dump_tokens(model, config.dump_tokens)
    model.prompts = {name: prefix for name in PROMPT_NAMES}
    return model, prefix


# ----------------------------------------------------------------------------- data and training
def prepare_data(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> TrainingData:
    """User pairs when the config names them, otherwise the training articles of SQuAD."""
    settings = config.build_settings()
    if config.pairs_file is not None and config.filler_dir is not None:
        return user_training_data(config.pairs_file, config.filler_dir, tokenizer, settings)
    return squad_training_data(
        config.data_dir,
        tokenizer,
        settings,
        heldout_fraction=config.heldout_fraction,
        split_seed=config.split_seed,
    )


def _loss_logger(path: Path):
    """A trainer callback that appends ``{"step", "loss", "learning_rate", "epoch"}`` per logged step."""
    from transformers import TrainerCallback

    class LossLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                row = {"step": state.global_step, "loss": logs["loss"]}
                row.update({k: logs[k] for k in ("learning_rate", "grad_norm", "epoch") if k in logs})
                with path.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")

    return LossLog()


def _prepare_output(config: FinetuneConfig) -> Path:
    output = config.output
    if output.exists() and any(output.iterdir()):
        if not config.overwrite:
            raise FileExistsError(f"output folder {output} is not empty; pass overwrite=True to replace it")
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    return output


def finetune(config: FinetuneConfig, data: Optional[TrainingData] = None) -> FinetuneResult:
    """Train, then save the sentence-transformers folder, the loss log and ``posfair_training.json``."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    output = _prepare_output(config)
    model, prefix = build_model(config)
    data = data if data is not None else prepare_data(config, model.tokenizer)
    dataset = to_dataset(data.examples)
    log_path = output / LOSS_LOG
    with tempfile.TemporaryDirectory(prefix="posfair-train-") as scratch:
        args = SentenceTransformerTrainingArguments(
            output_dir=scratch,
            max_steps=config.steps or -1,
            num_train_epochs=config.epochs or 1.0,
            per_device_train_batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            warmup_steps=config.warmup_ratio,
            seed=config.seed,
            data_seed=config.seed,
            bf16=config.bf16,
            use_cpu=config.use_cpu,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            dataloader_num_workers=0,
            batch_sampler=BatchSamplers.NO_DUPLICATES,
            prompts={column: prefix for column in dataset.column_names} if prefix else None,
        )
        trainer = SentenceTransformerTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            loss=MultipleNegativesRankingLoss(model, scale=20.0),
            callbacks=[_loss_logger(log_path)],
        )
        state = trainer.train()
    model.save(str(output), create_model_card=False)
    losses = _read_losses(log_path)
    summary = _summary(config, data, model, prefix, trainer.state.global_step, losses, state.training_loss)
    (output / TRAINING_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return FinetuneResult(output, trainer.state.global_step, losses, summary)


def _read_losses(path: Path) -> tuple[float, ...]:
    if not path.is_file():
        return ()
    return tuple(json.loads(line)["loss"] for line in path.read_text().splitlines() if line.strip())


def _summary(
    config: FinetuneConfig,
    data: TrainingData,
    model: SentenceTransformer,
    prefix: Optional[str],
    steps: int,
    losses: tuple[float, ...],
    mean_loss: float,
) -> dict[str, Any]:
    import sentence_transformers
    import torch
    import transformers

    tokenizer = model.tokenizer
    return {
        "config": config.model_dump(mode="json"),
        "data": data.summary(),
        "dump_tokens": {
            "count": config.dump_tokens,
            "prompt": prefix,
            "token_ids": tokenizer.convert_tokens_to_ids(dump_token_names(config.dump_tokens)),
            "prompt_names": list(PROMPT_NAMES) if prefix else [],
            "include_prompt": model[1].include_prompt,
        },
        "training": {"steps": steps, "mean_loss": mean_loss, "final_loss": losses[-1] if losses else None},
        "versions": {
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        },
    }
