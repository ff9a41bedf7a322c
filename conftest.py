"""How the suite shares a machine's cores: its torch threads, and its pytest-xdist workers (scripts/test.sh runs one
per core).

Each test file goes to one worker whole, so its module fixtures are built once; every test that needs the Ray
cluster goes to the same worker, so one cluster starts. A worker keeps to one torch thread, and the children
it starts inherit that, so two workers never fight over two cores."""

from __future__ import annotations

import os

import pytest
import torch

RAY_GROUP = "ray-cluster"


def in_a_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


# two threads at most; one in a worker, whose neighbour has the other core (its children inherit the variables)
if in_a_worker():
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
torch.set_num_threads(1 if in_a_worker() else max(1, min(2, torch.get_num_threads())))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    if not in_a_worker():
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = RAY_GROUP if "ray_cluster" in item.fixturenames else item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
