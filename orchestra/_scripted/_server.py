"""A scripted model server on loopback: a provider's HTTP API that plays a :class:`Script`.

The server knows no vendor. A :class:`Provider` adapter reads each request
into an :class:`Exchange` (the conversation so far, as the CLI sent it) and
writes replies and errors in its API's shapes; the server decides which reply
of the script a request gets:

- a request whose conversation has no model answer yet, or ends in a new
  prompt after some (a resumed session), starts the next conversation of the
  script whose ``match`` is in the prompt;
- a request that continues a conversation gets the reply after the last one
  the conversation holds;
- a request that repeats one whose reply is still behind failures is a retry:
  it gets the next failure, or the reply;
- a request that is not the agent's main loop (no tools offered: a title, a
  next-speaker check) gets the provider's short answer for it.

Every request is recorded (:attr:`ScriptedServer.exchanges`), so a test can
read what the CLI sent back: a tool's output, a hook's refusal.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol

import attrs

from ._script import Conversation, Failure, Reply, Script


@attrs.frozen
class Message:
    """One message of a conversation, as a provider's request carries it."""

    role: str  # "user" or "assistant"
    texts: tuple[str, ...] = ()
    tool_calls: tuple[str, ...] = ()  # tool names the assistant called
    tool_results: tuple[str, ...] = ()  # the text of each tool result the user message carries


@attrs.frozen
class Exchange:
    """A model request, read by its provider's adapter."""

    messages: tuple[Message, ...]
    tools: tuple[str, ...]  # the tool names offered; none for a side request
    model: str = ""
    stream: bool = True
    system: str = ""
    main: bool = True  # the agent's own loop (False: a title, a check, a classifier)
    # The JSON schema the answer must fit, when the request asks for JSON (a router's
    # classifier): a side reply that reads it can answer in kind.
    schema: Mapping[str, Any] | None = attrs.field(default=None, eq=False)

    @property
    def prompt(self) -> str:
        """The first user message's text: what the session was started with."""
        for message in self.messages:
            if message.role == "user" and message.texts:
                return "\n".join(message.texts)
        return ""

    @property
    def answers(self) -> int:
        """How many model answers the conversation already holds."""
        return sum(1 for message in self.messages if message.role == "assistant")

    @property
    def new_prompt(self) -> bool:
        """Whether the conversation ends in a user's prompt rather than tool results."""
        last = self.messages[-1] if self.messages else None
        return last is not None and last.role == "user" and not last.tool_results

    @property
    def tool_results(self) -> tuple[str, ...]:
        """The tool results of the last user message (what the CLI's tools answered)."""
        last = self.messages[-1] if self.messages else None
        return last.tool_results if last is not None and last.role == "user" else ()


@attrs.frozen
class Response:
    """An HTTP answer: a status, headers, and the body (chunks, for a stream)."""

    status: int
    body: bytes | Iterable[bytes]
    content_type: str = "application/json"
    headers: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def json(cls, status: int, value: object, headers: Mapping[str, str] | None = None) -> Response:
        return cls(status, json.dumps(value).encode(), headers=dict(headers or {}))


class Provider(Protocol):
    """A provider's API, as the scripted server speaks it."""

    name: str

    def read(self, method: str, path: str, body: Any) -> Exchange | None:
        """The model request at ``path``, or None for any other endpoint."""

    def reply(self, exchange: Exchange, reply: Reply, number: int) -> Response:
        """The answer for ``reply`` (``number``: how many replies the server served before)."""

    def failure(self, exchange: Exchange, failure: Failure) -> Response:
        """The HTTP error for ``failure``."""

    def side_reply(self, exchange: Exchange) -> Response:
        """The answer to a request that is not the agent's loop."""

    def other(self, method: str, path: str, body: Any) -> Response:
        """Any endpoint that is not a model request (a model list, a token count)."""


