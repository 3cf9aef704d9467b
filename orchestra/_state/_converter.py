"""The converter of the YAML state files (cattrs, strict)."""

from __future__ import annotations

from cattrs.preconf.pyyaml import make_converter

from .._convert import make_strict

# Unknown keys are tolerated (a newer forge may have written them); known keys
# must have exactly their type, and a required key that is missing is corruption.
STATE_CONVERTER = make_strict(make_converter(forbid_extra_keys=False))
