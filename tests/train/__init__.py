"""Tests of the fine-tuning data and training; ``write_fake_squad`` builds a small SQuAD-like file for them."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

_WORDS = [
    "harbour",
    "lantern",
    "orchard",
    "quarry",
    "meadow",
    "chapel",
    "granary",
    "workshop",
    "ferry",
    "tannery",
    "market",
    "bell",
    "tower",
    "canal",
    "mill",
    "archive",
    "cellar",
    "bridge",
    "foundry",
    "garden",
    "school",
    "courtyard",
    "wharf",
    "forge",
    "library",
    "stable",
    "vineyard",
]


def fake_paragraph(rng: random.Random, topic: str, answer: str, words: int) -> tuple[str, int]:
    """A paragraph about ``topic`` that names ``answer`` once, and the character offset of that answer."""
    before = " ".join(rng.choice(_WORDS) for _ in range(words // 2))
    after = " ".join(rng.choice(_WORDS) for _ in range(words - words // 2))
    head = f"The {topic} of the town is known for its {before}. Its keeper was "
    return f"{head}{answer}, who loved the {after}.", len(head)


def write_fake_squad(data_dir: Path, articles: int = 8, paragraphs: int = 7, seed: int = 0) -> Path:
    """``data_dir/squad/squad-v1.1-train.json.gz`` with answers at correct offsets.

    Every paragraph has two questions with unique answers (``Keeper<a>x<p>``); in each article paragraph 1 also
    mentions the answer of paragraph 0, so a filler that contains the answer text exists and must be skipped.
    """
    rng = random.Random(seed)
    data = []
    for a in range(articles):
        items = []
        for p in range(paragraphs):
            answer = f"Keeper{a}x{p}"
            context, start = fake_paragraph(rng, f"site {a}-{p}", answer, rng.randint(25, 45))
            if p == 1:
                context += f" Some say Keeper{a}x0 once lived here."
            qas = [
                {
                    "id": f"q-{a}-{p}-{k}",
                    "question": f"Who kept site {a}-{p} ({k})?",
                    "answers": [{"text": answer, "answer_start": start}],
                }
                for k in range(2)
            ]
            items.append({"context": context, "qas": qas})
        data.append({"title": f"Town_{a}", "paragraphs": items})
    folder = data_dir / "squad"
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "squad-v1.1-train.json.gz", "wt", encoding="utf-8") as handle:
        json.dump({"version": "1.1", "data": data}, handle)
    return data_dir
