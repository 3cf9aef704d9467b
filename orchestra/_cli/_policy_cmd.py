"""``forge policy show | check | dump | schema | diff``: the effective policy, where each value
came from, its JSON Schema, and how two policies differ."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import EXIT_OK, EXIT_USAGE, ConfigError, UsageError
from ._common import policy_from, project_from, set_layer
from ._console import Output

# Each action imports what it uses, when it runs: show and dump need neither
# the loop tables (check), the policy diff, the JSON Schema nor the shipped
# policies (diff); a read-only command's start is mostly its imports.
if TYPE_CHECKING:
    from .._policy import Layer, LoadedPolicy, Policy
    from .._supervise import LoopSetup
    from .._workspace import Project


def show(args: argparse.Namespace, out: Output) -> int:
    from .._policy import display_name, policy_as_dict

    project = project_from(args)
    loaded = policy_from(project, args=args)
    values = policy_as_dict(loaded.policy)
    if out.json_mode:
        out.document(
            {
                "root": str(project.root),
                "files": [str(path) for path in loaded.files],
                "policy": values,
                "sources": dict(loaded.sources),
            }
        )
        return EXIT_OK
    described = ", ".join(display_name(p, project.root) for p in loaded.files)
    described = described or "built-in defaults only"
    out.line(f"policy: {described}", style="dim")
    width = max(len(key) for key in loaded.sources)
    current_table = None
    for dotted, source in loaded.sources.items():
        table = dotted.rpartition(".")[0]
        if table != current_table:
            out.line(f"[{table}]", style="bold")
            current_table = table
        value = _lookup(values, dotted)
        out.styled(
            (f"  {dotted.ljust(width)}  ", None),
            ("(unset)" if value is None else json.dumps(value, ensure_ascii=False), "cyan"),
            (f"  ({source})", "dim"),
        )
    return EXIT_OK


def check(args: argparse.Namespace, out: Output) -> int:
    from .._policy import display_name, load_policy
    from .._supervise import resolve_loops, separate_trees
    from .._workspace import find_project

    if args.file:
        path = Path(args.file).resolve()
        project = find_project(path.parent, path if path.is_file() else None)
        config: Path | None = path
    else:
        project = project_from(args)
        config = project.config
    settings = [set_layer(text) for text in args.set or []]
    try:
        loaded = load_policy(config, root=project.root, flags=settings)
        # The loops as forge supervise would start them: the same refusal, the same notes.
        loops = resolve_loops(loaded, project.root)
        _, tree_notes = separate_trees(loops, loaded.policy.supervise.worktrees)
        _check_executors(loaded.policy, project.root, loops)
    except ConfigError as exc:
        if out.json_mode:
            out.document({"ok": False, "message": exc.message, "problems": list(exc.problems)})
        out.note(exc.render(), style="red")
        return EXIT_USAGE
    files = [display_name(p, project.root) for p in loaded.files]
    notes = bound_notes(loaded.sources, loaded.policy) + tree_notes
    for note in notes:
        out.line(f"note: {note}")
    # Each loop's own policy too: a [loop.breaker] override may be the loose one.
    warnings = _relaxed(loaded.policy, resolve_loops(loaded, project.root))
    for warning in warnings:
        out.line(warning, style="yellow")
    if out.json_mode:
        out.document(
            {"ok": True, "files": files, "problems": [], "notes": notes, "warnings": warnings}
        )
    elif config is None and settings:
        out.line(
            f"policy: OK — no forge.toml found; the built-in defaults apply, "
            f"with {len(settings)} --set value(s) over them"
        )
    elif config is None:
        out.line("policy: OK — no forge.toml found; the built-in defaults apply")
    else:
        out.line(f"policy: OK — {config.name} ({len(files)} file(s): {', '.join(files)})")
    return EXIT_OK


def _check_executors(policy: Policy, root: Path, loops: Sequence[LoopSetup]) -> None:
    """Each executor a run or a loop names, loaded and set to its permission and session.

    A permission level is a key of the executor's own ``[permissions]``, so the
    policy's schema cannot hold it: without this, a typo there is found only
    when the run starts. Whether the level may run as root is left to the run,
    which knows who it runs as.

    Raises:
        ConfigError: every executor that does not load or take its settings.
    """
    problems: list[str] = []
    runs = [("[run]", policy.run)] + [(loop.source, loop.policy.run) for loop in loops]
    for source, run in runs:
        if run.cmd or not run.executor:
            continue
        # Only a policy that names an executor pays for loading definitions.
        from .._executor import load_executor

        try:
            load_executor(run.executor, root).configured(run.permission, run.session, source)
        except ConfigError as exc:
            problem = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            if problem not in problems:
                problems.append(problem)
    if problems:
        raise ConfigError("the policy's executors cannot run", problems=problems)


def _relaxed(policy: Policy, loops: Sequence[LoopSetup]) -> list[str]:
    """The relaxed-policy warnings of the policy and of each declared loop, once each."""
    from .._policy import batch_relaxed_warnings

    return batch_relaxed_warnings(policy, ((loop.change, loop.policy) for loop in loops))


DEFAULTS_HEADER = """Forge's built-in defaults: every tunable, at its value when no file sets it.

