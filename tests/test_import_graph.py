"""One import direction and only public names across files, read from the source (``ast``; nothing is imported).

Every ``import`` in ``gma_teach``, at module level or inside a function, is an edge from the importing module to
the module it names (``from pkg import name`` is an edge to the submodule ``pkg.name`` when that is a module, else
to ``pkg`` itself, which for the top package is its ``__init__``). One exception: taking a ``__dunder__`` such as
``__version__`` from the top package reads a fact about the package, not its code, and is no edge.

The rules, each a test below:

1. **No cycle between modules**: no module reaches itself through imports, lazy ones included.
2. **No cycle between the package's rooms**: collapse every module to its room, the first name under
   ``gma_teach`` (``gma_teach.plots.routing`` -> ``plots``, ``gma_teach.profiling`` -> ``profiling``; the top
   ``__init__`` is the room ``gma_teach``); no room reaches itself. Importing any module of a room runs the room's
   ``__init__``, which imports its other modules, so a cycle between rooms is a cycle at run time.
3. **Private names stay in their file**: a name with a leading underscore (not a ``__dunder__``) is private to the
   module that defines it. No ``from module import _name`` and no ``module._name`` from another module.
4. **Private modules stay in their package**: a module whose file name starts with an underscore
   (``_checks``, ``_style``, ``_base``, ``_common``, ``kernels/_ops``...) is private to the package that holds it:
   only modules of that package and of its subpackages may import it, and they use its public names (rule 3).
5. **The views never reach the runner**: no module of ``plots`` or ``widgets`` reaches, through any chain of
   imports, a module of the run wing (``gma_teach.runs``) other than its reading modules (:data:`RUN_READERS`), or
   a command module kept at an old path (``gma_teach.study``, ...). Figures read :mod:`gma_teach.stats` and the
   tables; they never train.
6. **Statistics and records are leaves**: ``gma_teach.stats`` and ``gma_teach.records`` import nothing of the
   package above them (:data:`LEAVES` lists what each may import). A leaf that is a package is held to it in every
   module it holds, which may import each other.
7. **Designs are data**: the design room (``gma_teach.designs``, the declared studies) imports nothing above the
   core (:data:`CORE`): no runner, no preset, no record, no view; so a study is read, costed and drawn without
   running anything.

The last test runs the same checks on a small package written for the purpose, so each rule is seen to fail.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gma_teach"


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted
    name: str | None  # the name taken from ``target`` (``from target import name``), or None
    where: str  # file:line, for messages


def find_modules(package_dir: Path, package: str) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file of the package (a package is its ``__init__``)."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join([package, *parts])] = path
    return modules


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute dotted name of a relative import ``from {'.' * level}{target} import ...`` in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def find_edges(modules: dict[str, Path], package: str) -> tuple[list[Edge], list[tuple[str, str, str]]]:
    """Every import edge inside the package, and every ``alias._name`` use of a module alias:
    ``(module, "alias._name", where)``."""
    edges, attributes = [], []
    top = modules[package].parent.parent  # the folder that holds the package
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        aliases: dict[str, str] = {}  # local name -> imported package module
        for node in ast.walk(tree):
            where = f"{path.relative_to(top)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package or alias.name.startswith(package + "."):
                        target = alias.name
                        while target not in modules and "." in target:
                            target = target.rsplit(".", 1)[0]
                        edges.append(Edge(module, target, None, where))
                        aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else package
            elif isinstance(node, ast.ImportFrom):
                origin = _resolve(module, is_package, node.level, node.module)
                if not (origin == package or origin.startswith(package + ".")):
                    continue
                for alias in node.names:
                    submodule = f"{origin}.{alias.name}"
                    if origin == package and alias.name.startswith("__") and alias.name.endswith("__"):
                        continue  # package metadata (__version__), not code
                    if submodule in modules:
                        edges.append(Edge(module, submodule, None, where))
                        aliases[alias.asname or alias.name] = submodule
                    else:
                        edges.append(Edge(module, origin, alias.name, where))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _is_private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.value.id != "self"):
                where = f"{path.relative_to(top)}:{node.lineno}"
                attributes.append((module, f"{aliases[node.value.id]}.{node.attr}", where))
    return edges, attributes


def find_cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted: the cycles of the graph."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        if source != target:
            graph.setdefault(source, set()).add(target)
            graph.setdefault(target, set())
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def room(module: str, package: str) -> str:
    """``gma_teach.plots.routing`` -> ``gma_teach.plots``; the top package is its own room."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else package


