"""The layering of ``docs/architecture.md``, read from the code's own imports.

Each package imports only the packages below it (``MAY_IMPORT``), another package only
through its public face (never one of its private modules), and no two files import each
other, directly or in a circle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "reactive_streams"

KIT = {"_core", "api"}
MAY_IMPORT: dict[str, set[str]] = {
    "api": set(),
    "_core": {"api"},
    "_arrow_literals": set(),
    "schedulers": {"_core"},
    "stages": {"_core"},
    "reference": KIT,
    "testing": KIT,
    "tck": KIT,
    "hubs": KIT,
    "adapters": KIT,
    "rsocket": KIT,
    "metrics": KIT,
    "files": KIT | {"_arrow_literals"},
    "operators": KIT | {"adapters"},
    "spark": KIT | {"_arrow_literals", "files", "operators", "rsocket"},
    "pipeline": KIT | {"_arrow_literals", "files", "metrics", "operators", "rsocket", "spark"},
    "cli": KIT | {"__init__", "files", "pipeline", "reference", "rsocket", "tck"},
    "_cli_entry": {"cli"},
    "__main__": {"_cli_entry"},
    "__init__": KIT | {"operators"},
}
"""Which top-level package or module each one may import (``__init__``: the package)."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ["reactive_streams", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports() -> dict[str, set[str]]:
    """Module -> the package modules it imports (under ``TYPE_CHECKING`` too)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            elif node.module and node.module.split(".")[0] == "reactive_streams":
                target = node.module  # an absolute import of the package's own module
            else:
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                edges[name].add(candidate if candidate in MODULES else target)
    return edges


IMPORTS = _imports()


def _top(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_package_imports_only_the_layers_below_it() -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in IMPORTS.items()
        for target in targets
        if _top(target) != _top(module) and _top(target) not in MAY_IMPORT[_top(module)]
    )
    assert wrong == []


def test_no_package_imports_a_private_module_of_another() -> None:
    private = {
        (module, target)
        for module, targets in IMPORTS.items()
        for target in targets
        if _top(target) != _top(module)
        and any(part.startswith("_") for part in target.split(".")[2:])
    }
    assert sorted(private) == []


def test_no_import_cycle_between_files() -> None:
    # Tarjan's strongly connected components over module -> module imports; a package's
    # __init__ re-exporting its own modules is not a cycle of files, so a component
    # counts when it holds two files that are not __init__.
    files = {name for name, path in MODULES.items() if path.name != "__init__.py"}
    graph = {name: {t for t in IMPORTS.get(name, ()) if t in MODULES} for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(files.intersection(component)) > 1:
                cycles.append(sorted(files.intersection(component)))

    for node in sorted(MODULES):
        if node not in index:
            visit(node)
    assert cycles == []


PROLOGUE_ALLOWED: dict[str, str] = {
    "reactive_streams/reference/_subscribers.py": (
        "teaching code: the reference subscribers spell out each rule where it applies "
        "(Rule 2.13 through their own `_check_not_none`, Rule 2.5 in `_handle_subscribe`)"
    ),
    "reactive_streams/tck/_support.py": (
        "the TCK's probe subscriber records a None or second subscription as a failure of "
        "the publisher under test (`env.flop`) before it refuses it"
    ),
}
"""Files that check ``on_subscribe``'s argument themselves, each with the reason."""


def _prologue_copies(path: Path) -> list[str]:
    """Where ``path`` writes the ``on_subscribe`` prologue itself instead of calling the kit.

    A copy is an ``if <x> is None:`` whose body raises ``TypeError`` for ``on_subscribe``,
    a ``"Rule 2.13: on_subscribe..."`` message, or an ``on_subscribe`` that hands its
    argument to a ``*check*`` function of its own.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("Rule 2.13: on_subscribe"):
                found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.FunctionDef) and node.name == "on_subscribe":
            parameter = node.args.args[-1].arg if node.args.args else None
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.If)
                    and isinstance(inner.test, ast.Compare)
                    and isinstance(inner.test.left, ast.Name)
                    and inner.test.left.id == parameter
                    and isinstance(inner.test.ops[0], ast.Is)
                    and any(isinstance(statement, ast.Raise) for statement in inner.body)
                ):
                    found.append(f"line {inner.lineno}: if {parameter} is None: raise")
                elif (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Name)
                    and "check" in inner.func.id
                    and any(isinstance(a, ast.Name) and a.id == parameter for a in inner.args)
                ):
                    found.append(f"line {inner.lineno}: {inner.func.id}({parameter}, ...)")
    return found


def test_the_on_subscribe_prologue_is_written_once_in_the_kit() -> None:
    """Rules 2.13 and 2.5 at the top of ``on_subscribe`` go through ``accept_subscription``."""
    copies = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT.parent).as_posix()
        if relative.startswith("reactive_streams/_core/"):
            continue
        found = _prologue_copies(path)
        if found and relative not in PROLOGUE_ALLOWED:
            copies[relative] = found
    assert not copies, (
        f"the on_subscribe prologue written again (use accept_subscription): {copies}"
    )
    # every allowed file still needs its exception, or it comes off the list
    stale = [name for name in PROLOGUE_ALLOWED if not _prologue_copies(ROOT.parent / name)]
    assert not stale, stale


def test_the_prologue_check_finds_a_copy(tmp_path: Path) -> None:
    copy = tmp_path / "copy.py"
    copy.write_text(
        "class S:\n"
        "    def on_subscribe(self, subscription):\n"
        "        if subscription is None:\n"
        "            raise TypeError('Rule 2.13: on_subscribe(None)')\n",
        encoding="utf-8",
    )
    assert len(_prologue_copies(copy)) == 2
    kept = tmp_path / "kept.py"
    kept.write_text(
        "class S:\n"
        "    def on_subscribe(self, subscription):\n"
        "        if not accept_subscription(subscription, self.upstream is None):\n"
        "            return\n",
        encoding="utf-8",
    )
    assert _prologue_copies(kept) == []
