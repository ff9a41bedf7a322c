"""Position-aware retrieval benchmarks built from the shared data folder (never copied into the project).

* SQuAD-LongPosQ: consecutive paragraphs of one article joined into non-overlapping documents under a
  token (or word) budget; each question is grouped begin / middle / end by the token position where its
  answer starts.
* Evidence moving: sets of paragraphs rotated so that every gold paragraph is first, in the middle and
  last once; only position changes between the three corpora.
* NQ oracle: gold ~100-word passages of different questions rotated the same way.
* SciFact (BEIR): a general-retrieval check with no positional groups.
"""

from __future__ import annotations

import bisect
import functools
import gzip
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, TypeVar

import numpy as np

GROUPS = ("begin", "middle", "end")
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: frozenset[str]
    group: str = "all"


@dataclass
class RetrievalTask:
    """One corpus and the queries searched in it."""

    documents: dict[str, str]
    queries: list[Query]


@dataclass
class Benchmark:
    """One or more tasks whose per-query results are pooled by group (several tasks when position is rotated)."""

    name: str
    tasks: list[RetrievalTask]
    groups: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def document_count(self) -> int:
        return sum(len(task.documents) for task in self.tasks)

    @property
    def query_count(self) -> int:
        return sum(len(task.queries) for task in self.tasks)

    def describe(self) -> str:
        per_group = {g: sum(q.group == g for t in self.tasks for q in t.queries) for g in self.groups}
        return (
            f"{self.name}: {len(self.tasks)} corpus(es), {self.document_count} documents, "
            f"{self.query_count} queries {per_group}"
        )


# ----------------------------------------------------------------------------- helpers
T = TypeVar("T")


def split_articles(articles: Sequence[T], heldout_fraction: float = 0.2, seed: int = 0) -> tuple[list[T], list[T]]:
    """Training and held-out articles, disjoint, each in input order; the same inputs always split the same way.

    ``round(len * heldout_fraction)`` articles are held out (at least one when the fraction is positive and
    there are two or more articles), chosen by ``random.Random(seed)``.
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction!r}")
    count = round(len(articles) * heldout_fraction)
    if heldout_fraction > 0 and count == 0 and len(articles) > 1:
        count = 1
    held = set(random.Random(seed).sample(range(len(articles)), count))
    train = [a for i, a in enumerate(articles) if i not in held]
    heldout = [a for i, a in enumerate(articles) if i in held]
    return train, heldout


def heldout_article_indices(data_dir: Path, heldout_fraction: float = 0.2, seed: int = 0) -> frozenset:
    """Positions of the SQuAD articles that fine-tuning with the same fraction and seed never trains on."""
    articles = squad_articles(data_dir)
    return frozenset(split_articles(list(range(len(articles))), heldout_fraction, seed)[1])


SQUAD_TRAIN = Path("squad") / "squad-v1.1-train.json.gz"


@functools.lru_cache(maxsize=1)
def _squad_json(path: Path) -> tuple[dict, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return tuple(json.load(handle)["data"])


def squad_articles(data_dir: Path) -> tuple[dict, ...]:
    """SQuAD v1.1 train's articles in file order, as the JSON has them; read once per process.

    The held-out split, SQuAD-LongPosQ, evidence moving and the training data all enumerate this one tuple,
    so an article's index means the same thing to each of them. Callers must not modify the dicts.
    """
    path = (Path(data_dir) / SQUAD_TRAIN).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass the shared data folder (--data) that holds {SQUAD_TRAIN}")
    return _squad_json(path)


def _token_count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])


def group_at(starts: Sequence[int], char: int) -> str:
    """The third of a text (in tokens) holding character ``char``; ``starts`` are its tokens' start offsets."""
    token = max(0, bisect.bisect_right(starts, char) - 1)  # the token holding that character
    return GROUPS[min(2, int(token / len(starts) * 3))]


def _pack(count: int, fits) -> list[list[int]]:
    """Greedy runs of consecutive indices below ``count`` whose items, joined, still ``fits`` (given the run's
    indices); an item that never fits is skipped."""
    runs, current = [], []
    for index in range(count):
        candidate = current + [index]
        if fits(candidate):
            current = candidate
            continue
        if current:
            runs.append(current)
        current = [index] if fits([index]) else []
    if current:
        runs.append(current)
    return runs


