"""Imports point one way, in the package as it is installed: no cycle, and no core module imports an edge.

In the source tree `installers/` is a top-level folder; installed, it is `retained.installers`, and
only there do `from .. import native` in a host module and `from .installers import ...` in the core
name the same modules. So the graph is read from a real (non-editable) install of this tree into a
temporary folder, built once per test session.

The edges are the modules that face a user or a host (the command line, the server, the web page, the
hook runner, the installers and the host registry): they may ask the registry and pass what it says
into the core. Every other module of the package is core, a new one included.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EDGES = ("retained.installers", "retained.cli", "retained.server", "retained.transport", "retained.tools",
         "retained.instructions",
         "retained.stdio_guard", "retained.ui", "retained.team_cli",
         "retained.hook", "retained.entry", "retained.__main__")
# The registry imports every module of its package by name (importlib), which no import statement shows.
REGISTRY = "retained.installers.hosts"


def is_edge(module: str) -> bool:
    return any(module == e or module.startswith(e + ".") for e in EDGES)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """This tree installed as users get it (a wheel build, not an editable link), in a temporary folder."""
    work = tmp_path_factory.mktemp("installed")
    src = work / "src"
    # A copy, so the build leaves nothing (build/, stale files) in the working tree.
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                             "__pycache__", ".pytest_cache", "tests", "bench"))
    target = work / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                           "--disable-pip-version-check", "--target", str(target), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (target / "retained" / "installers" / "hosts" / "__init__.py").exists()
    return target


def modules_of(site: Path) -> dict[str, Path]:
    """Every module of the installed package, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((site / "retained").rglob("*.py")):
        parts = list(path.relative_to(site).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST, hints: bool = False):
    """Every import statement, at any depth (function-local ones too), except under `if TYPE_CHECKING:`
    (unless `hints`: the imports type hints name count too)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test) and not hints:
                stack.extend(child.orelse)  # the else branch runs
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def imports_of(name: str, path: Path, known: dict[str, Path], hints: bool = False) -> set[str]:
    """The package's own modules that module `name` imports (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text("utf-8"), str(path)), hints):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                assert len(base_parts) == len(package.split(".")) - (node.level - 1) and base_parts, \
                    f"{name}: relative import beyond the package"
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` the module mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:  # `import retained.x.y` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    if name == REGISTRY:
        out |= {m for m in known if m.rpartition(".")[0] == REGISTRY and not m.rpartition(".")[2].startswith("_")}
    return out


def import_graph(site: Path, hints: bool = False) -> dict[str, set[str]]:
    known = modules_of(site)
    return {name: imports_of(name, path, known, hints) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def a_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One shortest cycle through the component's first module, as the path of imports that closes it."""
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & set(component)):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return component


def core_to_edge(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in graph.items() if not is_edge(m)
                  for t in targets if is_edge(t))


def test_the_installed_package_has_no_import_cycle(installed):
    graph = import_graph(installed)
    assert len(graph) > 30 and REGISTRY in graph and "retained.native" in graph
    assert graph[REGISTRY] >= {f"{REGISTRY}.claude", f"{REGISTRY}.cursor"}  # what the registry loads
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(
        f"{' -> '.join(a_cycle(c, graph))} (in a knot of {len(c)} modules: {', '.join(c)})" for c in found)


def test_no_core_module_imports_an_edge(installed):
    graph = import_graph(installed)
    core = [m for m in graph if not is_edge(m)]
    assert {"retained.native", "retained.project", "retained.brief", "retained.store"} <= set(core)
    bad = core_to_edge(graph)
    assert not bad, "core modules importing the edges (pass host facts as arguments instead):\n" + "\n".join(bad)


def test_the_graph_sees_relative_local_imports_and_skips_type_checking(tmp_path):
    """The reader itself: a planted cycle through a function-local relative import is found, a core module
    importing an edge is named, and an import under TYPE_CHECKING counts for neither."""
    pkg = tmp_path / "retained"
    (pkg / "installers" / "hosts").mkdir(parents=True)
    for init in (pkg, pkg / "installers", pkg / "installers" / "hosts"):
        (init / "__init__.py").write_text("")
    (pkg / "project.py").write_text("def f():\n    from .installers.hosts import x\n")
    (pkg / "installers" / "hosts" / "one.py").write_text("from ... import project\n")
    (pkg / "records.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import cli\n")
    (pkg / "cli.py").write_text("import retained.records\n")
    graph = import_graph(tmp_path)
    assert graph["retained.project"] == {"retained.installers.hosts"}
    assert graph["retained.installers.hosts"] == {"retained.installers.hosts.one"}
    assert cycles(graph) == [["retained.installers.hosts", "retained.installers.hosts.one", "retained.project"]]
    assert core_to_edge(graph) == ["retained.project imports retained.installers.hosts"]
    assert graph["retained.records"] == set() and graph["retained.cli"] == {"retained.records"}


def layers_of_the_architecture_page() -> list[tuple[str, list[str]]]:
    """docs/ARCHITECTURE.md's layers, lowest first: (name, [a module, or a package's prefix "retained.x."])."""
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = page.split("## The layers", 1)[1].split("\n## ", 1)[0]
    found = []
    for name, line in re.findall(r"^\d+\. \*\*(.+?)\*\* — (.+)$", section, re.M):
        names = []
        for path in re.findall(r"`([\w./]+)`", re.sub(r"\([^)]*\)", "", line)):  # not the asides
            folder = path.endswith("/")
            dotted = path.removesuffix(".py").removesuffix("/").replace("/", ".").removesuffix(".__init__")
            dotted = dotted if dotted.startswith("retained") else f"retained.{dotted}"
            names += [dotted, dotted + "."] if folder else [dotted]
        found.append((name, names))
    return found


def layer_index(module: str, layers: list[tuple[str, list[str]]]) -> int | None:
    for i, (_, names) in enumerate(layers):
        if any(module == n or (n.endswith(".") and module.startswith(n)) for n in names):
            return i
    return None


def imports_below(graph: dict[str, set[str]], layers: list[tuple[str, list[str]]]) -> list[str]:
    """Each import of a module in a higher layer than the importer's, and each module no layer places."""
    bad = sorted(f"{m} is in no layer of docs/ARCHITECTURE.md" for m in graph if layer_index(m, layers) is None)
    for m, targets in sorted(graph.items()):
        mine = layer_index(m, layers)
        for t in sorted(targets):
            theirs = layer_index(t, layers)
            if mine is not None and theirs is not None and theirs > mine:
                bad.append(f"{m} ({layers[mine][0]}) imports {t} ({layers[theirs][0]})")
    return bad


def test_no_module_imports_above_its_layer(installed):
    """The layers docs/ARCHITECTURE.md names are the code's: every module is in one, and none imports a
    module of a higher layer, a function-level import included."""
    layers = layers_of_the_architecture_page()
    assert [n for n, _ in layers][:2] == ["foundations", "the log"] and len(layers) >= 8
    bad = imports_below(import_graph(installed), layers)
    assert not bad, "imports against the layers of docs/ARCHITECTURE.md:\n" + "\n".join(bad)


def test_the_layer_check_names_an_import_upward_and_a_module_no_layer_places():
    """The check above is not vacuous."""
    layers = [("low", ["retained", "retained.records"]), ("high", ["retained.store", "retained.index", "retained.index."])]
    graph = {"retained": set(), "retained.records": {"retained.index.kept"}, "retained.store": {"retained.records"},
             "retained.index.kept": set(), "retained.stray": set()}
    assert imports_below(graph, layers) == ["retained.stray is in no layer of docs/ARCHITECTURE.md",
                                            "retained.records (low) imports retained.index.kept (high)"]


# Type hints that still point against the layers or close a knot, each with why; the test below fails
# when one of them is gone, so that it leaves this list too.
HINTS_AGAINST_THE_GRAIN = {
    # A host builds its file plans (base.py), and a plan names the hosts that want it.
    "knot: retained.installers.base, retained.installers.host",
}


def test_type_hints_point_the_way_imports_do(installed):
    """Issue 31: a module takes what it needs, so even its type hints (imports under TYPE_CHECKING) name
    no module of a higher layer and close no import cycle: forget, ranking and reads take the index,
    the appender and the semantic tier, never the Store that calls them; team memory's share names the
    store only by the calls it makes (a Protocol of its own)."""
    graph = import_graph(installed, hints=True)
    assert "retained.store" not in graph["retained.forget"] | graph["retained.ranking"] | graph["retained.reads"] \
        | graph["retained.team.share"]
    found = {line for line in imports_below(graph, layers_of_the_architecture_page()) if "in no layer" not in line}
    found |= {"knot: " + ", ".join(c) for c in cycles(graph)}
    assert found - HINTS_AGAINST_THE_GRAIN == set(), "type hints against the layers, or closing a cycle:\n" + \
        "\n".join(sorted(found - HINTS_AGAINST_THE_GRAIN))
    assert found >= HINTS_AGAINST_THE_GRAIN, f"mended, so drop from the list: {HINTS_AGAINST_THE_GRAIN - found}"


def test_the_hint_graph_sees_what_the_import_graph_skips(tmp_path):
    """The reader with hints on: an import under TYPE_CHECKING counts, one that runs counts as before."""
    pkg = tmp_path / "retained"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "forget.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .store import Store\n")
    (pkg / "store.py").write_text("def f():\n    from . import forget\n")
    assert import_graph(tmp_path)["retained.forget"] == set()
    hinted = import_graph(tmp_path, hints=True)
    assert hinted["retained.forget"] == {"retained.store"} and hinted["retained.store"] == {"retained.forget"}
    assert cycles(hinted) == [["retained.forget", "retained.store"]]