Generated from the policy model by `forge policy dump --defaults`; copy what you
want to change into your forge.toml, or extend this file by name: extends = ["default"]."""


def bound_notes(sources: Mapping[str, str], policy: Policy) -> list[str]:
    """Settings that describe one bound twice and disagree: say so, and which one wins."""
    fix_budget = policy.contract.max_fix_iterations
    streak = policy.verify.max_failures
    both_set = all(
        sources.get(key, "default") != "default"
        for key in ("contract.max_fix_iterations", "verify.max_failures")
    )
    if not both_set or fix_budget == streak:
        return []
    if streak < fix_budget:
        wins = (
            f"the verify breaker opens after {streak} consecutive failures, before the fix "
            f"budget of {fix_budget} is spent: {streak} is the bound in force"
        )
    else:
        wins = (
            f"the fix budget of {fix_budget} runs out before the verify breaker opens at "
            f"{streak}: {fix_budget} is the bound in force"
        )
    return [
        f"contract.max_fix_iterations ({fix_budget}) and verify.max_failures ({streak}) "
        f"describe the same bound and disagree; {wins}"
    ]


def dump(args: argparse.Namespace, out: Output) -> int:
    from .._policy import Policy, commented_toml, policy_as_toml

    if args.defaults:
        text = commented_toml(Policy(), DEFAULTS_HEADER)
    else:
        text = policy_as_toml(policy_from(project_from(args), args=args).policy)
    if args.schema:
        # Taplo's header directive: editors validate the file against this schema.
        text = f"#:schema {args.schema}\n{text}"
    if args.output:
        _write(args.output, text)
        out.note(f"wrote the effective policy to {args.output}", style=None)
    elif out.json_mode:
        import tomllib

        out.document(tomllib.loads(text))
    else:
        print(text, end="")
    return EXIT_OK


def schema(args: argparse.Namespace, out: Output) -> int:
    """The JSON Schema of forge.toml: one JSON document, with or without ``--json``."""
    from .._policy import policy_json_schema_text

    text = policy_json_schema_text()
    if args.output:
        _write(args.output, text)
        out.note(f"wrote the policy's JSON Schema to {args.output}", style=None)
    else:
        print(text, end="")
    return EXIT_OK


def diff(args: argparse.Namespace, out: Output) -> int:
    """The keys whose effective values differ between two policies: a report, exit 0."""
    from .._policy import policy_differences

    project = project_from(args)
    a = _load_side(args.a, project, [_renamed(set_layer(t), "--set-a") for t in args.set_a or []])
    b = _load_side(args.b, project, [set_layer(text) for text in args.set or []])
    differences = policy_differences(a, b)
    sides = {
        "a": _side(args.a, args.set_a, a, project.root),
        "b": _side(args.b, args.set, b, project.root),
    }
    if out.json_mode:
        out.document(
            {
                **sides,
                "differences": [
                    {
                        "key": d.key,
                        "a": d.a,
                        "b": d.b,
                        "a_source": d.a_source,
                        "b_source": d.b_source,
                    }
                    for d in differences
                ],
            }
        )
        return EXIT_OK
    for name, side in sides.items():
        described = ", ".join(side["files"]) or "built-in defaults only"
        settings = "".join(f" --set{'-a' if name == 'a' else ''} {s}" for s in side["set"])
        out.line(f"{name}: {side['argument']} ({described}){settings}", style="dim")
    if not differences:
        out.line("no differences: every key has the same effective value")
        return EXIT_OK
    width = max(len(d.key) for d in differences)
    for d in differences:
        out.styled(
            (f"{d.key.ljust(width)}  ", None),
            (_shown(d.a), "cyan"),
            (f" ({d.a_source})", "dim"),
            ("  ->  ", None),
            (_shown(d.b), "cyan"),
            (f" ({d.b_source})", "dim"),
        )
    return EXIT_OK


def _load_side(argument: str, project: Project, flags: list[Layer]) -> LoadedPolicy:
    """One side of a diff: ``-`` (the project's policy), a policy file, or a shipped name."""
    from .._policy import load_policy
    from .._shipped import shipped_dir, shipped_names

    if argument == "-":
        config = project.config
    else:
        path = Path(argument)
        if path.is_file():
            config = path.resolve()
        elif argument in shipped_names("policies"):
            config = (shipped_dir("policies") / f"{argument}.toml").resolve()
        else:
            known = ", ".join(shipped_names("policies")) or "none"
            raise UsageError(
                f"{argument!r} is neither a policy file nor a shipped policy",
                hint=f"give a path, '-' for this project's policy, or a shipped name ({known})",
            )
    return load_policy(config, root=project.root, flags=flags)


def _side(
    argument: str, settings: list[str] | None, loaded: LoadedPolicy, root: Path
) -> dict[str, Any]:
    from .._policy import display_name

    return {
        "argument": argument,
        "files": [display_name(path, root) for path in loaded.files],
        "set": list(settings or []),
    }


def _renamed(layer: Layer, flag: str) -> Layer:
    """A ``--set`` layer shown as set by ``flag``, so each side's provenance names its own flag."""
    from .._policy import Layer

    return Layer(layer.source.replace("--set", flag, 1), layer.data)


def _shown(value: object) -> str:
    return "(unset)" if value is None else json.dumps(value, ensure_ascii=False)


def _write(name: str, text: str) -> None:
    from .._state import atomic_write

    target = Path(name)
    if not target.parent.is_dir():
        raise UsageError(f"-o {name}: the folder {target.parent} does not exist")
    atomic_write(target, text.encode("utf-8"))


def _lookup(values: dict[str, object], dotted: str) -> object:
    current: object = values
    for part in dotted.split("."):
        current = current[part] if isinstance(current, dict) else None
    return current
