"""Pseudo-queries at known positions, made from a corpus's own sentences."""

from __future__ import annotations

import pytest

from posfair_llamaindex.eval.benchmark_data import GROUPS
from posfair_llamaindex.eval.pseudo_queries import (
    MIN_QUERY_WORDS,
    AuditCorpusError,
    pseudo_query_benchmark,
    texts_of,
)
from posfair_llamaindex.eval.sentences import split_sentences

PLACES = ("Lyon", "Oslo", "Lima", "Quito", "Perth", "Accra", "Hanoi", "Cusco", "Turin", "Leeds", "Porto", "Graz")


def corpus(count: int, sentences: int = 12) -> dict[str, str]:
    """Documents of distinct sentences, each naming its document and its place in it."""
    return {
        f"doc-{i:02d}": " ".join(
            f"Record {k} of the archive in {PLACES[i % len(PLACES)]} number {i} lists {k * 7 + i} boats."
            for k in range(sentences)
        )
        for i in range(count)
    }


def build(texts, tokenizer, **kwargs):
    settings = dict(min_tokens=16, max_tokens=500, max_documents=300, seed=0)
    return pseudo_query_benchmark(texts, tokenizer, **{**settings, **kwargs})


def _third(text: str, sentence: str, tokenizer) -> str:
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    start = text.index(sentence)
    middle = start + len(sentence) // 2
    token = max(i for i, (a, _) in enumerate(offsets) if a <= middle)
    return GROUPS[min(2, token * 3 // len(offsets))]


def test_ict_cuts_each_query_out_of_its_own_document(tokenizer):
    texts = corpus(24)
    benchmark, screen = build(texts, tokenizer, design="ict")
    assert benchmark.groups == GROUPS and len(benchmark.tasks) == 3
    assert screen.eligible == screen.sampled == 24
    for group, task in zip(GROUPS, benchmark.tasks, strict=True):
        assert len(task.queries) == 24 and set(task.documents) == set(texts)
        for query in task.queries:
            assert query.group == group
            (source,) = query.relevant
            original = texts[source]
            assert query.text in original and query.text not in task.documents[source]
            assert len(task.documents[source]) < len(original)
            # everything else of the document is still there, in order
            rest = [s.text for s in split_sentences(original) if s.text != query.text]
            assert [s.text for s in split_sentences(task.documents[source])] == rest
            assert _third(original, query.text, tokenizer) == group
            assert len(query.text.split()) >= MIN_QUERY_WORDS


def test_drop_words_keeps_documents_whole_and_half_of_each_sentence(tokenizer):
    texts = corpus(24)
    benchmark, _ = build(texts, tokenizer)  # the default design
    (task,) = benchmark.tasks
    assert task.documents == texts
    assert [q.group for q in task.queries].count("end") == 24
    ict, _ = build(texts, tokenizer, design="ict")
    sentences = {q.id: q.text for t in ict.tasks for q in t.queries}
    for query in task.queries:
        words, source = query.text.split(), sentences[query.id].split()
        assert len(words) == len(source) - len(source) // 2
        position = 0  # the kept words are a subsequence of the sentence
        for word in words:
            position = source.index(word, position) + 1
    again, _ = build(texts, tokenizer)
    other, _ = build(texts, tokenizer, seed=1)
    assert [q.text for q in again.tasks[0].queries] == [q.text for q in task.queries]
    assert [q.text for q in other.tasks[0].queries] != [q.text for q in task.queries]


def test_sampling_is_bounded_deterministic_and_seeded(tokenizer):
    texts = corpus(40)
    first, screen = build(texts, tokenizer, max_documents=25, design="ict")
    again, _ = build(texts, tokenizer, max_documents=25, design="ict")
    other, _ = build(texts, tokenizer, max_documents=25, seed=1, design="ict")
    assert screen.sampled == 25 and screen.eligible == 40
    assert first.tasks[0].documents == again.tasks[0].documents
    assert [q.text for q in first.tasks[2].queries] == [q.text for q in again.tasks[2].queries]
    assert set(first.tasks[0].documents) != set(other.tasks[0].documents)
    # under one seed a document keeps its queries whichever sample it is in
    larger, _ = build(texts, tokenizer, max_documents=32, design="ict")
    pick = {q.id: q.text for q in larger.tasks[1].queries}
    assert all(pick[q.id] == q.text for q in first.tasks[1].queries if q.id in pick)
    assert len(set(pick) & {q.id for q in first.tasks[1].queries}) >= 17


def test_short_long_and_sentence_poor_documents_are_counted_and_left_out(tokenizer):
    texts = corpus(22)
    texts["short"] = "Only a few words here, not enough."
    texts["long"] = corpus(1, sentences=60)["doc-00"]
    texts["one-sentence"] = "a very long run of words without any full stop " * 6
    benchmark, screen = build(texts, tokenizer, max_tokens=400)
    assert (screen.too_short, screen.too_long, screen.no_sentence_per_third) == (1, 1, 1)
    assert set(screen.reasons) == {"short", "long", "one-sentence"}
    assert "not more than one basket" in screen.reasons["short"]
    assert set(benchmark.tasks[0].documents) == {f"doc-{i:02d}" for i in range(22)}


def test_too_small_a_corpus_is_refused_with_its_counts(tokenizer):
    texts = corpus(19)
    texts["short"] = "Tiny."
    with pytest.raises(
        AuditCorpusError, match=r"20 document\(s\): 19 long enough to audit, 1 no longer than one basket"
    ):
        build(texts, tokenizer)


def test_bad_settings_and_inputs(tokenizer):
    with pytest.raises(ValueError, match="design must be one of"):
        build(corpus(20), tokenizer, design="cloze")
    with pytest.raises(ValueError, match="max_documents must be at least 20"):
        build(corpus(20), tokenizer, max_documents=5)
    with pytest.raises(ValueError, match="min_tokens < max_tokens"):
        build(corpus(20), tokenizer, min_tokens=600)
    with pytest.raises(TypeError, match="is a int, not a string"):
        build({**corpus(20), "bad": 7}, tokenizer)


def test_texts_of_a_rotated_benchmark_are_its_first_rotation(tokenizer):
    benchmark, _ = build(corpus(24), tokenizer, design="ict")
    assert texts_of(benchmark) == benchmark.tasks[0].documents


def test_the_same_corpus_under_other_ids_gets_the_same_queries(tokenizer):
    """Ids are file paths or uuids of them: moving a corpus must not change what the audit asks."""
    texts = corpus(30)
    moved = {f"/elsewhere/{doc_id[::-1]}": text for doc_id, text in texts.items()}
    for design in ("drop-words", "ict"):
        here, _ = build(texts, tokenizer, max_documents=25, design=design)
        there, _ = build(moved, tokenizer, max_documents=25, design=design)
        assert sorted(q.text for t in here.tasks for q in t.queries) == sorted(
            q.text for t in there.tasks for q in t.queries
        )
