"""Windows mode: a vector per window of the text beside the document vector(s), searched by MaxSim.

A single vector per document favours what it can see best: the start, and nothing past the token limit.
Cutting the text into windows of ``size`` tokens every ``stride`` tokens and encoding each window on its
own gives every position a vector of its own, whatever the text's length; a query scores a document by its
best window (MaxSim) and by its document vector, fused. Windows are cut at word starts of the model's own
tokenizer, so a window re-tokenizes into the tokens it was cut from; each is encoded plain, with the
document prompt in front, exactly as a short document would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from posfair_llamaindex.options import DEFAULT_WINDOW_DOCUMENT, WINDOW_DOCUMENTS, WindowDocument

if TYPE_CHECKING:  # a WindowConfig is checked, e.g. on the command line, before the model's libraries load
    import numpy as np

    from posfair_llamaindex.encoding.encoder import PosFairEncoder


class WindowConfig(BaseModel):
    """How texts are cut into windows, and which document vector goes with them.

    ``size`` and ``stride`` count tokens of the model's tokenizer without special tokens; ``stride`` None
    means ``size`` (windows side by side). The last window ends at the text's end, so the whole text is
    covered. ``document`` is the vector kept for the whole text (truncated at the model's limit) beside
    the windows: ``"none"`` (the default), ``"plain"``, ``"calibrated"`` or ``"dual"`` (both). None is the default
    because windows alone were level with windows beside a plain vector on every benchmark but one (+0.3 HM) at
    half the encoding cost (docs/RESULTS.md §4.5); a text of at most ``size`` tokens is its own window, which is
    its plain vector.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    size: StrictInt = Field(default=128, ge=8, description="Tokens per window.")
    stride: Optional[StrictInt] = Field(default=None, ge=1, description="Tokens between window starts.")
    document: WindowDocument = Field(
        default=DEFAULT_WINDOW_DOCUMENT, description="The document vector(s) kept beside windows."
    )

    @model_validator(mode="after")
    def _stride_within_size(self) -> WindowConfig:
        if self.stride is not None and self.stride > self.size:
            raise ValueError(f"stride ({self.stride}) must not exceed size ({self.size}): text would be skipped")
        return self

    @property
    def step(self) -> int:
        return self.stride if self.stride is not None else self.size

    @property
    def document_vectors(self) -> int:
        """How many document vectors precede the windows in a document embedding."""
        return {"plain": 1, "calibrated": 1, "dual": 2, "none": 0}[self.document]

    @property
    def calibrated(self) -> bool:
        return self.document in ("calibrated", "dual")

    def tag(self) -> dict:
        return {"size": self.size, "stride": self.step, "document": self.document}


def window_spans(words: Sequence[Optional[int]], size: int, stride: int) -> list[tuple[int, int]]:
    """Token ranges ``[first, end)`` of the windows over tokens whose word ids are ``words``.

    Windows hold at most ``size`` tokens, start every ``stride`` tokens and cover every token: each starts
    and ends at a word start where one lies in range (a word longer than a window is cut), the next starts
    no later than the previous ends, and the last one ends at the last token, reaching back ``size`` tokens
    so that it is as full as the others.
    """
    count = len(words)
    if count <= size:
        return [(0, count)]
    spans = []
    first = 0
    while True:
        if first + size >= count:  # the last window: as full as the others, ending at the end
            spans.append((min(first, _word_start_from(words, count - size)), count))
            return spans
        end = _word_start(words, first + size)
        end = end if end > first else first + size
        spans.append((first, end))
        following = _word_start(words, first + stride)
        if following <= first:  # a word longer than the stride: the next window starts after it, if it can
            following = _word_start_from(words, first + stride)
        first = following if first < following <= end else min(first + stride, end)


def _word_start(words: Sequence[Optional[int]], position: int) -> int:
    """The first token of the word that holds token ``position`` (a token without a word stands alone)."""
    word = words[position]
    while word is not None and position > 0 and words[position - 1] == word:
        position -= 1
    return position


def _word_start_from(words: Sequence[Optional[int]], position: int) -> int:
    """The first word start at or after ``position`` (``position`` itself when none lies before the end)."""
    for candidate in range(position, len(words)):
        if candidate == 0 or words[candidate] is None or words[candidate] != words[candidate - 1]:
            return candidate
    return position


class WindowSplitter:
    """Cuts texts into window texts at word starts of the encoder's tokenizer (a wrapped embedding's tokens:
    ``WrappedEncoder.token_spans``, encoding/wrapped.py)."""

    def __init__(self, encoder: PosFairEncoder, config: WindowConfig) -> None:
        tokenizer = encoder.tokenizer
        if not getattr(encoder, "is_wrapped", False) and not getattr(tokenizer, "is_fast", False):
            raise ValueError(
                f"windows mode cuts texts by token offsets, which needs a fast tokenizer; {encoder.model_name}'s "
                f"is {type(tokenizer).__name__}"
            )
        self.encoder = encoder
        self.config = config

    def check_fits(self, prompt: str) -> None:
        """A window with its prompt and special tokens must fit the model's limit, or it would be truncated."""
        if getattr(self.encoder, "is_wrapped", False):  # the wrapped model's limit, less its specials and prompt
            self.encoder.check_window(self.config.size)
            return
        # a prompt's length counts the leading special token, which content_limit has already set aside
        room = self.encoder.content_limit - max(0, self.encoder.prompt_span(prompt).length - 1)
        if self.config.size > room:
            raise ValueError(
                f"windows of {self.config.size} tokens do not fit {self.encoder.model_name} at max_length "
                f"{self.encoder.max_length}: at most {room} text tokens remain after special tokens"
                + (" and the document prompt" if prompt else "")
            )

    def split(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's windows, in order; a text that fits in one window is its own single window."""
        if not texts:
            return []
        if getattr(self.encoder, "is_wrapped", False):
            spans = self.encoder.token_spans(texts)
            return [self._cut(text, offsets, words) for text, (offsets, words) in zip(texts, spans, strict=True)]
        with self.encoder._tokenizer_lock:
            encoded = self.encoder.tokenizer(
                list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False
            )
        return [self._cut(text, encoded[i].offsets, encoded[i].word_ids) for i, text in enumerate(texts)]

    def _cut(self, text: str, offsets: list, words: list) -> list[str]:
        if len(offsets) <= self.config.size:
            return [text]
        spans = window_spans(words, self.config.size, self.config.step)
        return [text[offsets[first][0] : offsets[end - 1][1]] for first, end in spans]


class WindowEmbedder:
    """Every window of every text encoded plain, returned per text as a ``[windows, dim]`` array."""

    def __init__(self, encoder: PosFairEncoder, config: Optional[WindowConfig] = None) -> None:
        self.config = config or WindowConfig()
        self.splitter = WindowSplitter(encoder, self.config)
        self.encoder = encoder

    def encode(
        self,
        texts: Sequence[str],
        *,
        prompt: str = "",
        batch_size: Optional[int] = None,
        max_batch_tokens: Optional[int] = None,
        normalize: bool = True,
        owners: Optional[Sequence[int]] = None,
    ) -> list[np.ndarray]:
        """The windows of all ``texts`` share forward passes (``PosFairEncoder.encode``'s ``batch_size`` and
        ``max_batch_tokens``), so many short windows fill a pass as a few long texts would. Over a wrapped
        embedding they share requests instead, and ``owners`` (each text's position in the caller's call) lets a
        failed request name the nodes whose windows it held."""
        self.splitter.check_fits(prompt)
        windows = self.splitter.split(texts)
        flat = [window for per_text in windows for window in per_text]
        named = {"owners": _window_owners(windows, owners)} if getattr(self.encoder, "is_wrapped", False) else {}
        vectors = self.encoder.encode(
            flat,
            None,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
            normalize=normalize,
            prompt=prompt,
            **named,
        )
        return _per_text(vectors, windows)

    async def aencode(
        self, texts: Sequence[str], *, normalize: bool = True, owners: Optional[Sequence[int]] = None
    ) -> list[np.ndarray]:
        """:meth:`encode` over a wrapped embedding's async path: its requests run concurrently, bounded."""
        self.splitter.check_fits("")
        windows = self.splitter.split(texts)
        flat = [window for per_text in windows for window in per_text]
        vectors = await self.encoder.aencode(flat, normalize=normalize, owners=_window_owners(windows, owners))
        return _per_text(vectors, windows)


def _window_owners(windows: list[list[str]], owners: Optional[Sequence[int]]) -> list[int]:
    """For each window, the position of its text (``owners[i]`` for text ``i``, else ``i``)."""
    return [owners[i] if owners is not None else i for i, per_text in enumerate(windows) for _ in per_text]


def _per_text(vectors: np.ndarray, windows: list[list[str]]) -> list[np.ndarray]:
    out, start = [], 0
    for per_text in windows:
        out.append(vectors[start : start + len(per_text)])
        start += len(per_text)
    return out


__all__ = ("WINDOW_DOCUMENTS", "WindowConfig", "WindowDocument", "WindowEmbedder", "WindowSplitter", "window_spans")
