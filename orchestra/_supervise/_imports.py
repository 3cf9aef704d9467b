"""Before a loop works in its worktree: would its Python import the worktree's code?

The verify and the agent run with the worktree's source roots first on
``PYTHONPATH`` (:mod:`orchestra._sourcepath`). A layout Forge does not
recognise can still leave an editable install of the main checkout ahead of
the worktree's sources, and then every verify tests the wrong code: the
agent's correct edit fails, again and again, until the circuit opens. So the
interpreter on the loop's ``PATH`` is asked, once, where it would import the
project's packages from; a path in the main checkout ends the loop before its
first iteration, with the path and the fix. A clean answer stands for the
other worktrees of the same checkout the process makes alike (same
interpreter, packages and environment, but for their own path): a batch asks
once, not once a loop. A loop that starts after the project was installed
otherwise in the same process is not asked again.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import trio

from .._process import run_process
from .._sourcepath import LinkedCheckout, linked_checkout, source_roots, with_sources
from ._worktree import WorktreeError

_PROBE = """
import importlib.util, json, sys
origins = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    where = None
    if spec is not None:
        where = spec.origin
        if where in (None, "namespace") and spec.submodule_search_locations:
            where = list(spec.submodule_search_locations)[0]
    origins[name] = where
print(json.dumps({"path": sys.path, "origins": origins}))
"""
_PROBE_TIME = 30.0


class WorktreeImportError(WorktreeError):
    """A loop's worktree would import the main checkout's Python code."""


async def check_worktree_imports(worktree: Path, change: str) -> None:
    """Raise when Python in ``worktree`` would import the project from the main checkout.

    Nothing is checked outside a linked worktree, without a Python on ``PATH``,
    or when the interpreter cannot answer (a project that is no Python one).

    Raises:
        WorktreeImportError: naming the import path, the interpreter and the fix.
    """
    linked = linked_checkout(worktree)
    env = with_sources(worktree)
    search = (env or os.environ).get("PATH")
    python = shutil.which("python3", path=search) or shutil.which("python", path=search)
    if linked is None or python is None:
        return
    names = _package_names(linked)
    # The worktrees of one checkout differ only by their own path: what one
    # answered clean, the others answer alike, and a batch of fifty loops
    # asks the interpreter once (a pyenv shim costs a dozen processes a time).
    key = _probe_key(linked, python, names, env)
    async with _probing(key):
        if key in _CLEAN:
            return
        await _probe(linked, python, names, env, change)
        _CLEAN.add(key)


# What was answered clean in this process, and the locks that make the loops of
# one batch wait for the first answer instead of all asking at once.
_CLEAN: set[tuple[str, ...]] = set()
_LOCKS: dict[tuple[object, tuple[str, ...]], trio.Lock] = {}


def _probing(key: tuple[str, ...]) -> trio.Lock:
    token = trio.lowlevel.current_trio_token()
    return _LOCKS.setdefault((token, key), trio.Lock())


def _probe_key(
    linked: LinkedCheckout, python: str, names: list[str], env: dict[str, str] | None
) -> tuple[str, ...]:
    """The question asked, with the worktree's own path written as a placeholder."""
    here = str(linked.worktree)
    variables = env or os.environ
    relative = [variables.get(name, "").replace(here, "<worktree>") for name in _PROBED_VARIABLES]
    return (python, str(linked.main), *relative, "\0".join(names))


_PROBED_VARIABLES = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


async def _probe(
    linked: LinkedCheckout, python: str, names: list[str], env: dict[str, str] | None, change: str
) -> None:
    worktree = linked.worktree
    done = await run_process(
        [python, "-c", _PROBE, *names], cwd=worktree, env=env, time_limit=_PROBE_TIME, grace=1.0
    )
    try:
        answer = json.loads(done.output.text())
        module_path = [str(entry) for entry in answer["path"]]
        origins = {str(k): v for k, v in answer["origins"].items() if isinstance(v, str)}
    except (ValueError, KeyError, TypeError, AttributeError):
        return
    found = _from_main(linked, module_path, origins)
    if found is not None:
        raise _error(change, linked, python, found, (env or os.environ).get("PYTHONPATH", ""))


def _package_names(linked: LinkedCheckout) -> list[str]:
    """The top-level packages (and, outside a flat layout, modules) of the source roots."""
    names: list[str] = []
    for root in source_roots(linked.worktree):
        flat = root == linked.worktree
        for entry in sorted(root.iterdir()):
            if (entry / "__init__.py").is_file():
                names.append(entry.name)
            elif not flat and entry.suffix == ".py" and entry.is_file():
                names.append(entry.stem)
    return [name for name in names if name.isidentifier()]


def _from_main(
    linked: LinkedCheckout, module_path: list[str], origins: dict[str, str]
) -> str | None:
    """What the interpreter takes from the main checkout ahead of the worktree's copy."""
    for name, origin in origins.items():
        if linked.counterpart(Path(origin).resolve()) is not None:
            return f"{name} from {origin}"
    ahead: set[str] = set()
    for entry in module_path:
        where = Path(entry).resolve() if entry else linked.worktree
        copy = linked.counterpart(where)
        if copy is not None and str(copy) not in ahead:
            return f"from {where}, ahead of the worktree's {copy}"
        ahead.add(str(where))
    return None


def _error(
    change: str, linked: LinkedCheckout, python: str, found: str, pythonpath: str
) -> WorktreeImportError:
    # The fix is part of the message: a loop's ending keeps its message alone.
    return WorktreeImportError(
        f"the worktree of loop {change!r} would import the main checkout's code, not its own: "
        f"Python imports {found} (an editable install of the main checkout); declare the "
        "package's folder in pyproject.toml ([tool.setuptools] package-dir, or hatch's wheel "
        "packages) so that Forge puts the worktree's copy first, or export PYTHONPATH=<that "
        "folder, relative> before forge supervise, or run the loop without worktree = true",
        context=[
            f"worktree: {linked.worktree}",
            f"main checkout: {linked.main}",
            f"interpreter: {python}",
            f"PYTHONPATH: {pythonpath or '(unset)'}",
        ],
    )
