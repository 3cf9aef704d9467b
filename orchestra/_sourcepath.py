"""A command run in a linked git worktree imports the worktree's Python sources.

A project installed editable in its main checkout (``pip install -e .``) puts
the main checkout's source folder on every interpreter's module path (a
``.pth`` file naming ``<main>/src``, or a finder appended to
``sys.meta_path``). A verify run in ``.forge/worktrees/<c>`` would then test
the main checkout's code, not the agent's. ``PYTHONPATH`` entries come
before both (site-packages and its ``.pth`` paths are added after them, and an
editable finder is consulted after the path finder), so putting the
worktree's own source roots first on ``PYTHONPATH`` makes the worktree's
package the one imported, whatever tool installed the main checkout's.

Only reads files (the worktree's ``.git`` file, its layout, its
``pyproject.toml``): it runs before every verify and every iteration.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

PYTHONPATH = "PYTHONPATH"


@attrs.frozen
class LinkedCheckout:
    """A linked git worktree and the main checkout of its repository."""

    worktree: Path
    main: Path

    def counterpart(self, path: Path) -> Path | None:
        """The worktree's copy of a path in the main checkout (outside the worktree), if any."""
        if path.is_relative_to(self.worktree) or not path.is_relative_to(self.main):
            return None
        copy = self.worktree / path.relative_to(self.main)
        return copy if copy.exists() else None


def linked_checkout(tree: Path) -> LinkedCheckout | None:
    """The linked worktree ``tree`` lies in, with its main checkout; None in a main checkout."""
    here = tree.resolve()
    for folder in (here, *here.parents):
        marker = folder / ".git"
        if marker.is_dir():
            return None  # a main checkout (or a repository of its own)
        if marker.is_file():
            return _from_git_file(folder, marker)
    return None


def _from_git_file(worktree: Path, marker: Path) -> LinkedCheckout | None:
    try:
        text = marker.read_text(encoding="utf-8").strip()
        gitdir = Path(text.removeprefix("gitdir:").strip())
        gitdir = gitdir if gitdir.is_absolute() else (worktree / gitdir)
        common = gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return None  # a submodule's .git file has no commondir: not a linked worktree
    common = common.resolve()
    if common.name != ".git":
        return None  # a bare repository has no main checkout
    return LinkedCheckout(worktree=worktree, main=common.parent)


def source_roots(worktree: Path) -> tuple[Path, ...]:
    """The folders of ``worktree`` its Python packages are imported from.

    ``src/`` when it holds a package or a module; the folders ``pyproject.toml``
    names (setuptools ``package-dir`` and ``packages.find.where``, hatch's
    wheel ``packages`` and ``sources``, poetry's ``from``); the worktree itself
    for a flat layout (a package declared at the top, or named after the
    project).
    """
    pyproject = _pyproject(worktree)
    roots = [worktree / "src"] if holds_python(worktree / "src") else []
    roots += [worktree / folder for folder in _declared_folders(pyproject)]
    name = str(pyproject.get("project", {}).get("name", ""))
    package = re.sub(r"[-_.]+", "_", name).lower()
    if package and (worktree / package / "__init__.py").is_file():
        roots.append(worktree)
    return tuple(_unique(root.resolve() for root in roots if root.is_dir()))


def holds_python(folder: Path) -> bool:
    """Whether ``folder`` holds a Python module or package (``src/`` of a src layout)."""
    if not folder.is_dir():
        return False
    return any(folder.glob("*.py")) or any(folder.glob("*/*.py"))


def _pyproject(worktree: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((worktree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _declared_folders(pyproject: Mapping[str, Any]) -> list[str]:
    tool = pyproject.get("tool", {})
    setuptools = tool.get("setuptools", {})
    folders: list[str] = []
    package_dir = setuptools.get("package-dir", {})
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        folders.append(package_dir[""])
    found = setuptools.get("packages", {})
    if isinstance(found, dict):
        where = found.get("find", {}).get("where", [])
        folders += [str(folder) for folder in where if isinstance(folder, str)]
    wheel = tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
    for package in wheel.get("packages", []):
        if isinstance(package, str) and package.strip("/"):
            parent, _, _ = package.strip("/").rpartition("/")
            folders.append(parent or ".")  # a package at the top: a flat layout
    sources = wheel.get("sources", [])
    if isinstance(sources, list):
        folders += [str(folder) for folder in sources if isinstance(folder, str) and folder]
    for package in tool.get("poetry", {}).get("packages", []):
        if isinstance(package, dict) and isinstance(package.get("from"), str):
            folders.append(package["from"])
    return [folder or "." for folder in folders]


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: list[Path] = []
    for path in paths:
        if path not in seen:
            seen.append(path)
    return seen


def source_environment(tree: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The ``PYTHONPATH`` that makes a command run in ``tree`` import the worktree's sources.

    Empty outside a linked worktree, and where the worktree has no Python
    sources of its own and ``environ``'s ``PYTHONPATH`` names nothing in the
    main checkout. Otherwise the worktree's source roots come first, then
    ``environ``'s entries, each one inside the main checkout replaced by the
    worktree's copy of it.
    """
    linked = linked_checkout(tree)
    if linked is None:
        return {}
    given = [entry for entry in environ.get(PYTHONPATH, "").split(os.pathsep) if entry]
    mapped = []
    for entry in given:
        copy = linked.counterpart(Path(entry).resolve())
        mapped.append(str(copy) if copy is not None else entry)
    roots = [str(root) for root in source_roots(linked.worktree)]
    if not roots and mapped == given:
        return {}
    return {PYTHONPATH: os.pathsep.join(_unique_text([*roots, *mapped]))}


def _unique_text(entries: Iterable[str]) -> list[str]:
    kept: list[str] = []
    for entry in entries:
        if entry not in kept:
            kept.append(entry)
    return kept


def with_sources(tree: Path, environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """``environ`` (default: this process's) with :func:`source_environment` laid over it.

    None when nothing changes, so that a caller passing ``env=None`` keeps
    inheriting as before.
    """
    base = os.environ if environ is None else environ
    extra = source_environment(tree, base)
    return {**base, **extra} if extra else None
