"""The changelog's tables are the truth about what 0.2.0 renamed: every old path and name it lists is gone, and every
new one it points to exists, so a later move that forgets the changelog (or the code) fails here."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import posfair_llamaindex
from posfair_llamaindex import errors

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def section(title: str) -> str:
    text = CHANGELOG.read_text(encoding="utf-8")
    start = text.index(f"### {title}\n")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> list[tuple[str, str]]:
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and line.startswith("| `"):
            rows.append((cells[0], cells[1]))
    return rows


def names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


MOVED = [(names(old)[0], names(new)[0]) for old, new in table_rows(section("Moved modules")) if old.count("`") == 2]


def test_the_latest_release_is_the_package_version():
    heading = re.search(r"^## (\S+)", CHANGELOG.read_text(encoding="utf-8"), re.M)
    assert heading is not None and heading.group(1) == posfair_llamaindex.__version__


def test_the_moved_table_lists_every_module_path_of_the_layer_move():
    assert len(MOVED) == 41  # what moved.py mapped
    assert all(old.startswith("posfair_llamaindex.") and new.startswith("posfair_llamaindex.") for old, new in MOVED)


@pytest.mark.parametrize(("old", "new"), MOVED, ids=[old for old, _ in MOVED])
def test_an_old_module_path_is_gone_and_its_new_path_is_there(old, new):
    assert importlib.util.find_spec(new) is not None, f"{new} (the changelog's new path) does not exist"
    try:
        found = importlib.util.find_spec(old)
    except ModuleNotFoundError:  # its parent is gone too (posfair_llamaindex.distributed)
        found = None
    # the old calibration module is now a package of that name; every other old path must not resolve
    assert found is None or old == "posfair_llamaindex.calibration", f"{old} still imports"


def test_the_renamed_errors_exist_only_under_their_new_names():
    rows = table_rows(section("Renamed errors"))
    assert len(rows) == 3
    for old, new in rows:
        (new_name,) = names(new)
        assert issubclass(getattr(errors, new_name), errors.PosFairError)
        assert getattr(posfair_llamaindex, new_name) is getattr(errors, new_name)
        for dotted in names(old):
            module, _, name = dotted.rpartition(".")
            where = {
                "errors": "posfair_llamaindex.errors",
                "upgrade": "posfair_llamaindex.qdrant.upgrade",
                "kernel_cache": "posfair_llamaindex.calibration.kernel.kernel_cache",
            }[module]
            assert not hasattr(importlib.import_module(where), name), f"{dotted} is still there"


def test_the_edge_modules_of_the_split_exist_and_edge_translate_is_gone():
    rows = table_rows(section("Qdrant Edge client split by concern"))
    modules = {name for _, new in rows for name in names(new) if name.startswith("qdrant.edge_")}
    assert modules >= {"qdrant.edge_store", "qdrant.edge_points", "qdrant.edge_filters", "qdrant.edge_queries"}
    for module in modules:
        assert importlib.util.find_spec(f"posfair_llamaindex.{module}") is not None
    assert importlib.util.find_spec("posfair_llamaindex.qdrant.edge_translate") is None
