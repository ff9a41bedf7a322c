"""Loading a transformers model once and encoding texts with it, plain or calibrated.

One model object serves both paths: without a plan the registered attention function is plain SDPA,
so queries cost exactly what they cost without this package.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections.abc import Iterable, Sequence
from typing import Optional, Union

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer

from posfair_llamaindex.attention import ATTENTION_NAME, PLAN_KWARG, PROBE_KWARG, CalibrationPlan, RowRecorder
from posfair_llamaindex.calibration import RowLayout
from posfair_llamaindex.config import CalibrationConfig
from posfair_llamaindex.model_files import (
    check_model_exists,
    read_sentence_transformer_files,
    resolve_local_folder,
    weights_identity,
)
from posfair_llamaindex.options import DTYPES, PADDING_SIDES, POOLINGS
from posfair_llamaindex.pooling import pool_hidden_states, pooling_positions
from posfair_llamaindex.prompts import NO_PROMPT, PromptSpan, prompt_span

logger = logging.getLogger(__name__)

SUPPORTED_FAMILIES = (
    "BERT, RoBERTa/XLM-RoBERTa (bge-m3, granite), ModernBERT, Qwen3, Gemma3 and other models whose attention "
    "goes through transformers' AttentionInterface"
)
_DTYPES = {name: getattr(torch, name) for name in DTYPES}


class UnsupportedModelError(ValueError):
    """The model computes attention itself, so its attention cannot be calibrated through the interface."""


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
        max_length: Optional[int] = None,
        device: Optional[str] = None,
        dtype: Union[str, torch.dtype, None] = None,
        trust_remote_code: bool = False,
        padding_side: str = "right",
    ) -> None:
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
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_name, trust_remote_code=trust_remote_code)
        except OSError as error:
            raise FileNotFoundError(
                f"no model at {model_name}: not a folder on this machine, and not a hub model in the local cache "
                f"({str(error).splitlines()[0]})"
            ) from None
        try:
            model = AutoModel.from_pretrained(
                model_name, attn_implementation=ATTENTION_NAME, dtype=self.dtype, trust_remote_code=trust_remote_code
            )
        except ValueError as error:
            if "attn_implementation" in str(error) or "attention" in str(error).lower():
                first_sentence = str(error).split(". ")[0]
                raise UnsupportedModelError(
                    self._unsupported_message(f"transformers refused it ({first_sentence})")
                ) from None
            raise
        if getattr(model.config, "use_cache", False):
            model.config.use_cache = False
        self.model = model.eval().to(self.device)
        self.num_layers = self._probe_layers()
        self._layers = self._find_layer_modules()
        for index, layer in enumerate(self._layers):
            # acts only on forwards that carry a dual plan; every other forward passes through untouched
            layer.register_forward_pre_hook(functools.partial(_branch_dual_batch, index), with_kwargs=True)
        self.folder = resolve_local_folder(model_name)
        self.files = read_sentence_transformer_files(self.folder)
        self._weights_identity: Optional[str] = None
        self.pooling = pooling or self.files.pooling or self._fallback_pooling()
        self.max_length = self._resolve_max_length(max_length)
        self.dense = [layer.to(self.device, self.dtype).eval() for layer in self.files.dense]
        # sentence-transformers' include_prompt: whether mean pooling averages over the prompt's tokens too
        self.include_prompt = self.files.include_prompt
        self._prompt_spans: dict[str, PromptSpan] = {}
        self._truncation_warned = False

    # ------------------------------------------------------------------ loading
    def _unsupported_message(self, reason: str) -> str:
        return (
            f"{self.model_name} cannot be calibrated: {reason}. Supported: {SUPPORTED_FAMILIES}; "
            "models that compute softmax inside their own forward (MPNet, remote-code models) are not"
        )

    def _probe_layers(self) -> int:
        """Run a few tokens through the model and count the layers that called the registered function."""
        seen: list[Optional[int]] = []
        ids = self.tokenizer("probe", return_tensors="pt")
        with torch.inference_mode():
            self.model(**ids.to(self.device), **{PROBE_KWARG: seen})
        expected = _configured_layers(self.model.config)
        if not seen or any(layer is None for layer in seen):
            raise UnsupportedModelError(
                self._unsupported_message("its attention does not go through transformers' AttentionInterface")
            )
        layers = sorted(set(seen))
        if layers != list(range(len(layers))) or (expected is not None and len(layers) != expected):
            raise UnsupportedModelError(
                self._unsupported_message(f"only layers {layers} of {expected} went through the AttentionInterface")
            )
        return len(layers)

    def _find_layer_modules(self) -> list[torch.nn.Module]:
        """The model's layer stack, found by structure: the ModuleList whose i-th entry holds layer i's attention.

        Dual encoding doubles the batch where the branches part; that needs a handle on each layer, and
        this finds one in any family without naming module paths.
        """
        for _, candidate in self.model.named_modules():
            if not isinstance(candidate, torch.nn.ModuleList) or len(candidate) != self.num_layers:
                continue
            if all(
                any(getattr(sub, "layer_idx", None) == index for sub in layer.modules())
                for index, layer in enumerate(candidate)
            ):
                return list(candidate)
        raise UnsupportedModelError(self._unsupported_message("its layer stack could not be located for dual encoding"))

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

    def _resolve_max_length(self, requested: Optional[int]) -> int:
        limits = []
        tokenizer_limit = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tokenizer_limit, int) and tokenizer_limit < 1_000_000:
            limits.append(tokenizer_limit)
        position_limit = getattr(self.model.config, "max_position_embeddings", None)
        if isinstance(position_limit, int):
            limits.append(position_limit)
        limit = min(limits) if limits else None
        if requested is None:
            if limit is None:
                raise ValueError(f"{self.model_name} states no maximum length; pass max_length=")
            return limit
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 2:
            raise ValueError(f"max_length must be an int >= 2, got {requested!r}")
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
        """Token counts before truncation (special tokens included)."""
        with self._tokenizer_lock:
            encoded = self.tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def encode(
        self,
        texts: Sequence[str],
        calibration: Optional[CalibrationConfig] = None,
        *,
        batch_size: int = 16,
        normalize: bool = True,
        show_progress: bool = False,
        dual: bool = False,
        prompt: str = "",
    ) -> np.ndarray:
        """Embed ``texts`` (float32 ``[n, dim]``), longest first in batches, returned in input order.

        With ``dual=True`` each row is the plain vector followed by the calibrated one (``[n, 2 * dim]``),
        both from one shared pass (see :meth:`encode_batch`). ``prompt`` goes in front of every text, as
        sentence-transformers' prompts do: left out of mean pooling when the model says ``include_prompt:
        false``, and its [DUMP] tokens isolated under calibration.
        """
        texts = check_texts(texts)
        span = self.prompt_span(prompt)
        texts = [span.text + text for text in texts] if span.text else texts
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if calibration is not None:
            self.check_calibration(calibration)
        if dual and calibration is None:
            raise ValueError("dual encoding needs a calibration config for its calibrated half")
        width = self.dimension * (2 if dual else 1)
        if not texts:
            return np.zeros((0, width), dtype=np.float32)
        lengths = self.token_lengths(texts)
        self._warn_truncation(lengths)
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        result = np.empty((len(texts), width), dtype=np.float32)
        starts = range(0, len(order), batch_size)
        for start in tqdm(starts, desc="Encoding", unit="batch", disable=not show_progress):
            chosen = order[start : start + batch_size]
            result[chosen] = self.encode_batch(
                [texts[i] for i in chosen], calibration, normalize=normalize, dual=dual, prompt=span
            )
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
        batch = self.tokenize(texts)
        extra = {}
        mask = batch["attention_mask"]
        if dual and recorder is not None:
            raise ValueError("dual encoding cannot record attention rows")
        if (calibration is not None and not calibration.is_plain) or recorder is not None:
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
            hidden = self.model(**batch.to(self.device), **extra).last_hidden_state
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


def _branch_dual_batch(index: int, module: torch.nn.Module, args: tuple, kwargs: dict):
    """Forward pre-hook of layer ``index``: under a dual plan, double the batch from the branch layer on.

    At the branch layer the hidden states arrive with the batch once and leave with it twice; in every
    layer from there on, whatever else the model hands its layers per sequence (the attention mask,
    rotary position embeddings, position ids) is doubled to match. Forwards without a dual plan, and
    layers below the branch, are left alone.
    """
    plan = kwargs.get(PLAN_KWARG)
    if plan is None or plan.dual_batch is None or index < plan.branch_layer:
        return None
    n = plan.dual_batch
    hidden = args[0] if args else kwargs["hidden_states"]
    if hidden.shape[0] not in (n, 2 * n):
        raise RuntimeError(f"layer {index} of a dual pass got a batch of {hidden.shape[0]}, expected {n} or {2 * n}")

    def doubled(value):
        if isinstance(value, torch.Tensor):
            return torch.cat([value, value]) if value.dim() >= 2 and value.shape[0] == n else value
        if isinstance(value, (tuple, list)):
            return type(value)(doubled(item) for item in value)
        if isinstance(value, dict):
            return {key: doubled(item) for key, item in value.items()}
        return value

    if hidden.shape[0] == n and n > 0:
        hidden = torch.cat([hidden, hidden])
    rest = tuple(doubled(item) for item in args[1:])
    kwargs = {key: (item if key in (PLAN_KWARG, "hidden_states") else doubled(item)) for key, item in kwargs.items()}
    if args:
        return (hidden, *rest), kwargs
    kwargs["hidden_states"] = hidden
    return rest, kwargs


def _configured_layers(config) -> Optional[int]:
    value = getattr(config, "num_hidden_layers", None)
    return int(value) if isinstance(value, int) else None
