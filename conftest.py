"""How the suite shares a machine's cores: its torch threads, and its pytest-xdist workers (scripts/test.sh runs one
per core).

Each test file goes to one worker whole, so its module fixtures are built once; every file that uses one of the
costly session fixtures (the Ray cluster, the two concurrent kernel builds) goes to that fixture's worker, so it is
made once. A worker keeps to one torch thread, and the children it starts inherit that, so two workers never fight
over two cores. tests/test_workers.py checks that the groups hold."""

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


# the session fixtures that start a cluster or build a kernel: each file that uses one joins the fixture's group
SHARED_GROUPS = {"ray_cluster": RAY_GROUP, "two_kernel_builds": "kernel-builds"}


# A wrapper, so the groups are set before every plain implementation of the hook, xdist's included: it writes them
# into the test ids, which is all its scheduler reads (pytest 9.2 keeps ids where it no longer writes, hence the pin
# in constraints.txt). The shared groups and the files marked `heavy_group` go first, in their collected order, so
# that no long file starts last while the other worker runs out of work (scripts/test.sh turns off xdist's own
# reordering by test count, which knows nothing of time).
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    if in_a_worker():
        shared = {}
        for item in items:
            for fixture, group in SHARED_GROUPS.items():
                if fixture in item.fixturenames:
                    shared.setdefault(file_of(item), group)
        for item in items:
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(shared.get(file_of(item), file_of(item))))
        heavy = {group_of(item) for item in items if is_heavy(item)}
        items.sort(key=lambda item: group_of(item) not in heavy)  # stable: the collected order within each part
    return (yield)


def file_of(item) -> str:
    return item.nodeid.split("::")[0]


def group_of(item) -> str:
    return item.get_closest_marker("xdist_group").args[0]


def is_heavy(item) -> bool:
    return group_of(item) in SHARED_GROUPS.values() or item.get_closest_marker("heavy_group") is not None
