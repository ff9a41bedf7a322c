"""The two diagnostics of the training-side papers, run on any model this package loads.

* Evidence-moving cosine ("Is Position Bias in Dense Retrievers Built In-or Learned from Data?"): one
  evidence paragraph is moved through evenly spaced slots of a fixed filler document; cos(query, document)
  at each slot shows how much the vector cares where the evidence is. Δ = (peak - lowest) x 10^3.
* [DUMP] effect ("Reducing Representational Interference ... with Trainable Prefix Tokens"): the mean L2
  norm of final-layer hidden states of [CLS], the [DUMP] tokens and stopwords, and how much last-layer
  attention stopwords send to [CLS] and to the [DUMP] tokens. Sinks show up as large norms and as
  attention from low-information tokens.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from posfair_llamaindex.calibration.config import CalibrationConfig
from posfair_llamaindex.encoding.encoder import PosFairEncoder
from posfair_llamaindex.eval.benchmark_data import SEPARATOR, squad_articles
from posfair_llamaindex.model.prompts import dump_token_ids

SLOTS = 10
# short English function words: the "low-information" tokens of the [DUMP] paper's analysis
_STOPWORD_TEXT = (
    "a an the of to in on at by for with from and or but as is was were are be been it its this that these "
    "those which who he she they his her their there"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())  # noqa: SIM905 - a sentence of words reads better than 37 strings


@dataclass(frozen=True)
class MovingSet:
    """A query, its evidence paragraph, and the filler paragraphs the evidence moves through."""

    query: str
    evidence: str
    fillers: tuple


def squad_moving_sets(
    data_dir: Path,
    tokenizer,
    *,
    count: int = 100,
    token_budget: int = 450,
    articles: Optional[frozenset] = None,
    seed: int = 0,
) -> list[MovingSet]:
    """Sets from SQuAD: a question, its gold paragraph, and other paragraphs of its article without the answer.

    Fillers are packed up to ``token_budget`` tokens with the evidence included, so every slot's document
    fits one forward pass. ``articles`` restricts to those article positions (the held-out split).
    """
    rng = random.Random(seed)
    data = squad_articles(data_dir)
    candidates = []
    for index, article in enumerate(data):
        if articles is not None and index not in articles:
            continue
        for number, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"][:1]:
                if qa.get("answers"):
                    candidates.append((index, number, qa["question"], qa["answers"][0]["text"]))
    rng.shuffle(candidates)
    sets = []
    for index, number, question, answer in candidates:
        paragraphs = data[index]["paragraphs"]
        evidence = paragraphs[number]["context"]
        room = token_budget - _tokens(tokenizer, evidence)
        fillers, used = [], 0
        for other, paragraph in enumerate(paragraphs):
            text = paragraph["context"]
            if other == number or answer.lower() in text.lower():
                continue
            size = _tokens(tokenizer, text)
            if used + size > room:
                continue
            fillers.append(text)
            used += size
        if len(fillers) >= 2 and used >= room // 2:
            sets.append(MovingSet(question, evidence, tuple(fillers)))
        if len(sets) == count:
            break
    if not sets:
        raise ValueError("no evidence-moving set could be built from the given articles")
    return sets


def _tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])


def moved_documents(item: MovingSet, slots: int = SLOTS) -> list[str]:
    """The filler document with the evidence inserted at ``slots`` evenly spaced word positions, start to end.

    The fillers are joined into one run of words, so only the evidence's place changes between slots.
    """
    words = " ".join(item.fillers).split()
    if len(words) < slots - 1:
        raise ValueError(f"{len(words)} filler words cannot give {slots} distinct slots")
    documents = []
    for slot in range(slots):
        cut = round(slot * len(words) / (slots - 1))
        before, after = " ".join(words[:cut]), " ".join(words[cut:])
        documents.append(SEPARATOR.join(part for part in (before, item.evidence, after) if part))
    return documents


def evidence_moving_cosine(
    encoder: PosFairEncoder,
    sets: Sequence[MovingSet],
    calibration: Optional[CalibrationConfig],
    *,
    query_prompt: str = "",
    document_prompt: str = "",
    slots: int = SLOTS,
    batch_size: int = 16,
) -> np.ndarray:
    """``[sets, slots]``: cos(query, document with the evidence at slot i); documents calibrated when asked."""
    queries = encoder.encode([s.query for s in sets], None, batch_size=batch_size, prompt=query_prompt)
    documents = [d for s in sets for d in moved_documents(s, slots)]
    vectors = encoder.encode(documents, calibration, batch_size=batch_size, prompt=document_prompt)
    return np.einsum("nd,nsd->ns", queries, vectors.reshape(len(sets), slots, -1))


def moving_summary(cosines: np.ndarray) -> dict:
    """Mean curve, its peak and lowest slot, and Δ = (peak - lowest) x 10^3."""
    curve = cosines.mean(axis=0)
    return {
        "mean_cosine": [float(v) for v in curve],
        "peak_slot": int(curve.argmax()) + 1,
        "lowest_slot": int(curve.argmin()) + 1,
        "delta_x1000": float((curve.max() - curve.min()) * 1000),
        "sets": int(cosines.shape[0]),
    }


def dump_effect(encoder: PosFairEncoder, texts: Sequence[str], *, prompt: str = "") -> dict:
    """Final-layer norms of [CLS], [DUMP] and stopword tokens, and stopwords' last-layer attention to them.

    Attention probabilities are read from an eager copy of the model (SDPA never forms them); it shares
    the weights' files, not the encoder's modules.
    """
    from transformers import AutoModel

    eager = AutoModel.from_pretrained(encoder.model_name, attn_implementation="eager", dtype=torch.float32).eval()
    dumps = dump_token_ids(encoder.tokenizer)
    norms: dict[str, list] = {"cls": [], "dump": [], "stopword": []}
    to_cls, to_dump = [], []
    for text in texts:
        batch = encoder.tokenizer(prompt + text, truncation=True, max_length=encoder.max_length, return_tensors="pt")
        ids = batch["input_ids"][0].tolist()
        with torch.inference_mode():
            output = eager(**batch, output_attentions=True)
        hidden = output.last_hidden_state[0].float()
        attention = output.attentions[-1][0].float().mean(dim=0)  # [K, K], heads averaged
        dump_positions = [i for i, t in enumerate(ids) if t in dumps]
        stop_positions = [
            i
            for i, t in enumerate(ids)
            if t not in dumps and encoder.tokenizer.decode([t]).strip().lower() in STOPWORDS
        ]
        norms["cls"].append(float(hidden[0].norm()))
        norms["dump"] += [float(hidden[i].norm()) for i in dump_positions]
        norms["stopword"] += [float(hidden[i].norm()) for i in stop_positions]
        if stop_positions:
            rows = attention[stop_positions]
            to_cls.append(float(rows[:, 0].mean()))
            if dump_positions:
                to_dump.append(float(rows[:, dump_positions].sum(dim=1).mean()))
    return {
        "mean_norm": {kind: (float(np.mean(values)) if values else None) for kind, values in norms.items()},
        "stopword_attention": {
            "to_cls": float(np.mean(to_cls)) if to_cls else None,
            "to_dump": float(np.mean(to_dump)) if to_dump else None,
        },
        "dump_tokens": len(dumps),
        "texts": len(texts),
    }