def _budget_check(tokenizer, token_budget: Optional[int], word_budget: Optional[int]):
    if (token_budget is None) == (word_budget is None):
        raise ValueError("give exactly one of token_budget and word_budget")
    if token_budget is not None:
        return lambda text: _token_count(tokenizer, text) <= token_budget
    return lambda text: len(text.split()) <= word_budget


def _cap_per_group(queries: list[Query], per_group: Optional[int], seed: int) -> list[Query]:
    if per_group is None:
        return queries
    rng = random.Random(seed)
    kept = []
    for group in GROUPS:
        members = [q for q in queries if q.group == group]
        kept += rng.sample(members, min(per_group, len(members)))
    return sorted(kept, key=lambda q: q.id)


# ----------------------------------------------------------------------------- SQuAD-LongPosQ
# Packed documents and their questions per (file, tokenizer, packing settings): evaluations, sweeps and
# tests draw many samples from one packing, which costs seconds from per-paragraph tokens and about a minute
# where every candidate run is tokenized whole (below). Sampling happens after the cache.
_POOLS: dict[tuple, tuple[dict[str, str], list[tuple[Query, bool]]]] = {}
# least recently used first out; a whole-file packing is a few MB, and small packings (a held-out split,
# another budget) must not push it out
_POOL_CACHE_SIZE = 16


def _tokenizer_definition(tokenizer) -> Optional[dict]:
    """A fast tokenizer's full definition (vocabulary, normaliser, pre-tokeniser, added tokens), or None.

    The truncation and padding state is left out: transformers sets it on the backend for each call, so two
    copies of one tokenizer differ there while they tokenize alike (the builders never truncate or pad).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    definition = json.loads(backend.to_str())
    definition.pop("truncation", None)
    definition.pop("padding", None)
    return definition


def _tokenizer_identity(definition: Optional[dict]) -> Optional[str]:
    """A hash of a tokenizer's :func:`_tokenizer_definition` (about 0.2 s for a 30,000-word vocabulary, so
    callers compute it once), or None for a tokenizer without one."""
    if definition is None:
        return None
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode("utf-8")).hexdigest()


# Normalisers that map each character on its own, and pre-tokenisers that cut at whitespace and drop it.
# With both, the tokens of paragraphs joined by SEPARATOR are each paragraph's own tokens in a row (the model
# only ever sees one pre-token at a time), so a run's count is the sum of its paragraphs' counts and its
# offsets are theirs, shifted. BERT's family (all-MiniLM-L6-v2 included) is of this kind.
_CHAR_LOCAL_NORMALIZERS = frozenset({"BertNormalizer", "Lowercase", "NFD", "NFKD", "NFC", "NFKC", "StripAccents"})
_WHITESPACE_PRE_TOKENIZERS = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})


def _joins_additively(definition: Optional[dict]) -> bool:
    """Whether a tokenizer of this definition tokenizes ``a + SEPARATOR + b`` as ``a``'s tokens then ``b``'s."""
    if definition is None:
        return False
    normalizer = definition.get("normalizer")
    parts = [] if normalizer is None else normalizer.get("normalizers", [normalizer])
    pre_tokenizer = definition.get("pre_tokenizer") or {}
    # an added token that takes in the whitespace beside it, or holds some, could span the separator
    added_apart = all(
        not (token.get("lstrip") or token.get("rstrip")) and not any(c.isspace() for c in token.get("content", ""))
        for token in definition.get("added_tokens") or []
    )
    return (
        all(part.get("type") in _CHAR_LOCAL_NORMALIZERS for part in parts)
        and pre_tokenizer.get("type") in _WHITESPACE_PRE_TOKENIZERS
        and added_apart
    )


@dataclass(frozen=True)
class _ParagraphTokens:
    """An article's paragraphs tokenized one by one: token counts (no special tokens), each token's start
    offset in its paragraph, and the special tokens a whole text gets."""

    counts: list[int]
    starts: list[np.ndarray]
    special: int

    def total(self, run: Sequence[int]) -> int:
        """Tokens of the run's paragraphs joined by SEPARATOR, special tokens included."""
        return self.special + sum(self.counts[i] for i in run)

    def joined_starts(self, run: Sequence[int], paragraphs: Sequence[str]) -> np.ndarray:
        """Each token's start offset in the run's joined text."""
        shifted, offset = [], 0
        for i in run:
            shifted.append(self.starts[i] + offset)
            offset += len(paragraphs[i]) + len(SEPARATOR)
        return np.concatenate(shifted) if shifted else np.zeros(0, dtype=np.int32)


