"""Sentence spans: the audit cuts sentences out of documents and the shuffle test reorders them."""

from __future__ import annotations

import random

import pytest

from posfair_llamaindex.eval.sentences import shuffled, split_sentences, without

TEXT = "  The Danube rises in the Black Forest. It flows east for 2,850 km!\n\nIt ends in the Black Sea? Yes."


def test_spans_point_at_the_sentences_without_surrounding_whitespace():
    sentences = split_sentences(TEXT)
    assert [s.text for s in sentences] == [
        "The Danube rises in the Black Forest.",
        "It flows east for 2,850 km!",
        "It ends in the Black Sea?",
        "Yes.",
    ]
    for s in sentences:
        assert TEXT[s.start : s.end] == s.text
    assert sentences[1].words == 6


def test_empty_and_unpunctuated_texts():
    assert split_sentences("") == []
    assert split_sentences("   \n ") == []
    assert [s.text for s in split_sentences("no full stop at all")] == ["no full stop at all"]


def test_non_strings_are_refused():
    with pytest.raises(TypeError, match="must be a string"):
        split_sentences(b"bytes")


def test_without_cuts_one_sentence_and_keeps_the_kind_of_break():
    sentences = split_sentences(TEXT)
    assert without(TEXT, sentences[1]) == "  The Danube rises in the Black Forest.\n\nIt ends in the Black Sea? Yes."
    assert without(TEXT, sentences[0]) == "It flows east for 2,850 km!\n\nIt ends in the Black Sea? Yes."
    assert (
        without(TEXT, sentences[3])
        == "  The Danube rises in the Black Forest. It flows east for 2,850 km!\n\nIt ends in the Black Sea?"
    )
    assert without(TEXT, sentences[2]) == "  The Danube rises in the Black Forest. It flows east for 2,850 km!\n\nYes."


def test_shuffled_keeps_every_sentence_once():
    text = " ".join(f"Sentence number {i} is here." for i in range(12))
    mixed = shuffled(text, random.Random(3))
    assert mixed != text
    assert sorted(s.text for s in split_sentences(mixed)) == sorted(s.text for s in split_sentences(text))
    assert shuffled(text, random.Random(3)) == mixed
