"""The suite's grouping on pytest-xdist workers (conftest.py) takes effect: a file runs whole on one worker.

xdist reads a group only from the suffix it writes into the test id; when a pytest release stores ids elsewhere, the
groups vanish without an error and module fixtures, Ray clusters and kernel builds run once per worker."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def loadgroup(request):
    if "PYTEST_XDIST_WORKER" not in os.environ or not request.config.getvalue("loadgroup"):
        pytest.skip("only on pytest-xdist workers with --dist loadgroup (scripts/test.sh)")


def test_this_files_tests_carry_its_group_in_their_ids(loadgroup, request):
    assert request.node.nodeid.endswith("@tests/test_workers.py"), request.node.nodeid


def root_conftest(config):
    """The suite's conftest.py, as pytest loaded it (`import conftest` could find a nested one of the same name)."""
    return config.pluginmanager.get_plugin(str(config.rootpath / "conftest.py"))


def test_a_ray_test_carries_the_ray_group(loadgroup, request):
    group = root_conftest(request.config).RAY_GROUP
    ray_ids = [item.nodeid for item in request.session.items if "ray_cluster" in item.fixturenames]
    if not ray_ids:
        pytest.skip("no test that uses the Ray cluster was collected")
    assert all(nodeid.endswith(f"@{group}") for nodeid in ray_ids), ray_ids[:3]


def test_the_heavy_groups_are_collected_first(loadgroup, request):
    suite = root_conftest(request.config)
    group_of, is_heavy = suite.group_of, suite.is_heavy
    items = request.session.items
    heavy_groups = {group_of(item) for item in items if is_heavy(item)}
    files = {item.nodeid.split("::")[0] for item in items}
    for marked in ("tests/calibration/kernel/test_fused_kernel.py", "integration_tests/test_cli.py"):
        assert marked not in files or marked in heavy_groups, marked
    flags = [group_of(item) in heavy_groups for item in items]
    assert flags == sorted(flags, reverse=True), "a test of a heavy group is collected after a light one"
