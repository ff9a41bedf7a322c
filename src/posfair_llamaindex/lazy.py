"""Lazy package exports: a name is imported from its module on first use, then kept in the package.

Packages use this so that ``import posfair_llamaindex`` (and the CLI's first contact with Qdrant) does not
wait for torch, transformers or Ray.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public names live in the modules ``where`` maps."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        vars(sys.modules[package])[name] = value  # found once, then an ordinary attribute
        return value

    def __dir__() -> list:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
