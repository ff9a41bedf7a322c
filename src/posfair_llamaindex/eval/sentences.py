"""Sentences of a document as character spans, by the splitter LlamaIndex's own SentenceSplitter uses.

The audit removes one sentence from a document and the shuffled-sentence test reorders them, so both need
the sentences as spans of the original text. LlamaIndex ships NLTK's Punkt model (no download), and its
pieces come in order, so each is found in the text where the previous one ended.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Sentence:
    start: int  # character offsets into the document, whitespace around the sentence excluded
    end: int
    text: str

    @property
    def words(self) -> int:
        return len(self.text.split())


@functools.lru_cache(maxsize=1)
def _splitter():
    from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer

    return split_by_sentence_tokenizer()


def split_sentences(text: str) -> list[Sentence]:
    """The document's sentences in order; whitespace-only pieces are dropped."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    sentences, offset = [], 0
    for piece in _splitter()(text):
        stripped = piece.strip()
        if not stripped:
            continue
        start = text.find(stripped, offset)  # pieces come in order; found from where the last one ended
        if start < 0:  # never seen: the spans would be wrong, so refuse rather than guess
            raise ValueError(f"the sentence splitter returned a piece that is not in the text: {stripped[:60]!r}")
        sentences.append(Sentence(start, start + len(stripped), stripped))
        offset = start + len(stripped)
    return sentences


def without(text: str, sentence: Sentence) -> str:
    """The text with one sentence cut out, and the whitespace on either side of the cut joined to one space."""
    before, after = text[: sentence.start].rstrip(), text[sentence.end :].lstrip()
    if not before or not after:
        return before + after
    gap = text[len(before) : sentence.start] + text[sentence.end : len(text) - len(after)]
    return before + ("\n\n" if "\n\n" in gap else "\n" if "\n" in gap else " ") + after


def shuffled(text: str, rng: random.Random) -> str:
    """The text's sentences in a random order, joined by single spaces (paragraph breaks cannot survive it)."""
    sentences = [s.text for s in split_sentences(text)]
    rng.shuffle(sentences)
    return " ".join(sentences)
