"""Windows and SEA over any LlamaIndex ``BaseEmbedding``: the model is called, never loaded.

Windows mode asks one thing of a model: a plain vector for each window (SEA: for each chunk). Any LlamaIndex
embedding gives that, hosted (``OpenAIEmbedding``, ``OpenAILikeEmbedding`` over vLLM, infinity-emb or TEI,
``OllamaEmbedding``, ``TextEmbeddingsInference``) or local (``HuggingFaceEmbedding``, ``FastEmbedEmbedding``).
:class:`WrappedEncoder` stands where :class:`~posfair_llamaindex.encoding.encoder.PosFairEncoder` stands for a
model this package loads, with the part of its interface that windows and SEA use:

- the model's own tokens (:mod:`posfair_llamaindex.encoding.token_offsets`), so windows are cut as for a loaded
  model, and the most tokens the model reads, so a window that would be truncated is refused when the embedding
  is made;
- ``encode``: texts in as few requests as the model allows (:class:`RequestLimits`: OpenAI takes 2,048 inputs and
  300,000 tokens per request), concurrently and bounded when async; a failed request raises
  :class:`~posfair_llamaindex.errors.WrappedRequestError`, which names the node whose windows it held;
- ``encode_query``: the model's own query path, with its query instruction;
- ``tag_facts``: what made the vectors (the class, its model, the tokenizer, the dimension, and the weights' hash
  where the model is on this machine).

Calibration changes the model's attention, which an embedding behind an API never exposes: calibrated and dual
modes (and a calibrated document vector beside windows) are refused by name before the model is called.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from posfair_llamaindex.encoding.token_offsets import (
    HuggingFaceTokenOffsets,
    TiktokenOffsets,
    TokenOffsets,
    token_offsets,
)
from posfair_llamaindex.errors import WrappedEmbeddingError, WrappedRequestError

# OpenAI's embeddings endpoint: inputs per request, tokens per request, tokens per input (text-embedding-3-*, ada-002)
OPENAI_MAX_INPUTS = 2048
OPENAI_MAX_REQUEST_TOKENS = 300_000
OPENAI_MAX_INPUT_TOKENS = 8191
OPENAI_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
OPENAI_API_BASE = "https://api.openai.com/v1"
# requests in flight at once when async, unless told otherwise
DEFAULT_CONCURRENCY = 4
# the command line's --embedding kind of each LlamaIndex class it can rebuild from a tag (cli/wrapped_options.py)
CLI_KINDS = {
    "OpenAILikeEmbedding": "openai-like",
    "OpenAIEmbedding": "openai",
    "HuggingFaceEmbedding": "huggingface",
    "OllamaEmbedding": "ollama",
}
# what a tag records as the weights of a model this machine does not hold
REMOTE_WEIGHTS = "remote"


@dataclass(frozen=True)
class RequestLimits:
    """How much one request to the wrapped model may carry: inputs, and tokens summed over them (None: no cap)."""

    max_inputs: int
    max_tokens: Optional[int] = None

    def requests(self, costs: Sequence[int]) -> list[list[int]]:
        """The indices of inputs with these token ``costs``, in order, cut into the fewest requests that fit."""
        requests: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for index, cost in enumerate(costs):
            over = len(current) >= self.max_inputs or (
                self.max_tokens is not None and current and tokens + cost > self.max_tokens
            )
            if over:
                requests.append(current)
                current, tokens = [], 0
            current.append(index)
            tokens += cost
        if current:
            requests.append(current)
        return requests


def _class_names(embed_model: Any) -> list[str]:
    return [cls.__name__ for cls in type(embed_model).__mro__]


def _is_openai_hosted(embed_model: Any) -> bool:
    """OpenAI's own API (``OpenAIEmbedding`` at its default base), not a server that speaks its protocol."""
    names = _class_names(embed_model)
    if "OpenAIEmbedding" not in names or "OpenAILikeEmbedding" in names:
        return False
    base = (getattr(embed_model, "api_base", None) or OPENAI_API_BASE).rstrip("/")
    return base == OPENAI_API_BASE


def _fastembed_model(embed_model: Any) -> Any:
    """The model inside ``FastEmbedEmbedding`` (its ``TextEmbedding``'s ``model``: an ``OnnxTextEmbedding``)."""
    return getattr(getattr(embed_model, "_model", None), "model", None)


