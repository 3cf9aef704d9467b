"""Executor definitions: how to invoke one agent CLI, read from ``executors/<name>.toml``.

A definition is an argv template plus what Forge needs to understand the
agent's output. Placeholders in the argv (``{prompt}``, ``{change}`` ...) are
filled per iteration; ``{{`` and ``}}`` stand for literal braces. A project's
own ``executors/<name>.toml`` takes precedence over the one shipped with Forge.

Beyond the argv a definition may name permission levels (the arguments that
let the agent read, edit or do anything), a price table to estimate cost from
tokens when the CLI reports none, the argv that continues an agent session,
and for Claude Code whether Forge's hooks go with every invocation.
"""

from __future__ import annotations

import json
import os
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
from .._hook_passing import FROM_EXECUTOR, HOOKS_PASSED, forge_command
from .._policy import FieldError, structure_file
from .._shipped import shipped_dir, shipped_names
from ._denials import (
    CLAUDE_SETTINGS,
    DENY_FORMATS,
    GEMINI_POLICY,
    GEMINI_POLICY_FILE,
    ProtectedPaths,
    claude_deny_rules,
    gemini_policy,
)
from ._sessionid import valid_session_id

OUTPUT_FORMATS = ("text", "claude-json", "claude-stream-json", "codex-json", "gemini-json")
PLACEHOLDERS = (
    "prompt",
    "change",
    "iteration",
    "max_iterations",
    "state_dir",
    "report",
    "workdir",
    "session",
)
SESSION_MODES = ("fresh", "continue")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _check_argv(_instance: object, attribute: attrs.Attribute[Any], argv: tuple[str, ...]) -> None:
    if not argv:
        raise FieldError(attribute.name, "a non-empty list: the program and its arguments", [])


