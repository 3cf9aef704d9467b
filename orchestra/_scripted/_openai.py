"""The OpenAI Responses API (streaming), as Codex CLI 0.171.0 uses it, for a scripted server.

What this adapter relies on, each seen by running ``codex exec --json``
0.171.0 against it and reading its requests:

- Codex sends every model turn as ``POST /v1/responses`` with
  ``"stream": true`` and reads server-sent events: ``response.created``,
  ``response.output_item.added`` / ``.done`` (a ``message`` with
  ``output_text`` parts, a ``function_call``, a ``custom_tool_call``),
  ``response.output_text.delta`` and ``response.completed`` with ``usage``
  (``input_tokens`` including ``input_tokens_details.cached_tokens``,
  ``output_tokens``). It asks for no model list and no token count from a
  provider of its own config.
- The conversation is the request's ``input``: ``message`` items (roles
  ``developer``, ``user``, ``assistant``), the model's earlier
  ``function_call`` / ``custom_tool_call`` items and their
  ``function_call_output`` / ``custom_tool_call_output``. Codex sends its
  own context as user messages too (``<environment_context>…``, AGENTS.md):
  those are not the prompt.
- The tools come in the top-level ``tools`` list, or, for the release's
  default model (``gpt-6.2-sol``, which Codex runs in "code mode"), in an
  ``additional_tools`` input item whose namespaces hold a freeform
  ``exec`` tool: the model writes JavaScript that calls the nested tools,
  ``tools.exec_command({cmd})`` (the shell) and ``tools.apply_patch(patch)``
  (the file editor, a freeform patch). Older models (``gpt-5-codex``) get
  ``exec_command`` as a plain function tool. The adapter uses whichever the
  request offers.
- An HTTP error's body is ``{"error": {"type", "code", "message", …}}``.
  A 429 whose error type is ``usage_limit_reached`` is the account's usage
  limit, which Codex does not retry; it words ``resets_at`` (an epoch) as
  "… or try again at 1:07 AM." (with a ``plan_type``) or "Try again at Dec
  3rd, 2026 2:10 AM.", and without it (``resets_in_seconds`` alone is not
  read) "Try again later.". Other 429s and 5xx are retried: each of
  ``stream_max_retries`` + 1 stream attempts makes one request for a 429,
  up to ``request_max_retries`` + 1 for a 5xx, with a
  ``Reconnecting... n/N (…)`` error event per new stream;
  at the end, "exceeded retry limit, last status: 429 Too Many Requests",
  "We’re currently experiencing high demand, …" (500) or "unexpected status
  503 Service Unavailable: <message>, url: …".
- No side requests (titles, model lists, token counts) in ``codex exec``.

:data:`PROFILE` points the CLI at the server through a ``config.toml`` in a
scratch ``CODEX_HOME``: a model provider of its own (``base_url`` on
loopback, ``wire_api = "responses"``, a fake key in the variable its
``env_key`` names, small retry counts), update checks and analytics off.
Facts about that file come from the Codex configuration reference
(developers.openai.com/codex/config-reference).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ._profile import CliProfile, scratch_home
from ._script import Call, Failure, Reply, RunShell, ToolCall, Usage, WriteFile
from ._server import Exchange, Message, Response, sse

# What Codex itself puts in user messages before the prompt: not the user's words.
_CONTEXT_OPENINGS = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
_CALL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call"}
_RESULT_ITEMS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
# The variable holding the fake key, named by the provider table's env_key.
KEY_VARIABLE = "SCRIPTED_OPENAI_API_KEY"


class OpenAIResponses:
    """The Responses API at ``/v1/responses``, with Codex's tools."""

    name = "openai-responses"

    def read(self, method: str, path: str, body: Any) -> Exchange | None:
        if method != "POST" or not path.split("?")[0].endswith("/responses"):
            return None
        if not isinstance(body, dict):
            return None
        items = [item for item in body.get("input") or () if isinstance(item, dict)]
        tools = _offered_tools(body.get("tools") or (), items)
        return Exchange(
            messages=tuple(_messages(items)),
            tools=tools,
            model=str(body.get("model") or ""),
            stream=bool(body.get("stream", True)),
            system=str(body.get("instructions") or ""),
            main=bool(tools),
        )

    def reply(self, exchange: Exchange, reply: Reply, number: int) -> Response:
        model = reply.model or exchange.model
        output = [_message_item(reply.text, number)] if reply.text else []
        output += [
            _call_item(call, exchange.tools, f"{number}_{index}")
            for index, call in enumerate(reply.calls)
        ]
        response = {
            "id": f"resp_{number}",
            "object": "response",
            "model": model,
            "status": "completed",
            "output": output,
            "usage": _usage(reply.usage),
        }
        return Response(200, sse(_events(response)), content_type="text/event-stream")

    def failure(self, exchange: Exchange, failure: Failure) -> Response:
        body = failure.body or {"error": _error(failure)}
        return Response.json(failure.status, body, failure.headers)

    def side_reply(self, exchange: Exchange) -> Response:
        return self.reply(exchange, Reply(text="ok"), 0)

    def other(self, method: str, path: str, body: Any) -> Response:
        if method == "GET" and path.split("?")[0].endswith("/models"):
            return Response.json(200, {"object": "list", "data": []})
        return Response.json(404, {"error": {"message": f"no such endpoint: {method} {path}"}})


