"""Position-controlled training pairs: the gold paragraph sits in a chosen slot of a longer document.

The fine-tuning experiment asks whether *where* the evidence sits in training documents changes a model's
position bias. So every setup is built from the same (question, gold paragraph, filler paragraphs) triples
for a given seed and size; only the gold paragraph's place in the document changes:

* ``begin`` / ``middle`` / ``end``: the gold paragraph is first, at index ``n // 2``, or last;
* ``uniform``: a third of the examples each (counts differ by at most one), slots shuffled with the seed;
* ``natural``: the paragraphs keep the article's order, so the gold paragraph falls wherever it falls; its
  slot is recorded by the third of the document its centre paragraph index lies in.

For SQuAD the document of a question is the run of consecutive article paragraphs around its gold paragraph
(packed greedily from the start of the article under the token budget, like SQuAD-LongPosQ), after removing
every other paragraph that contains the answer text. Articles are split into training and held-out sets
first, so the evaluation can be built from held-out articles only.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tqdm.auto import tqdm

from posfair_llamaindex.eval.benchmark_data import SEPARATOR, SQUAD_TRAIN, split_articles, squad_articles

if TYPE_CHECKING:
    import datasets
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

SLOTS = ("begin", "middle", "end")
SETUPS = ("begin", "middle", "end", "uniform", "natural")


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class SquadQuestion:
    """One SQuAD question with its first answer and the index of the paragraph that holds it."""

    id: str
    question: str
    answer: str
    answer_start: int
    paragraph: int


@dataclass(frozen=True)
class SquadArticle:
    """A SQuAD article; ``index`` is its position in the file, the id SQuAD-LongPosQ builds document ids from."""

    index: int
    title: str
    paragraphs: tuple[str, ...]
    questions: tuple[SquadQuestion, ...]


@dataclass(frozen=True)
class ArticleSplit:
    """Which SQuAD articles train and which are held out for evaluation (indices are file positions)."""

    heldout_fraction: float
    seed: int
    train_indices: tuple[int, ...]
    heldout_indices: tuple[int, ...]
    heldout_titles: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        return {
            "train": len(self.train_indices),
            "heldout": len(self.heldout_indices),
            "heldout_fraction": self.heldout_fraction,
            "split_seed": self.seed,
        }


@dataclass(frozen=True)
class TrainingExample:
    """A query, a document holding its evidence in a known place, and optionally a hard negative.

    ``gold_char_start`` is the character offset of the evidence in ``document``; ``gold_token_start`` the
    index of its first token in the tokenizer's ``input_ids`` *with* special tokens (so ``[CLS]`` is 0, and
    any training prompt such as ``[DUMP]`` tokens shifts it further); ``token_count`` counts special tokens.
    """

    pair_id: str
    query: str
    document: str
    evidence: str
    answer: Optional[str]
    slot: str
    gold_index: int
    paragraph_count: int
    gold_char_start: int
    gold_token_start: int
    token_count: int
    source: str
    article_index: Optional[int] = None
    negative: Optional[str] = None


@dataclass(frozen=True)
class PairBuildConfig:
    """How examples are built; everything that picks pairs depends on ``seed`` only, never on ``setup``."""

    setup: str = "uniform"
    examples: Optional[int] = None
    seed: int = 0
    token_budget: int = 450
    min_paragraphs: int = 3
    hard_negatives: bool = False

    def __post_init__(self) -> None:
        if self.setup not in SETUPS:
            raise ValueError(f"setup {self.setup!r} is not one of {SETUPS}")
        if self.examples is not None and (isinstance(self.examples, bool) or self.examples < 1):
            raise ValueError(f"examples must be a positive count or None, got {self.examples!r}")
        if self.token_budget < 8:
            raise ValueError(f"token_budget {self.token_budget!r} is too small for a document (at least 8)")
        if self.min_paragraphs < 1:
            raise ValueError(f"min_paragraphs must be at least 1, got {self.min_paragraphs!r}")


@dataclass(frozen=True)
class TrainingData:
    """The examples of one run and where they came from, for the training summary."""

    examples: tuple[TrainingExample, ...]
    settings: PairBuildConfig
    source: str
    split: Optional[ArticleSplit] = None

    def summary(self) -> dict[str, Any]:
        found = {
            "source": self.source,
            "setup": self.settings.setup,
            "examples": len(self.examples),
            "slot_counts": slot_counts(self.examples),
            "hard_negatives": self.settings.hard_negatives,
            "token_budget": self.settings.token_budget,
            "min_paragraphs": self.settings.min_paragraphs,
            "seed": self.settings.seed,
        }
        if self.split is not None:
            found["articles"] = self.split.summary()
            found["articles"]["used"] = len({e.article_index for e in self.examples})
        return found


@dataclass(frozen=True)
class _Candidate:
    """A pair before placement: its paragraphs in natural order and where the gold one is among them."""

    pair_id: str
    query: str
    answer: Optional[str]
    source: str
    article_index: Optional[int]
    paragraphs: tuple[str, ...]
    natural_index: int
    negative_pool: tuple[str, ...]


# ----------------------------------------------------------------------------- SQuAD and the article split
def load_squad_articles(data_dir: Path) -> list[SquadArticle]:
    """SQuAD v1.1 train from the shared data folder, in file order."""
    return [_article(index, item) for index, item in enumerate(squad_articles(data_dir))]


def _article(index: int, item: dict) -> SquadArticle:
    paragraphs = tuple(p["context"] for p in item["paragraphs"])
    questions = tuple(
        SquadQuestion(qa["id"], qa["question"], qa["answers"][0]["text"], qa["answers"][0]["answer_start"], number)
        for number, paragraph in enumerate(item["paragraphs"])
        for qa in paragraph["qas"]
        if qa.get("answers")
    )
    return SquadArticle(index, item.get("title", f"article-{index}"), paragraphs, questions)


def article_split(articles: Sequence[SquadArticle], heldout_fraction: float = 0.2, seed: int = 0) -> ArticleSplit:
    """The split of ``split_articles`` as file indices and titles, for the training summary and the evaluation."""
    train, heldout = split_articles(articles, heldout_fraction, seed)
    return ArticleSplit(
        heldout_fraction,
        seed,
        tuple(a.index for a in train),
        tuple(a.index for a in heldout),
        tuple(a.title for a in heldout),
    )


def heldout_split(data_dir: Path, heldout_fraction: float = 0.2, seed: int = 0) -> ArticleSplit:
    """The held-out SQuAD articles of the shared data: build SQuAD-LongPosQ from ``heldout_indices`` only.

    The indices are the article positions ``eval.data.squad_longposq`` enumerates (its document ids are
    ``squad-{article_index}-{first_paragraph}``), so a model trained with this split can be evaluated on
    documents from articles it never saw.
    """
    return article_split(load_squad_articles(data_dir), heldout_fraction, seed)


def squad_training_data(
    data_dir: Path,
    tokenizer: PreTrainedTokenizerBase,
    settings: PairBuildConfig,
    *,
    heldout_fraction: float = 0.2,
    split_seed: int = 0,
) -> TrainingData:
    """Examples from the training articles of SQuAD only; the held-out articles are never read for pairs.

    ``split_seed`` is separate from ``settings.seed`` so repeated runs with other seeds keep one held-out set.
    """
    articles = load_squad_articles(data_dir)
    split = article_split(articles, heldout_fraction, split_seed)
    held = set(split.heldout_indices)
    train = [a for a in articles if a.index not in held]
    examples = build_squad_examples(train, tokenizer, settings)
    return TrainingData(tuple(examples), settings, str(Path(data_dir) / SQUAD_TRAIN), split)


def build_squad_examples(
    articles: Sequence[SquadArticle], tokenizer: PreTrainedTokenizerBase, settings: PairBuildConfig
) -> list[TrainingExample]:
    """Pick pairs from ``articles`` in a seeded order, keep those whose document has enough paragraphs, place them."""
    counter = _TokenCounter(tokenizer)
    order = [(a, q) for a in articles for q in range(len(a.questions))]
    random.Random(settings.seed).shuffle(order)
    wanted = settings.examples or len(order)
    candidates: list[_Candidate] = []
    layouts: list[dict[int, _Layout]] = []
    with tqdm(total=wanted, desc="training pairs", unit="pair", leave=False) as bar:
        for article, number in order:
            if len(candidates) >= wanted:
                break
            candidate = _squad_candidate(article, article.questions[number], counter, settings)
            fitted = _fit(candidate, counter, settings) if candidate is not None else None
            if fitted is not None:
                candidates.append(fitted[0])
                layouts.append(fitted[1])
                bar.update(1)
    _check_enough(len(candidates), settings, f"{len(articles)} training articles")
    return _place(candidates, layouts, counter, settings)


def _squad_candidate(
    article: SquadArticle, question: SquadQuestion, counter: _TokenCounter, settings: PairBuildConfig
) -> Optional[_Candidate]:
    """The run of consecutive answer-free paragraphs around the gold one, or None when the pair is unusable."""
    gold = article.paragraphs[question.paragraph]
    end = question.answer_start + len(question.answer)
    if not question.answer or gold[question.answer_start : end] != question.answer:
        return None
    counter.prime(article.paragraphs)  # one batched call per article instead of one per paragraph
    allowed = [
        i
        for i, text in enumerate(article.paragraphs)
        if i == question.paragraph or not _contains(text, question.answer)
    ]
    run = _run_holding(allowed, question.paragraph, [article.paragraphs[i] for i in allowed], counter, settings)
    if run is None:
        return None
    others = tuple(article.paragraphs[i] for i in allowed if i not in run and i != question.paragraph)
    return _Candidate(
        pair_id=question.id,
        query=question.question,
        answer=question.answer,
        source=f"squad/{article.index}/{question.paragraph}",
        article_index=article.index,
        paragraphs=tuple(article.paragraphs[i] for i in run),
        natural_index=run.index(question.paragraph),
        negative_pool=others or tuple(article.paragraphs[i] for i in run if i != question.paragraph),
    )


def _run_holding(
    indices: list[int], gold: int, texts: list[str], counter: _TokenCounter, settings: PairBuildConfig
) -> Optional[list[int]]:
    """Greedy consecutive packing from the first paragraph (as SQuAD-LongPosQ does); the run holding ``gold``."""
    runs: list[list[int]] = []
    current: list[int] = []
    current_texts: list[str] = []
    for index, text in zip(indices, texts, strict=True):
        if counter.fits(current_texts + [text], settings.token_budget):
            current.append(index)
            current_texts.append(text)
            continue
        if current:
            runs.append(current)
        fits_alone = counter.fits([text], settings.token_budget)
        current, current_texts = ([index], [text]) if fits_alone else ([], [])
    if current:
        runs.append(current)
    return next((run for run in runs if gold in run), None)


# ----------------------------------------------------------------------------- user data
def user_training_data(
    pairs_file: Path, filler_dir: Path, tokenizer: PreTrainedTokenizerBase, settings: PairBuildConfig
) -> TrainingData:
    """Examples from a JSONL of ``{"query", "evidence"}`` lines and a folder of ``.txt`` filler files.

    Filler files are split into paragraphs at blank lines; a paragraph that equals, contains or is contained
    in a pair's evidence is never used as its filler. Fillers are drawn with the seed; the ``natural`` slot
    of a user pair is a seeded random position, as user data has no paragraph order of its own.
    """
    pairs = _read_pairs(Path(pairs_file))
    fillers = _read_fillers(Path(filler_dir))
    counter = _TokenCounter(tokenizer)
    counter.prime(fillers)
    candidates: list[_Candidate] = []
    layouts: list[dict[int, _Layout]] = []
    dropped = 0
    for number, (pair_id, query, evidence) in enumerate(tqdm(pairs, desc="user pairs", unit="pair", leave=False)):
        rng = random.Random(f"{settings.seed}:user:{pair_id}")
        candidate = _user_candidate(pair_id, number, query, evidence, fillers, counter, settings, rng)
        fitted = _fit(candidate, counter, settings) if candidate is not None else None
        if fitted is None:
            dropped += 1
            continue
        candidates.append(fitted[0])
        layouts.append(fitted[1])
    if dropped:
        logger.warning(
            "%d of %d pairs in %s were dropped: the evidence alone exceeds %d tokens or fewer than %d paragraphs fit",
            dropped,
            len(pairs),
            pairs_file,
            settings.token_budget,
            settings.min_paragraphs,
        )
    order = list(range(len(candidates)))
    random.Random(settings.seed).shuffle(order)
    order = sorted(order[: settings.examples or len(order)])
    _check_enough(len(order), settings, f"{len(pairs)} pairs in {pairs_file}")
    examples = _place([candidates[i] for i in order], [layouts[i] for i in order], counter, settings)
    return TrainingData(tuple(examples), settings, f"{pairs_file} + {filler_dir}")


def _read_pairs(path: Path) -> list[tuple[str, str, str]]:
    if not path.is_file():
        raise FileNotFoundError(f"pairs file {path} not found")
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number} is not a JSON line: {error}") from None
        if not isinstance(row, dict) or not all(
            isinstance(row.get(k), str) and row[k].strip() for k in ("query", "evidence")
        ):
            raise ValueError(
                f"{path}:{number} needs non-empty string fields 'query' and 'evidence', got {line[:200]!r}"
            )
        pairs.append((str(row.get("id", f"line-{number}")), row["query"].strip(), row["evidence"].strip()))
    if not pairs:
        raise ValueError(f"{path} holds no pairs")
    return pairs


def _read_fillers(folder: Path) -> list[str]:
    if not folder.is_dir():
        raise FileNotFoundError(f"filler folder {folder} not found")
    seen: dict[str, None] = {}
    for file in sorted(folder.rglob("*.txt")):
        for paragraph in re.split(r"\n\s*\n", file.read_text(encoding="utf-8", errors="replace")):
            if paragraph.strip():
                seen.setdefault(paragraph.strip(), None)
    if not seen:
        raise ValueError(f"{folder} holds no non-empty .txt paragraphs to use as filler")
    return list(seen)


def _user_candidate(
    pair_id: str,
    number: int,
    query: str,
    evidence: str,
    fillers: list[str],
    counter: _TokenCounter,
    settings: PairBuildConfig,
    rng: random.Random,
) -> Optional[_Candidate]:
    """Evidence plus seeded fillers added first-fit while the document stays within the budget."""
    key = _normal(evidence)
    pool = [f for f in fillers if key not in _normal(f) and _normal(f) not in key]
    rng.shuffle(pool)
    chosen: list[str] = []
    used = counter.estimate([evidence])
    if used > settings.token_budget:
        return None
    for filler in pool:
        extra = counter.count(filler) + counter.separator
        if used + extra <= settings.token_budget:
            chosen.append(filler)
            used += extra
    natural = rng.randrange(len(chosen) + 1)
    paragraphs = tuple(chosen[:natural] + [evidence] + chosen[natural:])
    negative_pool = tuple(f for f in pool if f not in chosen) or tuple(chosen)
    return _Candidate(pair_id, query, None, f"user/{number}", None, paragraphs, natural, negative_pool)


# ----------------------------------------------------------------------------- placement
@dataclass(frozen=True)
class _Layout:
    document: str
    gold_char_start: int
    gold_token_start: int
    token_count: int


def _fit(
    candidate: _Candidate, counter: _TokenCounter, settings: PairBuildConfig
) -> Optional[tuple[_Candidate, dict[int, _Layout]]]:
    """Trim the paragraph farthest from the gold one until every placement fits; None below ``min_paragraphs``.

    All placements are checked before any is chosen, so the setup never changes which fillers a pair gets.
    """
    while len(candidate.paragraphs) >= settings.min_paragraphs:
        layouts = {index: _layout(candidate, index, counter) for index in _placements(candidate)}
        if all(layout.token_count <= settings.token_budget for layout in layouts.values()):
            return candidate, layouts
        paragraphs, natural = list(candidate.paragraphs), candidate.natural_index
        if natural < len(paragraphs) - 1:
            paragraphs.pop()
        else:
            paragraphs.pop(0)
            natural -= 1
        candidate = _replace(candidate, paragraphs=tuple(paragraphs), natural_index=natural)
    return None


def _replace(candidate: _Candidate, **changes: Any) -> _Candidate:
    values = {name: getattr(candidate, name) for name in candidate.__dataclass_fields__}
    return _Candidate(**{**values, **changes})


def _placements(candidate: _Candidate) -> set[int]:
    count = len(candidate.paragraphs)
    return {0, count // 2, count - 1, candidate.natural_index}


def _slot_index(slot: str, candidate: _Candidate) -> int:
    count = len(candidate.paragraphs)
    return {"begin": 0, "middle": count // 2, "end": count - 1}[slot]


def _layout(candidate: _Candidate, gold_index: int, counter: _TokenCounter) -> _Layout:
    """The document with the gold paragraph at ``gold_index`` and the fillers in their natural order."""
    gold = candidate.paragraphs[candidate.natural_index]
    fillers = [p for i, p in enumerate(candidate.paragraphs) if i != candidate.natural_index]
    ordered = fillers[:gold_index] + [gold] + fillers[gold_index:]
    char_start = sum(len(p) + len(SEPARATOR) for p in ordered[:gold_index])
    document = SEPARATOR.join(ordered)
    encoded = counter.tokenizer(document, add_special_tokens=True, return_offsets_mapping=True, verbose=False)
    token_start = next(
        (i for i, (start, end) in enumerate(encoded["offset_mapping"]) if end > start and end > char_start), -1
    )
    return _Layout(document, char_start, token_start, len(encoded["input_ids"]))


def _place(
    candidates: list[_Candidate], layouts: list[dict[int, _Layout]], counter: _TokenCounter, settings: PairBuildConfig
) -> list[TrainingExample]:
    slots = _assign_slots(len(candidates), settings)
    examples = []
    for candidate, layout_of, slot in zip(candidates, layouts, slots, strict=True):
        if slot is None:
            index = candidate.natural_index
            slot = _third((index + 0.5) / len(candidate.paragraphs))
        else:
            index = _slot_index(slot, candidate)
        layout = layout_of[index]
        examples.append(
            TrainingExample(
                pair_id=candidate.pair_id,
                query=candidate.query,
                document=layout.document,
                evidence=candidate.paragraphs[candidate.natural_index],
                answer=candidate.answer,
                slot=slot,
                gold_index=index,
                paragraph_count=len(candidate.paragraphs),
                gold_char_start=layout.gold_char_start,
                gold_token_start=layout.gold_token_start,
                token_count=layout.token_count,
                source=candidate.source,
                article_index=candidate.article_index,
                negative=_negative(candidate, counter, settings) if settings.hard_negatives else None,
            )
        )
    return examples


def _assign_slots(count: int, settings: PairBuildConfig) -> list[Optional[str]]:
    """One slot per example; ``uniform`` is exact thirds shuffled with the seed; None means natural."""
    if settings.setup == "natural":
        return [None] * count
    if settings.setup != "uniform":
        return [settings.setup] * count
    slots = [SLOTS[i % 3] for i in range(count)]
    random.Random(f"{settings.seed}:slots").shuffle(slots)
    return slots


def _third(fraction: float) -> str:
    return SLOTS[min(2, int(fraction * 3))]


def _negative(candidate: _Candidate, counter: _TokenCounter, settings: PairBuildConfig) -> str:
    """Answer-free paragraphs of the same source, seeded and first-fit under the budget, in their natural order."""
    rng = random.Random(f"{settings.seed}:negative:{candidate.pair_id}")
    pool = list(candidate.negative_pool)
    order = list(range(len(pool)))
    rng.shuffle(order)
    chosen: list[int] = []
    for index in order:
        if counter.fits([pool[i] for i in sorted(chosen + [index])], settings.token_budget):
            chosen.append(index)
    if not chosen:
        chosen = [order[0]]  # a lone paragraph longer than the budget: truncated by the model like any input
    return SEPARATOR.join(pool[i] for i in sorted(chosen))


def _check_enough(found: int, settings: PairBuildConfig, where: str) -> None:
    if found == 0 or (settings.examples is not None and found < settings.examples):
        raise ValueError(
            f"only {found} usable pairs in {where} (asked for {settings.examples}); each needs at least "
            f"{settings.min_paragraphs} paragraphs within {settings.token_budget} tokens"
        )


def _contains(text: str, answer: str) -> bool:
    return answer.casefold() in text.casefold()


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


# ----------------------------------------------------------------------------- counting and output
class _TokenCounter:
    """Token counts with special tokens; paragraph counts are cached so packing costs no re-tokenisation."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"{type(tokenizer).__name__} is not a fast tokenizer; offsets need one")
        self.tokenizer = tokenizer
        self._cache: dict[str, int] = {}
        self.special = len(tokenizer("", add_special_tokens=True)["input_ids"])
        self.separator = len(tokenizer(SEPARATOR, add_special_tokens=False)["input_ids"])

    def prime(self, texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for start in range(0, len(missing), 256):
            batch = missing[start : start + 256]
            ids = self.tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"]
            self._cache.update(zip(batch, map(len, ids), strict=True))

    def count(self, text: str) -> int:
        if text not in self._cache:
            self.prime([text])
        return self._cache[text]

    def estimate(self, paragraphs: Sequence[str]) -> int:
        """Tokens of the joined paragraphs with special tokens; exact for tokenizers that split at whitespace."""
        return self.special + sum(map(self.count, paragraphs)) + self.separator * max(0, len(paragraphs) - 1)

    def fits(self, paragraphs: Sequence[str], budget: int) -> bool:
        return self.estimate(paragraphs) <= budget


def slot_counts(examples: Sequence[TrainingExample]) -> dict[str, int]:
    counts = Counter(e.slot for e in examples)
    return {slot: counts.get(slot, 0) for slot in SLOTS}


def to_dataset(examples: Sequence[TrainingExample]) -> datasets.Dataset:
    """Columns ``anchor``, ``positive`` and, when every example has one, ``negative`` (in that order, as
    ``MultipleNegativesRankingLoss`` reads columns by position)."""
    from datasets import Dataset

    if not examples:
        raise ValueError("no examples to turn into a dataset")
    with_negative = sum(e.negative is not None for e in examples)
    if with_negative not in (0, len(examples)):
        raise ValueError(f"{with_negative} of {len(examples)} examples have a hard negative; give all or none")
    columns: dict[str, list[str]] = {
        "anchor": [e.query for e in examples],
        "positive": [e.document for e in examples],
    }
    if with_negative:
        columns["negative"] = [e.negative for e in examples]
    return Dataset.from_dict(columns)
