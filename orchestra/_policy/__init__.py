"""Policy: the model, its layering and its TOML forms."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._converter import POLICY_CONVERTER as POLICY_CONVERTER
    from ._diff import Difference as Difference
    from ._diff import policy_differences as policy_differences
    from ._dump import commented_toml as commented_toml
    from ._dump import policy_as_dict as policy_as_dict
    from ._dump import policy_as_toml as policy_as_toml
    from ._dump import verify_digest as verify_digest
    from ._fields import FieldError as FieldError
    from ._jsonschema import SCHEMA_FILE as SCHEMA_FILE
    from ._jsonschema import policy_json_schema as policy_json_schema
    from ._jsonschema import policy_json_schema_text as policy_json_schema_text
    from ._load import DeclaredLoops as DeclaredLoops
    from ._load import Layer as Layer
    from ._load import LoadedPolicy as LoadedPolicy
    from ._load import display_name as display_name
    from ._load import leaf_keys as leaf_keys
    from ._load import load_policy as load_policy
    from ._load import merge_layers as merge_layers
    from ._load import read_config_text as read_config_text
    from ._load import structure_policy as structure_policy
    from ._model import ALERTS as ALERTS
    from ._model import LOOP_POLICY_TABLES as LOOP_POLICY_TABLES
    from ._model import MAX_ITERATIONS_CEILING as MAX_ITERATIONS_CEILING
    from ._model import SEVERITIES as SEVERITIES
    from ._model import AlertsPolicy as AlertsPolicy
    from ._model import BreakerPolicy as BreakerPolicy
    from ._model import BudgetPolicy as BudgetPolicy
    from ._model import FleetPolicy as FleetPolicy
    from ._model import LandPolicy as LandPolicy
    from ._model import NotifyPolicy as NotifyPolicy
    from ._model import Policy as Policy
    from ._model import PolicyRails as PolicyRails
    from ._model import ProtectPolicy as ProtectPolicy
    from ._model import RateLimitPolicy as RateLimitPolicy
    from ._model import RecoveryPolicy as RecoveryPolicy
    from ._model import ReportPolicy as ReportPolicy
    from ._model import RunPolicy as RunPolicy
    from ._model import SandboxPolicy as SandboxPolicy
    from ._model import SecscanPolicy as SecscanPolicy
    from ._model import StagnationPolicy as StagnationPolicy
    from ._model import StagnationWeights as StagnationWeights
    from ._model import SupervisePolicy as SupervisePolicy
    from ._model import VerifyPolicy as VerifyPolicy
    from ._rails import batch_relaxed_warnings as batch_relaxed_warnings
    from ._rails import relaxed_settings as relaxed_settings
    from ._rails import relaxed_warnings as relaxed_warnings
    from ._reference import generated_section as generated_section
    from ._reference import markdown_reference as markdown_reference
    from ._reference import with_reference as with_reference
    from ._schema import structure_file as structure_file
    from ._schema import unknown_keys as unknown_keys

# Hidden from type checkers, which read the imports above and must not take
# every misspelt name for a lazy one.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._converter": ("POLICY_CONVERTER",),
            "._diff": (
                "Difference",
                "policy_differences",
            ),
            "._dump": (
                "commented_toml",
                "policy_as_dict",
                "policy_as_toml",
                "verify_digest",
            ),
            "._fields": ("FieldError",),
            "._jsonschema": (
                "SCHEMA_FILE",
                "policy_json_schema",
                "policy_json_schema_text",
            ),
            "._load": (
                "DeclaredLoops",
                "Layer",
                "LoadedPolicy",
                "display_name",
                "leaf_keys",
                "load_policy",
                "merge_layers",
                "read_config_text",
                "structure_policy",
            ),
            "._model": (
                "BreakerPolicy",
                "BudgetPolicy",
                "FleetPolicy",
                "LandPolicy",
                "LOOP_POLICY_TABLES",
                "MAX_ITERATIONS_CEILING",
                "Policy",
                "ProtectPolicy",
                "RateLimitPolicy",
                "RunPolicy",
                "SandboxPolicy",
                "SEVERITIES",
                "SecscanPolicy",
                "StagnationPolicy",
                "StagnationWeights",
                "SupervisePolicy",
                "ALERTS",
                "AlertsPolicy",
                "PolicyRails",
                "RecoveryPolicy",
                "NotifyPolicy",
                "ReportPolicy",
                "VerifyPolicy",
            ),
            "._rails": (
                "batch_relaxed_warnings",
                "relaxed_settings",
                "relaxed_warnings",
            ),
            "._reference": (
                "generated_section",
                "markdown_reference",
                "with_reference",
            ),
            "._schema": (
                "structure_file",
                "unknown_keys",
            ),
        },
    )
