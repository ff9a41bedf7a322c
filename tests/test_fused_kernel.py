"""The compiled all-rows kernel: built where a compiler exists, used where it applies, and a fallback
(with one warning) where it cannot be built."""

from __future__ import annotations

import shutil
import warnings

import pytest
import torch

from posfair_llamaindex import fused_kernel
from posfair_llamaindex.basket_attention import calibrated_all_rows
from posfair_llamaindex.config import CalibrationConfig
from tests.test_basket_attention import long_case


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler here")
def test_the_compiled_kernel_builds_and_is_used(monkeypatch):
    assert fused_kernel.module() is not None  # a machine with a compiler must not fall back in silence
    calls = []
    real = fused_kernel.basket_pieces

    def recording(*args):
        calls.append(real(*args))
        return calls[-1]

    monkeypatch.setattr(fused_kernel, "basket_pieces", recording)
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "1")
    q, k, v, mask, layout = long_case()
    calibrated_all_rows(q, k, v, mask, 0.25, False, layout, CalibrationConfig(basket_size=32))
    assert len(calls) == 1 and calls[0] is not None
    calls.clear()
    calibrated_all_rows(q, k, v, None, 0.25, True, layout, CalibrationConfig(basket_size=32))  # causal
    calibrated_all_rows(
        q.double(), k.double(), v.double(), mask, 0.25, False, layout, CalibrationConfig(basket_size=32)
    )
    assert calls == []  # masks that differ by row, and other dtypes, take the PyTorch path


def test_a_failed_build_warns_once_and_falls_back(monkeypatch):
    from torch.utils import cpp_extension

    def broken(**_):
        raise RuntimeError("no compiler\nc++: command not found")

    monkeypatch.setattr(cpp_extension, "load", broken)
    monkeypatch.setattr(fused_kernel, "_loaded", {})
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "1")
    q, k, v, mask, layout = long_case()
    config = CalibrationConfig(basket_size=32)
    with pytest.warns(RuntimeWarning, match="c\\+\\+: command not found"):
        fallback = calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config)  # no second warning
    monkeypatch.setenv(fused_kernel.ENV_SWITCH, "0")
    torch.testing.assert_close(fallback, calibrated_all_rows(q, k, v, mask, 0.25, False, layout, config))


def test_the_switch_reads_the_usual_spellings(monkeypatch):
    for value, expected in (("0", False), ("off", False), ("False", False), ("1", True), ("", True)):
        monkeypatch.setenv(fused_kernel.ENV_SWITCH, value)
        assert fused_kernel.enabled() is expected, value
