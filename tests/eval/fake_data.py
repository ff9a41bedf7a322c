"""A tiny, structurally faithful stand-in for the shared data folder, generated from deterministic text.

Nothing is copied from the real data sets: every paragraph is about one made-up place, and every question
names that place, so a sentence encoder can find the paragraph a question was written for.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

PREFIXES = (
    "Ash",
    "Bram",
    "Cor",
    "Dun",
    "Elm",
    "Fen",
    "Glen",
    "Hart",
    "Ivy",
    "Kel",
    "Lan",
    "Mor",
    "Nor",
    "Oak",
    "Pen",
    "Ros",
)
SUFFIXES = ("ford", "ley", "wick", "mere", "ton", "stead", "bridge", "haven")
FIRST_NAMES = (
    "Edith",
    "Walter",
    "Agnes",
    "Hugo",
    "Martha",
    "Felix",
    "Clara",
    "Oswin",
    "Ruth",
    "Silas",
    "Ida",
    "Jasper",
)
SURNAMES = ("Marlow", "Pennick", "Thorne", "Ashby", "Calder", "Whitlock", "Brandt", "Fairley", "Holloway", "Quince")
THINGS = ("lighthouse", "observatory", "library", "harbour", "windmill", "theatre", "monastery", "railway station")
COLOURS = ("crimson", "green", "yellow", "violet", "white", "orange", "blue", "silver")
FEATURES = ("gallery", "roof", "gate", "clock tower", "front door", "bell")
FILLER = (
    "Fishermen trusted its lamp through the long winter storms.",
    "Visitors still walk along the old stone path beside the river.",
    "Local students wrote essays about its history and its trade routes.",
    "Farmers planted barley in the fields that surround it.",
    "A small museum nearby keeps maps, letters and printing plates.",
    "Scientists once argued about the storms that battered its walls.",
)

ARTICLES = 4
PARAGRAPHS_PER_ARTICLE = 8
NQ_ROWS = 12
SCIFACT_DOCUMENTS = 10


def _places(rng: random.Random, count: int) -> list[str]:
    names = [p + s for p in PREFIXES for s in SUFFIXES]
    rng.shuffle(names)
    return names[:count]


def _paragraph(rng: random.Random, place: str, thing: str, qid: str, long: bool = False) -> dict:
    """A paragraph about ``place``: who founded its ``thing`` (early answer) and a year near its end."""
    person = f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
    founded = rng.randint(1700, 1850)
    painted = rng.randint(1860, 1990)
    colour, feature = rng.choice(COLOURS), rng.choice(FEATURES)
    opening = f"The {thing} of {place} was founded by {person} in {founded}."
    middle = " ".join(rng.sample(FILLER, 6 if long else 1))
    if long:
        middle = " ".join([middle] * 4)  # longer than any budget the tests use: never packed
    closing = f"Its {feature} was painted {colour} in {painted}."
    context = " ".join([opening, middle, closing])
    qas = [
        {
            "id": f"{qid}-who",
            "question": f"Who founded the {thing} of {place}?",
            "answers": [{"text": person, "answer_start": context.index(person), "offset_method": "unique"}],
        },
        {
            "id": f"{qid}-when",
            "question": f"In what year was the {feature} of the {place} {thing} painted {colour}?",
            # the year may also occur earlier by chance, like SQuAD's heuristically located answers
            "answers": [
                {
                    "text": str(painted),
                    "answer_start": context.rindex(str(painted)),
                    "offset_method": "heuristic_question_overlap",
                }
            ],
        },
    ]
    return {"context": context, "qas": qas}


def fake_squad(seed: int = 0) -> dict:
    rng = random.Random(seed)
    places = iter(_places(rng, ARTICLES * PARAGRAPHS_PER_ARTICLE))
    articles = []
    for a in range(ARTICLES):
        thing = THINGS[a % len(THINGS)]
        paragraphs = [
            # one overlong paragraph in the second article, to exercise the packer's skip
            _paragraph(rng, next(places), thing, f"fake-{a}-{p}", long=(a == 1 and p == 4))
            for p in range(PARAGRAPHS_PER_ARTICLE)
        ]
        articles.append({"title": f"{thing.title()}s of the north", "paragraphs": paragraphs})
    return {"version": "1.1", "data": articles}


def fake_nq(seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for index, place in enumerate(_places(rng, NQ_ROWS)):
        thing = THINGS[index % len(THINGS)]
        person = f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
        text = f"The {thing} of {place} was designed by {person}. " + " ".join(rng.sample(FILLER, 2))
        rows.append(
            {
                "question": f"who designed the {thing} of {place}",
                "answers": [person],
                "ctxs": [{"title": f"{place} {thing}", "text": text, "hasanswer": True, "isgold": True}],
            }
        )
    return rows


def fake_scifact(seed: int = 2) -> dict[str, object]:
    """Corpus rows, query rows and test qrels: query i is relevant to documents 100+i (and 200 for query 0)."""
    rng = random.Random(seed)
    places = _places(rng, SCIFACT_DOCUMENTS)
    corpus = [
        {
            "_id": str(100 + i),
            "title": f"Storm damage at {place}",
            "text": f"Coastal storms at {place} eroded the cliffs. " + rng.choice(FILLER),
            "metadata": {},
        }
        for i, place in enumerate(places)
    ]
    corpus.append(
        {"_id": "200", "title": "", "text": f"Barley harvests at {places[0]} fell after the storms.", "metadata": {}}
    )
    queries = [
        {"_id": str(i), "text": f"Storms eroded the cliffs at {place}.", "metadata": {}}
        for i, place in enumerate(places[:6])
    ]
    queries.append({"_id": "99", "text": "A claim without judgements.", "metadata": {}})
    qrels = [(str(i), str(100 + i), 1) for i in range(6)] + [("0", "200", 1), ("5", "104", 0)]
    return {"corpus": corpus, "queries": queries, "qrels": qrels}


def _write_jsonl_gz(path: Path, rows: list[dict]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def write_fake_shared_data(root: Path) -> Path:
    """Write squad/, nq-open-oracle/ and beir-scifact/ under ``root`` as the builders expect; return ``root``."""
    root = Path(root)
    (root / "squad").mkdir(parents=True, exist_ok=True)
    with gzip.open(root / "squad" / "squad-v1.1-train.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(fake_squad(), handle)
    (root / "nq-open-oracle").mkdir(exist_ok=True)
    _write_jsonl_gz(root / "nq-open-oracle" / "nq-open-oracle.jsonl.gz", fake_nq())
    scifact = fake_scifact()
    (root / "beir-scifact" / "qrels").mkdir(parents=True, exist_ok=True)
    _write_jsonl_gz(root / "beir-scifact" / "corpus.jsonl.gz", scifact["corpus"])
    with (root / "beir-scifact" / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for row in scifact["queries"]:
            handle.write(json.dumps(row) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in scifact["qrels"]]
    (root / "beir-scifact" / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