def describe_cycle(component: list[str], edges: list[Edge], key) -> str:
    members = set(component)
    links = sorted({f"{edge.where} ({edge.source} -> {edge.target})" for edge in edges
                    if key(edge.source) in members and key(edge.target) in members
                    and key(edge.source) != key(edge.target)})
    return " <-> ".join(component) + ":\n    " + "\n    ".join(links)


def module_cycles(edges, package):
    return [describe_cycle(c, edges, lambda m: m) for c in find_cycles([(e.source, e.target) for e in edges])]


def room_cycles(edges, package):
    pairs = [(room(e.source, package), room(e.target, package)) for e in edges]
    return [describe_cycle(c, edges, lambda m: room(m, package)) for c in find_cycles(pairs)]


def private_name_imports(edges, attributes):
    found = [f"{e.where}: {e.source} takes {e.target}.{e.name}" for e in edges
             if e.name is not None and _is_private(e.name) and e.source != e.target]
    found += [f"{where}: {module} uses {name}" for module, name, where in attributes
              if name.rsplit(".", 1)[0] != module]
    return sorted(found)


def private_module_imports(edges):
    found = []
    for edge in edges:
        parts = edge.target.split(".")
        for depth in range(1, len(parts)):
            if _is_private(parts[depth]):
                home = ".".join(parts[:depth])  # the package that holds the private module
                if not (edge.source == home or edge.source.startswith(home + ".")):
                    found.append(f"{edge.where}: {edge.source} imports {edge.target}, private to {home}")
                break
    return sorted(found)


MODULES = find_modules(ROOT / PACKAGE, PACKAGE)
EDGES, ATTRIBUTES = find_edges(MODULES, PACKAGE)


def test_the_package_is_read():
    assert f"{PACKAGE}.measure" in MODULES and f"{PACKAGE}.plots" in MODULES and len(MODULES) > 20


def test_no_cycle_between_modules():
    cycles = module_cycles(EDGES, PACKAGE)
    assert not cycles, "import cycles between modules:\n" + "\n".join(cycles)


def test_no_cycle_between_rooms():
    cycles = room_cycles(EDGES, PACKAGE)
    assert not cycles, "import cycles between the package's rooms:\n" + "\n".join(cycles)


def test_no_private_name_crosses_a_file():
    found = private_name_imports(EDGES, ATTRIBUTES)
    assert not found, "private names used outside their module:\n" + "\n".join(found)


def test_private_modules_stay_in_their_package():
    found = private_module_imports(EDGES)
    assert not found, "private modules imported from outside their package:\n" + "\n".join(found)


RUN_READERS = {"gma_teach.runs", "gma_teach.runs.arm_records", "gma_teach.runs.study_values",
               "gma_teach.runs.tables", "gma_teach.runs.verdicts", "gma_teach.runs.analyses",
               "gma_teach.runs.profile_tables", "gma_teach.runs.recall_tables"}
"""The run wing's modules that only read records: what the views may import."""
COMMAND_MODULES = {"gma_teach.study", "gma_teach.experiments", "gma_teach.profiling", "gma_teach.bench",
                   "gma_teach.record_gpu", "gma_teach.routing_record"}
