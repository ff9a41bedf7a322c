"""Position-grouped pseudo-queries made from a corpus's own text, so that position bias can be measured without labels.

From each sampled document one sentence of its beginning, middle and end third (by the token position of
the sentence's midpoint) becomes a query whose relevant document is its source. Two designs:

* ``drop-words`` (the default): the documents stay whole and the query is the sentence with half of its
  words dropped, so no query is a verbatim match while what it asks about stays where it was.
* ``ict`` (inverse cloze task): the sentence is cut out of the document that is encoded for it, so no query
  is a verbatim match. Each position group is its own corpus, in which every document lacks that group's
  sentence: documents differ only in where the cut was, as in the rotated benchmarks. What the query asks
  about is gone from the document, so the document can match only through its context.

The result is a :class:`~posfair_llamaindex.eval.benchmark_data.Benchmark`, so the labelled benchmarks' runner,
metrics and reports apply unchanged.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from posfair_llamaindex.encoding.token_offsets import TokenOffsets
from posfair_llamaindex.errors import AuditCorpusError
from posfair_llamaindex.eval.benchmark_data import GROUPS, Benchmark, Query, RetrievalTask, group_at
from posfair_llamaindex.eval.sentences import Sentence, split_sentences, without
from posfair_llamaindex.options import AUDIT_DESIGNS, AUDIT_MIN_DOCUMENTS

DESIGNS = AUDIT_DESIGNS
# a pseudo-query needs enough words to identify its document at all
MIN_QUERY_WORDS = 6
MIN_DOCUMENTS = AUDIT_MIN_DOCUMENTS


@dataclass
class CorpusScreen:
    """How many documents were looked at, and why each one that was left out was left out."""

    documents: int = 0
    eligible: int = 0
    sampled: int = 0
    too_short: int = 0  # no more content tokens than one basket holds
    too_long: int = 0  # longer than one forward pass of the model
    no_sentence_per_third: int = 0  # no sentence of MIN_QUERY_WORDS words with its midpoint in some third
    reasons: dict[str, str] = field(default_factory=dict)  # doc id -> why it was left out

    def describe(self) -> str:
        return (
            f"{self.documents} document(s): {self.eligible} long enough to audit, {self.too_short} no longer "
            f"than one basket, {self.too_long} longer than the model's window, {self.no_sentence_per_third} "
            f"without a sentence of at least {MIN_QUERY_WORDS} words in each third"
        )


@dataclass(frozen=True)
class _Candidate:
    doc_id: str
    text: str
    per_group: dict[str, list[Sentence]]


def pseudo_query_benchmark(
    texts: Mapping[str, str],
    tokenizer,
    *,
    min_tokens: int,
    max_tokens: int,
    max_documents: int = 300,
    design: str = DESIGNS[0],
    seed: int = 0,
    min_documents: int = MIN_DOCUMENTS,
) -> tuple[Benchmark, CorpusScreen]:
    """Sample up to ``max_documents`` auditable documents and make three position-grouped queries from each.

    ``tokenizer`` counts the tokens: a fast tokenizer, or a wrapped model's ``TokenOffsets``.
    A document is auditable when it has more than ``min_tokens`` content tokens (one basket: it then spans
    at least two), at most ``max_tokens`` (what the model sees; longer ones would be truncated and their end
    third never read), and a sentence of at least ``MIN_QUERY_WORDS`` words in each third.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    if max_documents < min_documents:
        raise ValueError(f"max_documents must be at least {min_documents}, got {max_documents}")
    if not 0 < min_tokens < max_tokens:
        raise ValueError(f"need 0 < min_tokens < max_tokens, got {min_tokens} and {max_tokens}")
    screen = CorpusScreen(documents=len(texts))
    candidates = []
    for doc_id in sorted(texts):
        text = texts[doc_id]
        if not isinstance(text, str):
            raise TypeError(f"document {doc_id!r} is a {type(text).__name__}, not a string")
        reason = None
        starts = _token_starts(tokenizer, text)
        if len(starts) <= min_tokens:
            screen.too_short += 1
            reason = f"{len(starts)} content tokens, not more than one basket ({min_tokens})"
        elif len(starts) > max_tokens:
            screen.too_long += 1
            reason = f"{len(starts)} content tokens, more than the model reads ({max_tokens})"
        else:
            per_group = _sentences_by_third(text, starts)
            if all(per_group[g] for g in GROUPS):
                candidates.append(_Candidate(doc_id, text, per_group))
                continue
            screen.no_sentence_per_third += 1
            missing = [g for g in GROUPS if not per_group[g]]
            reason = f"no sentence of {MIN_QUERY_WORDS}+ words in the {'/'.join(missing)} third"
        screen.reasons[doc_id] = reason
    screen.eligible = len(candidates)
    if len(candidates) < min_documents:
        raise AuditCorpusError(
            f"too few documents to audit: {screen.describe()}; the audit needs at least {min_documents} "
            "auditable documents (a top-10 ranking among fewer says little)"
        )
    # drawn in the order of the texts' hashes: ids are paths or uuids of paths, and a corpus must sample
    # alike wherever it lies
    candidates.sort(key=_text_key)
    sampled = sorted(random.Random(seed).sample(candidates, min(max_documents, len(candidates))), key=_doc_id)
    screen.sampled = len(sampled)
    picks = {c.doc_id: _pick(c, seed) for c in sampled}
    if design == "ict":
        tasks = [
            RetrievalTask(
                {c.doc_id: without(c.text, picks[c.doc_id][g]) for c in sampled},
                [Query(f"{c.doc_id}#{g}", picks[c.doc_id][g].text, frozenset([c.doc_id]), g) for c in sampled],
            )
            for g in GROUPS
        ]
    else:
        queries = [
            Query(f"{c.doc_id}#{g}", _drop_half(picks[c.doc_id][g].text, seed, g), frozenset([c.doc_id]), g)
            for g in GROUPS
            for c in sampled
        ]
        tasks = [RetrievalTask({c.doc_id: c.text for c in sampled}, queries)]
    settings = dict(design=design, max_documents=max_documents, seed=seed, min_tokens=min_tokens, max_tokens=max_tokens)
    name = f"pseudo-queries ({design}, {len(sampled)} documents)"
    return Benchmark(name, tasks, GROUPS, settings), screen


