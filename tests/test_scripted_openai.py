"""The OpenAI Responses adapter, on request bodies shaped as Codex 0.171 sends them.

The real CLI meets the adapter in ``tests/test_real_codex_e2e.py``; these
cover what it does not choose to exercise there: a model outside code mode
(``exec_command`` as a plain function, no ``apply_patch``), and the shapes
of usage and errors.
"""

from __future__ import annotations

import json
from typing import Any

from orchestra._scripted import Failure, Reply, RunShell, Usage, WriteFile
from orchestra._scripted._openai import OpenAIResponses, add_file_patch, config_toml


def body(*items: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"model": "gpt-6.2-sol", "stream": True, "input": list(items), "tools": tools or []}


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


CODE_MODE = {
    "type": "additional_tools",
    "role": "developer",
    "tools": [
        {"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec"}]}
    ],
}


def streamed(response: Any) -> list[dict[str, Any]]:
    chunks = b"".join(response.body).decode()
    return [json.loads(line[6:]) for line in chunks.splitlines() if line.startswith("data: ")]


def test_codex_context_is_not_the_prompt_and_outputs_are_tool_results() -> None:
    exchange = OpenAIResponses().read(
        "POST",
        "/v1/responses",
        body(
            CODE_MODE,
            user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
            user("fix the bug"),
            {"type": "custom_tool_call", "name": "exec", "call_id": "c1", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Script completed"},
        ),
    )
    assert exchange is not None
    assert exchange.prompt == "fix the bug"
    assert exchange.tools == ("exec",)
    assert exchange.answers == 1
    assert exchange.tool_results == ("Script completed",)


def test_code_mode_calls_the_nested_tools_from_javascript() -> None:
    adapter = OpenAIResponses()
    exchange = adapter.read("POST", "/v1/responses", body(CODE_MODE, user("go")))
    assert exchange is not None
    reply = Reply(calls=(WriteFile("a.txt", "x\n"), RunShell("pytest -q")))
    items = [
        e["item"] for e in streamed(adapter.reply(exchange, reply, 0)) if e["type"].endswith("done")
    ]
    patch, shell = items
    assert patch["type"] == shell["type"] == "custom_tool_call"
    assert json.dumps(add_file_patch(WriteFile("a.txt", "x\n"))) in patch["input"]
    assert 'tools.exec_command({"cmd": "pytest -q"' in shell["input"]


def test_a_model_outside_code_mode_gets_exec_command_function_calls() -> None:
    adapter = OpenAIResponses()
    tools = [{"type": "function", "name": "exec_command"}, {"type": "web_search"}]
    exchange = adapter.read("POST", "/v1/responses", body(user("go"), tools=tools))
    assert exchange is not None
    assert exchange.tools == ("exec_command", "web_search")
    events = streamed(adapter.reply(exchange, Reply(calls=(WriteFile("a b.txt", "it's\n"),)), 0))
    [call] = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert call["type"] == "function_call"
    assert json.loads(call["arguments"]) == {"cmd": "printf %s 'it'\"'\"'s\n' > 'a b.txt'"}


def test_usage_counts_cached_input_in_input_tokens_and_errors_carry_their_type() -> None:
    adapter = OpenAIResponses()
    exchange = adapter.read("POST", "/v1/responses", body(CODE_MODE, user("go")))
    assert exchange is not None
    events = streamed(adapter.reply(exchange, Reply(text="hi", usage=Usage(10, 5, 90)), 3))
    completed = events[-1]["response"]
    assert completed["usage"]["input_tokens"] == 100
    assert completed["usage"]["input_tokens_details"] == {"cached_tokens": 90}
    assert completed["usage"]["output_tokens"] == 5
    refused = adapter.failure(exchange, Failure(429, "slow down", headers={"retry-after": "2"}))
    assert refused.status == 429
    assert refused.headers == {"retry-after": "2"}
    assert isinstance(refused.body, bytes)
    assert json.loads(refused.body)["error"]["type"] == "rate_limit_exceeded"


def test_the_config_points_codex_at_loopback_only() -> None:
    config = config_toml("http://127.0.0.1:4242")
    assert 'base_url = "http://127.0.0.1:4242/v1"' in config
    assert 'wire_api = "responses"' in config
    assert "check_for_update_on_startup = false" in config
