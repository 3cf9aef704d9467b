"""The Gemini API as Gemini CLI 0.61.0 (``@google/gemini-cli``) uses it, for a scripted server.

Facts this adapter relies on, read from the requests the pinned release sends
to a server on loopback and from the documentation shipped in its package
(``bundle/docs/reference/configuration.md``, ``docs/hooks/reference.md``,
``docs/reference/policy-engine.md``):

- With ``GEMINI_API_KEY`` set and ``security.auth.selectedType =
  "gemini-api-key"`` in ``~/.gemini/settings.json``, the CLI calls
  ``$GOOGLE_GEMINI_BASE_URL/v1beta/models/<model>:<method>`` (plain http is
  accepted for 127.0.0.1 only), the key in the ``x-goog-api-key`` header.
- The agent's loop is ``streamGenerateContent?alt=sse``: a body of
  ``contents`` (``role`` ``user`` or ``model``; parts of ``text``,
  ``functionCall {name, args}``, ``functionResponse {name, response}``),
  ``systemInstruction``, ``tools[].functionDeclarations`` and
  ``generationConfig``; the answer is server-sent events, each ``data:`` a
  ``GenerateContentResponse`` (``candidates[0].content.parts``,
  ``finishReason``, ``usageMetadata``, ``modelVersion``). The CLI files the
  tokens under the answer's ``modelVersion``: that is the model ``-o json``
  names in ``stats.models``.
- Before each prompt the model router sends a side request,
  ``gemini-3.5-flash-lite:generateContent`` with no tools and
  ``generationConfig.responseJsonSchema`` (``complexity_reasoning``,
  ``complexity_score``); a low score routes the prompt to
  ``gemini-3.8-flash``, a high one (or an unreadable answer) to
  ``gemini-3.1-pro-preview``. Side requests are answered with JSON that fits
  the schema they ask for, the lowest scores: the loop runs on the flash model
  (and the loop detector, which asks for an ``unproductive_state_confidence``
  after many turns, hears 0).
- The tools offered depend on ``--approval-mode``: ``default`` offers no
  tool that writes; ``auto_edit`` adds ``write_file {file_path, content}``
  and ``replace``; ``run_shell_command {command, description, dir_path}``
  is offered under ``yolo`` or when allowed (``--allowed-tools
  run_shell_command``). In every mode the CLI itself refuses a command with
  command substitution (``$(…)``, ``$((…))``, backticks, ``<(…)``) before
  running it: "Command injection detected".
- Errors are Google API error bodies, ``{"error": {"code", "message",
  "status", "details"}}``. The CLI retries 429 and 5xx up to
  ``general.maxAttempts`` times (set to 2 here, so a persistent failure costs
  one retry), waiting at least 5 s, or the ``RetryInfo`` ``retryDelay`` of the
  details; a delay over 300 s, a ``QuotaFailure`` whose ``quotaId`` says
  ``PerDay``, or ``limit: 0`` in the message is terminal (``TerminalQuotaError``,
  "Suggested retry after <delay>." appended to the message). It reads no
  ``Retry-After`` header. Each error it gives up on is also reported to a file
  in the temporary folder (``$TMPDIR``, the scratch home's here).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._profile import CliProfile, scratch_home
from ._script import Failure, Reply, RunShell, ToolCall, WriteFile
from ._server import Exchange, Message, Response, sse

_MODEL_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/models/(?P<model>[^:/?]+):(?P<method>streamGenerateContent|generateContent)"
)
_COUNT_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^:/?]+):countTokens")
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"


def quota_error(
    message: str, *, retry_delay: str = "", quota_id: str = "", status: int = 429, times: int = 1
) -> Failure:
    """A Gemini API quota refusal: ``RetryInfo`` and ``QuotaFailure`` details when given.

    Args:
        message: The error's message.
        retry_delay: ``RetryInfo.retryDelay`` (``"1s"``, ``"400s"``); none when empty.
        quota_id: The violated quota (``GenerateRequestsPerDayPerProjectPerModel``).
        status: The HTTP status.
        times: How many attempts in a row get it.
    """
    details: list[dict[str, Any]] = []
    if quota_id:
        details.append({"@type": QUOTA_FAILURE, "violations": [{"quotaId": quota_id}]})
    if retry_delay:
        details.append({"@type": RETRY_INFO, "retryDelay": retry_delay})
    body = {
        "error": {
            "code": status,
            "message": message,
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
            "details": details,
        }
    }
    return Failure(status, message, body=body, times=times)


class GeminiProvider:
    """The Gemini API (``streamGenerateContent``, ``generateContent``, ``countTokens``)."""

    name = "gemini"

    def read(self, method: str, path: str, body: Any) -> Exchange | None:
        found = _MODEL_PATH.match(path)
        if method != "POST" or found is None or not isinstance(body, dict):
            return None
        tools = tuple(
            str(declaration.get("name", ""))
            for tool in body.get("tools") or ()
            for declaration in tool.get("functionDeclarations") or ()
        )
        config = body.get("generationConfig") or {}
        # The agent's loop offers tools and asks for no JSON: the router's
        # classifier (and any other utility call) offers none.
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        main = bool(tools) and schema is None
        return Exchange(
            messages=tuple(_message(content) for content in body.get("contents") or ()),
            tools=tools,
            model=found["model"],
            stream=found["method"] == "streamGenerateContent",
            system=" ".join(_texts(body.get("systemInstruction") or {})),
            main=main,
            schema=schema if isinstance(schema, dict) else None,
        )

    def reply(self, exchange: Exchange, reply: Reply, number: int) -> Response:
        parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
        parts.extend({"functionCall": _function_call(call)} for call in reply.calls)
        usage = reply.usage
        answer = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                # The prompt count includes what the cache served, as the API reports it.
                "promptTokenCount": usage.input + usage.cached,
                "cachedContentTokenCount": usage.cached,
                "candidatesTokenCount": usage.output,
                "totalTokenCount": usage.input + usage.cached + usage.output,
            },
            "modelVersion": reply.model or exchange.model,
            "responseId": f"scripted-{number}",
        }
        return _answer(exchange, answer)

    def failure(self, exchange: Exchange, failure: Failure) -> Response:
        body = failure.body or {
            "error": {
                "code": failure.status,
                "message": failure.message,
                "status": failure.kind or _STATUS_NAMES.get(failure.status, "UNKNOWN"),
            }
        }
        return Response.json(failure.status, body, failure.headers)

    def side_reply(self, exchange: Exchange) -> Response:
        return _answer(exchange, _side_answer(exchange))

    def other(self, method: str, path: str, body: Any) -> Response:
        if _COUNT_PATH.match(path):
            return Response.json(200, {"totalTokens": _count(body)})
        if method == "GET" and path.split("?")[0].rstrip("/").endswith("/models"):
            return Response.json(200, {"models": []})
        return Response.json(
            404, {"error": {"code": 404, "message": f"no {path}", "status": "NOT_FOUND"}}
        )


def _message(content: Mapping[str, Any]) -> Message:
    parts = content.get("parts") or ()
    return Message(
        role="assistant" if content.get("role") == "model" else "user",
        texts=tuple(_texts(content)),
        tool_calls=tuple(
            str(part["functionCall"].get("name", "")) for part in parts if "functionCall" in part
        ),
        tool_results=tuple(
            _result_text(part["functionResponse"]) for part in parts if "functionResponse" in part
        ),
    )


def _texts(content: Mapping[str, Any]) -> list[str]:
    # Thoughts are the model's own notes, not what the conversation says.
    return [
        part["text"]
        for part in content.get("parts") or ()
        if isinstance(part.get("text"), str) and not part.get("thought")
    ]


def _result_text(response: Mapping[str, Any]) -> str:
    inner = response.get("response")
    if isinstance(inner, dict):
        for key in ("output", "error"):
            if isinstance(inner.get(key), str):
                return str(inner[key])
    return json.dumps(inner)


def _function_call(call: WriteFile | RunShell | ToolCall) -> dict[str, Any]:
    # The call is made whether the request offered the tool or not, as a model
    # may: the CLI then answers 'Tool "…" not found' (what a level refuses).
    if isinstance(call, WriteFile):
        return {"name": "write_file", "args": {"file_path": call.path, "content": call.content}}
    if isinstance(call, RunShell):
        return {
            "name": "run_shell_command",
            "args": {"command": call.command, "description": "scripted command"},
        }
    return {"name": call.name, "args": dict(call.arguments)}


def _side_answer(exchange: Exchange) -> dict[str, Any]:
    text = json.dumps(_fill(exchange.schema)) if exchange.schema is not None else "ok"
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
        "modelVersion": exchange.model,
    }


def _fill(schema: Mapping[str, Any]) -> Any:
    """The least value that fits a JSON schema: the first choice, the minimum, "", [].

    The CLI's utility requests ask for scores and confidences: the least is
    always the benign answer (a simple task, no loop).
    """
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _fill(value) for name, value in properties.items() if isinstance(value, dict)}
    if kind == "array":
        return []
    if kind == "integer":
        # The router's complexity_score runs from 1: the lowest says "the flash model will do".
        return schema.get("minimum", 1)
    if kind == "number":
        # The loop detector's unproductive_state_confidence: 0, the conversation progresses.
        return schema.get("minimum", 0.0)
    if kind == "boolean":
        return False
    return "scripted"


def _answer(exchange: Exchange, answer: dict[str, Any]) -> Response:
    if exchange.stream:
        return Response(200, sse([(None, answer)]), content_type="text/event-stream")
    return Response.json(200, answer)


def _count(body: Any) -> int:
    return max(1, len(json.dumps(body)) // 4)


def _environment(server_url: str, home: Path) -> dict[str, str]:
    env = scratch_home(home)
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(SETTINGS, indent=2), encoding="utf-8")
    # The CLI writes a report of each API error it gives up on to the temporary
    # folder: the scratch home's, not the machine's.
    temporary = home / "tmp"
    temporary.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "TMPDIR": str(temporary),
            "GEMINI_API_KEY": "scripted-fake-key",
            "GOOGLE_GEMINI_BASE_URL": server_url,
            "GEMINI_CLI_HOME": str(home),
            "GEMINI_TELEMETRY_ENABLED": "false",
            "NO_BROWSER": "1",
        }
    )
    return env


SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
        # Each retry waits 5 s at least: one is enough to show a recovery.
        "maxAttempts": 2,
    },
    "ide": {"enabled": False},
}
"""The scratch home's ``~/.gemini/settings.json``. Folder trust stays on (the
default): the executor's own ``--skip-trust`` must be what lets it run."""

PROFILE = CliProfile(executor="gemini", provider=GeminiProvider, environment=_environment)