def _doc_id(candidate: _Candidate) -> str:
    return candidate.doc_id


def _text_key(candidate: _Candidate) -> str:
    return _text_hash(candidate.text)


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _token_starts(tokenizer, text: str) -> list[int]:
    """The character offset where each content token starts (special tokens left out). ``tokenizer`` is a fast
    tokenizer, or a wrapped model's token offsets (``WrappedEncoder.offsets``: encoding/token_offsets.py)."""
    if isinstance(tokenizer, TokenOffsets):
        ((spans, _),) = tokenizer.spans([text])
        return [span[0] for span in spans]
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    return [span[0] for span in encoded["offset_mapping"]]


def _sentences_by_third(text: str, starts: list[int]) -> dict[str, list[Sentence]]:
    """Sentences long enough to be queries, by the third of the document (in tokens) that holds their midpoint."""
    per_group: dict[str, list[Sentence]] = {g: [] for g in GROUPS}
    sentences = split_sentences(text)
    if len(sentences) < len(GROUPS):
        return per_group
    for sentence in sentences:
        if sentence.words < MIN_QUERY_WORDS:
            continue
        per_group[group_at(starts, (sentence.start + sentence.end) // 2)].append(sentence)
    return per_group


def _pick(candidate: _Candidate, seed: int) -> dict[str, Sentence]:
    """One sentence per third, drawn per text: a document gets the same queries in any sample and under any id."""
    rng = random.Random(f"{seed}:{_text_hash(candidate.text)}")
    return {g: rng.choice(candidate.per_group[g]) for g in GROUPS}


def _drop_half(sentence: str, seed: int, group: str) -> str:
    """The sentence with ``floor(n / 2)`` of its ``n`` words dropped at random, the rest in their order."""
    words = sentence.split()
    rng = random.Random(f"{seed}:{_text_hash(sentence)}:{group}:words")
    keep = sorted(rng.sample(range(len(words)), len(words) - len(words) // 2))
    return " ".join(words[i] for i in keep)


def texts_of(benchmark: Benchmark) -> Optional[dict[str, str]]:
    """The distinct documents of a benchmark (a rotated benchmark's first rotation), for auditing its corpus."""
    if not benchmark.tasks:
        return None
    return dict(benchmark.tasks[0].documents)
