"""The shape of the package: imports flow one way, and the command line sits on top of the library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import posfair_llamaindex

PACKAGE = "posfair_llamaindex"
ROOT = Path(posfair_llamaindex.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict:
    """``{module: {package modules it imports}}``, counting imports inside functions too."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        edges = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative import
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # "from package import submodule" imports the submodule
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names
                ]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def cycles(graph: dict) -> list:
    """Every import cycle, as a list of modules; the package's own ``__init__`` re-exports are not cycles."""
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt == PACKAGE:  # every submodule import runs the package __init__ first; that is not a cycle
                continue
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_walk_sees_the_package():
    graph = import_graph()
    assert {"posfair_llamaindex.cli", "posfair_llamaindex.qdrant.store", "posfair_llamaindex.eval.runner"} <= set(graph)
    assert "posfair_llamaindex.embedding" in graph["posfair_llamaindex.qdrant.collection"]


def test_cycle_detection_works_on_a_known_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_library_never_imports_the_command_line():
    graph = import_graph()
    offenders = {
        m: sorted(e)
        for m, e in graph.items()
        if not m.startswith(f"{PACKAGE}.cli") and any(t.startswith(f"{PACKAGE}.cli") for t in e)
    }
    assert offenders == {}


def test_the_distributed_package_sits_on_top_and_ray_stays_inside_it():
    """Only the command line imports ``distributed/``; only ``distributed/`` imports Ray (an optional extra)."""
    graph = import_graph()
    distributed, cli = f"{PACKAGE}.distributed", f"{PACKAGE}.cli"
    assert f"{PACKAGE}.ingest" in graph[f"{distributed}.actors"]  # the walk sees the package's edges
    offenders = {
        m: sorted(t for t in e if t.startswith(distributed))
        for m, e in graph.items()
        if not m.startswith((distributed, cli)) and any(t.startswith(distributed) for t in e)
    }
    assert offenders == {}
    importing_ray = []
    for path in ROOT.rglob("*.py"):
        if module_name(path).startswith(distributed):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name == "ray" or name.startswith("ray.") for name in names):
                importing_ray.append(module_name(path))
    assert importing_ray == []


def test_low_level_modules_do_not_reach_up():
    """The math and the config know nothing about models, LlamaIndex, Qdrant or evaluation."""
    graph = import_graph()
    for low in ("options", "tag", "config", "calibration"):
        reachable, todo = set(), [f"{PACKAGE}.{low}"]
        while todo:
            for nxt in graph[todo.pop()] - reachable - {PACKAGE}:
                reachable.add(nxt)
                todo.append(nxt)
        assert reachable <= {f"{PACKAGE}.{m}" for m in ("options", "tag", "config")}, (low, reachable)


def test_importing_the_package_does_not_touch_the_matplotlib_backend():
    # read the raw rcParams entry: matplotlib.get_backend() would itself import pyplot and resolve a backend
    code = (
        "import matplotlib; raw = lambda: dict.__getitem__(matplotlib.rcParams, 'backend'); before = raw(); "
        "import posfair_llamaindex, posfair_llamaindex.plots, posfair_llamaindex.eval.report, posfair_llamaindex.cli; "
        "import sys; assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'; "
        "assert raw() == before, (before, raw())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_public_api_is_what_all_lists():
    for name in posfair_llamaindex.__all__:
        assert hasattr(posfair_llamaindex, name), name
    assert "tagged_vector_store" in posfair_llamaindex.__all__
    from posfair_llamaindex.attention import CalibrationPlan, posfair_attention  # noqa: F401
    from posfair_llamaindex.calibration import RowLayout, calibrate_rows  # noqa: F401


def reachable_from(graph: dict, module: str) -> set:
    found, todo = set(), [module]
    while todo:
        for nxt in graph[todo.pop()] - found - {PACKAGE}:
            found.add(nxt)
            todo.append(nxt)
    return found


def test_the_two_doors_into_attention_sit_side_by_side():
    """The registered function and the interception share calibration.py's row math; neither knows the other,
    loading, layer discovery or the encoder. Loading picks a door; the encoder only sees what loading chose."""
    graph = import_graph()
    attention, interception = f"{PACKAGE}.attention", f"{PACKAGE}.interception"
    above = {f"{PACKAGE}.{m}" for m in ("loading", "layers", "encoder", "embedding", "interception")}
    assert reachable_from(graph, attention).isdisjoint(above)
    assert reachable_from(graph, interception).isdisjoint(above - {interception})
    assert f"{PACKAGE}.calibration" in graph[attention] and f"{PACKAGE}.calibration" in graph[interception]
    assert {interception, f"{PACKAGE}.layers", attention} <= graph[f"{PACKAGE}.loading"]
    assert f"{PACKAGE}.loading" in graph[f"{PACKAGE}.encoder"]
    assert interception not in graph[f"{PACKAGE}.encoder"]


def test_no_model_module_path_is_named():
    """Layer stacks and attention calls are found by structure; no family's module path is written down."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        for needle in ("transformers.models.", ".encoder.layer", ".layers[", "self_attn", ".attention.self"):
            if needle in text:
                offenders.append((module_name(path), needle))
    assert offenders == []
