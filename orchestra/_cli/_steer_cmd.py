"""``forge steer CHANGE "text"``: a person's guidance for a loop's next iteration.

The guidance waits in the change's folder (``guidance.yaml``) until the
loop's next iteration starts, whether the loop is running, cooling down or
escalated (then it goes with the probe, or with the run a reset resumes).
That iteration gets it at ``{guidance}`` in its prompt (appended when the
prompt has none) and as ``FORGE_GUIDANCE``. ``--once`` (the default) is for
that iteration only; ``--until-cleared`` for every one until
``forge steer CHANGE --clear``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._errors import EXIT_OK, UsageError
from .._operator import operator
from .._state import (
    GUIDANCE_CLEARED,
    GUIDANCE_GIVEN,
    ONCE,
    UNTIL_CLEARED,
    ChangePaths,
    Guidance,
    clear_guidance,
    give_guidance,
    read_guidance,
    require_change,
    utc_now_iso,
)
from ._common import project_from, record_control
from ._console import Output


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    command = "forge steer --clear" if args.clear else "forge steer"
    paths = require_change(ChangePaths(project.root, args.change), command)
    text = _text(args)
    by = operator()
    if args.clear:
        if text:
            raise UsageError("--clear takes no text", hint=f"forge steer {paths.name} --clear")
        before = clear_guidance(paths)
        record_control(paths, GUIDANCE_CLEARED, {"by": by, "count": len(before.entries)})
        out.line(f'steer: cleared {len(before.entries)} piece(s) of guidance for "{paths.name}"')
        if out.json_mode:
            out.document({"change": paths.name, "cleared": len(before.entries)})
        return EXIT_OK
    if not text:
        waiting = read_guidance(paths)
        for given in waiting.entries:
            out.line(f"steer: waiting ({given.keep}, by {given.by}): {given.text}")
        if not waiting.entries:
            out.line(f'steer: no guidance waiting for "{paths.name}"')
        if waiting.blocked:
            out.line(f"steer: the guidance file was {waiting.blocked}: forge steer --clear")
        if out.json_mode:
            out.document(
                {
                    "change": paths.name,
                    "waiting": [_entry(given) for given in waiting.entries],
                    "blocked": waiting.blocked,
                }
            )
        return EXIT_OK
    keep = UNTIL_CLEARED if args.until_cleared else ONCE
    given = Guidance(text=text, by=by, at=utc_now_iso(), keep=keep)
    after = give_guidance(paths, given)
    record_control(paths, GUIDANCE_GIVEN, {"by": by, "keep": keep, "text": text})
    when = "its next iteration" if keep == ONCE else "every iteration until --clear"
    out.line(f'steer: guidance for "{paths.name}" waits for {when} ({len(after.entries)} waiting)')
    if after.blocked:
        out.line(
            f"steer: the guidance file was {after.blocked}: nothing is delivered until "
            f"forge steer {paths.name} --clear",
            style="yellow",
        )
    if out.json_mode:
        out.document({"change": paths.name, "given": _entry(given), "waiting": len(after.entries)})
    return EXIT_OK


def _text(args: argparse.Namespace) -> str:
    """The guidance, from the argument or ``--file`` (not both)."""
    if args.text is not None and args.file is not None:
        raise UsageError("give the guidance as text or --file, not both", hint="forge steer C TEXT")
    if args.file is not None:
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--file {args.file}: cannot read it ({exc})") from exc
        if not text.strip():
            raise UsageError(f"--file {args.file} is empty", hint="write the guidance in it")
        return text.strip()
    text = (args.text or "").strip()
    if args.text is not None and not text:
        raise UsageError("the guidance is empty", hint='forge steer C "use the fixture"')
    return text


def _entry(given: Guidance) -> dict[str, str]:
    return {"text": given.text, "by": given.by, "at": given.at, "keep": given.keep}
