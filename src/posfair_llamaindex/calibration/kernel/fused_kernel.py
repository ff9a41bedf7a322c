"""The compiled all-rows kernel (``csrc/basket_pieces.cpp``): built once per machine on first use, or ahead of
time with ``posfair kernel build``.

The pure-PyTorch path of :mod:`posfair_llamaindex.calibration.basket_attention` calls a flash kernel once per basket
and pays, per call, for writing and re-reading a full output. The compiled kernel walks the baskets
inside one call. It is optional: without a C++ compiler, or with ``POSFAIR_FUSED_KERNEL=0``, the same
math runs in PyTorch, and a failure is reported once as a warning that names its cause, never as an error.
How it is cached, locked and loaded is :mod:`posfair_llamaindex.calibration.kernel.kernel_cache`'s job.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Optional

import torch

from posfair_llamaindex.calibration.kernel import kernel_cache

ENV_SWITCH = "POSFAIR_FUSED_KERNEL"
SOURCE = Path(__file__).with_name("csrc") / "basket_pieces.cpp"
BASE_NAME = "posfair_basket_pieces"

_lock = threading.Lock()
_loaded: dict = {}  # "module": the extension, or None once it could not be had


def enabled() -> bool:
    """False when the environment switches the compiled kernel off (``POSFAIR_FUSED_KERNEL=0``)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def build_config() -> kernel_cache.KernelBuildConfig:
    """How the kernel is compiled here: for the CPU capability torch dispatches to (``ATEN_CPU_CAPABILITY``
    lowers it), with this compiler, torch and Python."""
    return kernel_cache.spec_for(BASE_NAME, SOURCE)


def build(root: Optional[Path] = None) -> kernel_cache.Built:
    """Load the kernel, building it first where it is not built yet; raises :class:`kernel_cache.KernelBuildError`
    with the cause. ``posfair kernel build`` calls this ahead of time; the switch does not apply."""
    return kernel_cache.load_or_build(build_config(), root)


def module():
    """The built extension, or None where it cannot be had (warned about once per process)."""
    if "module" in _loaded:
        return _loaded["module"]
    with _lock:
        if "module" not in _loaded:
            _loaded["module"] = _load()
    return _loaded["module"]


def _load():
    try:
        return build().module
    except Exception as error:  # no compiler, a read-only cache, a build that outlasted the wait: say why once
        cause = error.cause if isinstance(error, kernel_cache.KernelBuildError) else f"{type(error).__name__}: {error}"
        warnings.warn(
            f"posfair_llamaindex: the compiled all-rows kernel is not available ({cause}); mean pooling runs the "
            f"PyTorch path, which is exact but slower. `posfair kernel build` builds it and prints the whole log "
            f"with --verbose; {ENV_SWITCH}=0 skips the attempt.",
            RuntimeWarning,
            stacklevel=4,
        )
        return None


def available() -> bool:
    """Whether the all-rows path may call :func:`basket_pieces`: switched on, and built (the first call
    builds it). The one place the switch is read."""
    return enabled() and module() is not None


def basket_pieces(query, keys, values, bias: Optional[torch.Tensor], scale: float, basket_size: int) -> list:
    """``[plain over the baskets [N, Q, H, Dv], sum of live basket outputs [N, Q, H, Dv], log-sum-exp over
    the baskets [N, H, Q], live baskets [N, H, Q]]``; call only where :func:`available` said yes."""
    empty = torch.empty(0, dtype=torch.float32)
    return module().basket_pieces(query, keys, values, empty if bias is None else bias, scale, basket_size)
