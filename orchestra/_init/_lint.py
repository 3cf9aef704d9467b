"""The project's linter, as ``forge init`` finds it: by its configuration, venv or dependencies."""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._files import npm_scripts, read_text

_MAKE_LINT = re.compile(r"^lint\s*:", re.MULTILINE)
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_ESLINT_CONFIGS = (
    "eslint.config.js",
    "eslint.config.mjs",
    "eslint.config.cjs",
    "eslint.config.ts",
    ".eslintrc",
    ".eslintrc.js",
    ".eslintrc.cjs",
    ".eslintrc.json",
    ".eslintrc.yml",
    ".eslintrc.yaml",
)
_GOLANGCI_CONFIGS = (".golangci.yml", ".golangci.yaml", ".golangci.toml", ".golangci.json")
_REQUIREMENT_FILES = ("requirements-dev.txt", "dev-requirements.txt", "requirements/dev.txt")


def python_linter(root: Path, in_venv: frozenset[str]) -> tuple[str, str] | None:
    """``("ruff" | "flake8", where it was found)`` for a Python project, or None.

    ``in_venv`` names the tools the project's venv holds.
    """
    pyproject = _toml(root / "pyproject.toml")
    if "ruff" in pyproject.get("tool", {}):
        return "ruff", "pyproject.toml's [tool.ruff]"
    for name in ("ruff.toml", ".ruff.toml"):
        if (root / name).is_file():
            return "ruff", name
    if (root / ".flake8").is_file():
        return "flake8", ".flake8"
    for name in ("setup.cfg", "tox.ini"):
        if _has_ini_section(root / name, "flake8"):
            return "flake8", f"{name}'s [flake8]"
    developed = set(_dev_requirements(root, pyproject))
    for tool in ("ruff", "flake8"):
        if tool in in_venv:
            return tool, f"{tool} in the project's virtualenv"
        if tool in developed:
            return tool, f"{tool} among the development dependencies"
    return None


def other_linter(root: Path) -> tuple[str, str] | None:
    """The lint command of a Makefile, a JavaScript or a Go project, and where it was found."""
    makefile = root / "Makefile"
    if makefile.is_file() and _MAKE_LINT.search(read_text(makefile)):
        return "make lint", "the Makefile's lint target"
    scripts = npm_scripts(root / "package.json")
    if isinstance(scripts.get("lint"), str):
        return "npm run lint", "package.json's lint script"
    for name in _ESLINT_CONFIGS:
        if (root / name).is_file():
            return "npx eslint .", name
    for name in _GOLANGCI_CONFIGS:
        if (root / name).is_file():
            return "golangci-lint run", name
    return None


def _dev_requirements(root: Path, pyproject: dict[str, Any]) -> Iterator[str]:
    """The names of the optional, grouped and development requirements a project declares."""
    lists: list[object] = []
    optional = pyproject.get("project", {}).get("optional-dependencies", {})
    if isinstance(optional, dict):
        lists += optional.values()
    groups = pyproject.get("dependency-groups", {})
    if isinstance(groups, dict):
        lists += groups.values()
    poetry = pyproject.get("tool", {}).get("poetry", {})
    lists.append(list(poetry.get("dev-dependencies", {})))
    for group in poetry.get("group", {}).values():
        if isinstance(group, dict):
            lists.append(list(group.get("dependencies", {})))
    for name in _REQUIREMENT_FILES:
        lists.append(read_text(root / name).splitlines())
    for entries in lists:
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, str) and (match := _REQUIREMENT_NAME.match(entry)):
                yield match[1].lower()


def _has_ini_section(path: Path, section: str) -> bool:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(read_text(path))
    except configparser.Error:
        return False
    return parser.has_section(section)


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError:
        return {}
