"""Executor definitions: how to invoke one agent CLI, read from ``executors/<name>.toml``.

A definition is an argv template plus what Forge needs to understand the
agent's output. Placeholders in the argv (``{prompt}``, ``{change}`` ...) are
filled per iteration; ``{{`` and ``}}`` stand for literal braces. A project's
own ``executors/<name>.toml`` takes precedence over the one shipped with Forge.
"""

from __future__ import annotations

import re
import shlex
import string
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._durations import Duration
from .._errors import ConfigError
from .._policy import FieldError, structure_file
from .._shipped import shipped_dir, shipped_names

OUTPUT_FORMATS = ("text", "claude-json", "claude-stream-json", "codex-json", "gemini-json")
PLACEHOLDERS = ("prompt", "change", "iteration", "max_iterations", "state_dir", "report", "workdir")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _check_argv(_instance: object, attribute: attrs.Attribute[Any], argv: tuple[str, ...]) -> None:
    if not argv:
        raise FieldError(attribute.name, "a non-empty list: the program and its arguments", [])


def _check_output(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in OUTPUT_FORMATS:
        raise FieldError(attribute.name, "one of " + ", ".join(OUTPUT_FORMATS), value)


@attrs.frozen
class ExecutorSpec:
    """What an ``executors/<name>.toml`` file says.

    Attributes:
        argv: The program and its arguments, with placeholders.
        output: How to read what it prints (see ``OUTPUT_FORMATS``).
        description: One line for people.
        timeout: Overrides ``[run].timeout`` for this executor.
        done_marker: Overrides ``[run].done_marker``.
        env: Extra environment variables for the agent.
    """

    argv: tuple[str, ...] = attrs.field(validator=_check_argv)
    output: str = attrs.field(default="text", validator=_check_output)
    description: str = ""
    timeout: Duration | None = None
    done_marker: str | None = None
    env: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Executor:
    """A runnable executor: a named definition, or the shell command of ``--cmd``."""

    name: str
    spec: ExecutorSpec
    templated: bool = True

    def argv(self, values: Mapping[str, str]) -> list[str]:
        """The argv for one iteration, placeholders filled."""
        if not self.templated:
            return list(self.spec.argv)
        return [part.format_map(values) for part in self.spec.argv]

    def describe(self, values: Mapping[str, str]) -> str:
        """How the plan names it: ``sh -c "<cmd>"``, or ``claude: claude -p '…' …``."""
        if not self.templated:
            return f'sh -c "{self.spec.argv[2]}"'
        return f"{self.name}: {shlex.join(self.argv(values))}"


def shell_command(cmd: str) -> Executor:
    """The executor of ``--cmd``: the command through ``sh -c``, its output read as text.

    The command is passed as written: braces in it are the shell's, not placeholders.
    """
    return Executor(name="cmd", spec=ExecutorSpec(argv=("sh", "-c", cmd)), templated=False)


def load_executor(name: str, project_root: Path) -> Executor:
    """Find and load ``executors/<name>.toml``: the project's own first, then the shipped one.

    Raises:
        ConfigError: an unknown name, or an unreadable or invalid definition.
    """
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"invalid executor name {name!r}",
            hint="an executor name is a-z, 0-9, '-' or '_', and names executors/<name>.toml",
        )
    candidates = (
        (project_root / "executors" / f"{name}.toml", f"executors/{name}.toml"),
        (shipped_dir("executors") / f"{name}.toml", f"{name}.toml (shipped executor)"),
    )
    for path, source in candidates:
        if path.is_file():
            return Executor(name=name, spec=_read_spec(path, source))
    local = {p.stem for p in (project_root / "executors").glob("*.toml")}
    known = ", ".join(sorted(local | set(shipped_names("executors")))) or "none"
    raise ConfigError(f"no executor named {name!r}", hint=f"known executors: {known}")


def _read_spec(path: Path, source: str) -> ExecutorSpec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            "cannot read the executor definition", problems=[f"{source}: {exc}"]
        ) from exc
    spec = structure_file(data, ExecutorSpec, source)
    known = "{" + "}, {".join(PLACEHOLDERS) + "}"
    problems = [
        f"{source}: argv[{index}]: expected only the placeholders {known}, got {part!r}"
        for index, part in enumerate(spec.argv)
        if (names := _placeholders(part)) is None or any(n not in PLACEHOLDERS for n in names)
    ]
    if problems:
        raise ConfigError(f"{source} is invalid", problems=problems)
    return spec


def _placeholders(template: str) -> list[str] | None:
    """The placeholder names in a template, or None when its braces are unbalanced."""
    try:
        return [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    except ValueError:
        return None
