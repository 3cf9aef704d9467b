"""The private converter for policy files: strict types, unknown keys refused."""

from __future__ import annotations

from cattrs.preconf.tomllib import make_converter

from .._convert import make_strict

POLICY_CONVERTER = make_strict(make_converter(forbid_extra_keys=True))
