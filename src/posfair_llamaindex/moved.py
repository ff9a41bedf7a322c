"""Old module paths, kept working for one release after the package was laid out by layer.

A finder at the front of ``sys.meta_path`` answers each old dotted name with the module that now lives at the new
one (the same object, so ``mock.patch`` on an old path patches the real thing), after a DeprecationWarning that
names the new path. sentence-transformers eased its own module moves the same way.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Optional

_P = "posfair_llamaindex"

# old dotted path -> new dotted path. The old ``posfair_llamaindex.calibration`` (the row math) is now the name of
# a package; calibration/__init__.py answers its old names.
MOVED_MODULES: dict[str, str] = {
    f"{_P}.{old}": f"{_P}.{new}"
    for old, new in {
        "config": "calibration.config",
        "basket_attention": "calibration.basket_attention",
        "fused_kernel": "calibration.kernel.fused_kernel",
        "kernel_cache": "calibration.kernel.kernel_cache",
        "loading": "model.loading",
        "layers": "model.layers",
        "interception": "model.interception",
        "attention": "model.attention",
        "remote_code": "model.remote_code",
        "weights_fit": "model.weights_fit",
        "model_files": "model.model_files",
        "prompts": "model.prompts",
        "pooling": "model.pooling",
        "encoder": "encoding.encoder",
        "sea": "encoding.sea",
        "windows": "encoding.windows",
        "ingest": "jobs.ingest",
        "upgrade": "qdrant.upgrade",
        "plots": "eval.plots",
        "eval.windows": "eval.window_vectors",
        "eval.data": "eval.benchmark_data",
        "train.data": "train.training_pairs",
        "qdrant.layout": "qdrant.vector_layout",
        "cli.options": "cli.arguments",
        "cli.store": "cli.store_commands",
        "cli.audit": "cli.audit_command",
        "cli.train": "cli.finetune_command",
        "cli.kernel": "cli.kernel_command",
        "cli.upgrade": "cli.upgrade_command",
        "distributed": "jobs.distributed",
        "distributed.actors": "jobs.distributed.actors",
        "distributed.defaults": "jobs.distributed.defaults",
        "distributed.layout": "jobs.distributed.store_layout",
        "distributed.lookup": "jobs.distributed.lookup",
        "distributed.pipeline": "jobs.distributed.pipeline",
        "distributed.requirements": "jobs.distributed.requirements",
        "distributed.rows": "jobs.distributed.rows",
        "distributed.settings": "jobs.distributed.ray_settings",
        "distributed.sink": "jobs.distributed.sink",
        "distributed.upgrade": "jobs.distributed.ray_upgrade",
        "distributed.writer": "jobs.distributed.writer",
    }.items()
}


def warn_moved(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(
        f"{old} has moved to {new}; import it from there (the old path will be removed in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _AliasLoader(importlib.abc.Loader):
    """Hands the import system the module already loaded under its new name, and leaves that module untouched."""

    def __init__(self, new: str) -> None:
        self.new = new
        self._real_spec = None

    def create_module(self, spec) -> ModuleType:
        module = importlib.import_module(self.new)
        self._real_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._real_spec  # the import system stamped the old name's spec on it; put the real one back


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path=None, target=None) -> Optional[importlib.machinery.ModuleSpec]:
        new = MOVED_MODULES.get(fullname)
        if new is None:
            return None
        warn_moved(fullname, new, stacklevel=4)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    """Put the finder in front of the path finder (once), so an old name never loads a second copy of a module."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
