"""Whether Ray Data is installed, checked without importing it, and the one message that says how to get it."""

from __future__ import annotations

import importlib.util

RAY_INSTALL_HINT = "pip install 'posfair-llamaindex[ray]'"
RAY_MISSING = f"scale-out ingestion runs on Ray Data, which is not installed: {RAY_INSTALL_HINT}"


def ray_available() -> bool:
    """True when ``ray.data`` can be imported (nothing is imported to find out)."""
    try:
        return importlib.util.find_spec("ray") is not None and importlib.util.find_spec("ray.data") is not None
    except (ImportError, ValueError):  # a broken or half-installed ray
        return False


def require_ray() -> None:
    """Raise :class:`ImportError` naming the extra to install when Ray Data is missing."""
    if not ray_available():
        raise ImportError(RAY_MISSING)
