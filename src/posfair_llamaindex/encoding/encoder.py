"""Encoding texts with a loaded model, plain or calibrated.

One model object serves both paths: without a plan either door into attention (loading.py) leaves the
model's own computation alone, so queries cost exactly what they cost without this package.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np
import torch
from tqdm.auto import tqdm

from posfair_llamaindex.calibration.row_math import RowLayout
from posfair_llamaindex.encoding.passes import check_budget, forward_passes
from posfair_llamaindex.model.attention import PLAN_KWARG, CalibrationPlan, RowRecorder
from posfair_llamaindex.model.loading import SUPPORTED_FAMILIES, UnsupportedModelError, load_model, load_tokenizer
from posfair_llamaindex.model.model_files import (
    check_model_exists,
    read_sentence_transformer_files,
    resolve_local_folder,
    weights_identity,
)
from posfair_llamaindex.model.pooling import pool_hidden_states, pooling_positions
from posfair_llamaindex.model.prompts import NO_PROMPT, PromptSpan, prompt_span
from posfair_llamaindex.options import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_LENGTH_LIMIT,
    DTYPES,
    LENGTH_LIMITS,
    PADDING_SIDES,
    POOLINGS,
)

if TYPE_CHECKING:  # a plain forward pass needs no calibration config (nor pydantic)
    from posfair_llamaindex.calibration.config import CalibrationConfig

logger = logging.getLogger(__name__)

__all__ = ["SUPPORTED_FAMILIES", "PosFairEncoder", "TokenizedTexts", "UnsupportedModelError", "check_texts"]

_DTYPES = {name: getattr(torch, name) for name in DTYPES}


@dataclass(frozen=True)
class TokenizedTexts:
    """Model inputs of some texts (truncated to the encoder's limit) and their lengths before truncation."""

    inputs: list  # one dict of token lists per text: input_ids, attention_mask, token_type_ids, ...
    lengths: list
    prompt: str = ""

    def select(self, indices: Sequence[int]) -> TokenizedTexts:
        return TokenizedTexts([self.inputs[i] for i in indices], [self.lengths[i] for i in indices], self.prompt)


def check_texts(texts: Sequence[object]) -> list[str]:
    """Reject what cannot be embedded, naming the offending position."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("expected a list of strings, got a single string")
    checked = []
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text at position {position} is {type(text).__name__}, expected str")
        if not text.strip():
            raise ValueError(f"text at position {position} is empty or whitespace only")
        checked.append(text)
    return checked


def resolve_dtype(dtype: Union[str, torch.dtype, None]) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPES.values():
            raise ValueError(f"dtype {dtype} is not supported; use one of {sorted(_DTYPES)}")
        return dtype
    if dtype not in _DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]


def resolve_device(device: Optional[str]) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"device {device!r} is not a valid torch device: {error}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available")
    return resolved


class PosFairEncoder:
    """A transformers model with sentence-transformers pooling that encodes plain or calibrated."""

    def __init__(
        self,
        model_name: str,
        *,
        pooling: Optional[str] = None,
        max_length: Union[int, str, None] = None,
        device: Optional[str] = None,
        dtype: Union[str, torch.dtype, None] = None,
        trust_remote_code: bool = False,
        padding_side: str = "right",
        show_progress: bool = False,
    ) -> None:
        """``max_length``: tokens per text, or ``"model_card"`` (sentence-transformers' ``max_seq_length``, as
        ``SentenceTransformer.encode`` truncates) or ``"positions"`` (the most the model takes); None means
        :data:`~posfair_llamaindex.options.DEFAULT_LENGTH_LIMIT`. The number in force is ``self.max_length``.
        ``show_progress``: transformers' progress bar while the weights load (off: loading is quiet)."""
        if pooling is not None and pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS} or None (detect), got {pooling!r}")
        if padding_side not in PADDING_SIDES:
            raise ValueError(f"padding_side must be one of {PADDING_SIDES}, got {padding_side!r}")
        self.model_name = model_name
        # right padding keeps every valid token at the position it has unpadded, for absolute-position
        # models (BERT) and causal ones alike; left padding is supported for models that want it
        self.padding_side = padding_side
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self._tokenizer_lock = threading.Lock()  # fast tokenizers refuse concurrent calls ("Already borrowed")
        check_model_exists(model_name)
        self.tokenizer = load_tokenizer(model_name, trust_remote_code)
        loaded = load_model(
            model_name,
            self.tokenizer,
            dtype=self.dtype,
            device=self.device,
            trust_remote_code=trust_remote_code,
            show_progress=show_progress,
        )
        self.model = loaded.model
        self._layers = loaded.layers
        self.num_layers = loaded.num_layers
        # "interface": transformers' AttentionInterface; "interception": torch calls inside each layer
        self.attention_door = loaded.door
        self.folder = resolve_local_folder(model_name)
        self.files = read_sentence_transformer_files(self.folder)
        self._weights_identity: Optional[str] = None
        self.pooling = pooling or self.files.pooling or self._fallback_pooling()
        self.max_length = self.resolve_max_length(max_length)
        self.dense = [layer.to(self.device, self.dtype).eval() for layer in self.files.dense]
        # sentence-transformers' include_prompt: whether mean pooling averages over the prompt's tokens too
        self.include_prompt = self.files.include_prompt
        self._prompt_spans: dict[str, PromptSpan] = {}
        self._truncation_warned = False

    # ------------------------------------------------------------------ loading
    def _fallback_pooling(self) -> str:
        causal = (
            bool(getattr(self.model.config, "is_decoder", False))
            or any(name.endswith("ForCausalLM") for name in (getattr(self.model.config, "architectures", None) or []))
            or type(self.model).__name__.startswith(("Qwen", "Llama", "Mistral", "Gemma"))
        )
        chosen = "last" if causal else "first"
        warnings.warn(
            f"{self.model_name} has no sentence-transformers pooling config; using {chosen!r} pooling. "
            "Pass pooling= to choose.",
            stacklevel=3,
        )
        return chosen

    @property
    def length_limits(self) -> dict[str, Optional[int]]:
        """The limits ``max_length`` can name: ``positions`` (the tokenizer's and the position table's, whichever is
        lower) and ``model_card`` (sentence-transformers' ``max_seq_length``, within ``positions``; None without
        one)."""
        limits = []
        tokenizer_limit = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tokenizer_limit, int) and tokenizer_limit < 1_000_000:
            limits.append(tokenizer_limit)
        position_limit = getattr(self.model.config, "max_position_embeddings", None)
        if isinstance(position_limit, int):
            limits.append(position_limit)
        positions = min(limits) if limits else None
        card = self.files.max_seq_length
        if isinstance(card, int) and positions is not None:
            card = min(card, positions)
        return {"positions": positions, "model_card": card if isinstance(card, int) else None}

    def resolve_max_length(self, requested: Union[int, str, None]) -> int:
        """The number of tokens ``requested`` means for this model (see ``__init__``)."""
        limits = self.length_limits
        limit = limits["positions"]
        if requested is None or isinstance(requested, str):
            name = DEFAULT_LENGTH_LIMIT if requested is None else requested
            if name not in LENGTH_LIMITS:
                raise ValueError(f"max_length must be an int >= 2 or one of {LENGTH_LIMITS}, got {requested!r}")
            if name == "model_card" and limits["model_card"] is None:
                logger.info("%s has no sentence-transformers max_seq_length; using its position limit", self.model_name)
                name = "positions"
            if limits[name] is None:
                raise ValueError(f"{self.model_name} states no maximum length; pass max_length=")
            return limits[name]
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 2:
            raise ValueError(f"max_length must be an int >= 2 or one of {LENGTH_LIMITS}, got {requested!r}")
        if limit is not None and requested > limit:
            raise ValueError(f"max_length={requested} exceeds what {self.model_name} supports ({limit})")
        return requested

    # ------------------------------------------------------------------ calibration plumbing
    def isolation(self, calibration: CalibrationConfig) -> tuple:
        """(isolate_first, isolate_last) for this model's pooling under ``calibration``."""
        if calibration.isolated_tokens is None:
            defaults = {"first": (True, False), "last": (True, True), "mean": (False, False)}
            return defaults[self.pooling]
        chosen = set(calibration.isolated_tokens)
        return (
            "first" in chosen or self.pooling == "first",
            "last" in chosen or self.pooling == "last",
        )

    def check_calibration(self, calibration: CalibrationConfig) -> None:
        """Fail early on settings this model cannot run."""
        calibration.resolve_layers(self.num_layers)
        if calibration.variant == "cls_hard" and self.pooling == "mean":
            raise ValueError("variant 'cls_hard' needs a pooling token; this model uses mean pooling")

    def plan_for(
        self,
        attention_mask: torch.Tensor,
        calibration: CalibrationConfig,
        recorder: Optional[RowRecorder] = None,
        dual: bool = False,
        prefix_tokens: int = 0,
    ) -> CalibrationPlan:
        """The plan of one batch; ``prefix_tokens`` [DUMP] tokens after the first token are isolated with it."""
        isolate_first, isolate_last = self.isolation(calibration)
        layout = RowLayout.from_attention_mask(
            attention_mask,
            basket_size=calibration.basket_size,
            isolate_first=isolate_first or prefix_tokens > 0,
            isolate_last=isolate_last,
            pooling_token=None if self.pooling == "mean" else self.pooling,
            prefix_tokens=prefix_tokens,
            device=self.device,
        )
        positions = None if self.pooling == "mean" else pooling_positions(attention_mask, self.pooling).to(self.device)
        layers = calibration.resolve_layers(self.num_layers)
        return CalibrationPlan(
            config=calibration,
            layers=frozenset(layers),
            layout=layout,
            pooling=self.pooling,
            pool_positions=positions,
            recorder=recorder,
            dual_batch=attention_mask.shape[0] if dual else None,
            branch_layer=min(layers) if dual else None,
        )

    # ------------------------------------------------------------------ encoding
    def prompt_span(self, prompt: str) -> PromptSpan:
        """The token span ``prompt`` takes in front of every text (measured once per prompt)."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if prompt not in self._prompt_spans:
            with self._tokenizer_lock:
                span = prompt_span(self.tokenizer, prompt)
            if span.length and not self.include_prompt and self.pooling == "first":
                raise ValueError(
                    f"{self.model_name} leaves prompts out of first-token pooling (include_prompt: false), so "
                    "sentence-transformers pools the first token after the prompt; posfair pools the model's "
                    "first token and does not reproduce that. Save the model with include_prompt: true"
                )
            self._prompt_spans[prompt] = span
        return self._prompt_spans[prompt]

    def tokenize(self, texts: Sequence[str]):
        with self._tokenizer_lock:
            return self.tokenizer(
                list(texts),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                padding_side=self.padding_side,
                return_tensors="pt",
            )

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Token counts before truncation (special tokens included), from one untruncated pass."""
        if not texts:
            return []
        with self._tokenizer_lock:
            return [len(ids) for ids in self._untruncated(list(texts))["input_ids"]]

    def _untruncated(self, texts: list):
        return self.tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)

    def tokenize_texts(self, texts: Sequence[str], prompt: str = "") -> TokenizedTexts:
        """Every text's model inputs, truncated to ``max_length``, and its length before truncation.

        One tokenizer pass serves the length sort, the truncation warning and the batches; only texts over
        the limit are tokenized a second time, truncated the tokenizer's own way. ``prompt`` goes in front
        of every text as :meth:`encode` puts it.
        """
        span = self.prompt_span(prompt)
        texts = [span.text + text for text in texts] if span.text else list(texts)
        if not texts:
            return TokenizedTexts([], [], prompt)
        with self._tokenizer_lock:
            full = self._untruncated(texts)
            keys = [key for key in self.tokenizer.model_input_names if key in full]
            inputs = [{key: full[key][i] for key in keys} for i in range(len(texts))]
            lengths = [len(ids) for ids in full["input_ids"]]
            over = [i for i, length in enumerate(lengths) if length > self.max_length]
            if over:
                cut = self.tokenizer(
                    [texts[i] for i in over], truncation=True, max_length=self.max_length, verbose=False
                )
                for row, i in enumerate(over):
                    inputs[i] = {key: cut[key][row] for key in keys}
        return TokenizedTexts(inputs, lengths, prompt)

    def pad(self, inputs: Sequence[dict]) -> dict[str, torch.Tensor]:
        """One batch of :meth:`tokenize_texts` inputs, padded as the tokenizer pads (side, pad ids, mask 0)."""
        width = max(len(item["input_ids"]) for item in inputs)
        fill = {
            "input_ids": self.tokenizer.pad_token_id,
            "token_type_ids": self.tokenizer.pad_token_type_id,
            "attention_mask": 0,
        }
        batch = {}
        for key in inputs[0]:
            rows = torch.full((len(inputs), width), fill.get(key, 0), dtype=torch.long)
            for row, item in enumerate(inputs):
                values = torch.tensor(item[key], dtype=torch.long)
                if self.padding_side == "right":
                    rows[row, : len(values)] = values
                else:
                    rows[row, width - len(values) :] = values
            batch[key] = rows
        return batch

    def encode(
        self,
        texts: Sequence[str],
        calibration: Optional[CalibrationConfig] = None,
        *,
        batch_size: Optional[int] = None,
        max_batch_tokens: Optional[int] = None,
        normalize: bool = True,
        show_progress: bool = False,
        dual: bool = False,
        prompt: str = "",
        tokenized: Optional[TokenizedTexts] = None,
    ) -> np.ndarray:
        """Embed ``texts`` (float32 ``[n, dim]``), longest first in forward passes, returned in input order.

        A pass holds at most ``max_batch_tokens`` padded tokens (rows x its longest text) and at most
        ``batch_size`` texts; with neither given, passes follow the token budget
        :data:`~posfair_llamaindex.options.DEFAULT_BATCH_TOKENS`. How texts share passes does not change their
        vectors beyond float rounding.

        With ``dual=True`` each row is the plain vector followed by the calibrated one (``[n, 2 * dim]``),
        both from one shared pass (see :meth:`encode_batch`). ``prompt`` goes in front of every text, as
        sentence-transformers' prompts do: left out of mean pooling when the model says ``include_prompt:
        false``, and its [DUMP] tokens isolated under calibration. ``tokenized`` is :meth:`tokenize_texts` of
        the same texts and prompt, when the caller has it already: each text is then tokenized once.
        """
        texts = check_texts(texts)
        span = self.prompt_span(prompt)
        if batch_size is not None:
            check_budget(batch_size, "batch_size")
        if max_batch_tokens is not None:
            check_budget(max_batch_tokens)
        elif batch_size is None:
            max_batch_tokens = DEFAULT_BATCH_TOKENS
        if calibration is not None:
            self.check_calibration(calibration)
        if dual and calibration is None:
            raise ValueError("dual encoding needs a calibration config for its calibrated half")
        width = self.dimension * (2 if dual else 1)
        if not texts:
            return np.zeros((0, width), dtype=np.float32)
        if tokenized is None:
            tokenized = self.tokenize_texts(texts, prompt)
        elif len(tokenized.inputs) != len(texts) or tokenized.prompt != prompt:
            raise ValueError(
                f"tokenized holds {len(tokenized.inputs)} text(s) with prompt {tokenized.prompt!r}, but "
                f"{len(texts)} text(s) with prompt {prompt!r} were given"
            )
        self._warn_truncation(tokenized.lengths)
        padded = [len(item["input_ids"]) for item in tokenized.inputs]
        result = np.empty((len(texts), width), dtype=np.float32)
        with tqdm(total=len(texts), desc="Encoding", unit="text", disable=not show_progress) as progress:
            for chosen in forward_passes(padded, max_tokens=max_batch_tokens, max_rows=batch_size):
                batch = self.pad([tokenized.inputs[i] for i in chosen])
                result[chosen] = self._forward(batch, calibration, normalize, None, dual, span)
                progress.update(len(chosen))
        return result

    def encode_batch(
        self,
        texts: Sequence[str],
        calibration: Optional[CalibrationConfig] = None,
        *,
        normalize: bool = True,
        recorder: Optional[RowRecorder] = None,
        dual: bool = False,
        prompt: PromptSpan = NO_PROMPT,
    ) -> np.ndarray:
        """One forward pass over ``texts`` (already validated, ``prompt`` already in front of each).

        Calibrated when a non-plain config is given. ``dual=True`` returns ``[plain | calibrated]`` per text
        from one pass: the layers below the first calibrated layer run once, and from there the batch is
        doubled, its first half plain and its second half calibrated. The cost is about
        ``1 + calibrated-from-here layers / all layers`` plain.
        """
        return self._forward(dict(self.tokenize(texts)), calibration, normalize, recorder, dual, prompt)

    def _forward(self, batch, calibration, normalize, recorder, dual, prompt: PromptSpan) -> np.ndarray:
        extra = {}
        mask = batch["attention_mask"]
        if dual and recorder is not None:
            raise ValueError("dual encoding cannot record attention rows")
        if (calibration is not None and not calibration.is_plain) or recorder is not None:
            from posfair_llamaindex.calibration.config import CalibrationConfig

            plan = self.plan_for(
                mask,
                calibration or CalibrationConfig(strength=0.0),
                recorder,
                dual=dual,
                prefix_tokens=prompt.dump_tokens,
            )
            if plan.layout.any_calibrated or recorder is not None:
                extra[PLAN_KWARG] = plan
        skip = prompt.length if self.pooling == "mean" and not self.include_prompt else 0
        with torch.inference_mode():
            inputs = {key: value.to(self.device) for key, value in batch.items()}
            hidden = self.model(**inputs, **extra).last_hidden_state
            doubled = hidden.shape[0] == 2 * mask.shape[0]
            vectors = pool_hidden_states(hidden, torch.cat([mask, mask]) if doubled else mask, self.pooling, skip)
            for layer in self.dense:
                vectors = layer(vectors)
            vectors = vectors.float()
            if normalize:
                vectors = torch.nn.functional.normalize(vectors, dim=-1)
        vectors = vectors.cpu().numpy()
        if not dual:
            return vectors
        if doubled:
            return np.concatenate([vectors[: mask.shape[0]], vectors[mask.shape[0] :]], axis=1)
        # nothing in the batch was long enough to calibrate: both halves are the plain vector
        return np.concatenate([vectors, vectors], axis=1)

    def _warn_truncation(self, lengths: Iterable[int]) -> None:
        over = sum(1 for length in lengths if length > self.max_length)
        if over and not self._truncation_warned:
            self._truncation_warned = True
            warnings.warn(
                f"{over} text(s) exceed max_length={self.max_length} tokens of {self.model_name} and are truncated; "
                "later truncations by this encoder are not reported again",
                stacklevel=3,
            )

    @property
    def default_prompts(self) -> tuple[Optional[str], Optional[str]]:
        """The model's own query and document prompts (sentence-transformers' ``prompts``), for settings that
        name none."""
        prompts = self.files.prompts
        return prompts.get("query"), prompts.get("document", prompts.get("passage"))

    def encode_query(self, query: object, prompt: str = "", *, normalize: bool = True) -> np.ndarray:
        """One query, plain: the vector a search sends. Refuses what is not a non-empty string."""
        if not isinstance(query, str):
            raise TypeError(f"query is {type(query).__name__}, expected str")
        if not query.strip():
            raise ValueError("query is empty or whitespace only")
        return self.encode([query], None, normalize=normalize, prompt=prompt)[0]

    def tag_facts(self, text_instruction: str = "") -> dict[str, Any]:
        """What this encoder decides about the vectors of a collection (``tag.ENCODER_TAG_KEYS``): the weights'
        identity and the settings its model files resolve. Keys that hold their usual value are left out, so that
        tags written before they existed keep their fingerprints."""
        facts: dict[str, Any] = {
            "model_weights": self.weights_identity,
            "pooling": self.pooling,
            "dimension": self.dimension,
            "max_length": self.max_length,
        }
        if not self.include_prompt:
            facts["prompt_in_pooling"] = False
        dump_tokens = self.prompt_span(text_instruction).dump_tokens
        if dump_tokens:
            facts["dump_tokens"] = dump_tokens
        return facts

    @property
    def weights_identity(self) -> str:
        """Hub revision or weight-file hash (computed once, on first use)."""
        if self._weights_identity is None:
            self._weights_identity = weights_identity(self.folder)
        return self._weights_identity

    @property
    def content_limit(self) -> int:
        """Text tokens one forward pass takes: ``max_length`` less the special tokens added around every text."""
        with self._tokenizer_lock:
            specials = len(self.tokenizer("x")["input_ids"]) - len(
                self.tokenizer("x", add_special_tokens=False)["input_ids"]
            )
        return self.max_length - specials

    @property
    def dimension(self) -> int:
        if self.dense:
            return self.dense[-1][0].out_features
        return int(self.model.config.hidden_size)
