"""Benchmark builders on the real shared data: groups, overlap, offsets."""

from __future__ import annotations

from collections import Counter

import pytest
from transformers import AutoTokenizer

from posfair_llamaindex.eval import data
from tests.utils import SHARED_DATA, minilm_path

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "squad").is_dir(), reason="shared data folder not present")


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(minilm_path())


@pytest.fixture(scope="module")
def squad(tokenizer):
    return data.squad_longposq(SHARED_DATA, tokenizer, max_documents=150, questions_per_group=None)


def test_documents_fit_the_budget_and_do_not_overlap(squad, tokenizer):
    task = squad.tasks[0]
    paragraphs = Counter()
    for text in task.documents.values():
        assert len(tokenizer(text)["input_ids"]) <= 512
        assert text.count(data.SEPARATOR) >= 1  # at least two paragraphs
        paragraphs.update(text.split(data.SEPARATOR))
    assert max(paragraphs.values()) == 1  # no paragraph in two documents


def test_every_answer_lies_in_its_document_and_group(squad, tokenizer):
    import gzip
    import json

    with gzip.open(SHARED_DATA / "squad" / "squad-v1.1-train.json.gz", "rt") as handle:
        answers = {qa["id"]: qa["answers"][0]["text"] for a in json.load(handle)["data"] for p in a["paragraphs"] for qa in p["qas"]}
    task = squad.tasks[0]
    groups = Counter(q.group for q in task.queries)
    assert set(groups) == set(data.GROUPS) and min(groups.values()) > 100
    for query in task.queries:
        (doc_id,) = query.relevant
        assert answers[query.id] in task.documents[doc_id]


def test_group_follows_the_token_position(tokenizer):
    # rebuild one document by hand and check the group of its first and last questions
    bench = data.squad_longposq(SHARED_DATA, tokenizer, max_documents=None, questions_per_group=None)
    task = bench.tasks[0]
    first_doc = next(iter(task.documents))
    questions = [q for q in task.queries if first_doc in q.relevant]
    assert questions[0].group == "begin"  # the first paragraph's questions open the document
    assert questions[-1].group in ("middle", "end")


def test_exact_offsets_only_keeps_fewer(tokenizer):
    every = data.squad_longposq(SHARED_DATA, tokenizer, max_documents=100, questions_per_group=None)
    exact = data.squad_longposq(SHARED_DATA, tokenizer, max_documents=100, questions_per_group=None, exact_offsets_only=True)
    assert exact.tasks[0].documents == every.tasks[0].documents
    assert 0 < exact.query_count < every.query_count


def test_word_budget_builds_longer_documents(tokenizer):
    long = data.squad_longposq(SHARED_DATA, tokenizer, word_budget=1000, max_documents=50, questions_per_group=None)
    lengths = [len(t.split()) for t in long.tasks[0].documents.values()]
    assert max(lengths) <= 1000 and sum(lengths) / len(lengths) > 600


def test_per_group_cap_is_balanced(tokenizer):
    capped = data.squad_longposq(SHARED_DATA, tokenizer, max_documents=300, questions_per_group=100)
    assert Counter(q.group for q in capped.tasks[0].queries) == {"begin": 100, "middle": 100, "end": 100}


@pytest.mark.parametrize("builder", [data.squad_evidence_moving, data.nq_oracle])
def test_rotations_move_only_the_position(builder, tokenizer):
    bench = builder(SHARED_DATA, tokenizer, max_sets=40)
    assert len(bench.tasks) == 3
    base = {q.id.split("@")[0] for q in bench.tasks[0].queries}
    positions = {}
    for task in bench.tasks:
        assert {q.id.split("@")[0] for q in task.queries} == base
        for text in task.documents.values():
            assert len(tokenizer(text)["input_ids"]) <= 512
        for query in task.queries:
            positions.setdefault(query.id.split("@")[0], set()).add(query.group)
    # every question is first, middle and last exactly once across the three corpora
    assert all(groups == set(data.GROUPS) for groups in positions.values())
    # the three documents of a set hold the same units in rotated order
    units = [sorted(task.documents[f"{next(iter(task.documents)).rsplit('-r', 1)[0]}-r{r}"].split(data.SEPARATOR)) for r, task in enumerate(bench.tasks)]
    assert units[0] == units[1] == units[2]


def test_scifact_has_its_test_queries():
    bench = data.scifact(SHARED_DATA)
    task = bench.tasks[0]
    assert len(task.documents) == 5183 and len(task.queries) == 300
    assert all(q.relevant <= set(task.documents) for q in task.queries)


def test_missing_data_folder_is_named(tmp_path, tokenizer):
    with pytest.raises(FileNotFoundError, match="--data"):
        data.squad_longposq(tmp_path, tokenizer)
