"""The Anthropic Messages API as Claude Code 2.1.197 (``claude -p``) uses it, on loopback.

Facts this adapter relies on, read from the requests of the pinned release
(``claude --version``: 2.1.197) run against this server, and from the CLI's
public documentation of its environment variables:

- ``ANTHROPIC_BASE_URL`` sends every model call to ``POST
  {base}/v1/messages?beta=true`` (``stream: true``, server-sent events:
  ``message_start``, ``content_block_start`` / ``_delta`` / ``_stop`` with
  ``text_delta`` and ``input_json_delta``, ``message_delta`` with the
  ``stop_reason`` and the output usage, ``message_stop``); the key
  ``ANTHROPIC_API_KEY`` comes back as ``x-api-key``. The CLI also sends a
  ``HEAD /`` reachability probe first, whatever it is answered.
- Messages of role ``system`` may appear mid-conversation (the CLI's
  reminders: "The task tools haven't been used recently"), and a request's
  first user message holds a ``<system-reminder>`` block (the
  date, the project's memory) before the prompt; the system prompt names the
  working directory (``Primary working directory: /path``), which the
  ``Write`` tool needs, since it takes only absolute paths and refuses to
  overwrite a file the conversation has not read.
- A Stop hook that blocks comes back as a user message ``Stop hook
  feedback:\n<reason>``; it is read here as the answer to the model's stop
  (like a tool result), so the conversation goes on.
- The agent's loop offers its tools (``Bash`` with ``command`` and
  ``description``, ``Write`` with ``file_path`` and ``content``, ``Edit``,
  ``Read`` …); a request with none is a side request (a title, a check) and
  gets a short text.
- The CLI retries a 429 and any 5xx itself, ``CLAUDE_CODE_MAX_RETRIES`` times
  (default 10, at most 15), waiting ``retry-after`` seconds or 0.5 s doubling;
  a ``retry-after`` over 60 s ends the call at once. Each retry is a
  ``system/api_retry`` stream-json event with ``retry_delay_ms``.
- Cost is the CLI's own figure (``total_cost_usd``): the default model
  ``claude-opus-4-8`` is priced $5 input / $25 output per million tokens.
- ``CLAUDE_CONFIG_DIR`` holds its settings, sessions and credentials (under
  the scratch home here); ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``,
  ``DISABLE_AUTOUPDATER`` and ``DISABLE_TELEMETRY`` keep it off the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ._profile import CliProfile, scratch_home
from ._script import Call, Failure, Reply, RunShell, ToolCall, Usage, WriteFile
from ._server import Exchange, Message, Response, sse

# The error types the Messages API answers each status with.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_WORKDIR = re.compile(r"Primary working directory: (\S.*)")
_REMINDER = "<system-reminder>"
_STOP_FEEDBACK = "Stop hook feedback:"
_SIDE_USAGE = Usage(input=10, output=3)


class AnthropicMessages:
    """The Messages API (streaming) for Claude Code; an implementation of ``Provider``."""

    name = "anthropic"

    def read(self, method: str, path: str, body: Any) -> Exchange | None:
        """A ``POST /v1/messages`` body as an :class:`Exchange`; None for other endpoints."""
        endpoint = path.split("?", 1)[0]
        if method != "POST" or endpoint != "/v1/messages" or not isinstance(body, dict):
            return None
        tools = tuple(str(tool.get("name", "")) for tool in body.get("tools") or ())
        return Exchange(
            # Mid-conversation "system" messages are the CLI's reminders, not the dialogue.
            messages=tuple(
                _message(raw) for raw in body.get("messages") or () if raw.get("role") != "system"
            ),
            tools=tools,
            model=str(body.get("model", "")),
            stream=bool(body.get("stream")),
            system=_system_text(body.get("system")),
            main=bool(tools),
        )

    def reply(self, exchange: Exchange, reply: Reply, number: int) -> Response:
        """The model's answer: a text block, then a ``tool_use`` block per call."""
        blocks = [{"type": "text", "text": reply.text}] if reply.text else []
        blocks += [
            _tool_use(exchange, call, f"toolu_{number:04d}_{index}")
            for index, call in enumerate(reply.calls)
        ]
        message = {
            "id": f"msg_scripted_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": reply.model or exchange.model,
            "content": blocks,
            "stop_reason": "tool_use" if reply.calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": reply.usage.input,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": reply.usage.cached,
                "output_tokens": reply.usage.output,
            },
        }
        if not exchange.stream:
            return Response.json(200, message)
        return Response(200, sse(_events(message)), content_type="text/event-stream")

    def failure(self, exchange: Exchange, failure: Failure) -> Response:
        """The API's error body (``{"type": "error", "error": {type, message}}``)."""
        kind = failure.kind or _ERROR_TYPES.get(failure.status, "api_error")
        body = failure.body or {
            "type": "error",
            "error": {"type": kind, "message": failure.message},
        }
        headers = {"request-id": "req_scripted", **failure.headers}
        return Response.json(failure.status, body, headers)

    def side_reply(self, exchange: Exchange) -> Response:
        """A side request (no tools offered) gets a short answer of its own."""
        return self.reply(exchange, Reply(text="Scripted session", usage=_SIDE_USAGE), 0)

    def other(self, method: str, path: str, body: Any) -> Response:
        """Token counts, the model list and the reachability probe; 404 for the rest."""
        endpoint = path.split("?", 1)[0]
        if endpoint == "/v1/messages/count_tokens":
            return Response.json(200, {"input_tokens": 100})
        if endpoint == "/v1/models":
            model = {"type": "model", "id": "claude-opus-4-8", "display_name": "Opus 4.8"}
            return Response.json(200, {"data": [model], "has_more": False})
        if endpoint == "/":
            return Response.json(200, {})
        return Response.json(404, {"type": "error", "error": {"type": "not_found_error"}})


