"""The private converter for policy files: strict types, unknown keys refused."""

from __future__ import annotations

from typing import Any

from cattrs.preconf.tomllib import make_converter

from .._convert import make_strict

POLICY_CONVERTER = make_strict(make_converter(forbid_extra_keys=True))

# cattrs registers the hook it makes for a mapping type the first time it meets
# one, and registering empties its cache of every hook made so far: structuring
# a [[loop]] table (whose overrides are dict[str, Any]) after the policy would
# make the whole policy's hooks again. Made first, it costs nothing later.
POLICY_CONVERTER.get_structure_hook(dict[str, Any])
