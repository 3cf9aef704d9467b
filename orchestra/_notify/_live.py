"""Notifications sent while a batch runs: a loop that escalates, an alert, a question.

A batch that runs overnight must not keep a loop's escalation until its last
loop ends: :class:`LiveNotices` sends ``escalate`` the moment a loop stops for
a person, ``alert`` the moment an alert is raised and ``question`` the moment an
iteration ends on a question instead of acting, and remembers what it
sent so that the batch's end sends only what was not said yet (``finish``,
always). Sending blocks (a command, a POST, each bounded by the timeout): the
supervisor calls :meth:`LiveNotices.escalated` and :meth:`LiveNotices.alert`
in a worker thread, never on the event loop, and says what failed itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._durations import format_duration
from ._deliver import (
    ALERT,
    BATCH_WIDE,
    ESCALATE,
    LOG_NAME,
    QUESTION,
    deliver,
    log_deliveries,
)
from ._send import Delivery

if TYPE_CHECKING:
    from .._policy import NotifyPolicy


class LiveNotices:
    """What a running batch has said so far, and the means to say more.

    Args:
        policy: The ``[notify]`` table.
        root: The project's root, where the commands run.
        run_folder: ``.forge/runs/<id>/``: the log, and where the summary will be.
        run_id: The batch's run id.
    """

    def __init__(
        self,
        policy: NotifyPolicy,
        *,
        root: Path,
        run_folder: Path,
        run_id: str,
    ) -> None:
        self._policy = policy
        self._root = root
        self._run_folder = run_folder
        self._run_id = run_id
        # (event, loop folder, change) of each notice sent.
        self.sent: set[tuple[str, str, str]] = set()
        # When each alert was last told: (loop folder, change, alert) → clock seconds.
        self._told: dict[tuple[str, str, str], float] = {}
        self._batch_told: set[str] = set()

    @property
    def tells_escalations(self) -> bool:
        """Whether anybody listens for escalations (``on_escalate``, or the webhook)."""
        return bool(self._policy.on_escalate or self._policy.webhook)

    @property
    def tells_alerts(self) -> bool:
        """Whether anybody listens for alerts (``on_alert``, or the webhook)."""
        return bool(self._policy.on_alert or self._policy.webhook)

    @property
    def tells_questions(self) -> bool:
        """Whether anybody listens for questions (``on_question``, or the webhook)."""
        return bool(self._policy.on_question or self._policy.webhook)

    def escalated(self, entry: Mapping[str, Any]) -> list[Delivery]:
        """A loop stopped for a person; ``entry`` is its line of the coming summary."""
        change, folder = str(entry.get("change")), str(entry.get("dir"))
        self.sent.add((ESCALATE, folder, change))
        part = {**entry, "ending": entry.get("reason")}
        return self._send(ESCALATE, {"loop": part}, change)

    def worth_telling(self, change: str, folder: str, name: str, now: float) -> bool:
        """Whether an alert raised at ``now`` (seconds on any one clock) is to be told.

        A batch-wide alert (the shared rate window's ``calls-remaining``) is told
        once per batch, whichever loop raised it first; an alert raised again on
        the same loop within ``[notify] alert_quiet`` of its last notice is not
        told again. Telling it (True) counts as told.
        """
        if name in BATCH_WIDE:
            if name in self._batch_told:
                return False
            self._batch_told.add(name)
            return True
        key = (folder, change, name)
        last = self._told.get(key)
        if last is not None and now - last < self._policy.alert_quiet.seconds:
            return False
        self._told[key] = now
        return True

    def alert(self, change: str, folder: str, name: str, detail: str) -> list[Delivery]:
        """An alert was raised on a loop (and was not holding before)."""
        self.sent.add((ALERT, folder, change))
        part = {"change": change, "dir": folder, "name": name, "text": detail}
        return self._send(ALERT, {"alert": part}, change)

    def asked(
        self, change: str, folder: str, iteration: int, question: str, *, wait: float | None
    ) -> list[Delivery]:
        """An iteration of a loop ended on ``question``: the notice names the answering command.

        ``wait``: how long the loop waits for the answer (``[run] on_question =
        "wait"``), or None when its next iteration decides at once.
        """
        answer = f'forge steer {change} "ANSWER"'
        if wait is None:
            then = f"the next iteration decides unless a person answers first: {answer}"
        else:
            waits = f"the loop waits up to {format_duration(wait)} for an answer"
            then = f"{waits}: {answer}; then it decides"
        part = {
            "change": change,
            "dir": folder,
            "iteration": iteration,
            "text": question,
            "answer": answer,
            "next": then,
        }
        env = {"FORGE_QUESTION": question, "FORGE_ANSWER": answer}
        return self._send(QUESTION, {"question": part}, change, env)

    def _send(
        self,
        event: str,
        own: dict[str, Any],
        change: str,
        more_env: Mapping[str, str] | None = None,
    ) -> list[Delivery]:
        # No ``report`` and no file variables: the summary and the report are
        # written when the batch ends, and never if it is killed or writes none.
        # The ``finish`` notice names them once they exist.
        payload = {"run_id": self._run_id, "event": event, **own}
        env = {
            "FORGE_EVENT": event,
            "FORGE_RUN_ID": self._run_id,
            "FORGE_CHANGE": change,
            "FORGE_ROOT": str(self._root),
            "FORGE_SUMMARY": "",
            "FORGE_REPORT": "",
            "FORGE_REPORT_MARKDOWN": "",
            "FORGE_EXIT_CODE": "",
            **(more_env or {}),
        }
        deliveries = deliver(self._policy, event, payload, env, root=self._root)
        log_deliveries(self._run_folder / LOG_NAME, deliveries)
        return deliveries