def _local_folder(name: Any) -> Optional[Path]:
    if not isinstance(name, str) or not name:
        return None
    path = Path(name).expanduser()
    return path if path.is_dir() else None


def _folder_input_limit(folder: Path) -> Optional[int]:
    """The most tokens a model folder's files say it reads: sentence-transformers' ``max_seq_length``, else the
    tokenizer's ``model_max_length``, else ``config.json``'s ``max_position_embeddings``."""
    for name, key in (
        ("sentence_bert_config.json", "max_seq_length"),
        ("tokenizer_config.json", "model_max_length"),
        ("config.json", "max_position_embeddings"),
    ):
        path = folder / name
        if path.is_file():
            try:
                value = json.loads(path.read_text()).get(key)
            except (OSError, ValueError):
                continue
            if isinstance(value, int) and 0 < value < 1_000_000:
                return value
    return None


class WrappedEncoder:
    """A LlamaIndex embedding in the place of :class:`PosFairEncoder`, for windows and SEA (module docstring).

    It has no pooling, no padding side and no prompts of its own: the wrapped model decides them.

    Args:
        embed_model: any LlamaIndex ``BaseEmbedding``.
        tokenizer: the model's tokens when they cannot be found on ``embed_model``: a model folder (its
            ``tokenizer.json``), a tiktoken encoding name, a fast tokenizer, or a callable ``text -> [(start, end)]``.
            Found by itself for ``HuggingFaceEmbedding``, ``FastEmbedEmbedding`` (its ONNX model's tokenizer, also
            with ``lazy_load=True``) and OpenAI's API (``cl100k_base``).
        max_input_tokens: the most tokens the model reads per input, special tokens included. Found by itself for
            ``HuggingFaceEmbedding`` (its ``max_length``), OpenAI's API (8,191) and a ``tokenizer`` folder's files.
        max_request_inputs / max_request_tokens: what one request may carry. OpenAI's API: 2,048 and 300,000;
            other OpenAI-protocol servers 2,048 inputs; anything else ``embed_model.embed_batch_size`` inputs.
        max_concurrency: requests in flight at once on the async path.
    """

    is_wrapped = True
    pooling = None
    padding_side = None
    default_prompts = (None, None)

    def __init__(
        self,
        embed_model: Any,
        *,
        tokenizer: Any = None,
        max_input_tokens: Optional[int] = None,
        max_request_inputs: Optional[int] = None,
        max_request_tokens: Optional[int] = None,
        max_concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        from llama_index.core.base.embeddings.base import BaseEmbedding

        if not isinstance(embed_model, BaseEmbedding):
            raise TypeError(f"embed_model must be a LlamaIndex BaseEmbedding, got {type(embed_model).__name__}")
        for name, value in (
            ("max_input_tokens", max_input_tokens),
            ("max_request_inputs", max_request_inputs),
            ("max_request_tokens", max_request_tokens),
            ("max_concurrency", max_concurrency),
        ):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.embed_model = embed_model
        self.class_name = type(embed_model).__name__
        self.model_name = str(getattr(embed_model, "model_name", None) or self.class_name)
        self.max_concurrency = max_concurrency
        self.tokenizer_setting = tokenizer  # as given, to rebuild the embedding (PosFairEmbedding.constructor_settings)
        self._tokenizer_given = str(tokenizer) if isinstance(tokenizer, (str, Path)) else None
        self._limit_given = max_input_tokens
        self.folder = self._model_folder()
        self.offsets = self._find_tokenizer(tokenizer)
        self.max_length = self._find_input_limit(max_input_tokens, tokenizer)
        self.limits = self._find_request_limits(max_request_inputs, max_request_tokens)
        self.document_prompt = self._document_prompt()
        self._dimension: Optional[int] = self._known_dimension()
        self._weights: Optional[str] = None
        if self.content_limit < 1:
            raise WrappedEmbeddingError(
                f"{self.describe()} reads {self.max_length} tokens per input, which its special tokens and document "
                "prompt fill: no text fits"
            )

    # ------------------------------------------------------------------ what the model is
    def describe(self) -> str:
        return f"{self.class_name}({self.model_name!r})"

    def _model_folder(self) -> Optional[Path]:
        """Where the weights are on this machine, for a model that runs here (HuggingFace, FastEmbed)."""
        names = _class_names(self.embed_model)
        if "HuggingFaceEmbedding" in names:
            return _local_folder(self.embed_model.model_name)
        if "FastEmbedEmbedding" in names:
            return _local_folder(str(getattr(_fastembed_model(self.embed_model), "_model_dir", "") or ""))
        return None

    def _find_tokenizer(self, tokenizer: Any) -> TokenOffsets:
        if tokenizer is not None:
            return token_offsets(tokenizer)
        names = _class_names(self.embed_model)
        if "HuggingFaceEmbedding" in names:
            return HuggingFaceTokenOffsets(self.embed_model._model.tokenizer)
        if "FastEmbedEmbedding" in names:
            inner = _fastembed_model(self.embed_model)
            found = getattr(inner, "tokenizer", None)
            if found is None and callable(getattr(inner, "_ensure_tokenizer", None)):
                inner._ensure_tokenizer()  # lazy_load=True: the tokenizer alone, not the ONNX session
                found = getattr(inner, "tokenizer", None)
            if found is not None:
                return HuggingFaceTokenOffsets(found)
            if self.folder is not None and (self.folder / "tokenizer.json").is_file():
                return HuggingFaceTokenOffsets.from_folder(self.folder)
        if _is_openai_hosted(self.embed_model):
            return TiktokenOffsets()
        raise WrappedEmbeddingError(
            f"windows of {self.describe()} are cut in its own tokens, and this package cannot tell which tokenizer "
            "the model behind it uses: pass tokenizer= (the model's folder or its tokenizer.json, a tiktoken encoding "
            "name such as 'cl100k_base', or a callable text -> [(start, end), ...])"
        )

    def _find_input_limit(self, given: Optional[int], tokenizer: Any) -> int:
        if given is not None:
            return given
        names = _class_names(self.embed_model)
        if "HuggingFaceEmbedding" in names:
            return int(self.embed_model._model.max_seq_length)
        if "FastEmbedEmbedding" in names and self.folder is not None:
            found = _folder_input_limit(self.folder)
            if found:
                return found
        if _is_openai_hosted(self.embed_model):
            return OPENAI_MAX_INPUT_TOKENS
        folder = _local_folder(str(tokenizer)) if isinstance(tokenizer, (str, Path)) else None
        if folder is not None:
            found = _folder_input_limit(folder)
            if found:
                return found
        raise WrappedEmbeddingError(
            f"the most tokens {self.describe()} reads per input is unknown, so windows cannot be checked to fit it: "
            "pass max_input_tokens= (the served model's limit, special tokens included)"
        )

    def _find_request_limits(self, inputs: Optional[int], tokens: Optional[int]) -> RequestLimits:
        names = _class_names(self.embed_model)
        if _is_openai_hosted(self.embed_model):
            return RequestLimits(inputs or OPENAI_MAX_INPUTS, tokens or OPENAI_MAX_REQUEST_TOKENS)
        if "OpenAIEmbedding" in names:  # the class asserts at most 2,048 inputs per request, whatever the server
            return RequestLimits(min(inputs or OPENAI_MAX_INPUTS, OPENAI_MAX_INPUTS), tokens)
        return RequestLimits(inputs or max(1, int(self.embed_model.embed_batch_size)), tokens)

    def _document_prompt(self) -> str:
        """The prefix the wrapped model puts before each document itself (HuggingFaceEmbedding's text prompt)."""
        if "HuggingFaceEmbedding" in _class_names(self.embed_model):
            return self.embed_model._model.prompts.get("text") or ""
        return getattr(self.embed_model, "text_instruction", None) or ""

    def _known_dimension(self) -> Optional[int]:
        names = _class_names(self.embed_model)
        if "HuggingFaceEmbedding" in names:
            model = self.embed_model._model
            size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            return int(size())
        if "FastEmbedEmbedding" in names:
            description = getattr(_fastembed_model(self.embed_model), "model_description", None)
            if isinstance(getattr(description, "dim", None), int):
                return description.dim
        dimensions = getattr(self.embed_model, "dimensions", None)
        if isinstance(dimensions, int):
            return dimensions
        if _is_openai_hosted(self.embed_model):
            return OPENAI_DIMENSIONS.get(self.model_name)
        return None

    @property
    def dimension(self) -> int:
        """Size of one vector; asked of the model with one short request where nothing else tells it."""
        if self._dimension is None:
            try:
                vector = self.embed_model._get_text_embedding("dimension")
            except Exception as error:
                raise WrappedRequestError(
                    f"{self.describe()} did not answer the request that reads its vector size "
                    f"({type(error).__name__}: {error})"
                ) from error
            self._dimension = len(vector)
        return self._dimension

    @property
    def content_limit(self) -> int:
        """Text tokens one input takes: the model's limit less its special tokens and its own document prompt."""
        prompt = self.offsets.count(self.document_prompt) if self.document_prompt else 0
        return self.max_length - self.offsets.special_tokens - prompt

    @property
    def weights_identity(self) -> str:
        """The weight files' hash where the model is on this machine, else ``"remote"``."""
        if self._weights is None:
            if self.folder is None:
                self._weights = REMOTE_WEIGHTS
            else:
                from posfair_llamaindex.model.model_files import weights_identity

                self._weights = weights_identity(self.folder)
                if self._weights == "unknown":  # an ONNX folder (FastEmbed's): no safetensors or .bin to hash
                    self._weights = self._onnx_identity() or self._weights
        return self._weights

    def _onnx_identity(self) -> Optional[str]:
        """A SHA-256 of the ONNX files FastEmbed runs (its model file and the external data beside it), hashed as
        ``model_files.weights_identity`` hashes weight files: each file's path in the folder, then its bytes."""
        description = getattr(_fastembed_model(self.embed_model), "model_description", None)
        names = [getattr(description, "model_file", None), *(getattr(description, "additional_files", None) or [])]
        files = sorted({name for name in names if isinstance(name, str) and (self.folder / name).is_file()})
        if not files:
            return None
        import hashlib

        digest = hashlib.sha256()
        for name in files:
            digest.update(name.encode())
            with (self.folder / name).open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        return f"sha256:{digest.hexdigest()[:16]}"

    def check_window(self, size: int, what: str = "windows") -> None:
        """A window (or chunk) of ``size`` tokens must fit the model's input, or the model would cut it."""
        if size > self.content_limit:
            prompt = " and its document prompt" if self.document_prompt else ""
            raise WrappedEmbeddingError(
                f"{what} of {size} tokens do not fit {self.describe()}: it reads {self.max_length} tokens per input, "
                f"so at most {self.content_limit} text tokens remain after its special tokens{prompt}; pass a "
                "smaller size"
            )

    def tag_facts(self, text_instruction: str = "") -> dict[str, Any]:
        """What this model decides about a collection's vectors (the counterpart of ``PosFairEncoder.tag_facts``)."""
        return {
            "embedding": {
                "class": self.class_name,
                "model_name": self.model_name,
                "tokenizer": self.offsets.tag(),
                "max_input_tokens": self.max_length,
                "document_prompt": self.document_prompt or None,
                "query_instruction": getattr(self.embed_model, "query_instruction", None),
            },
            "model_weights": self.weights_identity,
            "dimension": self.dimension,
            "max_length": self.max_length,
        }

    def source(self) -> dict[str, Any]:
        """How the command line rebuilds this embedding (the tag's informational ``embedding_source``): the
        ``--embedding`` kind, the model's name, the API base, the tokenizer given as a folder or name. Never a key."""
        kind = next((CLI_KINDS[name] for name in _class_names(self.embed_model) if name in CLI_KINDS), None)
        base = getattr(self.embed_model, "api_base", None) or getattr(self.embed_model, "base_url", None)
        return {
            "kind": kind,
            "model": self.model_name,
            "api_base": base if isinstance(base, str) else None,
            "tokenizer": self._tokenizer_given,
            "max_input_tokens": self._limit_given,
        }

    # ------------------------------------------------------------------ the parts windows and SEA read
    def token_spans(self, texts: Sequence[str]) -> list[tuple[list, list]]:
        """Each text's tokens as ``(character spans, word ids)`` (what ``WindowSplitter`` cuts by)."""
        return self.offsets.spans(texts)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [len(spans) for spans, _ in self.offsets.spans(texts)]

    @property
    def tokenizer(self) -> Any:
        """What chonkie counts tokens with (SEA's chunkers)."""
        return self.offsets.chonkie_tokenizer()

    # ------------------------------------------------------------------ calls
    def _plan(self, texts: Sequence[str]) -> list[list[int]]:
        costs = [length + self.offsets.special_tokens for length in self.token_lengths(texts)]
        return self.limits.requests(costs)

    def _vectors(self, answers: list, count: int, normalize: bool) -> np.ndarray:
        vectors = np.asarray(answers, dtype=np.float32).reshape(count, -1) if count else np.zeros((0, 0), np.float32)
        if count and self._dimension is None:
            self._dimension = vectors.shape[1]
        if count and vectors.shape[1] != self._dimension:
            raise WrappedRequestError(
                f"{self.describe()} answered vectors of {vectors.shape[1]} floats, not {self._dimension}"
            )
        if normalize and count:
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
        return vectors

    def encode(
        self,
        texts: Sequence[str],
        calibration: Any = None,
        *,
        batch_size: Optional[int] = None,
        max_batch_tokens: Optional[int] = None,
        normalize: bool = True,
        show_progress: bool = False,
        prompt: str = "",
        owners: Optional[Sequence[int]] = None,
        **_: Any,
    ) -> np.ndarray:
        """Plain vectors of ``texts`` (``[len(texts), dimension]``), in the fewest requests the limits allow.

        ``batch_size`` and ``max_batch_tokens`` size forward passes of a loaded model and are not used: the
        requests are sized by :attr:`limits`. ``owners`` maps each text to the node it came from, so that a
        failed request names that node (:class:`WrappedRequestError`)."""
        self._refuse(calibration, prompt)
        texts = list(texts)
        answers: list = [None] * len(texts)
        requests = self._plan(texts)
        for number, request in enumerate(requests):
            try:
                vectors = self.embed_model._get_text_embeddings([texts[i] for i in request])
            except Exception as error:
                raise self._failure(error, number, len(requests), request, owners) from error
            self._place(answers, request, vectors, number)
        return self._vectors(answers, len(texts), normalize)

    async def aencode(
        self,
        texts: Sequence[str],
        *,
        normalize: bool = True,
        prompt: str = "",
        owners: Optional[Sequence[int]] = None,
    ) -> np.ndarray:
        """:meth:`encode` on the model's async path: up to :attr:`max_concurrency` requests in flight; the first
        failure cancels the rest and raises."""
        self._refuse(None, prompt)
        texts = list(texts)
        answers: list = [None] * len(texts)
        requests = self._plan(texts)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def send(number: int, request: list[int]) -> None:
            async with gate:
                try:
                    vectors = await self.embed_model._aget_text_embeddings([texts[i] for i in request])
                except Exception as error:
                    raise self._failure(error, number, len(requests), request, owners) from error
            self._place(answers, request, vectors, number)

        tasks = [asyncio.ensure_future(send(number, request)) for number, request in enumerate(requests)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return self._vectors(answers, len(texts), normalize)

    def encode_batch(self, texts: Sequence[str], calibration: Any = None, **kwargs: Any) -> np.ndarray:
        """chonkie's semantic chunker (SEA) embeds sentences through this."""
        return self.encode(texts, calibration, normalize=kwargs.get("normalize", True))

    def encode_query(self, query: object, prompt: str = "", *, normalize: bool = True) -> np.ndarray:
        """A query through the model's own query path (its query instruction, its query model where it has one)."""
        if not isinstance(query, str):
            raise TypeError(f"query is {type(query).__name__}, expected str")
        if not query.strip():
            raise ValueError("query is empty or whitespace only")
        try:
            vector = self.embed_model._get_query_embedding(query)
        except Exception as error:
            raise WrappedRequestError(
                f"the query request to {self.describe()} failed ({type(error).__name__}: {error})"
            ) from error
        return self._vectors([vector], 1, normalize)[0]

    async def aencode_query(self, query: str, *, normalize: bool = True) -> np.ndarray:
        try:
            vector = await self.embed_model._aget_query_embedding(query)
        except Exception as error:
            raise WrappedRequestError(
                f"the query request to {self.describe()} failed ({type(error).__name__}: {error})"
            ) from error
        return self._vectors([vector], 1, normalize)[0]

    def _refuse(self, calibration: Any, prompt: str) -> None:
        if calibration is not None:
            raise WrappedEmbeddingError(
                f"{self.describe()} cannot calibrate: calibration rewrites the model's attention, which a wrapped "
                "embedding does not expose"
            )
        if prompt:
            raise WrappedEmbeddingError(
                f"a document prompt for {self.describe()} is the wrapped model's own setting (its text instruction); "
                "PosFairEmbedding adds none"
            )

    def _place(self, answers: list, request: list[int], vectors: Sequence, number: int) -> None:
        if len(vectors) != len(request):
            raise WrappedRequestError(
                f"request {number + 1} to {self.describe()} sent {len(request)} inputs and got {len(vectors)} vectors"
            )
        for index, vector in zip(request, vectors, strict=True):
            answers[index] = vector

    def _failure(
        self, error: Exception, number: int, total: int, request: list[int], owners: Optional[Sequence[int]]
    ) -> WrappedRequestError:
        nodes = sorted({owners[i] for i in request}) if owners is not None else []
        whose = ""
        if nodes:
            shown = ", ".join(str(node) for node in nodes[:5]) + (", ..." if len(nodes) > 5 else "")
            whose = f" It held windows of node(s) {shown} of this call (0-based, in the order given)."
        return WrappedRequestError(
            f"request {number + 1} of {total} to {self.describe()} failed ({type(error).__name__}: {error}).{whose} "
            "No vector of this call was returned, so no node is stored with part of its windows; retry the call.",
            nodes=nodes,
        )


class Precomputed:
    """The embeddings of one async batch call, made up front with concurrent requests and served to the slices
    LlamaIndex asks for (the interface of ``passes.Lookahead``: ``holds`` and ``embed``)."""

    def __init__(self, texts: Sequence[str], embeddings: Sequence[Any]) -> None:
        self._done = dict(zip(texts, embeddings, strict=True))

    def holds(self, texts: Sequence[str]) -> bool:
        return all(text in self._done for text in texts)

    def embed(self, texts: Sequence[str]) -> list[Any]:
        return [self._done[text] for text in texts]


def check_wrapped_mode(embed_model: Any, mode: str, window_document: Optional[str]) -> None:
    """Refuse, before the wrapped model is touched, the modes that need its attention (calibrated and dual, and a
    calibrated document vector beside windows)."""
    name = (
        "it" if embed_model is None else f"{type(embed_model).__name__}({getattr(embed_model, 'model_name', None)!r})"
    )
    why = (
        "it needs the model's attention (calibration rewrites the pooling token's attention over the text in the "
        f"upper layers), which a wrapped LlamaIndex embedding ({name}) does not expose"
    )
    if mode in ("calibrated", "dual"):
        raise WrappedEmbeddingError(
            f"mode {mode!r} cannot run over embed_model: {why}. Use mode='windows' or mode='sea' over it, or pass "
            "the model's folder or hub id as model_name"
        )
    if window_document in ("calibrated", "dual"):
        raise WrappedEmbeddingError(
            f"windows with document={window_document!r} cannot run over embed_model: {why}. Use document='none' "
            "or 'plain'"
        )


def lower_bound_requests(limits: RequestLimits, costs: Sequence[int]) -> int:
    """No packing can make fewer requests than this (inputs over the input cap, tokens over the token cap)."""
    bound = math.ceil(len(costs) / limits.max_inputs) if costs else 0
    if limits.max_tokens is not None:
        bound = max(bound, math.ceil(sum(costs) / limits.max_tokens))
    return bound


__all__ = [
    "DEFAULT_CONCURRENCY",
    "Precomputed",
    "check_wrapped_mode",
    "OPENAI_MAX_INPUTS",
    "OPENAI_MAX_INPUT_TOKENS",
    "OPENAI_MAX_REQUEST_TOKENS",
    "RequestLimits",
    "WrappedEncoder",
]