# Per-paragraph tokens per (file, tokenizer) for tokenizers that join additively: about 19,000 paragraphs
# tokenized once (ten seconds on one core) instead of every candidate run (about 38,000 calls, four times
# the text). Every packing of the file, at any budget, and evidence moving read them. The whole file's
# tokens take about 15 MB; least recently used out, with room for small files beside it.
_PARAGRAPHS: dict[tuple, list[_ParagraphTokens]] = {}
_PARAGRAPH_CACHE_SIZE = 8


def _paragraph_tokens(data_dir, tokenizer, definition, identity) -> Optional[list[_ParagraphTokens]]:
    """Every SQuAD article's :class:`_ParagraphTokens`, or None where the tokenizer does not join additively;
    ``definition`` and ``identity`` are the tokenizer's, as the caller computed them."""
    if not _joins_additively(definition):
        return None
    key = (str((Path(data_dir) / SQUAD_TRAIN).resolve()), identity)
    if key in _PARAGRAPHS:
        found = _PARAGRAPHS[key] = _PARAGRAPHS.pop(key)  # now the most recently used
        return found
    special = _token_count(tokenizer, "") - len(tokenizer("", add_special_tokens=False, verbose=False)["input_ids"])
    tokens = []
    for article in squad_articles(data_dir):
        contexts = [p["context"] for p in article["paragraphs"]]
        encoded = tokenizer(
            contexts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
        )
        starts = [np.fromiter((span[0] for span in spans), dtype=np.int32) for spans in encoded["offset_mapping"]]
        tokens.append(_ParagraphTokens([len(ids) for ids in encoded["input_ids"]], starts, special))
    while len(_PARAGRAPHS) >= _PARAGRAPH_CACHE_SIZE:
        _PARAGRAPHS.pop(next(iter(_PARAGRAPHS)))
    _PARAGRAPHS[key] = tokens
    return tokens


def _longposq_pool(data_dir, tokenizer, token_budget, word_budget, min_paragraphs, min_fill, articles):
    """Every packed document and its questions, each flagged whether its answer offset is SQuAD's unique one."""
    path = (Path(data_dir) / SQUAD_TRAIN).resolve()
    definition = _tokenizer_definition(tokenizer)
    identity = _tokenizer_identity(definition)
    key = (str(path), identity, token_budget, word_budget, min_paragraphs, min_fill, articles)
    if identity is not None and key in _POOLS:
        documents, pooled = _POOLS[key] = _POOLS.pop(key)  # now the most recently used
        return dict(documents), list(pooled)
    budget = token_budget or word_budget
    paragraph_tokens = _paragraph_tokens(data_dir, tokenizer, definition, identity)
    documents: dict[str, str] = {}
    pooled: list[tuple[Query, bool]] = []
    for article_index, article in enumerate(squad_articles(data_dir)):
        if articles is not None and article_index not in articles:
            continue
        paragraphs = article["paragraphs"]
        contexts = [p["context"] for p in paragraphs]
        tokens = None if paragraph_tokens is None else paragraph_tokens[article_index]
        size = _run_size(contexts, tokenizer, tokens, token_budget is not None)
        for run in _pack(len(contexts), lambda run, size=size: size(run) <= budget):
            if len(run) < min_paragraphs or size(run) < min_fill * budget:
                continue
            text = SEPARATOR.join(contexts[i] for i in run)
            doc_id = f"squad-{article_index}-{run[0]}"
            documents[doc_id] = text
            if tokens is not None:
                starts = tokens.joined_starts(run, contexts)
            else:
                starts = _token_starts(tokenizer, text)
            pooled += _grouped_questions(doc_id, text, [paragraphs[i] for i in run], starts)
    if identity is not None:
        while len(_POOLS) >= _POOL_CACHE_SIZE:
            _POOLS.pop(next(iter(_POOLS)))
        _POOLS[key] = (documents, pooled)
    return dict(documents), list(pooled)


def _run_size(contexts: Sequence[str], tokenizer, tokens: Optional[_ParagraphTokens], in_tokens: bool):
    """The size of a run of paragraphs joined by SEPARATOR: tokens with special tokens, or words."""
    if not in_tokens:
        words = [len(context.split()) for context in contexts]  # SEPARATOR is whitespace: words add up
        return lambda run: sum(words[i] for i in run)
    if tokens is not None:
        return tokens.total
    return lambda run: _token_count(tokenizer, SEPARATOR.join(contexts[i] for i in run))


def _token_starts(tokenizer, text: str) -> list[int]:
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    return [span[0] for span in encoded["offset_mapping"]]


