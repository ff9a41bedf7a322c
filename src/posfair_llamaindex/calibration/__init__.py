"""The method itself: the calibration config, the row math on attention weights, and the all-rows basket attention.

Nothing here knows about models, LlamaIndex or Qdrant. ``kernel/`` holds the compiled all-rows kernel and the
cache that builds it once per machine.
"""

from __future__ import annotations

from typing import Any

# ``posfair_llamaindex.calibration`` was the row math's module before it became this package; its names still
# answer here for one release, with a DeprecationWarning.
_ROW_MATH_NAMES = ("RowLayout", "calibrate_rows", "IsolatedMasses", "isolated_targets")


def __getattr__(name: str) -> Any:
    if name in _ROW_MATH_NAMES:
        from posfair_llamaindex.calibration import row_math
        from posfair_llamaindex.moved import warn_moved

        warn_moved(f"posfair_llamaindex.calibration.{name}", f"posfair_llamaindex.calibration.row_math.{name}")
        value = globals()[name] = getattr(row_math, name)  # warned once, then an ordinary attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