@attrs.frozen
class Recorded:
    """One request the server received, and what it was given."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    exchange: Exchange | None
    served: str  # "reply", "failure", "side", "other", "exhausted"
    status: int
    conversation: int | None = None  # index in the script
    reply: int | None = None  # index in that conversation


@attrs.define
class _Binding:
    conversation: int
    offset: int  # answers the session held when this conversation began


class ScriptedServer:
    """A provider's API on 127.0.0.1, playing ``script``; a context manager.

    Args:
        provider: the adapter for the API to speak.
        script: the conversations to play.
        port: 0 for any free port.
    """

    def __init__(self, provider: Provider, script: Script, *, port: int = 0) -> None:
        self.provider = provider
        self.script = script
        self._lock = threading.Lock()
        self._taken = [False] * len(script.conversations)
        self._sessions: dict[str, _Binding] = {}
        self._attempts: dict[str, int] = {}  # request fingerprint -> attempts served
        self._served = 0
        self.exchanges: list[Recorded] = []
        self.problems: list[str] = []  # requests the script had no answer for
        self._http = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for a serve_forever that never ran
            self._http.shutdown()
            self._thread.join(timeout=5)
        self._http.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def main_exchanges(self) -> list[Recorded]:
        """The recorded requests of the agent's own loop."""
        with self._lock:
            return [r for r in self.exchanges if r.exchange is not None and r.exchange.main]

    def answer(self, method: str, path: str, headers: Mapping[str, str], body: Any) -> Response:
        """The response to one request (the handler's whole job, kept testable)."""
        exchange = self.provider.read(method, path, body)
        with self._lock:
            if exchange is None:
                response = self.provider.other(method, path, body)
                self._record(method, path, headers, body, None, "other", response)
                return response
            if not exchange.main:
                response = self.provider.side_reply(exchange)
                self._record(method, path, headers, body, exchange, "side", response)
                return response
            picked = self._pick(exchange)
            if picked is None:
                self.problems.append(
                    f"no scripted reply for a request with {exchange.answers} answer(s) "
                    f"and prompt {exchange.prompt[:200]!r}"
                )
                response = self.provider.reply(exchange, Reply(text="(the script is over)"), 0)
                self._record(method, path, headers, body, exchange, "exhausted", response)
                return response
            conversation_index, reply_index, attempt = picked
            reply = self.script.conversations[conversation_index].replies[reply_index]
            failure = reply.failure_for(attempt)
            if failure is not None:
                response = self.provider.failure(exchange, failure)
                served = "failure"
            else:
                response = self.provider.reply(exchange, reply, self._served)
                self._served += 1
                served = "reply"
            self._record(
                method,
                path,
                headers,
                body,
                exchange,
                served,
                response,
                conversation_index,
                reply_index,
            )
            return response

    def _pick(self, exchange: Exchange) -> tuple[int, int, int] | None:
        fingerprint = _fingerprint(exchange)
        session = _session_key(exchange)
        binding = self._sessions.get(session)
        attempts = self._attempts.get(fingerprint)
        if binding is not None and attempts is not None:
            index = exchange.answers - binding.offset
            replies = self.script.conversations[binding.conversation].replies
            if 0 <= index < len(replies) and attempts <= replies[index].attempts_refused:
                self._attempts[fingerprint] = attempts + 1  # a retry of the same request
                return binding.conversation, index, attempts
        if binding is None or exchange.answers == 0 or exchange.new_prompt:
            conversation = self._next_conversation(exchange.prompt)
            if conversation is None:
                return None
            binding = _Binding(conversation, exchange.answers)
            self._sessions[session] = binding
        index = exchange.answers - binding.offset
        replies = self.script.conversations[binding.conversation].replies
        if not 0 <= index < len(replies):
            return None
        self._attempts[fingerprint] = 1
        return binding.conversation, index, 0

    def _next_conversation(self, prompt: str) -> int | None:
        for index, conversation in enumerate(self.script.conversations):
            if not self._taken[index] and _matches(conversation, prompt):
                self._taken[index] = True
                return index
        return None

    def _record(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: Any,
        exchange: Exchange | None,
        served: str,
        response: Response,
        conversation: int | None = None,
        reply: int | None = None,
    ) -> None:
        self.exchanges.append(
            Recorded(
                method=method,
                path=path,
                headers=dict(headers),
                body=body,
                exchange=exchange,
                served=served,
                status=response.status,
                conversation=conversation,
                reply=reply,
            )
        )


def _matches(conversation: Conversation, prompt: str) -> bool:
    return conversation.match in prompt


def _session_key(exchange: Exchange) -> str:
    return hashlib.sha256(exchange.prompt.encode()).hexdigest()


def _fingerprint(exchange: Exchange) -> str:
    last = exchange.messages[-1] if exchange.messages else None
    text = json.dumps(
        [exchange.prompt, exchange.answers, attrs.asdict(last) if last else None], default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the recorded exchanges are the log."""

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", errors="replace")
            headers = {key.lower(): value for key, value in self.headers.items()}
            try:
                response = server.answer(method, self.path, headers, body)
            except Exception as error:  # a broken adapter answers 500, and says why
                server.problems.append(f"{method} {self.path}: {type(error).__name__}: {error}")
                response = Response.json(500, {"error": {"message": str(error)}})
            self._send(response)

        def _send(self, response: Response) -> None:
            self.send_response(response.status)
            self.send_header("content-type", response.content_type)
            for key, value in response.headers.items():
                self.send_header(key, value)
            if isinstance(response.body, bytes):
                self.send_header("content-length", str(len(response.body)))
                self.end_headers()
                self.wfile.write(response.body)
                return
            self.send_header("transfer-encoding", "chunked")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            try:
                for chunk in _chunks(response.body):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler


def _chunks(body: Iterable[bytes]) -> Iterator[bytes]:
    for piece in body:
        if piece:
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def sse(events: Iterable[tuple[str | None, object]]) -> Iterator[bytes]:
    """Server-sent events: ``event:`` (when named) and one ``data:`` line of JSON each."""
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        yield f"{head}data: {json.dumps(data)}\n\n".encode()
