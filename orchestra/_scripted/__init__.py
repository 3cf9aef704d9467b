"""Scripted model servers: each provider's streaming API on loopback, playing a script.

Forge has no model, and needs none to prove that an agent CLI still works
with it: a scripted server speaks the provider's API (Anthropic Messages,
OpenAI Responses, Gemini ``streamGenerateContent``) and answers with the
replies and tool calls of a :class:`Script`, so the real CLI edits files,
runs commands and meets Forge's hooks exactly as it would against the
provider — with no key, no network and no cost. The test suite runs the
shipped executors through it, and ``forge executors check`` runs the CLI a
user has installed.
"""

from ._check import FAILED as FAILED
from ._check import OK as OK
from ._check import SKIPPED as SKIPPED
from ._check import Check as Check
from ._check import ExecutorCheck as ExecutorCheck
from ._check import check_executor as check_executor
from ._check import installed_version as installed_version
from ._profile import CliProfile as CliProfile
from ._profile import profile_for as profile_for
from ._profile import profiled_executors as profiled_executors
from ._profile import scratch_home as scratch_home
from ._script import Conversation as Conversation
from ._script import Failure as Failure
from ._script import Reply as Reply
from ._script import RunShell as RunShell
from ._script import Script as Script
from ._script import ToolCall as ToolCall
from ._script import Usage as Usage
from ._script import WriteFile as WriteFile
from ._server import Exchange as Exchange
from ._server import Message as Message
from ._server import Provider as Provider
from ._server import Recorded as Recorded
from ._server import Response as Response
from ._server import ScriptedServer as ScriptedServer
from ._server import sse as sse
