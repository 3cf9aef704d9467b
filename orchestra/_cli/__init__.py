"""The ``forge`` command line: the console script, its commands, their output.

Only :func:`entry` is shared: the console script, and ``python -m orchestra``.
It imports nothing else of the command line until it knows what is asked, so
that the agent hooks start fast.
"""

from ._entry import entry as entry
