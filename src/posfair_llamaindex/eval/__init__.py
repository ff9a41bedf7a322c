"""Position-aware evaluation: benchmarks from the shared data, metrics, runs, sweeps and diagnostics.

Submodules: ``data`` (benchmarks), ``metrics``, ``runner`` (encode and score), ``report`` (markdown, JSON,
charts), ``sweeps`` and ``grids`` (setting sweeps), ``diagnostics`` (per-text inspection).
"""
