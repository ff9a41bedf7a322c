"""Position-aware evaluation: benchmarks from the shared data, metrics, runs, sweeps, diagnostics and charts."""

from posfair_llamaindex.eval.data import Benchmark, Query, RetrievalTask, nq_oracle, scifact, squad_evidence_moving, squad_longposq
from posfair_llamaindex.eval.metrics import harmonic_mean, ndcg_at_k, position_sensitivity_index, recall_at_k
from posfair_llamaindex.eval.runner import EvalConfig, EvalRun, evaluate

__all__ = [
    "Benchmark",
    "EvalConfig",
    "EvalRun",
    "Query",
    "RetrievalTask",
    "evaluate",
    "harmonic_mean",
    "ndcg_at_k",
    "nq_oracle",
    "position_sensitivity_index",
    "recall_at_k",
    "scifact",
    "squad_evidence_moving",
    "squad_longposq",
]
