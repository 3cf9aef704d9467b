"""The sandbox around every executor: what the agent's process tree cannot write.

Three lines of defence guard the protected paths. The guard hook tells an
agent no before a tool call; the check after each iteration finds harm and
restores it; this sandbox, underneath both, has the kernel refuse the write
itself. An executor runs inside bubblewrap with every frozen path bound
read-only, every path that must exist bound onto itself (a mount point cannot
be deleted or renamed), and ``.forge/`` read-only but for the change's inbox.

Landlock is no alternative: its rules only add access beneath a folder, so it
cannot leave one file read-only inside a writable folder, nor stop its deletion.
"""

from __future__ import annotations

from ._detect import Availability as Availability
from ._detect import bubblewrap as bubblewrap
from ._detect import probe_bubblewrap as probe_bubblewrap
from ._inbox import INBOX as INBOX
from ._inbox import empty_inbox as empty_inbox
from ._inbox import inbox_of as inbox_of
from ._inbox import run_inbox as run_inbox
from ._mounts import Mounts as Mounts
from ._mounts import bwrap_arguments as bwrap_arguments
from ._mounts import describe_mounts as describe_mounts
from ._mounts import plan_mounts as plan_mounts
from ._requests import REQUEST_COMMANDS as REQUEST_COMMANDS
from ._requests import apply_requests as apply_requests
from ._requests import queue_refusal as queue_refusal
from ._requests import queue_request as queue_request
from ._requests import read_refusals as read_refusals
from ._sandbox import BUBBLEWRAP as BUBBLEWRAP
from ._sandbox import INBOX_ENV as INBOX_ENV
from ._sandbox import SANDBOX_ENV as SANDBOX_ENV
from ._sandbox import Sandbox as Sandbox
from ._sandbox import SandboxChoice as SandboxChoice
from ._sandbox import choose_sandbox as choose_sandbox
