"""Position-controlled training pairs: slots, the article split, exact proportions, budgets, fillers."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from transformers import AutoTokenizer

from posfair_llamaindex.eval.benchmark_data import SEPARATOR
from posfair_llamaindex.train.training_pairs import (
    SETUPS,
    SLOTS,
    PairBuildConfig,
    article_split,
    build_squad_examples,
    heldout_split,
    load_squad_articles,
    slot_counts,
    split_articles,
    squad_training_data,
    to_dataset,
    user_training_data,
)
from tests.train import write_fake_squad
from tests.utils import HAS_SQUAD, NO_SHARED_DATA, SHARED_DATA, minilm_path

BUDGET = 300  # fake paragraphs are ~50-75 MiniLM tokens, so documents hold 3 to 5 of them


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(minilm_path())


@pytest.fixture(scope="module")
def fake_dir(tmp_path_factory):
    return write_fake_squad(tmp_path_factory.mktemp("fake-data"))


@pytest.fixture(scope="module")
def by_setup(fake_dir, tokenizer):
    """Every setup built from the fake file with one seed and size (with hard negatives)."""
    return {
        setup: squad_training_data(
            fake_dir, tokenizer, PairBuildConfig(setup=setup, examples=40, token_budget=BUDGET, hard_negatives=True)
        )
        for setup in SETUPS
    }


def _paragraphs(example) -> list[str]:
    return example.document.split(SEPARATOR)


def check_examples(examples, tokenizer, budget: int) -> None:
    """What every example of every setup must satisfy, on fake and real data alike."""
    for e in examples:
        paragraphs = _paragraphs(e)
        assert len(paragraphs) == e.paragraph_count
        assert paragraphs[e.gold_index] == e.evidence
        assert e.document[e.gold_char_start :].startswith(e.evidence)
        encoded = tokenizer(e.document, return_offsets_mapping=True)
        assert len(encoded["input_ids"]) == e.token_count <= budget  # counted with special tokens
        assert encoded["offset_mapping"][e.gold_token_start][0] == e.gold_char_start
        if e.answer is not None:
            assert e.answer in e.evidence
            fillers = [p for i, p in enumerate(paragraphs) if i != e.gold_index]
            assert all(e.answer.casefold() not in f.casefold() for f in fillers), e.pair_id
            if e.negative is not None:
                assert e.answer.casefold() not in e.negative.casefold()
                assert e.negative != e.document


def test_split_is_deterministic_disjoint_and_sized():
    articles = list(range(50))
    train, heldout = split_articles(articles, 0.2, seed=3)
    assert (train, heldout) == split_articles(articles, 0.2, seed=3)
    assert len(heldout) == 10 and not set(train) & set(heldout) and sorted(train + heldout) == articles
    assert split_articles(articles, 0.2, seed=4)[1] != heldout
    assert split_articles(articles, 0.0)[1] == []
    assert len(split_articles([1, 2, 3], 0.1)[1]) == 1
    with pytest.raises(ValueError, match="1.0"):
        split_articles(articles, 1.0)


def test_no_heldout_article_reaches_training(by_setup, fake_dir):
    split = heldout_split(fake_dir)
    assert split.heldout_titles == tuple(f"Town_{i}" for i in split.heldout_indices)
    assert len(split.heldout_indices) == 2 and not set(split.heldout_indices) & set(split.train_indices)
    for data in by_setup.values():
        assert data.split == split
        assert {e.article_index for e in data.examples} <= set(split.train_indices)
        assert data.summary()["articles"] == {**split.summary(), "used": 6}


@pytest.mark.parametrize("setup", SETUPS)
def test_examples_are_placed_within_budget_without_answer_in_fillers(by_setup, tokenizer, setup):
    examples = by_setup[setup].examples
    assert len(examples) == 40
    check_examples(examples, tokenizer, BUDGET)


@pytest.mark.parametrize("slot", SLOTS)
def test_controlled_slot_puts_the_gold_paragraph_there(by_setup, slot):
    for e in by_setup[slot].examples:
        assert e.slot == slot
        assert e.gold_index == {"begin": 0, "middle": e.paragraph_count // 2, "end": e.paragraph_count - 1}[slot]
        if slot == "begin":
            assert e.gold_char_start == 0 and e.gold_token_start == 1  # right after [CLS]
        if slot == "end":
            assert e.document.endswith(e.evidence)


def test_every_setup_uses_the_same_pairs_and_paragraphs(by_setup):
    def content(data):
        return [(e.pair_id, e.query, e.evidence, sorted(_paragraphs(e)), e.negative) for e in data.examples]

    reference = content(by_setup["begin"])
    assert all(content(data) == reference for data in by_setup.values())
    pairs = zip(by_setup["begin"].examples, by_setup["end"].examples, strict=True)
    assert all(b.document != e.document for b, e in pairs)


def test_uniform_counts_are_exact_and_shuffled(fake_dir, tokenizer, by_setup):
    counts = slot_counts(by_setup["uniform"].examples)
    assert sorted(counts.values()) == [13, 13, 14]
    slots = [e.slot for e in by_setup["uniform"].examples]
    assert slots != [SLOTS[i % 3] for i in range(len(slots))]
    thirty = squad_training_data(
        fake_dir, tokenizer, PairBuildConfig(setup="uniform", examples=30, token_budget=BUDGET)
    )
    assert slot_counts(thirty.examples) == {"begin": 10, "middle": 10, "end": 10}


def test_natural_keeps_article_order_and_labels_slots_by_thirds(by_setup):
    seen = set()
    for e in by_setup["natural"].examples:
        number = int(e.pair_id.split("-")[2])  # q-<article>-<paragraph>-<k>
        tags = [int(p.split("site ")[1].split(" ")[0].split("-")[1]) for p in _paragraphs(e)]
        assert tags == sorted(tags) and tags[e.gold_index] == number
        assert e.slot == SLOTS[min(2, int((e.gold_index + 0.5) / e.paragraph_count * 3))]
        seen.add(e.slot)
    assert seen == set(SLOTS)


def test_dataset_columns(by_setup):
    examples = by_setup["uniform"].examples
    dataset = to_dataset(examples)
    assert dataset.column_names == ["anchor", "positive", "negative"]
    assert dataset[0] == {
        "anchor": examples[0].query,
        "positive": examples[0].document,
        "negative": examples[0].negative,
    }
    plain = to_dataset([plain_example(e) for e in examples])
    assert plain.column_names == ["anchor", "positive"]
    with pytest.raises(ValueError, match="1 of 2"):
        to_dataset([examples[0], plain_example(examples[1])])


def plain_example(example):
    return example.__class__(**{**example.__dict__, "negative": None})


def test_settings_and_sizes_are_checked(fake_dir, tokenizer):
    with pytest.raises(ValueError, match="'top'"):
        PairBuildConfig(setup="top")
    with pytest.raises(ValueError, match="-3"):
        PairBuildConfig(examples=-3)
    with pytest.raises(ValueError, match="only 84 usable pairs"):
        squad_training_data(fake_dir, tokenizer, PairBuildConfig(examples=500, token_budget=BUDGET))
    with pytest.raises(FileNotFoundError, match="squad-v1.1-train"):
        load_squad_articles(fake_dir / "missing")


def test_user_pairs_with_filler_folder(tmp_path, tokenizer):
    evidence = [f"The lighthouse number {i} stands on the northern cliff and guards the bay." for i in range(9)]
    with (tmp_path / "pairs.jsonl").open("w") as handle:
        for i, text in enumerate(evidence):
            handle.write(json.dumps({"query": f"where is lighthouse {i}?", "evidence": text}) + "\n")
    fillers = tmp_path / "fillers"
    fillers.mkdir()
    for i in range(6):
        body = "\n\n".join(f"Filler text {i}.{k} about weather, tides and harbour fees in winter." for k in range(3))
        (fillers / f"f{i}.txt").write_text(body)
    (fillers / "copy.txt").write_text(evidence[0] + "\n\n" + "A quote: " + evidence[1])  # never used as filler
    built = {
        setup: user_training_data(
            tmp_path / "pairs.jsonl",
            fillers,
            tokenizer,
            PairBuildConfig(setup=setup, examples=6, token_budget=90, hard_negatives=True),
        )
        for setup in SETUPS
    }
    for data in built.values():
        check_examples(data.examples, tokenizer, 90)
        for e in data.examples:
            assert e.document.count(e.evidence) == 1 and e.paragraph_count >= 3
            assert e.evidence not in e.negative
    assert Counter(e.slot for e in built["uniform"].examples) == {"begin": 2, "middle": 2, "end": 2}
    reference = [(e.pair_id, sorted(_paragraphs(e))) for e in built["begin"].examples]
    assert all([(e.pair_id, sorted(_paragraphs(e))) for e in d.examples] == reference for d in built.values())
    (tmp_path / "bad.jsonl").write_text('{"query": "q"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        user_training_data(tmp_path / "bad.jsonl", fillers, tokenizer, PairBuildConfig())


@pytest.mark.skipif(not HAS_SQUAD, reason=NO_SHARED_DATA)
def test_real_squad_pairs(tokenizer):
    articles = load_squad_articles(SHARED_DATA)
    assert len(articles) == 442
    train, heldout = split_articles(articles, 0.2, seed=0)
    assert len(heldout) == 88 and not {a.title for a in train} & {a.title for a in heldout}
    assert article_split(articles).heldout_indices == tuple(a.index for a in heldout)
    built = {
        setup: build_squad_examples(train, tokenizer, PairBuildConfig(setup=setup, examples=24, hard_negatives=True))
        for setup in ("begin", "end", "uniform", "natural")
    }
    held = {a.index for a in heldout}
    for examples in built.values():
        check_examples(examples, tokenizer, 450)
        assert not {e.article_index for e in examples} & held
    assert slot_counts(built["uniform"]) == {"begin": 8, "middle": 8, "end": 8}
    assert all(e.gold_index == 0 for e in built["begin"])
    assert all(e.gold_index == e.paragraph_count - 1 for e in built["end"])
    pairs = [[(e.pair_id, e.evidence, sorted(_paragraphs(e))) for e in examples] for examples in built.values()]
    assert all(p == pairs[0] for p in pairs)
