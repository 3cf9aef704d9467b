"""Policy files through the real command: layering, provenance, and errors that name the key."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import attrs
import pytest

from orchestra._policy import Policy, commented_toml, load_policy, policy_as_toml
from orchestra._shipped import shipped_dir

from .support import Repo

ROOT = Path(__file__).resolve().parents[1]


def test_show_names_the_source_of_every_value(repo: Repo) -> None:
    repo.write("policies/base.toml", '[verify]\ntimeout = "1h30m"\nmax_failures = 5\n')
    repo.write(
        "forge.toml",
        'extends = ["policies/base.toml"]\n[verify]\nmax_failures = 4\nlint = "ruff"\n',
    )
    done = repo.forge("policy", "show", "--json")
    assert done.code == 0, done.err
    shown = json.loads(done.out)
    assert shown["policy"]["verify"]["timeout"] == "1h30m"
    assert shown["policy"]["verify"]["max_failures"] == 4
    verify_sources = {k: v for k, v in shown["sources"].items() if k.startswith("verify.")}
    others = {v for k, v in shown["sources"].items() if not k.startswith("verify.")}
    assert others == {"default"}
    assert verify_sources == {
        "verify.command": "default",
        "verify.lint": "forge.toml",
        "verify.specs": "default",
        "verify.tests": "default",
        "verify.max_failures": "forge.toml",
        "verify.timeout": "policies/base.toml",
    }
    human = repo.forge("policy", "show")
    assert human.code == 0
    assert any("verify.timeout" in line and "(policies/base.toml)" in line for line in human.lines)


def test_flags_are_the_highest_layer(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\ncommand = "exit 1"\nmax_failures = 4\n')
    done = repo.forge("verify", "--change", "c", "--max-failures", "1")
    assert done.code == 1
    assert "CIRCUIT OPEN — 1 consecutive" in done.out


def test_extends_a_shipped_policy_by_name(repo: Repo) -> None:
    repo.write("forge.toml", 'extends = ["default"]\n[verify]\nmax_failures = 9\n')
    shown = json.loads(repo.forge("policy", "show", "--json").out)
    assert shown["policy"]["verify"]["max_failures"] == 9
    assert shown["sources"]["verify.timeout"] == "default.toml (shipped)"


def test_unknown_key_is_refused_with_a_suggestion(repo: Repo) -> None:
    repo.write("forge.toml", "[verify]\nmax_failurs = 3\n")
    for args in (["verify"], ["policy", "check"], ["policy", "show"], ["verify", "--change", "c"]):
        done = repo.forge(*args)
        assert done.code == 2, args
        assert "forge.toml: verify.max_failurs: unknown key in [verify]; did you mean " in done.err
        assert "'max_failures'?" in done.err
        assert "Traceback" not in done.err
    assert not (repo.root / ".forge").exists()


def test_unknown_table_is_refused(repo: Repo) -> None:
    repo.write("forge.toml", "[verfy]\ncommand = 'x'\n")
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "forge.toml: verfy: unknown key in the top level; did you mean 'verify'?" in done.err


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("max_failures = 0", "verify.max_failures: expected an integer >= 1, got 0"),
        ("max_failures = -2", "verify.max_failures: expected an integer >= 1, got -2"),
        ('max_failures = "3"', "verify.max_failures: expected an integer, got a string ('3')"),
        ("max_failures = 2.5", "verify.max_failures: expected an integer, got a float (2.5)"),
        ("max_failures = true", "verify.max_failures: expected an integer, got a boolean (True)"),
        ('timeout = "soon"', 'verify.timeout: expected a duration like "90s", "30m"'),
        ("timeout = -5", 'verify.timeout: expected a duration like "90s"'),
        ('timeout = "0s"', "verify.timeout: expected a duration longer than 0s, got '0s'"),
        ("command = 3", "verify.command: expected a string, got an integer (3)"),
        ('specs = "specs/"', "verify.specs: expected a list of strings, got a string"),
        ('tests = ["ok", 1]', "verify.tests: expected a list of strings, found an integer (1)"),
        ("verify = 3", "verify: expected a table [verify], got 3"),
    ],
)
def test_bad_values_name_file_key_and_expectation(repo: Repo, body: str, message: str) -> None:
    if body.startswith("verify ="):
        repo.write("forge.toml", body + "\n")
    else:
        repo.write("forge.toml", f"[verify]\n{body}\n")
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert f"forge.toml: {message}" in done.err, done.err
    assert "Traceback" not in done.err


def test_every_problem_is_reported_at_once(repo: Repo) -> None:
    repo.write("forge.toml", '[verify]\nmax_failurs = 3\ntimeout = "x"\ncommnd = "y"\n')
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "verify.max_failurs" in done.err
    assert "verify.commnd" in done.err
    assert "verify.timeout" in done.err


def test_error_names_the_extended_file_that_holds_the_value(repo: Repo) -> None:
    repo.write("policies/base.toml", '[verify]\ntimeout = "forever"\n')
    repo.write("forge.toml", 'extends = ["policies/base.toml"]\n')
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "policies/base.toml: verify.timeout: expected a duration" in done.err


def test_invalid_toml_is_a_clear_error(repo: Repo) -> None:
    repo.write("forge.toml", "[verify\ncommand = 'x'\n")
    done = repo.forge("verify")
    assert done.code == 2
    assert "forge.toml" in done.err
    assert "not valid TOML" in done.err
    assert "Traceback" not in done.err


def test_invalid_utf8_is_a_clear_error(repo: Repo) -> None:
    (repo.root / "forge.toml").write_bytes(b"[verify]\ncommand = '\xff'\n")
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "not valid UTF-8" in done.err


def test_extends_cycle_is_refused(repo: Repo) -> None:
    repo.write("forge.toml", 'extends = ["a.toml"]\n')
    repo.write("a.toml", 'extends = ["b.toml"]\n')
    repo.write("b.toml", 'extends = ["a.toml"]\n')
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "cycle" in done.err
    assert "forge.toml -> a.toml -> b.toml -> a.toml" in done.err


def test_extends_paths_are_relative_to_the_file_that_names_them(repo: Repo) -> None:
    repo.write("forge.toml", 'extends = ["policies/team.toml"]\n')
    repo.write("policies/team.toml", 'extends = ["shared/base.toml"]\n')
    repo.write("policies/shared/base.toml", "[verify]\nmax_failures = 7\n")
    shown = json.loads(repo.forge("policy", "show", "--json").out)
    assert shown["policy"]["verify"]["max_failures"] == 7
    assert shown["sources"]["verify.max_failures"] == "policies/shared/base.toml"


def test_missing_extended_file_and_unknown_shipped_name(repo: Repo) -> None:
    repo.write("forge.toml", 'extends = ["policies/nope.toml"]\n')
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "policies/nope.toml" in done.err
    repo.write("forge.toml", 'extends = ["nightlly"]\n')
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "no shipped policy named 'nightlly'" in done.err


def test_check_a_named_file(repo: Repo) -> None:
    repo.write("other.toml", "[verify]\nmax_failures = 2\n")
    done = repo.forge("policy", "check", "other.toml")
    assert done.code == 0
    assert done.out.startswith("policy: OK")
    repo.write("bad.toml", "[verify]\nmax_failures = 0\n")
    done = repo.forge("policy", "check", "bad.toml", "--json")
    assert done.code == 2
    assert json.loads(done.out)["ok"] is False


def test_no_forge_toml_runs_on_defaults(repo: Repo) -> None:
    done = repo.forge("policy", "check")
    assert done.code == 0
    assert "built-in defaults" in done.out
    shown = json.loads(repo.forge("policy", "show", "--json").out)
    assert set(shown["sources"].values()) == {"default"}


def test_dump_loads_back_to_the_same_policy(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "make check"\nspecs = ["docs/**/*.md"]\ntimeout = 90\n'
        "max_failures = 6\n",
    )
    done = repo.forge("policy", "dump")
    assert done.code == 0
    dumped = repo.write("dumped.toml", done.out)
    original = load_policy(repo.root / "forge.toml", root=repo.root).policy
    again = load_policy(dumped, root=repo.root).policy
    assert again == original
    assert tomllib.loads(done.out)["verify"]["timeout"] == "1m30s"
    out_file = repo.root / "out.toml"
    assert repo.forge("policy", "dump", "-o", str(out_file)).code == 0
    assert load_policy(out_file, root=repo.root).policy == original


def test_shipped_default_policy_is_generated_from_the_model() -> None:
    text = (ROOT / "policies" / "default.toml").read_text()
    from orchestra._cli._policy_cmd import DEFAULTS_HEADER

    # The first line points TOML editors at the schema shipped beside it.
    assert text == "#:schema ./forge.schema.json\n" + commented_toml(Policy(), DEFAULTS_HEADER), (
        "policies/default.toml is stale: regenerate it with `make docs`"
    )
    assert load_policy(ROOT / "policies" / "default.toml", root=ROOT).policy == Policy()
    assert tomllib.loads(policy_as_toml(Policy())) == tomllib.loads(text)


def test_the_policy_as_data_is_what_the_converter_unstructures() -> None:
    from orchestra._policy import POLICY_CONVERTER, policy_as_dict, verify_digest

    shipped = load_policy(ROOT / "policies" / "default.toml", root=ROOT).policy
    policy = attrs.evolve(
        shipped,
        budget=attrs.evolve(shipped.budget, max_tokens=7, max_cost_usd=0.5),
        verify=attrs.evolve(shipped.verify, specs=("a/", "b.md"), lint="ruff check"),
    )
    for each in (shipped, policy):
        assert policy_as_dict(each) == POLICY_CONVERTER.unstructure(each)
    table = json.dumps(POLICY_CONVERTER.unstructure(policy.verify), sort_keys=True, default=str)
    assert verify_digest(policy) == "sha256:" + hashlib.sha256(table.encode()).hexdigest()[:16]


def test_shipped_policies_are_found_in_the_source_tree() -> None:
    assert (shipped_dir("policies") / "default.toml").is_file()


def test_deeply_nested_policy_is_a_clear_error(repo: Repo) -> None:
    repo.write("forge.toml", "[verify]\nspecs = " + "[" * 3000 + "]" * 3000 + "\n")
    done = repo.forge("policy", "check")
    assert done.code == 2
    assert "Traceback" not in done.err


def test_set_is_the_highest_layer_and_is_checked(repo: Repo) -> None:
    repo.write("forge.toml", "[verify]\nmax_failures = 4\n")
    shown = json.loads(
        repo.forge(
            "policy", "show", "--json", "--set", "verify.max_failures=6", "--set", "run.timeout=30m"
        ).out
    )
    assert shown["policy"]["verify"]["max_failures"] == 6
    assert shown["sources"]["verify.max_failures"] == "flag --set verify.max_failures"
    assert shown["policy"]["run"]["timeout"] == "30m"
    typo = repo.forge("policy", "check", "--set", "verify.max_failurs=6")
    assert typo.code == 2
    assert "did you mean 'max_failures'?" in typo.err
    bad = repo.forge("verify", "--set", "verify.max_failures=0")
    assert bad.code == 2
    assert (
        "flag --set verify.max_failures: verify.max_failures: expected an integer >= 1" in bad.err
    )
    assert repo.forge("policy", "show", "--set", "nonsense").code == 2


def test_a_table_written_as_a_value_is_one_clear_problem(repo: Repo) -> None:
    repo.write("forge.toml", "verify = 3\n")
    done = repo.forge("policy", "check")
    assert done.code == 2
    problems = [line for line in done.err.splitlines() if line.startswith("  ")]
    assert problems == ["  forge.toml: verify: expected a table [verify], got 3"]


def test_dump_to_a_missing_folder_is_a_usage_error(repo: Repo) -> None:
    done = repo.forge("policy", "dump", "-o", str(repo.root / "nowhere" / "p.toml"))
    assert done.code == 2
    assert not (repo.root / "nowhere").exists()


def test_check_refuses_an_executor_setting_only_a_run_would_find(repo: Repo) -> None:
    # A permission level is a key of the executor's own [permissions]: not in the
    # policy's schema, so only loading the executor tells a typo.
    repo.write(
        "forge.toml",
        '[run]\nexecutor = "claude"\npermission = "edit_and_run"\n\n'
        '[[loop]]\nchange = "a"\nexecutor = "codex"\n[loop.run]\npermission = "nope"\n',
    )
    done = repo.forge("policy", "check")
    assert done.code == 2, done.err
    assert "[run] permission: executor 'claude' has no permission level 'edit_and_run'" in done.err
    assert "its levels: edit, edit-and-run, full, read-only" in done.err
    assert "forge.toml: loop[0] permission: executor 'codex' has no permission level 'nope'" in (
        done.err
    )
    assert "Traceback" not in done.err
    repo.write("forge.toml", '[run]\nexecutor = "claude"\npermission = "edit-and-run"\n')
    assert repo.forge("policy", "check").code == 0


def test_check_names_the_loop_of_a_bad_loop_table(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[[loop]]\nchange = "a"\nsesion = "continue"\n\n[[loop]]\ncmd = "true"\n',
    )
    done = repo.forge("policy", "check")
    assert done.code == 2, done.err
    assert "forge.toml: loop[0].sesion: unknown key in the [[loop]] of change 'a';" in done.err
    assert "forge.toml: loop[1].change: required, and not set" in done.err
    assert "top level" not in done.err
