"""Qdrant Edge's Python binding, imported in this one place.

Every ``edge_*`` module takes ``edge`` from here, so a machine without the engine gets one ImportError that says
what to install, whichever of them is imported first.
"""

from __future__ import annotations

# the release this package is built and tested against (pyproject pins it: its API moves between releases)
EDGE_REQUIREMENT = "qdrant-edge-py==0.9.0"

try:
    import qdrant_edge as edge
except ImportError as missing:  # say what to install
    raise ImportError(
        f"EdgeQdrantClient runs Qdrant Edge in-process and needs qdrant-edge-py: pip install '{EDGE_REQUIREMENT}'"
    ) from missing

__all__ = ["EDGE_REQUIREMENT", "edge"]