def _offered_tools(listed: Iterable[Any], items: list[dict[str, Any]]) -> tuple[str, ...]:
    """Every tool name the request offers, namespaces flattened."""
    found: list[str] = []
    groups = [listed] + [
        item.get("tools") or () for item in items if item.get("type") == "additional_tools"
    ]
    for group in groups:
        found += _tool_names(group)
    return tuple(found)


def _tool_names(tools: Iterable[Any]) -> list[str]:
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names += _tool_names(tool.get("tools") or ())
        elif isinstance(tool.get("name"), str):
            names.append(tool["name"])
        elif isinstance(tool.get("type"), str):
            names.append(tool["type"])  # a hosted tool: web_search
    return names


def _messages(items: list[dict[str, Any]]) -> list[Message]:
    """The conversation: consecutive model items are one answer, consecutive outputs one turn."""
    messages: list[Message] = []
    for item in items:
        piece = _piece(item)
        if piece is None:
            continue
        if messages and messages[-1].role == piece.role:
            last = messages[-1]
            piece = Message(
                piece.role,
                last.texts + piece.texts,
                last.tool_calls + piece.tool_calls,
                last.tool_results + piece.tool_results,
            )
            messages[-1] = piece
        else:
            messages.append(piece)
    return messages


def _piece(item: dict[str, Any]) -> Message | None:
    """One input item as (part of) a message; None for what is no one's words."""
    kind = item.get("type", "message")
    if kind == "message" and item.get("role") in ("user", "assistant"):
        text = _text(item.get("content"))
        if item["role"] == "user" and text.lstrip().startswith(_CONTEXT_OPENINGS):
            return None
        return Message(str(item["role"]), texts=(text,) if text else ())
    if kind == "reasoning":
        return Message("assistant")
    if kind in _CALL_ITEMS:
        return Message("assistant", tool_calls=(str(item.get("name") or kind),))
    if kind in _RESULT_ITEMS:
        return Message("user", tool_results=(_text(item.get("output")),))
    return None  # developer messages, the tool list


