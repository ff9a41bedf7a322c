"""Shared fixtures: the offline all-MiniLM-L6-v2 and tiny random models saved as local folders."""

from __future__ import annotations

import pytest

from tests.utils import minilm_path, save_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Factory: the folder of a tiny model of a family and pooling, built once per session."""
    built = {}

    def make(family: str, pooling: str | None = None) -> str:
        key = (family, pooling)
        if key not in built:
            built[key] = save_tiny_model(family, tmp_path_factory.mktemp(f"{family}-{pooling}"), pooling)
        return built[key]

    return make


@pytest.fixture(scope="session")
def minilm() -> str:
    return minilm_path()


@pytest.fixture(scope="session")
def two_kernel_builds(tmp_path_factory):
    """One fresh kernel cache and two processes started at once that both need the compiled kernel there: the
    cache folder and what each child reported. Built once per session; the tests of the cache share it."""
    from tests.calibration.kernel import kernel_builds

    if not kernel_builds.HAS_COMPILER:
        pytest.skip(kernel_builds.NO_COMPILER)
    root = tmp_path_factory.mktemp("kernel-cache")
    children = [kernel_builds.start(root) for _ in range(2)]
    try:
        return root, [kernel_builds.finish(child) for child in children]
    finally:
        kernel_builds.kill_all(children)


@pytest.fixture(scope="session")
def warm_python():
    """Scripts in forked children of a Python that has imported the model stack once (tests/warm_python.py)."""
    from tests.warm_python import WarmPython

    return WarmPython.shared()  # one for the session, closed when it ends (tests/warm_python.py)
