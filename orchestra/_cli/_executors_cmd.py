"""``forge executors check``: the agent CLIs on this machine, proven against a scripted server."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._errors import EXIT_ESCALATE, EXIT_OK, UsageError
from .._executor import Executor, load_executor
from .._scripted import FAILED, OK, ExecutorCheck, check_executor, profiled_executors
from ._common import policy_from, project_from
from ._console import Output

_STYLES = {OK: "green", FAILED: "bold red"}


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    policy = policy_from(project, args=args).policy
    names = list(args.names) or _found_on_path(project.root)
    if not names:
        raise UsageError(
            "no agent CLI found on PATH: " + ", ".join(profiled_executors()),
            hint="install one (npm install -g @anthropic-ai/claude-code, @openai/codex or "
            "@google/gemini-cli), or name the executor to check",
        )
    executors = [load_executor(name, project.root) for name in names]
    results = check_all([(e, policy.run.permission) for e in executors], project.root, out)
    return EXIT_OK if all(result.passed for result in results) else EXIT_ESCALATE


def check_all(
    wanted: Iterable[tuple[Executor, str]], project_root: Path, out: Output
) -> list[ExecutorCheck]:
    """Check each executor (at a permission level) and print the table; the results.

    A level the definition does not have is left to its default.
    """
    results = []
    for executor, permission in wanted:
        level = permission if permission in executor.spec.permissions else ""
        results.append(check_executor(executor, project_root, level))
        print_check(results[-1], out)
    print_verdict(results, out)
    if out.json_mode:
        out.document({"executors": [_as_json(result) for result in results]})
    return results


def print_check(result: ExecutorCheck, out: Output) -> None:
    """One executor's block of the table."""
    version = result.version or "release unknown"
    out.line(f"{result.executor}  {version}", style="bold")
    width = max((len(check.name) for check in result.checks), default=0)
    for check in result.checks:
        out.styled(
            ("  ", None),
            (f"{check.status:<8}", _STYLES.get(check.status)),
            (f"{check.name:<{width}}  {check.detail}", None),
        )


def print_verdict(results: Sequence[ExecutorCheck], out: Output) -> None:
    """The last line: each executor passed, or the checks it failed."""
    parts = []
    for result in results:
        failed = [check.name for check in result.checks if check.status == FAILED]
        verdict = f"FAILED ({', '.join(failed)})" if failed else "passed"
        parts.append(f"{result.executor} {verdict}")
    style = "bold green" if all(r.passed for r in results) else "bold red"
    out.line("executors check: " + "; ".join(parts), style=style)


def _found_on_path(root: Path) -> list[str]:
    found = []
    for name in profiled_executors():
        executor = load_executor(name, root)
        if shutil.which(executor.spec.argv[0]) is not None:
            found.append(name)
    return found


def _as_json(result: ExecutorCheck) -> dict[str, Any]:
    return {**attrs.asdict(result), "passed": result.passed}
