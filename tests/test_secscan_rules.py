"""Rules files: the shipped rules compile under both engines; bad files say what is wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import orchestra._secscan as secscan
from orchestra._errors import ConfigError
from orchestra._secscan import (
    SEVERITIES,
    find_secrets,
    load_rules,
    parse_rules,
    severity_at_least,
    shannon_entropy,
)
from orchestra._secscan._engine import DEFAULT_ENGINE, KeywordFinder, compile_pattern
from orchestra._shipped import shipped_dir

GOOD_RULE = """
[[rule]]
id = "demo-token"
description = "Demo token"
regex = '''\\b(?P<secret>demo_[a-z0-9]{16})\\b'''
keywords = ["demo_"]
severity = "high"
"""


def shipped_rule_tables() -> list[dict[str, object]]:
    data = tomllib.loads((shipped_dir("policies") / "secscan.toml").read_text(encoding="utf-8"))
    tables: list[dict[str, object]] = data["rule"]
    return tables


def test_re2_is_the_engine() -> None:
    # Chosen by measurement (bench/secscan_engine.py); re is only the import fallback.
    assert DEFAULT_ENGINE == "re2"
    assert load_rules().engine == "re2"


@pytest.mark.parametrize("engine", ["re2", "re"])
def test_every_shipped_rule_compiles(engine: str) -> None:
    for table in shipped_rule_tables():
        regex = str(table["regex"])
        compiled, group = compile_pattern(regex, engine)
        assert compiled is not None
        assert group == 1, f"{table['id']}: the secret group should be the first group"


def test_shipped_rules_load_by_name_and_by_path(tmp_path: Path) -> None:
    by_name = load_rules("secscan")
    copy = tmp_path / "policies" / "mine.toml"
    copy.parent.mkdir()
    copy.write_text((shipped_dir("policies") / "secscan.toml").read_text(encoding="utf-8"))
    by_path = load_rules("policies/mine.toml", root=tmp_path)
    assert by_path.source == "policies/mine.toml"
    assert by_name.digest == by_path.digest
    assert len(by_name.rules) >= 25
    assert all(rule.keywords and rule.severity in SEVERITIES for rule in by_name.rules)


def test_the_digest_follows_the_rules_and_the_engine() -> None:
    base = parse_rules(GOOD_RULE)
    assert parse_rules(GOOD_RULE, "elsewhere.toml").digest == base.digest
    assert parse_rules(GOOD_RULE.replace('"high"', '"low"')).digest != base.digest
    assert parse_rules(GOOD_RULE, engine="re").digest != base.digest


def errors_of(text: str, tmp_path: Path) -> ConfigError:
    path = tmp_path / "rules.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_rules("rules.toml", root=tmp_path)
    return caught.value


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("{16})", "{16}))"), "rule 'demo-token': regex: does not compile"),
        (
            ("'''\\b(?P<secret>", "'''(?=x)(?P<secret>"),
            "rule 'demo-token': regex: does not compile",
        ),
        (('"high"', '"severe"'), "rule 'demo-token': severity: expected one of low, medium"),
        (
            ('severity = "high"', 'severity = "high"\nweight = 3'),
            "rule 'demo-token': weight: unknown key",
        ),
        (('keywords = ["demo_"]\n', ""), "rule 'demo-token': keywords: missing"),
        (
            ('keywords = ["demo_"]', "keywords = []"),
            "rule 'demo-token': keywords: expected at least one",
        ),
        (
            ('keywords = ["demo_"]', 'keywords = "demo_"'),
            "rule 'demo-token': keywords: expected a list",
        ),
        (('id = "demo-token"', 'id = "Demo Token"'), "rule 'Demo Token': id: expected lowercase"),
        (('id = "demo-token"\n', ""), "rule[0]: id: missing"),
        (
            ('severity = "high"', 'severity = "high"\nentropy = 12'),
            "entropy: expected bits per character",
        ),
    ],
)
def test_a_bad_rule_names_the_file_the_rule_and_the_expectation(
    change: tuple[str, str], expected: str, tmp_path: Path
) -> None:
    old, new = change
    assert old in GOOD_RULE
    error = errors_of(GOOD_RULE.replace(old, new), tmp_path)
    assert any(problem.startswith("rules.toml: ") for problem in error.problems), error.problems
    assert any(expected in problem for problem in error.problems), error.problems
    rendered = error.render()
    assert rendered.startswith("error: the secret-scan rules are invalid")
    assert "Traceback" not in rendered


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = "colour = 'blue'\n" + GOOD_RULE.replace('"high"', '"severe"') + GOOD_RULE
    error = errors_of(text, tmp_path)
    joined = "\n".join(error.problems)
    assert "severity: expected one of" in joined
    assert "id: used by more than one rule" in joined
    assert "rules.toml: colour: unknown key" in joined


def test_a_file_that_is_not_toml_or_not_there(tmp_path: Path) -> None:
    error = errors_of("[[rule]\nid = ", tmp_path)
    assert error.message == "the secret-scan rules are not valid TOML"
    assert error.problems[0].startswith("rules.toml: ")
    with pytest.raises(ConfigError, match="cannot read the secret-scan rules") as missing:
        load_rules("nope/rules.toml", root=tmp_path)
    assert missing.value.problems[0].startswith("nope/rules.toml: ")
    with pytest.raises(ConfigError, match="cannot load") as unknown:
        load_rules("no-such-rules", root=tmp_path)
    assert "shipped" in unknown.value.problems[0]
    empty = errors_of("stopwords = []\n", tmp_path)
    assert empty.problems == ("rules.toml: rule: expected one or more [[rule]] tables",)


def test_severity_ordering() -> None:
    assert severity_at_least("critical", "high")
    assert severity_at_least("high", "high")
    assert not severity_at_least("medium", "high")
    assert severity_at_least("low", "low")
    with pytest.raises(ValueError, match="unknown severity"):
        severity_at_least("severe", "low")


def test_entropy() -> None:
    assert shannon_entropy("") == 0
    assert shannon_entropy("aaaa") == 0
    assert shannon_entropy("abcd") == pytest.approx(2.0)


def test_exported_names() -> None:
    public = {name for name in dir(secscan) if not name.startswith("_")}
    assert {
        "Finding",
        "ScanResult",
        "Ruleset",
        "Rule",
        "Waiver",
        "WaiverOutcome",
        "load_rules",
        "parse_rules",
        "scan_tree",
        "scan_bytes",
        "redact",
        "find_secrets",
        "severity_at_least",
        "load_waivers",
        "add_waiver",
        "apply_waivers",
        "list_files",
    } <= public


def test_the_keyword_pre_filter_gates_each_rule() -> None:
    ruleset = parse_rules(GOOD_RULE.replace('keywords = ["demo_"]', 'keywords = ["tokenword"]'))
    assert find_secrets(b"x = demo_0123456789abcdef", ruleset) == []
    (hit,) = find_secrets(b"tokenword: demo_0123456789abcdef", ruleset)
    assert hit.rule_id == "demo-token"


def test_both_engines_find_the_same_keywords() -> None:
    keywords = tuple(sorted({b"sk-", b"sk-ant-", b"token", b"ken", b"://", b"hooks.slack.com"}))
    fast, slow = KeywordFinder(keywords, "re2"), KeywordFinder(keywords, "re")
    for text in (b"", b"nothing", b"sk-ant-x token", b"https://hooks.slack.com/x", b"broken"):
        assert fast.present(text) == slow.present(text), text
    assert fast.present(b"sk-ant-x") == {b"sk-", b"sk-ant-"}
