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


def test_every_file_of_a_shared_session_fixture_carries_its_group(loadgroup, request):
    suite = root_conftest(request.config)
    items = request.session.items
    checked = 0
    for fixture, group in suite.SHARED_GROUPS.items():
        files = {suite.file_of(item) for item in items if fixture in item.fixturenames}
        in_files = [item.nodeid for item in items if suite.file_of(item) in files]
        assert all(nodeid.endswith(f"@{group}") for nodeid in in_files), (fixture, in_files[:3])
        checked += len(in_files)
    if not checked:
        pytest.skip("no test that uses a shared session fixture was collected")


def test_the_heavy_groups_are_collected_first(loadgroup, request):
    suite = root_conftest(request.config)
    group_of = suite.group_of
    items = request.session.items
    heavy_groups = {group_of(item) for item in items if suite.is_heavy(item)}
    for heavy_file in ("tests/calibration/kernel/test_fused_kernel.py", "integration_tests/test_cli.py"):
        groups = {group_of(item) for item in items if suite.file_of(item) == heavy_file}
        assert groups <= heavy_groups, heavy_file
    flags = [group_of(item) in heavy_groups for item in items]
    assert flags == sorted(flags, reverse=True), "a test of a heavy group is collected after a light one"
