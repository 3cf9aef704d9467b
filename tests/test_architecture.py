"""The package's shape: parts entered through their facades, errors drawn in one tree.

Code in ``orchestra/`` may import a subpackage (``orchestra._policy``, its
``__init__`` facade) or a top-level module (``orchestra._errors``), but not a
private module inside a package it is not part of (``orchestra._policy._load``
from ``orchestra._supervise``): what one part uses of another is re-exported by
that part's facade, so a part can be reorganized behind it. The same holds one
level down (``orchestra._guard._shell``'s modules are for it alone). Tests
may import private modules; the rule is for the package only.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import orchestra
from orchestra._errors import ForgeError

PACKAGE = Path(orchestra.__file__).parent
REPOSITORY = PACKAGE.parent


def module_name(path: Path) -> str:
    parts = path.relative_to(REPOSITORY).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = REPOSITORY.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(name: str, source: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, module) for every module the module ``name`` imports, relative imports resolved."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from .._policy import _load`` imports the module ``_load``; it uses
            # nothing of the package's own, so only a name that is not a module
            # makes an edge to the package.
            submodules = [
                f"{module}.{a.name}" for a in node.names if is_module(f"{module}.{a.name}")
            ]
            if len(submodules) < len(node.names):
                yield node.lineno, module
            for submodule in submodules:
                yield node.lineno, submodule


def reaches_in(importer: str, target: str) -> bool:
    """Whether ``importer`` imports a private module of a package it is not part of."""
    if target.partition(".")[0] != "orchestra":
        return False
    package, _, last = target.rpartition(".")
    if package in ("", "orchestra") or not last.startswith("_"):
        return False
    return importer != package and not importer.startswith(f"{package}.")


def violations(where: str, importer: str, source: str, *, is_package: bool = False) -> list[str]:
    return [
        f"{where}:{line}: imports {target}"
        for line, target in imports(importer, source, is_package=is_package)
        if reaches_in(importer, target)
    ]


def file_violations(path: Path) -> list[str]:
    where = str(path.relative_to(REPOSITORY))
    is_package = path.name == "__init__.py"
    return violations(where, module_name(path), path.read_text(), is_package=is_package)


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_rule_sees_what_it_must() -> None:
    # The rule itself: own parts and facades pass, another part's private module does not.
    assert reaches_in("orchestra._loop", "orchestra._protect._check")
    assert reaches_in("orchestra._supervise._trips", "orchestra._protect._check")
    assert reaches_in("orchestra.__main__", "orchestra._cli._entry")
    assert reaches_in("orchestra._guard._wrapper", "orchestra._guard._shell._parse")
    assert reaches_in("orchestra._guard", "orchestra._guard._shell._parse")
    assert not reaches_in("orchestra._guard._shell._harm", "orchestra._guard._wrapper")
    assert reaches_in("orchestra._guard._shell._harm", "orchestra._protect._spec")
    assert not reaches_in("orchestra._guard._shell", "orchestra._guard._shell._parse")
    assert not reaches_in("orchestra._guard", "orchestra._guard._shell")
    assert not reaches_in("orchestra._loop", "orchestra._protect")
    assert not reaches_in("orchestra._cli._hooks", "orchestra._project_root")
    assert not reaches_in("orchestra._cli._hooks", "collections.abc")


def test_the_rule_reads_relative_absolute_and_module_imports() -> None:
    source = (
        "from .._policy._load import read_config_text\n"
        "from .._policy import _fields\n"
        "import orchestra._secscan._rules\n"
        "def later():\n"
        "    from orchestra._state import _files as files\n"
        "from .._policy import Policy\n"
        "from ._engine import run_supervised\n"
    )
    assert violations("sample.py", "orchestra._supervise._sample", source) == [
        "sample.py:1: imports orchestra._policy._load",
        "sample.py:2: imports orchestra._policy._fields",
        "sample.py:3: imports orchestra._secscan._rules",
        "sample.py:5: imports orchestra._state._files",
    ]
    # In a facade, ``.`` is the package itself.
    facade = "from ._check import INTEGRITY\nfrom .._state import _files\n"
    assert violations("f.py", "orchestra._protect", facade, is_package=True) == [
        "f.py:2: imports orchestra._state._files"
    ]


def test_no_module_reaches_into_another_parts_private_modules() -> None:
    found = [problem for path in package_files() for problem in file_violations(path)]
    assert found == []


def import_graph() -> dict[str, set[str]]:
    """Each module of ``orchestra/`` and the modules of ``orchestra/`` it imports.

    Every import counts, at module level or inside a function, under
    ``TYPE_CHECKING`` or not: a function-level import hides a circle from the
    interpreter, not from the reader.
    """
    graph: dict[str, set[str]] = {}
    for path in package_files():
        name = module_name(path)
        found = imports(name, path.read_text(), is_package=path.name == "__init__.py")
        graph[name] = {target for _, target in found if is_module(target) and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, round and round (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                lowest[module] = min(lowest[module], lowest[target])
            elif target in stack:
                lowest[module] = min(lowest[module], index[target])
        if lowest[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    found = circles(import_graph())
    assert found == [], "modules that import one another:\n" + "\n".join(
        " <-> ".join(group) for group in found
    )


def test_no_subpackage_imports_the_package_root() -> None:
    # The root is the public API and imports every part (lazily): a part that
    # imports it depends on everything. The version lives in orchestra._version.
    graph = import_graph()
    found = sorted(module for module, targets in graph.items() if "orchestra" in targets)
    assert found == []


def test_monitoring_sits_below_the_engine() -> None:
    # decide() judges the alerts, so the engine imports monitoring and never the
    # other way round, not even through a third part; the glue that needs engine
    # types (_engine/_watch.py) stays in the engine.
    graph = import_graph()

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    reached: set[str] = set()
    pending = [module for module in graph if part(module) == "orchestra._monitor"]
    while pending:
        module = pending.pop()
        if module not in reached:
            reached.add(module)
            pending.extend(graph.get(module, ()))
    assert len(reached) > 1  # the walk did start from monitoring's modules
    assert sorted(module for module in reached if part(module) == "orchestra._engine") == []


def facades() -> list[str]:
    return sorted(module_name(path) for path in PACKAGE.rglob("__init__.py"))


def exported_names(facade: str) -> dict[str, str]:
    """The names ``facade`` re-exports (``from ._x import name as name``), each with its module.

    A lazy facade lists them in ``_EXPORTS`` and again for type checkers under
    ``TYPE_CHECKING``; both are read, and must agree.
    """
    path = REPOSITORY.joinpath(*facade.split("."), "__init__.py")
    names: dict[str, str] = {}
    lazy: dict[str, str] | None = None
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                # ``__version__`` is imported eagerly, not one of the lazy names.
                if alias.asname == alias.name and not alias.name.startswith("__"):
                    names[alias.name] = "." * node.level + (node.module or "")
        elif (
            isinstance(node, ast.Assign)
            and [getattr(target, "id", None) for target in node.targets] == ["_EXPORTS"]
            and isinstance(node.value, ast.Dict)
        ):
            lazy = {
                ast.literal_eval(key): ast.literal_eval(value)
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if key is not None
            }
    if lazy is not None:
        assert lazy == names, f"{facade}: _EXPORTS and the TYPE_CHECKING imports differ"
    return names


@pytest.mark.parametrize("facade", facades())
def test_every_name_a_facade_exports_resolves(facade: str) -> None:
    module = importlib.import_module(facade)
    for name in exported_names(facade):
        assert getattr(module, name, None) is not None, f"{facade}.{name} does not resolve"


@pytest.mark.parametrize("facade", facades())
def test_each_facade_imports_first_without_a_cycle(facade: str) -> None:
    # A facade importing a module that imports the facade fails only when it
    # is the first thing imported: hence a fresh interpreter for each.
    done = subprocess.run(
        [sys.executable, "-c", f"import {facade}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_protect_facade_imports_nothing_until_asked() -> None:
    # The agent hooks import it on every tool call: it must cost nothing up front.
    code = (
        "import sys, orchestra._protect\n"
        "print(sorted(m for m in sys.modules if m.startswith('orchestra._protect.')))\n"
        "orchestra._protect.load_spec\n"
        "print(sorted(m for m in sys.modules if m.startswith('orchestra._protect.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "[]",
        "['orchestra._protect._config', 'orchestra._protect._spec']",
    ]


def all_modules() -> list[str]:
    return [
        info.name
        for info in pkgutil.walk_packages(orchestra.__path__, "orchestra.")
        if info.name != "orchestra.__main__"  # running it is what importing it does
    ]


def forge_errors() -> set[type[ForgeError]]:
    for name in all_modules():
        importlib.import_module(name)
    found: set[type[ForgeError]] = set()
    pending = [ForgeError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return found


def drawn_tree() -> dict[str, str | None]:
    """Each class in the errors module's drawn tree, with the class drawn above it."""
    import orchestra._errors

    doc = orchestra._errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in block.splitlines():
        match = re.search(r"[A-Za-z_]\w*", line)
        assert match is not None, line
        depth = match.start() // 4 - 1  # four spaces of indent, four per level
        del stack[depth:]
        parents[match.group()] = stack[-1] if stack else None
        stack.append(match.group())
    return parents


def test_every_forge_error_is_drawn_in_the_tree() -> None:
    drawn = drawn_tree()
    errors = forge_errors()
    assert len(errors) > 5  # the walk did import the modules that define them
    for cls in errors:
        assert cls.__name__ in drawn, f"{cls.__module__}.{cls.__name__} is not drawn"
        if cls is not ForgeError:
            bases = [base.__name__ for base in cls.__bases__ if issubclass(base, ForgeError)]
            assert drawn[cls.__name__] in bases, f"{cls.__name__} is drawn under the wrong class"
    assert set(drawn) == {cls.__name__ for cls in errors}, "the tree draws a class that is gone"
