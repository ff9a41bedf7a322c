"""Tokens as character spans and word ids, from whichever tokenizer a wrapped embedding model counts in.

Windows mode cuts a text at word starts of the model's own tokens (``windows.window_spans``), so the windows of an
embedding it does not load itself (:mod:`posfair_llamaindex.encoding.wrapped`) need that model's tokens too. A
:class:`TokenOffsets` gives, for each text, every token's ``(start, end)`` characters and the word it belongs to,
the two things the cut reads, from one of:

- a Hugging Face fast tokenizer: a ``transformers`` one (``HuggingFaceEmbedding``'s) or a ``tokenizers.Tokenizer``
  (a folder's ``tokenizer.json``, FastEmbed's); words are its pre-tokenizer's;
- tiktoken (``cl100k_base`` for OpenAI's models, read offline from LlamaIndex's bundled cache);
- a callable ``text -> [(start, end), ...]`` of the user's; words then start after whitespace.

Each also counts a text's tokens with the special tokens the model adds (:attr:`TokenOffsets.special_tokens`), so a
window's budget can be checked against the model's limit, and names itself for the collection's tag.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

Spans = list[tuple[int, int]]
WordIds = list[Optional[int]]

# tiktoken's encoding for OpenAI's embedding models (text-embedding-3-*, text-embedding-ada-002)
OPENAI_ENCODING = "cl100k_base"


class TokenOffsets:
    """A text's tokens as character spans and word ids (no special tokens), and what identifies the tokenizer."""

    #: tokens the model adds around every text (a BERT model's [CLS] and [SEP]); 0 for tiktoken and callables
    special_tokens: int = 0

    def spans(self, texts: Sequence[str]) -> list[tuple[Spans, WordIds]]:
        """Each text's tokens, in order: ``(spans, word_ids)``; a token's word id is None if it has no word."""
        raise NotImplementedError

    def count(self, text: str) -> int:
        """The tokens of ``text`` without special tokens."""
        return len(self.spans([text])[0][0])

    def tag(self) -> str:
        """What identifies this tokenizer in a collection's tag (a kind and a hash or a name)."""
        raise NotImplementedError

    def chonkie_tokenizer(self) -> Any:
        """What chonkie's chunkers count tokens with (SEA mode): the tokenizer object, or a counting function."""
        return self.count


class HuggingFaceTokenOffsets(TokenOffsets):
    """A fast tokenizer: ``transformers``' ``PreTrainedTokenizerFast`` or a bare ``tokenizers.Tokenizer``."""

    def __init__(self, tokenizer: Any) -> None:
        backend = _backend_tokenizer(tokenizer)
        # a copy, so that a folder's tokenizer.json settings (MiniLM's truncates at 128, pads) cut nothing here
        from tokenizers import Tokenizer

        self._backend = Tokenizer.from_str(backend.to_str())
        self._backend.no_truncation()
        self._backend.no_padding()
        self._original = tokenizer
        self.special_tokens = self._backend.num_special_tokens_to_add(False)
        self._identity = hashlib.sha256(self._backend.to_str().encode("utf-8")).hexdigest()[:16]

    @classmethod
    def from_folder(cls, folder: Union[str, os.PathLike]) -> HuggingFaceTokenOffsets:
        """The ``tokenizer.json`` of a model folder."""
        path = Path(folder).expanduser()
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise ValueError(f"no tokenizer.json in {folder}: pass the folder of a model with a fast tokenizer")
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    def spans(self, texts: Sequence[str]) -> list[tuple[Spans, WordIds]]:
        if not texts:
            return []
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
        return [([tuple(span) for span in encoding.offsets], list(encoding.word_ids)) for encoding in encodings]

    def count(self, text: str) -> int:
        return len(self._backend.encode(text, add_special_tokens=False).ids)

    def tag(self) -> str:
        return f"tokenizer.json:sha256:{self._identity}"

    def chonkie_tokenizer(self) -> Any:
        return self._backend


class TiktokenOffsets(TokenOffsets):
    """A tiktoken encoding (``cl100k_base`` by default), loaded offline from LlamaIndex's bundled cache."""

    def __init__(self, encoding: Union[str, Any] = OPENAI_ENCODING) -> None:
        if isinstance(encoding, str):
            self._encoding = load_tiktoken(encoding)
        else:
            self._encoding = encoding
        self.name = self._encoding.name

    def spans(self, texts: Sequence[str]) -> list[tuple[Spans, WordIds]]:
        result = []
        for text in texts:
            tokens = self._encoding.encode(text, disallowed_special=())
            if not tokens:
                result.append(([], []))
                continue
            decoded, starts = self._encoding.decode_with_offsets(tokens)
            if decoded != text:  # invalid UTF-8 (lone surrogates): tiktoken replaced characters, offsets do not fit
                raise ValueError("the text does not round-trip through tiktoken (it holds characters it replaces)")
            ends = [*starts[1:], len(text)]
            spans = [(start, max(start, end)) for start, end in zip(starts, ends, strict=True)]
            result.append((spans, whitespace_words(text, spans)))
        return result

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def tag(self) -> str:
        return f"tiktoken:{self.name}"

    def chonkie_tokenizer(self) -> Any:
        return self._encoding