def squad_longposq(
    data_dir: Path,
    tokenizer,
    *,
    token_budget: Optional[int] = 512,
    word_budget: Optional[int] = None,
    min_paragraphs: int = 2,
    min_fill: float = 0.5,
    max_documents: Optional[int] = 2000,
    questions_per_group: Optional[int] = 2000,
    exact_offsets_only: bool = False,
    seed: int = 0,
    articles: Optional[frozenset] = None,
) -> Benchmark:
    """Long documents of consecutive paragraphs; questions grouped by the token position of their answer.

    ``token_budget`` counts the model's tokens including special tokens, so no document is truncated;
    ``word_budget`` (e.g. 1000) builds longer documents for long-context models instead. Documents with
    fewer than ``min_paragraphs`` paragraphs or filled below ``min_fill`` of the budget are dropped.
    ``articles`` keeps only those article positions (the held-out articles of fine-tuning).
    """
    if word_budget is not None:
        token_budget = None
    _budget_check(tokenizer, token_budget, word_budget)  # the argument error comes before any reading
    documents, pooled = _longposq_pool(
        data_dir, tokenizer, token_budget, word_budget, min_paragraphs, min_fill, articles
    )
    queries = [query for query, unique in pooled if unique or not exact_offsets_only]
    if max_documents is not None and len(documents) > max_documents:
        chosen = set(random.Random(seed).sample(sorted(documents), max_documents))
        documents = {k: v for k, v in documents.items() if k in chosen}
        queries = [q for q in queries if next(iter(q.relevant)) in chosen]
    queries = _cap_per_group(queries, questions_per_group, seed)
    settings = dict(
        token_budget=token_budget,
        word_budget=word_budget,
        min_paragraphs=min_paragraphs,
        min_fill=min_fill,
        max_documents=max_documents,
        questions_per_group=questions_per_group,
        exact_offsets_only=exact_offsets_only,
        seed=seed,
        articles=None if articles is None else len(articles),
    )
    name = f"SQuAD-LongPosQ ({f'{token_budget} tokens' if token_budget else f'{word_budget} words'})"
    return Benchmark(name, [RetrievalTask(documents, queries)], GROUPS, settings)


def _grouped_questions(doc_id, text, paragraphs, starts: Sequence[int]) -> list[tuple[Query, bool]]:
    """Questions of a document with the third of the document (in tokens) where each answer starts;
    ``starts`` are the document's token start offsets (no special tokens).

    Each comes with whether its answer offset is the unique match SQuAD recorded (``exact_offsets_only``).
    """
    queries, offset = [], 0
    for paragraph in paragraphs:
        for qa in paragraph["qas"]:
            answer = qa["answers"][0]
            unique = answer.get("offset_method", "unique") == "unique"
            char = offset + answer["answer_start"]
            if text[char : char + len(answer["text"])] != answer["text"]:
                raise ValueError(f"answer offset of {qa['id']} does not point at its answer in {doc_id}")
            query = Query(qa["id"], qa["question"], frozenset([doc_id]), group_at(starts, char))
            queries.append((query, unique))
        offset += len(paragraph["context"]) + len(SEPARATOR)
    return queries


# ----------------------------------------------------------------------------- position rotation
def _rotated(name, units: list[tuple[str, list[tuple[str, str]]]], settings) -> Benchmark:
    """Three corpora from sets of three units: unit i of a set sits first, in the middle and last once.

    ``units`` is a list of (set id, [(unit text, question id, question text) ...]) with three units per set.
    """
    tasks = []
    for rotation in range(3):
        documents, queries = {}, []
        for set_id, members in units:
            order = members[rotation:] + members[:rotation]
            doc_id = f"{set_id}-r{rotation}"
            documents[doc_id] = SEPARATOR.join(unit_text for unit_text, _ in order)
            for position, (_, unit_questions) in enumerate(order):
                for question_id, question in unit_questions:
                    queries.append(Query(f"{question_id}@r{rotation}", question, frozenset([doc_id]), GROUPS[position]))
        tasks.append(RetrievalTask(documents, queries))
    return Benchmark(name, tasks, GROUPS, settings)


