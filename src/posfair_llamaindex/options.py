"""The choice sets of the package, each defined once.

Types, validation and the command line's ``choices`` all derive from these, so adding a pooling, a variant
or a mode is a one-line change here.
"""

from __future__ import annotations

from typing import Literal, get_args

Pooling = Literal["first", "last", "mean"]
Variant = Literal["uniform", "cls_soft", "cls_hard"]
Mode = Literal["calibrated", "plain", "sea", "dual", "windows"]
Fusion = Literal["max", "rrf", "sum"]
DType = Literal["float32", "float16", "bfloat16"]
ChunkerKind = Literal["semantic", "sentence", "recursive", "token"]
# what a windows collection stores beside its windows: the document vector(s) of another mode, or nothing
WindowDocument = Literal["plain", "calibrated", "dual", "none"]
# where the evaluation's window vectors come from: windows mode itself, late chunking, or LlamaIndex nodes
WindowSource = Literal["windows", "late", "nodes"]
PaddingSide = Literal["right", "left"]
# which token limit applies when max_length is not a number: the model card's (sentence-transformers'
# max_seq_length, what SentenceTransformer.encode and LlamaIndex's HuggingFaceEmbedding truncate at) or the
# most the model's positions allow
LengthLimit = Literal["model_card", "positions"]
# the audit's pseudo-query designs; drop-words first, the default (RESULTS.md §6.1)
AuditDesign = Literal["drop-words", "ict"]
# how a collection keeps a dense vector: as floats, or quantized in RAM, originals on disk (qdrant/vector_storage.py)
StorageType = Literal["float32", "float16", "int8", "binary"]

POOLINGS: tuple = get_args(Pooling)
VARIANTS: tuple = get_args(Variant)
MODES: tuple = get_args(Mode)
FUSIONS: tuple = get_args(Fusion)
DTYPES: tuple = get_args(DType)
CHUNKERS: tuple = get_args(ChunkerKind)
WINDOW_DOCUMENTS: tuple = get_args(WindowDocument)
WINDOW_SOURCES: tuple = get_args(WindowSource)
PADDING_SIDES: tuple = get_args(PaddingSide)
AUDIT_DESIGNS: tuple = get_args(AuditDesign)
STORAGE_TYPES: tuple = get_args(StorageType)
LENGTH_LIMITS: tuple = get_args(LengthLimit)
# the limit when none is given (docs/RESULTS.md §5)
DEFAULT_LENGTH_LIMIT: LengthLimit = "positions"
# what windows mode keeps beside its windows when not told (docs/RESULTS.md §4.5: windows alone)
DEFAULT_WINDOW_DOCUMENT: WindowDocument = "none"

# padded tokens per forward pass (rows x the longest row) when none is given: on two CPU cores passes past about 4,096
# tokens get slower, and 4,096 was within 3 % of the fastest budget for plain 512-token texts and 128-token windows
# alike (docs/RESULTS.md §8.9; benchmarks/bench_batch_tokens.py)
DEFAULT_BATCH_TOKENS = 4096

# SEA's chunk size when none is given: the paper's basket size, so SEA and calibration share a granularity
DEFAULT_CHUNK_TOKENS = 128

# Reciprocal-rank fusion constant, as Qdrant counts it: a hit at 0-based rank r adds 1 / (RRF_K + r)
RRF_K = 60

# the calibrated strengths a position audit scores when none are given
AUDIT_STRENGTHS = (0.25, 0.5, 0.75, 1.0)
# with fewer auditable documents than this, a top-10 ranking says little: the audit refuses instead of guessing
AUDIT_MIN_DOCUMENTS = 20