def _check_output(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in OUTPUT_FORMATS:
        raise FieldError(attribute.name, "one of " + ", ".join(OUTPUT_FORMATS), value)


def _check_deny(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value and value not in DENY_FORMATS:
        raise FieldError(attribute.name, '"" or one of ' + ", ".join(DENY_FORMATS), value)


def _check_session(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in SESSION_MODES:
        raise FieldError(attribute.name, "one of " + ", ".join(SESSION_MODES), value)


@attrs.frozen
class ModelPrice:
    """What one model costs, in US dollars per million tokens.

    Attributes:
        input: Input tokens not read from the cache.
        output: Output tokens (reasoning and thoughts included).
        cached_input: Input read from the provider's cache (default: the input price).
    """

    input: float = attrs.field(validator=attrs.validators.ge(0))
    output: float = attrs.field(validator=attrs.validators.ge(0))
    cached_input: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(0))
    )


@attrs.frozen
class AgentCli:
    """The agent CLI behind a definition, and the release Forge proved it with.

    Attributes:
        package: Its package on the npm registry.
        proven: The release the definition was tested against (end to end,
            with a scripted model server); ``forge executors check`` compares
            the installed one with it.
        version_argv: The command that prints the installed release.
    """

    package: str
    proven: str
    version_argv: tuple[str, ...] = attrs.field(validator=_check_argv)


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
        permission: The permission level used, a key of ``permissions``.
        permissions: Permission levels: the arguments appended to the argv for each.
        claude_hooks: Pass Forge's PreToolUse guard and Stop hook to Claude
            Code with every invocation (``--settings``).
        deny_protected: How the CLI's own permission system is told the
            loop's protected paths, so that it refuses a write to one before
            trying it: ``claude-settings`` (``permissions.deny`` rules in the
            ``--settings`` that carry Forge's hooks), ``gemini-policy`` (a
            policy file Forge writes, passed with ``--policy``), or empty (the
            CLI cannot express "this file is read-only in a writable tree").
        codex_hooks: Pass Forge's PreToolUse guard to Codex with every
            invocation (a ``-c hooks.PreToolUse=…`` override, trusted for that
            invocation only with ``--dangerously-bypass-hook-trust``).
        shell_guard: Put Forge's guard in front of the agent's ``bash`` (a
            wrapper first on its ``PATH``), for a CLI that runs its shell
            commands as ``bash -c`` and takes no hooks with an invocation.
        prices: Per model, what its tokens cost (to estimate a cost the CLI
            does not report); user-editable.
        price_model: The model whose price applies when the output names none.
        session: ``fresh`` (a new agent session each iteration) or
            ``continue`` (the previous iteration's session, when there is one).
        resume_argv: The argv that continues session ``{session}``.
        resume_permissions: Per permission level, the arguments appended to
            ``resume_argv`` instead of ``permissions`` (for a CLI whose resume
            command takes other flags); unset, ``permissions`` apply to both.
        cli: The agent CLI's package and the release it was proven with.
        not_as_root: Permission levels the CLI refuses to run as root (it exits
            before any model call): Forge refuses them at plan time instead.
        root_override: ``VAR=value`` in the agent's environment (Forge's own, or
            ``env``) with which the CLI accepts those levels as root after all
            (a container you can throw away); empty when nothing does.
    """

    argv: tuple[str, ...] = attrs.field(validator=_check_argv)
    output: str = attrs.field(default="text", validator=_check_output)
    description: str = ""
    timeout: Duration | None = None
    done_marker: str | None = None
    env: dict[str, str] = attrs.field(factory=dict)
    permission: str = ""
    permissions: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    claude_hooks: bool = False
    deny_protected: str = attrs.field(default="", validator=_check_deny)
    codex_hooks: bool = False
    shell_guard: bool = False
    prices: dict[str, ModelPrice] = attrs.field(factory=dict)
    price_model: str = ""
    session: str = attrs.field(default="fresh", validator=_check_session)
    resume_argv: tuple[str, ...] = ()
    resume_permissions: dict[str, tuple[str, ...]] | None = None
    cli: AgentCli | None = None
    not_as_root: tuple[str, ...] = ()
    root_override: str = ""

    def __attrs_post_init__(self) -> None:
        if self.permission and self.permission not in self.permissions:
            known = ", ".join(sorted(self.permissions)) or "none defined"
            raise FieldError(
                "permission", f"one of the [permissions] levels ({known})", self.permission
            )
        strays = sorted(set(self.not_as_root) - set(self.permissions))
        if strays:
            known = ", ".join(sorted(self.permissions)) or "none defined"
            raise FieldError("not_as_root", f"only [permissions] levels ({known})", strays[0])
        if self.root_override and "=" not in self.root_override:
            raise FieldError("root_override", 'a "VAR=value"', self.root_override)
        unknown = sorted(set(self.resume_permissions or {}) - set(self.permissions))
        if unknown:
            known = ", ".join(sorted(self.permissions)) or "none defined"
            raise FieldError(
                "resume_permissions", f"only [permissions] levels ({known})", unknown[0]
            )
        if self.deny_protected == CLAUDE_SETTINGS and not self.claude_hooks:
            # The rules go in the --settings that carry the hooks.
            raise FieldError(
                "deny_protected", f'not "{CLAUDE_SETTINGS}" unless claude_hooks is true', True
            )
        if self.session == "continue" and not self.resume_argv:
            raise FieldError("session", '"fresh" unless resume_argv is set', self.session)

    @property
    def reports_cost(self) -> bool:
        """The CLI's own output carries its cost."""
        return self.output in ("claude-json", "claude-stream-json")


@attrs.frozen
class Executor:
    """A runnable executor: a named definition, or the shell command of ``--cmd``.

    Attributes:
        name: The definition's name (``cmd`` for ``--cmd``).
        spec: What the definition says.
        templated: A named definition (not ``--cmd``'s shell command).
        protected: The loop's protected paths, told to the CLI's permission
            system when the definition says ``deny_protected`` (see
            :meth:`protecting`).
    """

    name: str
    spec: ExecutorSpec
    templated: bool = True
    protected: ProtectedPaths | None = None

    def argv(self, values: Mapping[str, str], *, session: str | None = None) -> list[str]:
        """The argv for one iteration, placeholders filled.

        With ``session`` (and a definition that continues sessions), the
        resume argv continues it. For Codex with ``codex_hooks``, Forge's
        guard follows; then the permission level's arguments
        (``resume_permissions``' for a resumed session, when defined); then,
        for Gemini CLI told the protected paths, ``--policy`` and its file;
        then, for Claude Code with ``claude_hooks``, Forge's hooks (and the
        protected paths' deny rules, when told them).
        """
        return self._argv(values, session, self._hook_args())

    def _argv(self, values: Mapping[str, str], session: str | None, hooks: list[str]) -> list[str]:
        spec = self.spec
        if not self.templated:
            return list(spec.argv)
        if session is not None and not valid_session_id(session):
            session = None  # never an agent's text on a command line: a fresh session
        template = spec.argv
        resuming = bool(session and self.continues_sessions)
        if resuming:
            template = spec.resume_argv
        filled = {**values, "session": session or ""}
        argv = [part.format_map(filled) for part in template]
        if spec.codex_hooks:
            argv.extend(hooks)
        if spec.permission:
            if resuming and spec.resume_permissions is not None:
                # A resume command may refuse the first call's flags (codex exec
                # resume rejects --sandbox): its own arguments, or none.
                argv.extend(spec.resume_permissions.get(spec.permission, ()))
            else:
                argv.extend(spec.permissions[spec.permission])
        if (policy := self.deny_policy(values)) is not None:
            argv.extend(["--policy", str(policy[0])])
        if spec.claude_hooks:
            argv.extend(hooks)
        return argv

    @property
    def continues_sessions(self) -> bool:
        """Each iteration resumes the previous one's agent session, when there is one."""
        spec = self.spec
        return self.templated and spec.session == "continue" and bool(spec.resume_argv)

    @property
    def verifies_at_stop(self) -> bool:
        """Forge's Stop hook goes with every invocation: each stop of the agent runs verify."""
        return self.templated and self.spec.claude_hooks

    def _hook_args(self) -> list[str]:
        if self.spec.claude_hooks:
            settings = claude_hook_settings()
            if denied := self.denied_rules():
                settings["permissions"] = {"deny": denied}
            return ["--settings", json.dumps(settings, separators=(",", ":"))]
        if self.spec.codex_hooks:
            return ["--dangerously-bypass-hook-trust", "-c", codex_hook_override()]
        return []

    def protecting(self, protected: ProtectedPaths) -> Executor:
        """The same executor, told the loop's protected paths.

        Only a named definition with ``deny_protected`` passes them on (to the
        CLI's own permission system); ``--cmd`` and the others are unchanged.
        """
        if not (self.templated and self.spec.deny_protected):
            return self
        return attrs.evolve(self, protected=protected)

    def denied_rules(self) -> list[str]:
        """Claude Code's rules refusing its file tools the protected paths (none: not told)."""
        if not self._tells(CLAUDE_SETTINGS) or self.protected is None:
            return []
        return claude_deny_rules(self.protected)

    def deny_policy(self, values: Mapping[str, str]) -> tuple[Path, str] | None:
        """The Gemini CLI policy file denying the protected paths: its path and text.

        ``values`` are the iteration's placeholders: the file goes in its state
        folder. None when the CLI is not told that way.
        """
        if not self._tells(GEMINI_POLICY) or self.protected is None or not values.get("state_dir"):
            return None
        return Path(values["state_dir"]) / GEMINI_POLICY_FILE, gemini_policy(self.protected)

    def _tells(self, how: str) -> bool:
        return (
            bool(how)
            and self.templated
            and self.protected is not None
            and self.spec.deny_protected == how
        )

    @property
    def passes_hooks(self) -> bool:
        """Forge's hooks go with every invocation of this executor."""
        return self.templated and (self.spec.claude_hooks or self.spec.codex_hooks)

    @property
    def guarded_inside(self) -> bool:
        """Forge's guard refuses a command inside the CLI (its hooks, or its shell)."""
        return self.passes_hooks or (self.templated and self.spec.shell_guard)

    def environment(self) -> dict[str, str]:
        """The extra environment of the agent: the definition's ``env``, and for an
        executor that passes Forge's hooks, the mark that makes the project's
        copies of those hooks stand aside (so each runs once)."""
        if self.passes_hooks:
            return {**self.spec.env, HOOKS_PASSED: "1"}
        return dict(self.spec.env)

    def describe(self, values: Mapping[str, str]) -> str:
        """How the plan names it: ``sh -c "<cmd>"``, or ``claude: claude -p '…' …``."""
        if not self.templated:
            return f'sh -c "{self.spec.argv[2]}"'
        # The hooks' long JSON or TOML shown as a word (Claude's --settings kept).
        shown = ["--settings", "<forge hooks>"] if self.spec.claude_hooks else ["<forge hooks>"]
        argv = self._argv(values, None, shown)
        return f"{self.name}: {shlex.join(argv)}"

    def with_permission(self, level: str, source: str) -> Executor:
        """The same executor at another permission level (from a policy or a flag).

        Raises:
            ConfigError: the definition has no such level.
        """
        if not level or level == self.spec.permission:
            return self
        if level not in self.spec.permissions:
            known = ", ".join(sorted(self.spec.permissions)) or "none"
            raise ConfigError(
                f"{source}: executor {self.name!r} has no permission level {level!r}",
                hint=f"its levels: {known}",
            )
        return attrs.evolve(self, spec=attrs.evolve(self.spec, permission=level))

    def for_policy(self, permission: str, session: str, source: str = "[run]") -> Executor:
        """The executor as a policy's ``[run] permission`` and ``[run] session`` want it.

        Raises:
            ConfigError: an unknown permission level, or ``continue`` for an
                executor that cannot continue a session.
        """
        executor = self.configured(permission, session, source)
        executor.refuse_root(f"{source} permission")
        return executor

    def configured(self, permission: str, session: str, source: str = "[run]") -> Executor:
        """:meth:`for_policy` but for the refusal to run as root, which depends on
        where it runs (``forge policy check`` judges the policy alone).

        Raises:
            ConfigError: an unknown permission level, or ``continue`` for an
                executor that cannot continue a session.
        """
        executor = self.with_permission(permission, f"{source} permission")
        if not session or session == executor.spec.session or not executor.templated:
            return executor
        if session == "continue" and not executor.spec.resume_argv:
            raise ConfigError(
                f"{source} session: executor {self.name!r} cannot continue a session",
                hint='its definition has no resume_argv; use session = "fresh"',
            )
        return attrs.evolve(executor, spec=attrs.evolve(executor.spec, session=session))

    def refuse_root(self, source: str, *, euid: int | None = None) -> None:
        """Refuse a level the CLI will not run as root, when Forge runs as root.

        Raises:
            ConfigError: the level is one of ``not_as_root``, Forge runs as root
                (``euid``: the effective user id, this process's by default) and
                the environment does not carry ``root_override``.
        """
        spec = self.spec
        if not self.templated or spec.permission not in spec.not_as_root:
            return
        if (os.geteuid() if euid is None else euid) != 0:
            return
        name, _, value = spec.root_override.partition("=")
        if name and {**os.environ, **spec.env}.get(name) == value:
            return
        allowed = sorted(set(spec.permissions) - set(spec.not_as_root))
        override = f", or set {spec.root_override} in a sandbox you can throw away" if name else ""
        raise ConfigError(
            f"{source}: executor {self.name!r} cannot run at level {spec.permission!r} as root: "
            f"its CLI refuses {shlex.join(spec.permissions[spec.permission])} "
            "for root and exits before doing anything; run Forge as a user other than root, "
            f"or choose another level ({', '.join(allowed)}) with [run] permission{override}"
        )

    def describe_permission(self) -> str | None:
        """The permission level and its arguments, as the plan shows them (None: no level)."""
        spec = self.spec
        if not self.templated or not spec.permission:
            return None
        args = shlex.join(spec.permissions[spec.permission])
        hooks = "; Forge's guard and Stop hooks passed with --settings" if spec.claude_hooks else ""
        if spec.shell_guard:
            hooks = "; every bash -c checked by Forge's guard"
        if self.protected is not None and self._tells(spec.deny_protected):
            how = " with --policy" if spec.deny_protected == GEMINI_POLICY else ""
            hooks += f"; {_paths(self.protected.count)} denied{how}"
        return f"{spec.permission} ({args}){hooks}"


def _paths(count: int) -> str:
    return f"{count} protected path" + ("" if count == 1 else "s")


def claude_hook_settings() -> dict[str, Any]:
    """Claude Code settings that run Forge's PreToolUse guard and Stop hook.

    The hooks call this very Forge (its interpreter, ``-m orchestra``), so they
    work whatever the agent's ``PATH``; marked as the executor's, they run
    while the project's own copies stand aside.
    """
    forge = forge_command()
    return {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit",
                    "hooks": [
                        {"type": "command", "command": f"{forge} hook pre-tool-use {FROM_EXECUTOR}"}
                    ],
                }
            ],
            "Stop": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": f"{forge} hook stop {FROM_EXECUTOR}",
                            "timeout": 900,
                        }
                    ]
                }
            ],
        }
    }


def codex_hook_override() -> str:
    """A Codex ``-c`` override that runs Forge's guard before every shell command and patch.

    Codex 0.171 names its shell tool ``Bash`` in a PreToolUse hook's input
    (``tool_input.command``, as Claude Code does) and its file editor
    ``apply_patch`` (the patch as ``tool_input.command``); a hook exiting 2
    blocks the call and hands its stderr to the model. The value is TOML:
    a JSON string is a valid TOML basic string.
    """
    command = json.dumps(f"{forge_command()} hook pre-tool-use {FROM_EXECUTOR}")
    return (
        'hooks.PreToolUse=[{matcher="^(Bash|apply_patch)$", '
        f'hooks=[{{type="command", command={command}}}]}}]'
    )


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
        f"{source}: {key}[{index}]: expected only the placeholders {known}, got {part!r}"
        for key, argv in (("argv", spec.argv), ("resume_argv", spec.resume_argv))
        for index, part in enumerate(argv)
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