class CallableTokenOffsets(TokenOffsets):
    """The user's tokenizer as a function ``text -> [(start, end), ...]``: its tokens' character spans."""

    def __init__(self, function: Callable[[str], Sequence[tuple[int, int]]], name: Optional[str] = None) -> None:
        if not callable(function):
            raise TypeError(f"tokenizer must be a folder, a tokenizer or a callable, got {type(function).__name__}")
        self._function = function
        module = getattr(function, "__module__", None) or "?"
        self.name = name or f"{module}.{getattr(function, '__qualname__', type(function).__name__)}"

    def spans(self, texts: Sequence[str]) -> list[tuple[Spans, WordIds]]:
        result = []
        for text in texts:
            spans = [(int(start), int(end)) for start, end in self._function(text)]
            previous = 0
            for start, end in spans:
                if not (previous <= start <= end <= len(text)):
                    raise ValueError(
                        f"the tokenizer {self.name} returned span ({start}, {end}) for a text of {len(text)} "
                        "characters: spans must be in order, within the text and not overlap"
                    )
                previous = end
            result.append((spans, whitespace_words(text, spans)))
        return result

    def tag(self) -> str:
        return f"callable:{self.name}"


def whitespace_words(text: str, spans: Sequence[tuple[int, int]]) -> WordIds:
    """Word ids for tokens whose tokenizer gives none. A token starts a word when it is the first, when its text
    begins with whitespace (tiktoken keeps the space before a word in the word's token), or when whitespace lies
    between it and the word before; a token of whitespace alone belongs to no word. Punctuation therefore stays
    with the word it follows."""
    words: WordIds = []
    word = -1
    boundary = True  # the next token with text starts a word
    previous_end = 0
    for start, end in spans:
        piece = text[start:end]
        if start > previous_end:  # characters no token holds: a boundary
            boundary = True
        if not piece.strip():
            words.append(None)
            boundary = True
        else:
            if boundary or piece[0].isspace():
                word += 1
            words.append(word)
            boundary = piece[-1].isspace()
        previous_end = max(previous_end, end)
    return words


def load_tiktoken(name: str = OPENAI_ENCODING) -> Any:
    """A tiktoken encoding, read from ``TIKTOKEN_CACHE_DIR`` or else LlamaIndex's bundled cache (no network)."""
    import tiktoken

    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        import llama_index.core

        cache = Path(llama_index.core.__file__).resolve().parent / "_static" / "tiktoken_cache"
        if cache.is_dir():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return tiktoken.get_encoding(name)
    except Exception as error:  # tiktoken fetches what its cache lacks; offline that fails with a network error
        raise ValueError(
            f"tiktoken's {name!r} encoding could not be loaded ({type(error).__name__}: {error}); LlamaIndex ships "
            "cl100k_base, set TIKTOKEN_CACHE_DIR to a cache that holds the others"
        ) from error


def _backend_tokenizer(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` behind a fast tokenizer, refusing slow (Python) tokenizers by name."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer):
        return backend
    raise ValueError(
        f"windows need token offsets, which a fast tokenizer gives; {type(tokenizer).__name__} is not one: pass the "
        "model's folder (its tokenizer.json) or a callable as tokenizer="
    )


def token_offsets(tokenizer: Any) -> TokenOffsets:
    """A :class:`TokenOffsets` for what a user passed as ``tokenizer=``: one already, a folder (or its
    ``tokenizer.json``), a tiktoken encoding name (``"cl100k_base"``), a fast tokenizer, a tiktoken encoding, or a
    callable giving a text's token spans."""
    if isinstance(tokenizer, TokenOffsets):
        return tokenizer
    if isinstance(tokenizer, os.PathLike) or (isinstance(tokenizer, str) and Path(tokenizer).expanduser().exists()):
        return HuggingFaceTokenOffsets.from_folder(tokenizer)
    if isinstance(tokenizer, str):
        if tokenizer.startswith(("cl100k", "o200k", "p50k", "r50k")):
            return TiktokenOffsets(tokenizer)
        raise ValueError(f"tokenizer {tokenizer!r} is neither a folder on this machine nor a tiktoken encoding name")
    if type(tokenizer).__module__.startswith("tiktoken"):
        return TiktokenOffsets(tokenizer)
    if hasattr(tokenizer, "backend_tokenizer") or type(tokenizer).__module__.startswith("tokenizers"):
        return HuggingFaceTokenOffsets(tokenizer)
    return CallableTokenOffsets(tokenizer)


__all__ = [
    "OPENAI_ENCODING",
    "CallableTokenOffsets",
    "HuggingFaceTokenOffsets",
    "TiktokenOffsets",
    "TokenOffsets",
    "load_tiktoken",
    "token_offsets",
    "whitespace_words",
]
