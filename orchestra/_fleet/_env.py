"""Whether a command is meant for the fleet, in a module that imports nothing of Forge.

Commands that only ask whether the fleet is meant (``forge status``,
``forge circuit``, ``forge report``) decide it without loading the fleet's
client, redis-py or the policy's model.
"""

from __future__ import annotations

import os

REDIS_URL_ENV = "FORGE_REDIS_URL"
"""The fleet's Redis URL; it wins over ``[fleet] redis`` when set."""


def fleet_meant(flag: bool) -> bool:
    """Whether a command is pointed at the fleet: its ``--fleet``, or ``FORGE_REDIS_URL`` set."""
    return flag or bool(os.environ.get(REDIS_URL_ENV, "").strip())