"""The thin modules at the old paths that the records' commands name (``python -m gma_teach.study``...)."""
VIEWS = ("gma_teach.plots", "gma_teach.widgets")
LEAVES = {"gma_teach.stats": {"gma_teach._checks"}, "gma_teach.records": set()}
"""Each leaf module (or package: its modules too) and the package modules it may import besides its own."""
CORE = {"gma_teach._checks", "gma_teach.gmm", "gma_teach.mixing", "gma_teach.layer"}
"""The core the designs may import (``layer`` holds the routing remedy a design names)."""
DESIGNS = "gma_teach.designs"


def reachable(edges, start: str) -> dict[str, str]:
    """``{module: where the first import on a chain from start to it sits}`` for every module ``start`` reaches."""
    graph: dict[str, list] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
    found, todo = {}, [start]
    while todo:
        for edge in graph.get(todo.pop(), []):
            if edge.target not in found and edge.target != start:
                found[edge.target] = edge.where
                todo.append(edge.target)
    return found


def views_reaching_the_runner(edges, modules, views=VIEWS, readers=RUN_READERS, commands=COMMAND_MODULES,
                              wing="gma_teach.runs"):
    found = []
    for module in sorted(modules):
        if not any(module == view or module.startswith(view + ".") for view in views):
            continue
        for target, where in sorted(reachable(edges, module).items()):
            runner = (target == wing or target.startswith(wing + ".")) and target not in readers
            if runner or target in commands:
                found.append(f"{module} reaches {target} (first step {where})")
    return found


def _inside(module: str, leaf: str) -> bool:
    return module == leaf or module.startswith(leaf + ".")


def leaves_importing_above(edges, leaves=LEAVES):
    found = []
    for e in edges:
        for leaf, allowed in leaves.items():
            if _inside(e.source, leaf) and not _inside(e.target, leaf) and e.target not in allowed:
                found.append(f"{e.where}: {e.source} imports {e.target}")
    return sorted(found)


def test_the_views_never_reach_the_runner():
    assert "gma_teach.runs.study_cli" in MODULES and RUN_READERS <= set(MODULES) and COMMAND_MODULES <= set(MODULES)
    found = views_reaching_the_runner(EDGES, MODULES)
    assert not found, "plots/widgets import the run wing's runner:\n" + "\n".join(found)


def designs_importing_above(edges, room=DESIGNS, core=CORE):
    inside = [e for e in edges if e.source == room or e.source.startswith(room + ".")]
    return sorted(f"{e.where}: {e.source} imports {e.target}" for e in inside
                  if not (e.target == room or e.target.startswith(room + ".")) and e.target not in core)


def test_designs_are_data():
    assert any(name.startswith(DESIGNS) for name in MODULES)
    found = designs_importing_above(EDGES)
    assert not found, "the designs import the package above the core:\n" + "\n".join(found)
    edges = [Edge("p.designs._studies", "p.designs._types", None, "p/designs/_studies.py:1"),
             Edge("p.designs._studies", "p.layer", None, "p/designs/_studies.py:2"),
             Edge("p.designs", "p.presets", None, "p/designs/__init__.py:3")]
    assert designs_importing_above(edges, room="p.designs", core={"p.layer"}) == [
        "p/designs/__init__.py:3: p.designs imports p.presets"]


def test_stats_and_records_are_leaves():
    assert set(LEAVES) <= set(MODULES)
    found = leaves_importing_above(EDGES)
    assert not found, "stats/records import the package above them:\n" + "\n".join(found)


