"""The compiled all-rows kernel (``csrc/basket_pieces.cpp``): built once per machine, on first use.

The pure-PyTorch path of :mod:`posfair_llamaindex.basket_attention` calls a flash kernel once per basket
and pays, per call, for writing and re-reading a full output. The compiled kernel walks the baskets
inside one call. It is optional: without a C++ compiler, or with ``POSFAIR_FUSED_KERNEL=0``, the same
math runs in PyTorch, and a build failure is reported once as a warning, never as an error.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Optional

import torch

ENV_SWITCH = "POSFAIR_FUSED_KERNEL"
SOURCE = Path(__file__).with_name("csrc") / "basket_pieces.cpp"

_lock = threading.Lock()
_loaded: dict = {}  # "module": the extension, or None once a build failed


def enabled() -> bool:
    """False when the environment switches the compiled kernel off (``POSFAIR_FUSED_KERNEL=0``)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def _capability_flags() -> list:
    """Compile for the vector width PyTorch itself dispatches to on this CPU."""
    capability = torch.backends.cpu.get_cpu_capability()
    flags = ["-O3", "-fopenmp"]
    if capability in ("AVX512", "AVX2"):
        flags += ["-march=native", f"-DCPU_CAPABILITY_{capability}", f"-DCPU_CAPABILITY={capability}"]
    return flags


def module():
    """The built extension, or None where it cannot be built (warned about once per process)."""
    if "module" in _loaded:
        return _loaded["module"]
    with _lock:
        if "module" not in _loaded:
            _loaded["module"] = _build()
    return _loaded["module"]


def _build():
    try:
        from torch.utils import cpp_extension

        flags = _capability_flags()
        name = "posfair_basket_pieces_" + torch.backends.cpu.get_cpu_capability().lower()
        return cpp_extension.load(
            name=name, sources=[str(SOURCE)], extra_cflags=flags, extra_ldflags=["-fopenmp"], verbose=False
        )
    except Exception as error:  # no compiler, no ninja, a read-only cache: fall back, say why once
        warnings.warn(
            f"posfair_llamaindex: the compiled all-rows kernel could not be built ({type(error).__name__}: "
            f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}); mean pooling runs the "
            f"PyTorch path, which is exact but slower. Set {ENV_SWITCH}=0 to skip the attempt.",
            RuntimeWarning,
            stacklevel=3,
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