def _text(content: Any) -> str:
    """The text of a message's content or a tool's output (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part) for part in content if _text(part))
    if isinstance(content, dict):
        text = content.get("text") or content.get("output") or content.get("content")
        return _text(text) if text is not None else ""
    return ""


def _message_item(text: str, number: int) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{number}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call_item(call: Call, tools: tuple[str, ...], ident: str) -> dict[str, Any]:
    """The output item asking for ``call``, with the tools this request offers."""
    if isinstance(call, ToolCall):
        return _direct(call.name, dict(call.arguments), ident)
    if "exec_command" in tools and "exec" not in tools:
        # A model outside code mode: the shell is a function tool, and files are
        # written through it (this release offers such models no apply_patch).
        command = call.command if isinstance(call, RunShell) else _write_command(call)
        return _direct("exec_command", {"cmd": command}, ident)
    if "exec" in tools:
        return _direct("exec", {"input": _code_mode_source(call)}, ident)
    raise ValueError(f"the request offers no shell tool Codex's calls can use (offered: {tools})")


def _direct(name: str, arguments: dict[str, Any], ident: str) -> dict[str, Any]:
    """A call of a tool by its name: freeform (``exec``, ``apply_patch``) or a function."""
    if name in ("exec", "apply_patch") and set(arguments) == {"input"}:
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{ident}",
            "call_id": f"call_{ident}",
            "name": name,
            "input": str(arguments["input"]),
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": f"fc_{ident}",
        "call_id": f"call_{ident}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _code_mode_source(call: RunShell | WriteFile) -> str:
    """The JavaScript a code-mode model writes for ``call``: it calls the nested tool."""
    if isinstance(call, RunShell):
        request = json.dumps({"cmd": call.command, "yield_time_ms": 30000})
        return (
            f"const result = await tools.exec_command({request});\n"
            "text(result.output);\n"
            'text("exit code: " + result.exit_code);\n'
        )
    patch = json.dumps(add_file_patch(call))
    return f"const result = await tools.apply_patch({patch});\ntext(result);\n"


def add_file_patch(call: WriteFile) -> str:
    """An ``apply_patch`` patch that creates (or replaces) the file."""
    lines = call.content.splitlines() or [""]
    body = "\n".join("+" + line for line in lines)
    return f"*** Begin Patch\n*** Add File: {call.path}\n{body}\n*** End Patch"


def _write_command(call: WriteFile) -> str:
    """A shell command writing the file, for a model that has only the shell."""
    return f"printf %s {shlex.quote(call.content)} > {shlex.quote(call.path)}"


def _usage(usage: Usage) -> dict[str, Any]:
    """The API's usage: ``input_tokens`` counts the cached ones too."""
    return {
        "input_tokens": usage.input + usage.cached,
        "input_tokens_details": {"cached_tokens": usage.cached},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input + usage.cached + usage.output,
    }


def _events(response: dict[str, Any]) -> Iterator[tuple[str | None, object]]:
    created = {**response, "status": "in_progress", "output": []}
    del created["usage"]
    yield "response.created", {"type": "response.created", "response": created}
    for index, item in enumerate(response["output"]):
        yield (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress"},
            },
        )
        if item["type"] == "message":
            yield (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": item["content"][0]["text"],
                },
            )
        yield (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": item,
            },
        )
    yield "response.completed", {"type": "response.completed", "response": response}


def _error(failure: Failure) -> dict[str, Any]:
    kind = failure.kind or _DEFAULT_KINDS.get(failure.status, "server_error")
    return {"type": kind, "code": kind, "message": failure.message, "param": None}


_DEFAULT_KINDS = {429: "rate_limit_exceeded", 400: "invalid_request_error", 401: "invalid_api_key"}


def _environment(server_url: str, home: Path) -> dict[str, str]:
    """Codex pointed at ``server_url``: a scratch ``CODEX_HOME`` with its config.toml."""
    env = scratch_home(home)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(config_toml(server_url), encoding="utf-8")
    env.update({"CODEX_HOME": str(codex_home), KEY_VARIABLE: "sk-scripted-not-a-real-key"})
    # Codex refuses to make its helper binaries (apply_patch, which its
    # bubblewrap sandbox runs file edits with) under the temporary folder,
    # and a scratch home usually lies there: every edit then fails where
    # bubblewrap is installed. A temporary folder of the home's own keeps the
    # home outside it.
    own_tmp = home / "tmp"
    own_tmp.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(own_tmp)
    return env


def config_toml(server_url: str) -> str:
    """The config.toml that sends every model request to ``server_url`` and nothing elsewhere."""
    return f"""\
# Written by Forge's scripted server: a provider on loopback, nothing else.
model_provider = "scripted"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.scripted]
name = "scripted"
base_url = "{server_url}/v1"
wire_api = "responses"
env_key = "{KEY_VARIABLE}"
# Codex retries a refused or broken request itself: few, so a test stays quick.
request_max_retries = 2
stream_max_retries = 2
stream_idle_timeout_ms = 20000
"""


PROFILE = CliProfile(executor="codex", provider=OpenAIResponses, environment=_environment)
