"""The JSON Schema of forge.toml: generated from the model, shipped, and true to the loader."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest

from orchestra._errors import ConfigError
from orchestra._policy import (
    Policy,
    commented_toml,
    leaf_keys,
    policy_as_dict,
    policy_json_schema,
    policy_json_schema_text,
    structure_policy,
)
from orchestra._policy._model import is_table
from orchestra._supervise._loop_tables import PER_LOOP_TABLES, LoopTable

from .support import Repo

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_SCHEMA = ROOT / "policies" / "forge.schema.json"
# policies/ holds the shipped policies and, besides them, the secret-scan rules.
NOT_A_POLICY = {"secscan.toml"}
POLICY_FILES = [
    *(p for p in sorted((ROOT / "policies").glob("*.toml")) if p.name not in NOT_A_POLICY),
    ROOT / "forge.toml",
]
_TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = policy_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(validator: jsonschema.Draft202012Validator, data: object) -> list[str]:
    return [error.message for error in validator.iter_errors(data)]


def test_the_shipped_schema_is_generated_from_the_model() -> None:
    assert SHIPPED_SCHEMA.read_text(encoding="utf-8") == policy_json_schema_text(), (
        "policies/forge.schema.json is stale: regenerate it with `make docs`"
    )
    assert policy_json_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: p.name)
def test_every_shipped_policy_file_names_the_schema_and_keeps_to_it(
    path: Path, validator: jsonschema.Draft202012Validator
) -> None:
    text = path.read_text(encoding="utf-8")
    directive = text.splitlines()[0]
    assert directive.startswith("#:schema "), f"{path.name}: no #:schema line first"
    assert (path.parent / directive.removeprefix("#:schema ")).resolve() == SHIPPED_SCHEMA
    assert problems(validator, tomllib.loads(text)) == []


def doc_examples() -> list[tuple[str, str]]:
    """Every fenced TOML block of the docs that is a policy file (not an executor definition)."""
    found = []
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for index, block in enumerate(_TOML_BLOCK.findall(document.read_text(encoding="utf-8"))):
            if block.startswith("# executors/"):
                continue
            found.append((f"{document.name}[{index}]", block))
    return found


def test_every_policy_example_in_the_docs_keeps_to_the_schema(
    validator: jsonschema.Draft202012Validator,
) -> None:
    examples = doc_examples()
    assert len(examples) >= 3  # policy.md's two, protect.md's one at least
    for name, block in examples:
        assert problems(validator, tomllib.loads(block)) == [], name


def test_the_schema_refuses_what_the_loader_refuses(
    validator: jsonschema.Draft202012Validator,
) -> None:
    assert problems(validator, {"verify": {"max_failures": 3}}) == []
    misspelt = problems(validator, {"verify": {"max_failurs": 3}})
    assert len(misspelt) == 1
    assert "'max_failurs' was unexpected" in misspelt[0]
    assert problems(validator, {"verify": {"max_failures": "3"}}) == [
        "'3' is not of type 'integer'"
    ]
    assert problems(validator, {"verfy": {}})  # an unknown table
    assert problems(validator, {"run": {"max_iterations": 51}})
    assert problems(validator, {"run": {"timeout": "soon"}})
    assert problems(validator, {"run": {"timeout": "0s"}})  # must be longer than zero
    assert problems(validator, {"run": {"grace": "0s"}}) == []  # may be zero
    assert problems(validator, {"protect": {"exist": ["../outside"]}})
    assert problems(validator, {"breaker": {"on_open": "panic"}})
    assert problems(validator, {"extends": "default"})  # a list, not a string
    assert problems(validator, {"loop": [{"cmd": "true"}]})  # no change
    assert problems(validator, {"loop": [{"change": "c", "verify": {"max_failurs": 1}}]})
    assert problems(validator, {"loop": [{"change": "c", "supervise": {}}]})  # shared, not per loop
    assert problems(validator, {"loop": [{"change": "Bad Name"}]})


def test_the_schema_names_every_key_of_the_model_with_its_default_and_doc() -> None:
    schema = policy_json_schema()
    definitions = schema["$defs"]
    defaults = policy_as_dict(Policy())

    def table_keys(cls: type, dotted: str) -> None:
        definition = definitions[dotted]
        assert definition["additionalProperties"] is False
        assert set(definition["properties"]) == {field.name for field in attrs.fields(cls)}
        for field in attrs.fields(cls):
            key = definition["properties"][field.name]
            assert key["description"] == field.metadata["doc"], f"{dotted}.{field.name}"
            if is_table(field.type):
                assert key["$ref"] == f"#/$defs/{dotted}.{field.name}"
                table_keys(field.type, f"{dotted}.{field.name}")

    top = schema["properties"]
    assert schema["additionalProperties"] is False
    tables = [field for field in attrs.fields(Policy) if is_table(field.type)]
    assert set(top) == {"extends", "loop", *(field.name for field in tables)}
    for field in tables:
        assert top[field.name]["$ref"] == f"#/$defs/{field.name}"
        if is_table(field.type):
            table_keys(field.type, field.name)
    for dotted in leaf_keys(Policy):
        table, _, key = dotted.rpartition(".")
        value: Any = defaults
        for part in dotted.split("."):
            value = value[part]
        described = definitions[table]["properties"][key]
        assert described.get("default") == value, dotted
    assert definitions["budget"]["properties"]["max_tokens"]["examples"] == [2_000_000]
    assert definitions["run"]["properties"]["max_iterations"]["maximum"] == 50


def test_the_loop_table_is_the_supervisors() -> None:
    loop = policy_json_schema()["$defs"]["loop"]
    assert set(loop["properties"]) == {field.name for field in attrs.fields(LoopTable)}
    assert loop["required"] == ["change"]
    for name in PER_LOOP_TABLES:
        assert loop["properties"][name]["$ref"] == f"#/$defs/{name}"
    for field in attrs.fields(LoopTable):
        if field.name in PER_LOOP_TABLES or field.default is attrs.NOTHING:
            continue
        assert loop["properties"][field.name].get("default") == field.default, field.name


# A spread of values, some valid for each kind of key and some not.
_SAMPLES: list[object] = [
    0,
    1,
    -1,
    50,
    51,
    0.5,
    1.5,
    True,
    "",
    " ",
    "x",
    "30m",
    "1H30M",
    "0s",
    "0",
    "soon",
    "../x",
    "/etc",
    "escalate",
    "memory",
    "critical",
    ["a/", "tests/**"],
    ["../a"],
    [1],
    {"a": 1},
]


_COMPANIONS = {
    "breaker.cooldown": {"cooldown_max": "1000d"},
    "breaker.cooldown_max": {"cooldown": 0.1},
    "fleet.lease": {"heartbeat": 0.001},
    "fleet.heartbeat": {"lease": "1000d"},
}


def _loader_accepts(data: dict[str, Any]) -> bool:
    try:
        structure_policy(data, "sample")
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("dotted", leaf_keys(Policy))
def test_the_schema_and_the_loader_agree_on_every_key(
    dotted: str, validator: jsonschema.Draft202012Validator
) -> None:
    *tables, key = dotted.split(".")
    for sample in _SAMPLES:
        data: dict[str, Any] = {key: sample}
        for table in reversed(tables):
            data = {table: data}
        # cooldown_max against cooldown (heartbeat against lease) is a rule between keys,
        # checked on loading only: the other key is set so that it cannot refuse the sample.
        data.get(tables[0], {}).update(_COMPANIONS.get(dotted, {}))
        schema_says = not problems(validator, data)
        assert schema_says == _loader_accepts(data), f"{dotted} = {sample!r}"


def test_forge_policy_schema_prints_the_shipped_schema(repo: Repo) -> None:
    done = repo.forge("policy", "schema")
    assert done.code == 0, done.err
    assert done.out == SHIPPED_SCHEMA.read_text(encoding="utf-8")
    assert repo.forge("policy", "schema", "--json").out == done.out
    assert json.loads(done.out)["title"] == "forge.toml"
    written = repo.root / "schema.json"
    assert repo.forge("policy", "schema", "-o", str(written)).code == 0
    assert written.read_text(encoding="utf-8") == done.out


def test_dump_with_a_schema_line_still_loads(repo: Repo) -> None:
    done = repo.forge("policy", "dump", "--defaults", "--schema", "./forge.schema.json")
    assert done.code == 0, done.err
    assert done.lines[0] == "#:schema ./forge.schema.json"
    from orchestra._cli._policy_cmd import DEFAULTS_HEADER

    assert done.out == "#:schema ./forge.schema.json\n" + commented_toml(Policy(), DEFAULTS_HEADER)
    repo.write("forge.toml", done.out)
    assert repo.forge("policy", "check").code == 0