def squad_evidence_moving(
    data_dir: Path,
    tokenizer,
    *,
    token_budget: int = 512,
    max_sets: Optional[int] = 600,
    questions_per_paragraph: int = 2,
    seed: int = 0,
    articles: Optional[frozenset] = None,
) -> Benchmark:
    """Three consecutive paragraphs per document, rotated so each gold paragraph is first, middle and last.

    ``articles`` keeps only those article positions (the held-out articles of fine-tuning).
    """
    _budget_check(tokenizer, token_budget, None)
    definition = _tokenizer_definition(tokenizer)
    paragraph_tokens = _paragraph_tokens(data_dir, tokenizer, definition, _tokenizer_identity(definition))
    rng = random.Random(seed)
    sets = []
    for article_index, article in enumerate(squad_articles(data_dir)):
        if articles is not None and article_index not in articles:
            continue
        paragraphs = article["paragraphs"]
        tokens = None if paragraph_tokens is None else paragraph_tokens[article_index]
        size = _run_size([p["context"] for p in paragraphs], tokenizer, tokens, True)
        for start in range(0, len(paragraphs) - 2, 3):
            trio = paragraphs[start : start + 3]
            if size(range(start, start + 3)) > token_budget:
                continue
            members = []
            for p in trio:
                chosen = rng.sample(p["qas"], min(questions_per_paragraph, len(p["qas"])))
                members.append((p["context"], [(qa["id"], qa["question"]) for qa in chosen]))
            sets.append((f"squad-em-{article_index}-{start}", members))
    if max_sets is not None and len(sets) > max_sets:
        sets = sorted(rng.sample(sets, max_sets))
    settings = dict(
        token_budget=token_budget, max_sets=max_sets, questions_per_paragraph=questions_per_paragraph, seed=seed
    )
    if articles is not None:
        settings["articles"] = len(articles)
    return _rotated("SQuAD evidence moving", sets, settings)


def nq_oracle(
    data_dir: Path,
    tokenizer,
    *,
    token_budget: int = 512,
    max_sets: Optional[int] = 600,
    seed: int = 0,
) -> Benchmark:
    """Gold NQ passages of three different questions per document, rotated through the three positions."""
    path = Path(data_dir) / "nq-open-oracle" / "nq-open-oracle.jsonl.gz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass the shared data folder (--data)")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    fits = _budget_check(tokenizer, token_budget, None)
    sets = []
    for start in range(0, len(order) - 2, 3):
        trio = [rows[i] for i in order[start : start + 3]]
        texts = [f"{row['ctxs'][0]['title']}\n{row['ctxs'][0]['text']}" for row in trio]
        if not fits(SEPARATOR.join(texts)):
            continue
        pairs = enumerate(zip(texts, trio, strict=True))
        members = [(text, [(f"nq-{order[start + j]}", row["question"])]) for j, (text, row) in pairs]
        sets.append((f"nq-{start // 3}", members))
        if max_sets is not None and len(sets) == max_sets:
            break
    return _rotated("NQ oracle positions", sets, dict(token_budget=token_budget, max_sets=max_sets, seed=seed))


# ----------------------------------------------------------------------------- SciFact
def scifact(data_dir: Path, *, split: str = "test", sample: Optional[int] = None, seed: int = 0) -> Benchmark:
    """BEIR SciFact: title + abstract documents, claims as queries, qrels of ``split``.

    ``sample`` keeps every abstract relevant to a query plus that many of the others, drawn with ``seed``:
    a fixed, smaller corpus (the full one costs minutes per configuration on a CPU).
    """
    folder = Path(data_dir) / "beir-scifact"
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} not found: pass the shared data folder (--data)")
    documents = {}
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            documents[row["_id"]] = f"{row.get('title', '')}\n{row['text']}".strip()
    texts = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            texts[row["_id"]] = row["text"]
    relevant: dict[str, set] = {}
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            query_id, doc_id, score = line.strip().split("\t")
            if int(score) > 0:
                relevant.setdefault(query_id, set()).add(doc_id)
    queries = [Query(q, texts[q], frozenset(docs)) for q, docs in sorted(relevant.items())]
    settings: dict[str, Any] = dict(split=split)
    name = "SciFact (BEIR)"
    if sample is not None:
        if sample < 0:
            raise ValueError(f"sample must be >= 0, got {sample}")
        needed = set().union(*relevant.values()) & set(documents)
        others = sorted(set(documents) - needed)
        kept = needed | set(random.Random(seed).sample(others, min(sample, len(others))))
        documents = {d: documents[d] for d in sorted(kept)}
        settings.update(sample=sample, seed=seed)
        name = f"SciFact (BEIR, relevant + {sample} sampled)"
    return Benchmark(name, [RetrievalTask(documents, queries)], ("all",), settings)