def _message(raw: Mapping[str, Any]) -> Message:
    content = raw.get("content")
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else []
    if isinstance(content, list):
        blocks = content
    said = [str(block.get("text", "")) for block in blocks if block.get("type") == "text"]
    texts = tuple(t for t in said if not t.startswith((_REMINDER, _STOP_FEEDBACK)))
    calls = tuple(str(block.get("name")) for block in blocks if block.get("type") == "tool_use")
    results = tuple(
        _result_text(block.get("content")) for block in blocks if block.get("type") == "tool_result"
    )
    # A Stop hook's block comes back as a user text: it answers the model's
    # stop, as a tool's result answers a call, and the conversation goes on.
    results += tuple(t for t in said if t.startswith(_STOP_FEEDBACK))
    return Message(role=str(raw.get("role")), texts=texts, tool_calls=calls, tool_results=results)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(part.get("text", "")) for part in system if isinstance(part, dict))
    return ""


def _tool_use(exchange: Exchange, call: Call, tool_id: str) -> dict[str, Any]:
    name, arguments = _tool_for(exchange, call)
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


def _tool_for(exchange: Exchange, call: Call) -> tuple[str, Mapping[str, Any]]:
    """The CLI's own tool for ``call``, as the request offers it."""
    if isinstance(call, ToolCall):
        return call.name, call.arguments
    if isinstance(call, WriteFile):
        _offered(exchange, "Write")
        return "Write", {"file_path": _absolute(exchange, call.path), "content": call.content}
    if isinstance(call, RunShell):
        _offered(exchange, "Bash")
        return "Bash", {"command": call.command, "description": "Run a scripted command"}
    raise TypeError(f"not a tool call: {call!r}")


def _offered(exchange: Exchange, tool: str) -> None:
    if tool not in exchange.tools:
        raise ValueError(
            f"the request offers no {tool} tool (offered: {', '.join(exchange.tools)})"
        )


def _absolute(exchange: Exchange, path: str) -> str:
    """``path`` under the working directory the system prompt names (Write wants it absolute)."""
    if Path(path).is_absolute():
        return path
    found = _WORKDIR.search(exchange.system)
    if found is None:
        raise ValueError("the system prompt names no working directory for a relative Write")
    return str(Path(found.group(1).strip()) / path)


def _events(message: Mapping[str, Any]) -> Iterator[tuple[str, object]]:
    """The stream of one message, block by block, as the API sends it."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block)
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[tuple[str, object]]:
    if block["type"] == "text":
        empty: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
    else:
        empty = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": empty},
    )
    yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def claude_environment(server_url: str, home: Path) -> dict[str, str]:
    """The variables that point Claude Code at ``server_url`` with a fake key.

    Its configuration folder is under the scratch ``home``; nothing of the
    user's is read, and nothing but the server is called.
    """
    config = home / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    return {
        **scratch_home(home),
        "CLAUDE_CONFIG_DIR": str(config),
        "ANTHROPIC_BASE_URL": server_url,
        "ANTHROPIC_API_KEY": "sk-ant-scripted-not-a-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # Few retries of a refused call, so a persistent error ends in seconds.
        "CLAUDE_CODE_MAX_RETRIES": "2",
    }


PROFILE = CliProfile(executor="claude", provider=AnthropicMessages, environment=claude_environment)