def test_the_view_and_leaf_rules_catch_what_they_forbid():
    edges = [Edge("p.plots.figure", "p.runs.tables", None, "p/plots/figure.py:1"),
             Edge("p.runs.tables", "p.stats", None, "p/runs/tables.py:1"),
             Edge("p.widgets.explorer", "p.helpers", None, "p/widgets/explorer.py:1"),
             Edge("p.helpers", "p.runs.arm", None, "p/helpers.py:3"),
             Edge("p.plots.other", "p.study", None, "p/plots/other.py:2"),
             Edge("p.stats", "p._checks", None, "p/stats/__init__.py:1"),
             Edge("p.stats", "p.stats._power", None, "p/stats/__init__.py:2"),
             Edge("p.stats._power", "p.stats._tests", None, "p/stats/_power.py:1"),
             Edge("p.stats._power", "p.layer", None, "p/stats/_power.py:2"),
             Edge("p.statsbook", "p.layer", None, "p/statsbook.py:1"),
             Edge("p.records", "p.layer", None, "p/records.py:4")]
    modules = {"p.plots.figure", "p.plots.other", "p.widgets.explorer", "p.helpers", "p.runs.tables", "p.runs.arm",
               "p.stats", "p.stats._power", "p.stats._tests", "p.statsbook", "p.study", "p.records", "p.layer",
               "p._checks"}
    found = views_reaching_the_runner(edges, modules, views=("p.plots", "p.widgets"), readers={"p.runs.tables"},
                                      commands={"p.study"}, wing="p.runs")
    assert found == ["p.plots.other reaches p.study (first step p/plots/other.py:2)",
                     "p.widgets.explorer reaches p.runs.arm (first step p/helpers.py:3)"], found
    assert leaves_importing_above(edges, {"p.stats": {"p._checks"}, "p.records": set()}) == [
        "p/records.py:4: p.records imports p.layer", "p/stats/_power.py:2: p.stats._power imports p.layer"]


FAKE = {
    "__init__.py": "__version__ = '1.0'\nfrom .a import run\nfrom .f import version\n",
    "f.py": "def version():\n    from . import __version__  # metadata: no edge\n    return __version__\n",
    "a.py": "from . import b\n\ndef run():\n    return b.helper()\n\n_hidden = 1\n",
    "b.py": "def helper():\n    from .a import run  # lazy, still a cycle\n    return run\n",
    "c.py": "from .a import _hidden\nfrom . import a\nvalue = a._hidden\n",
    "views/__init__.py": "from ._style import COLORS\nfrom .figure import draw\n",
    "views/_style.py": "COLORS = {}\n",
    "views/figure.py": "from ._style import COLORS\nfrom ..d import measure_it\n\ndef draw():\n    return COLORS\n",
    "d.py": "from .views._style import COLORS\n\ndef measure_it():\n    from .views import draw\n    return draw\n",
    "e.py": "import fakepkg.views.figure as figure\nimport numpy\nfrom .views.figure import draw\n",
}


@pytest.fixture
def fake_package(tmp_path):
    for name, text in FAKE.items():
        path = tmp_path / "fakepkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return find_modules(tmp_path / "fakepkg", "fakepkg")


def test_each_rule_catches_what_it_forbids(fake_package):
    assert set(fake_package) == {"fakepkg", "fakepkg.a", "fakepkg.b", "fakepkg.c", "fakepkg.d", "fakepkg.e",
                                 "fakepkg.f", "fakepkg.views", "fakepkg.views._style", "fakepkg.views.figure"}
    edges, attributes = find_edges(fake_package, "fakepkg")
    cycles = module_cycles(edges, "fakepkg")
    assert any(text.startswith("fakepkg.a <-> fakepkg.b") for text in cycles), cycles  # the lazy import counts
    assert any("fakepkg.d" in text and "fakepkg.views.figure" in text for text in cycles), cycles
    assert not any("fakepkg.f" in text for text in cycles), cycles
    rooms = room_cycles(edges, "fakepkg")
    assert any(text.startswith("fakepkg.d <-> fakepkg.views") for text in rooms), rooms
    private = private_name_imports(edges, attributes)
    assert len(private) == 2 and "takes fakepkg.a._hidden" in private[0] + private[1], private
    assert any("uses fakepkg.a._hidden" in text for text in private), private
    modules = private_module_imports(edges)
    assert modules == ["fakepkg/d.py:1: fakepkg.d imports fakepkg.views._style, private to fakepkg.views"], modules
    assert not any(edge.target == "numpy" for edge in edges)
    assert Edge("fakepkg.e", "fakepkg.views.figure", None, "fakepkg/e.py:1") in edges
