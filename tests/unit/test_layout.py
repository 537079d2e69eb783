"""The house rules of the library, checked on its source: layers, no import circle, small modules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from ..helpers import REPO

PACKAGE = REPO / "torchbuild"


# Lowest first. A module may import from its own layer or below, never above.
LAYERS = [
    {"errors", "console", "digest"},
    {"run", "locks", "jobserver", "usage"},
    {"config"},
    {"toolchain", "compat", "progress", "diagnose", "wheels"},
    {"git"},
    {"patches", "envs", "demo"},
    {"builder"},
    {"summary", "freshness", "nightly", "bisection"},
    {"doctor", "matrix", "ci", "holdings"},
    {"commands"},
    {"cli"},
    {"buildflags", "warm", "tasks", "noxfile"},
    {"program"},
]


def modules() -> dict[str, Path]:
    """Dotted name (relative to torchbuild) -> file, for every library module but the demo project's."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "demo_project":
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The library modules `name` imports, at any depth of its code (lazy imports count)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("torchbuild"):
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                target = ".".join([*base, alias.name])
                found.add(target if target in known else ".".join(base))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("torchbuild."):
                    found.add(alias.name.split(".", 1)[1])
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def layer(name: str) -> int:
    top = name.split(".")[0] if name else ""
    return next(i for i, group in enumerate(LAYERS) if top in group)


def test_the_checks_read_the_library():
    """A moved test file once read an empty folder and passed: every check below needs the modules found."""
    assert len(modules()) > 50 and "builder.verdict" in modules()


def test_every_module_has_a_layer():
    assert [m for m in modules() if m and not any(m.split(".")[0] in g for g in LAYERS)] == []


def test_no_module_imports_one_above_it():
    upward = [f"{a} -> {b}" for a, targets in graph().items() if a for b in targets if b and layer(b) > layer(a)]
    assert upward == []


def find_cycles(edges: dict[str, set[str]]) -> list[str]:
    """Every import circle met by a depth-first walk, as `a -> b -> a`."""
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                path = stack + [node]
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_import_circle():
    assert find_cycles(graph()) == []


FUNCTION_LINES = 60  # a function read at once; ruff's complexity limits (pyproject.toml) are the ratchet beside it


def test_no_function_is_over_60_lines():
    """Functions, not files, are what must be short: a cap on modules split files and left a 224-line function."""
    long = {f"{name}.{node.name}": node.end_lineno - node.lineno + 1
            for name, path in modules().items() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > FUNCTION_LINES}
    assert long == {}


def test_the_checks_catch_what_issue_14_found():
    """commands.py <-> matrix.py: a circle, and matrix importing the layer above it."""
    edges = {"matrix": {"commands"}, "commands": {"matrix", "config"}, "config": set()}
    assert find_cycles(edges) == ["commands -> matrix -> commands"]
    assert [(a, b) for a, bs in edges.items() for b in bs if layer(b) > layer(a)] == [("matrix", "commands")]


def test_ruff_holds_the_size_and_complexity_ratchet():
    import shutil
    import subprocess

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    done = subprocess.run([ruff, "check", "--select", "C901,PLR0911,PLR0912,PLR0913,PLR0915", str(PACKAGE)],
                          capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stdout
