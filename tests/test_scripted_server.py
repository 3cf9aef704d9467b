"""The scripted model server's own rules, through a toy provider and real HTTP on loopback.

Which reply a request gets: a new conversation takes the next script entry
its prompt matches, a continued one the next reply, a retry the next failure
and then the reply, a resumed session with a new prompt the next entry; side
requests get the side answer, and a request past the script is a problem.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from orchestra._scripted import (
    Conversation,
    Exchange,
    Failure,
    Message,
    Reply,
    Response,
    Script,
    ScriptedServer,
)


class Toy:
    """{"messages": [{"role", "text"|"result"}], "tools": [...]} -> {"text": ...}."""

    name = "toy"

    def read(self, method: str, path: str, body: Any) -> Exchange | None:
        if path != "/chat":
            return None
        messages = tuple(
            Message(
                role=m["role"],
                texts=(m["text"],) if "text" in m else (),
                tool_results=(m["result"],) if "result" in m else (),
            )
            for m in body["messages"]
        )
        return Exchange(messages=messages, tools=tuple(body["tools"]), main=bool(body["tools"]))

    def reply(self, exchange: Exchange, reply: Reply, number: int) -> Response:
        return Response.json(200, {"text": reply.text, "number": number})

    def failure(self, exchange: Exchange, failure: Failure) -> Response:
        return Response.json(failure.status, {"error": failure.message}, failure.headers)

    def side_reply(self, exchange: Exchange) -> Response:
        return Response.json(200, {"text": "side"})

    def other(self, method: str, path: str, body: Any) -> Response:
        return Response.json(404, {"error": "no such endpoint"})


def post(server: ScriptedServer, messages: list[dict[str, str]], tools: bool = True) -> Any:
    data = json.dumps({"messages": messages, "tools": ["t"] if tools else []}).encode()
    request = urllib.request.Request(server.url + "/chat", data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return {"status": error.code, **json.loads(error.read()), "retry": error.headers["retry"]}


def test_conversations_replies_and_resume() -> None:
    script = Script(
        (
            Conversation((Reply("a1"), Reply("a2"))),
            Conversation((Reply("b1"),), match="second"),
            Conversation((Reply("resumed"),)),
        )
    )
    with ScriptedServer(Toy(), script) as server:
        first = [{"role": "user", "text": "first task"}]
        assert post(server, first)["text"] == "a1"
        more = [*first, {"role": "assistant", "text": "a1"}, {"role": "user", "result": "ok"}]
        assert post(server, more)["text"] == "a2"
        assert post(server, [{"role": "user", "text": "the second one"}])["text"] == "b1"
        resumed = [*more, {"role": "assistant", "text": "a2"}, {"role": "user", "text": "go on"}]
        assert post(server, resumed)["text"] == "resumed"
        assert post(server, first, tools=False)["text"] == "side"
        assert server.problems == []
        assert [r.served for r in server.exchanges] == ["reply", "reply", "reply", "reply", "side"]


def test_a_retry_gets_the_failures_then_the_reply() -> None:
    failing = Reply("done", failures=(Failure(429, "slow down", {"retry": "2"}, times=2),))
    script = Script((Conversation((failing,)), Conversation((Reply("again"),))))
    with ScriptedServer(Toy(), script) as server:
        prompt = [{"role": "user", "text": "task"}]
        assert post(server, prompt) == {"status": 429, "error": "slow down", "retry": "2"}
        assert post(server, prompt)["status"] == 429
        assert post(server, prompt)["text"] == "done"
        # The same prompt once the reply was served is the next session.
        assert post(server, prompt)["text"] == "again"


def test_past_the_script_is_a_problem() -> None:
    with ScriptedServer(Toy(), Script.of(Reply("only"))) as server:
        assert post(server, [{"role": "user", "text": "x"}])["text"] == "only"
        assert post(server, [{"role": "user", "text": "y"}])["text"] == "(the script is over)"
        assert len(server.problems) == 1
        assert post(server, [], tools=False)["text"] == "side"
