"""Token spans and word ids from the tokenizers a wrapped embedding counts in (encoding/token_offsets.py)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from posfair_llamaindex.encoding.token_offsets import (
    CallableTokenOffsets,
    HuggingFaceTokenOffsets,
    TiktokenOffsets,
    token_offsets,
    whitespace_words,
)
from tests.utils import minilm_path

TEXT = "The Danube rises in the Black Forest, and it ends in a delta on the Black Sea. Pelicans nest there."


def test_a_folder_gives_the_tokens_and_words_of_the_models_own_fast_tokenizer():
    folder = token_offsets(minilm_path())
    reference = AutoTokenizer.from_pretrained(minilm_path())(
        TEXT * 20, add_special_tokens=False, return_offsets_mapping=True
    )
    spans, words = folder.spans([TEXT * 20])[0]
    # the folder's tokenizer.json truncates at 128 tokens; the copy used for windows must not
    assert len(spans) == len(reference["input_ids"]) > 128
    assert spans == [tuple(span) for span in reference["offset_mapping"]]
    assert words == reference.word_ids()
    assert folder.special_tokens == 2  # [CLS] and [SEP]
    assert folder.tag() == HuggingFaceTokenOffsets(AutoTokenizer.from_pretrained(minilm_path())).tag()


def test_a_folder_without_a_tokenizer_json_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no tokenizer.json"):
        HuggingFaceTokenOffsets.from_folder(tmp_path)


def test_tiktoken_cl100k_loads_offline_and_its_spans_rebuild_the_text():
    offsets = TiktokenOffsets()
    text = "Café owners in Zürich — 12,345 of them — said: “naïve” isn't the word.\n\nNew paragraph."
    spans, words = offsets.spans([text])[0]
    assert offsets.tag() == "tiktoken:cl100k_base"
    assert "".join(text[start:end] for start, end in spans) == text
    assert len(spans) == offsets.count(text)
    # a word starts where tiktoken's token carries the space before it
    starts = [spans[i][0] for i in range(len(spans)) if words[i] is not None and (i == 0 or words[i] != words[i - 1])]
    assert all(start == 0 or text[start].isspace() or text[start - 1].isspace() for start in starts)
    assert text.index(" owners") in starts


def test_whitespace_words_keep_punctuation_with_its_word_and_skip_bare_whitespace():
    text = "end. Next  word"
    spans = [(0, 3), (3, 4), (4, 9), (9, 10), (10, 15)]  # "end" "." " Next" " " " word"
    assert whitespace_words(text, spans) == [0, 0, 1, None, 2]


def test_a_callable_tokenizer_is_checked_and_named():
    def by_characters(text):
        return [(i, i + 1) for i in range(len(text))]

    offsets = token_offsets(by_characters)
    assert isinstance(offsets, CallableTokenOffsets)
    assert offsets.tag().startswith("callable:") and offsets.tag().endswith("by_characters")
    assert offsets.count("ab c") == 4
    bad = CallableTokenOffsets(lambda text: [(0, len(text) + 5)], name="broken")
    with pytest.raises(ValueError, match="broken returned span"):
        bad.spans(["abc"])


def test_what_is_neither_a_folder_nor_an_encoding_name_is_refused():
    with pytest.raises(ValueError, match="neither a folder"):
        token_offsets("no-such-folder-or-encoding")
