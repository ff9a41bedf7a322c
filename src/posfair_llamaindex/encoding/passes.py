"""Forward passes sized by tokens: which texts share a pass, and how far ahead of LlamaIndex a call encodes.

A pass costs what its padded tensor holds (rows x the longest row), so a fixed count of texts is the wrong unit:
ten 128-token windows leave two cores idle, while sixteen 512-token texts fill them. Texts sorted longest first
and cut where the next one would push the padded size past a budget give passes of one size, whatever the texts.
LlamaIndex hands an embedding ``embed_batch_size`` nodes at a time; :class:`Lookahead` lets those small calls
share full passes by encoding a few passes ahead of what was asked and serving later calls from what is done.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Optional

from posfair_llamaindex.options import DEFAULT_BATCH_TOKENS

# a lookahead encodes at least this many budgets of tokens at a time, so that the one part-filled pass at the end
# of each stretch costs little (one in four at most)
LOOKAHEAD_PASSES = 4


def check_budget(value: object, name: str = "max_batch_tokens") -> int:
    """``value`` as a cap on a pass (``max_batch_tokens`` or ``batch_size``), refused unless a positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def forward_passes(
    lengths: Sequence[int], *, max_tokens: Optional[int] = DEFAULT_BATCH_TOKENS, max_rows: Optional[int] = None
) -> list[list[int]]:
    """The indices of ``lengths`` (tokens per text, as padded), longest first, cut into passes.

    A pass holds at most ``max_rows`` texts and at most ``max_tokens`` padded tokens (its row count times its
    longest text); a text longer than ``max_tokens`` alone makes a pass. None lifts a cap.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    passes: list[list[int]] = []
    current: list[int] = []
    for index in order:
        rows = len(current) + 1
        width = lengths[current[0]] if current else lengths[index]  # the longest comes first
        full = (max_rows is not None and rows > max_rows) or (max_tokens is not None and rows * width > max_tokens)
        if current and full:
            passes.append(current)
            current = []
        current.append(index)
    if current:
        passes.append(current)
    return passes


class Lookahead:
    """The texts of one batch call, encoded a stretch at a time ahead of the slices LlamaIndex asks for.

    ``texts`` are in the order LlamaIndex will slice them (longest first), ``costs`` their tokens; ``encode``
    turns a list of texts into their embeddings. A slice that is not done yet is encoded together with the
    texts after it, up to ``stretch_tokens``; slices asked for out of order (LlamaIndex's async workers) are
    served as well, and a text asked for again (a duplicate) is encoded once. Thread-safe.
    """

    def __init__(
        self,
        texts: Sequence[str],
        costs: Sequence[int],
        stretch_tokens: int,
        encode: Callable[[list[str]], list[Any]],
    ) -> None:
        self._texts = list(texts)
        self._costs = list(costs)
        self._stretch = stretch_tokens
        self._encode = encode
        self._left = Counter(self._texts)  # how many times each text will still be asked for
        self._done: dict[str, Any] = {}
        self._cursor = 0
        self._lock = threading.Lock()

    def holds(self, texts: Sequence[str]) -> bool:
        return all(self._left.get(text, 0) > 0 for text in texts)

    def embed(self, texts: Sequence[str]) -> list[Any]:
        with self._lock:
            missing = {text for text in texts if text not in self._done}
            if missing:
                self._encode_through(missing)
            result = [self._done[text] for text in texts]
            for text in texts:  # forget what will not be asked for again
                self._left[text] -= 1
                if self._left[text] <= 0:
                    self._done.pop(text, None)
            return result

    def _encode_through(self, missing: set) -> None:
        stretch: list[str] = []
        seen: set = set()
        tokens = 0
        while self._cursor < len(self._texts) and (missing or tokens < self._stretch):
            text = self._texts[self._cursor]
            self._cursor += 1
            if text in self._done or text in seen or self._left[text] <= 0:  # done, or done and served
                continue
            seen.add(text)
            stretch.append(text)
            tokens += self._costs[self._cursor - 1]
            missing.discard(text)
        stretch.extend(sorted(missing))  # not in this call's list: encode them all the same
        for text, embedding in zip(stretch, self._encode(stretch), strict=True):
            self._done[text] = embedding
