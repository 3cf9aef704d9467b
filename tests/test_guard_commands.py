"""The destructive-command analysis behind ``forge guard``, over a real tree.

Each row of TABLE is (working folder relative to the root, command, the
protected path it must be refused for — or None when it must be allowed).
``{root}``, ``{tmp}`` and ``{other}`` in a command stand for the absolute
root, the folder above it and a sibling folder outside it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestra._guard import Refusal, analyse_command, check_file_write
from orchestra._protect._spec import ProtectSpec, forge_state_entries

SPEC = ProtectSpec(
    exist=("AGENTS.md", "IMPLEMENTATION_PLAN.md", "specs/"),
    frozen=("forge.toml", "policies/", *forge_state_entries()),
)
FILES = (
    "forge.toml",
    "policies/default.toml",
    "specs/a.md",
    "AGENTS.md",
    "IMPLEMENTATION_PLAN.md",
    "src/app.py",
    "build/x.pyc",
    "build/__pycache__/m.cpython-311.pyc",
    ".forge/changes/demo/breaker.yaml",
    ".forge/cache/notes.txt",
    ".gitignore",
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tmp/root`` (the project), ``tmp/other`` beside it, ``tmp/root-link`` → root."""
    tmp = tmp_path_factory.mktemp("guard")
    root = tmp / "root"
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("content\n")
    (root / "link-to-specs").symlink_to("specs")
    (root / "cfg-link").symlink_to("forge.toml")
    (tmp / "other").mkdir()
    (tmp / "home").mkdir()
    (tmp / "root-link").symlink_to(root)
    (root / "many").mkdir()
    for index in range(300):  # more than a glob is expanded to
        (root / "many" / f"f{index}").touch()
    # A repository where nothing is tracked yet: git clean would remove all of it.
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def run(tree: Path, cwd: str, command: str, spec: ProtectSpec = SPEC) -> list[Refusal]:
    tmp = tree.parent
    for name, path in (("{root}", tree), ("{tmp}", tmp), ("{other}", tmp / "other")):
        command = command.replace(name, str(path))
    env = {"HOME": str(tmp / "home"), "BUILD": "build", "PATH": "/usr/bin:/bin"}
    folder = os.path.normpath(tree / cwd)
    return analyse_command(command, cwd=folder, root=str(tree), spec=spec, env=env)


TABLE: list[tuple[str, str, str | None]] = [
    # Deleting, directly.
    ("", "rm -rf specs", "specs"),
    ("", "rm specs/a.md", "specs/a.md"),
    ("", "rm -r .", "forge.toml"),
    ("", "rm -rf ./", "forge.toml"),
    ("", "rm -rf *", "forge.toml"),
    ("", "rm -rf .*", ".forge/changes/demo/breaker.yaml"),
    ("", "rm -rf .forge", ".forge/changes/demo/breaker.yaml"),
    ("", "rm -rf .forge/cache", None),
    ("src", "rm -rf ..", "forge.toml"),
    ("src", "rm -rf ../specs", "specs"),
    ("", "rm -f build/x.pyc", None),
    ("", "rm -rf build src", None),
    ("", "rm specs/missing.md", None),
    ("", "rmdir specs", "specs"),
    ("", "rmdir -p build/__pycache__", None),
    ("", "unlink AGENTS.md", "AGENTS.md"),
    ("", "shred -u forge.toml", "forge.toml"),
    ("", "/bin/rm -rf specs", "specs"),
    ("", "\\rm -rf specs", "specs"),
    ("", "'rm' -rf specs", "specs"),
    ("", "rm -rf -- specs", "specs"),
    ("", "rm -rf spec*", "specs"),
    ("", "rm -rf {build,specs}", "specs"),
    ("", 'rm -rf "spec"s', "specs"),
    ("", "rm -rf '*'", None),
    ("", "rm -rf IMPLEMENTATION_PLAN.md", "IMPLEMENTATION_PLAN.md"),
    ("", "rm -rf specs/*", "specs/a.md"),
    ("", "rm -rf $'spe\\x63s'", "specs"),
    ("", "rm -rf many/*", None),
    ("", "rm -rf /*/*/*/*", "forge.toml"),
    # Moving, copying, linking.
    ("", "mv specs specs.old", "specs"),
    ("", "mv AGENTS.md build/", "AGENTS.md"),
    ("", "mv -t build src/app.py specs", "specs"),
    ("", "mv src/app.py forge.toml", "forge.toml"),
    ("", "mv src/app.py AGENTS.md", None),
    ("", "mv build/x.pyc build/y.pyc", None),
    ("", "cp src/app.py forge.toml", "forge.toml"),
    ("", "cp src/app.py policies/", "policies/app.py"),
    ("", "cp src/app.py specs/b.md", None),
    ("", "cp -r src build/src", None),
    ("", "ln -sf src/app.py forge.toml", "forge.toml"),
    ("", "install -m 644 src/app.py policies/x.toml", "policies/x.toml"),
    ("", "rsync -a --delete src/ specs/", "specs"),
    ("", "rsync -a src/ policies/", "policies"),
    ("", "rsync -a --delete src/ build/", None),
    ("", "rsync -a --delete build/ host:/srv/app/", None),
    # Redirections.
    ("", "echo x > forge.toml", "forge.toml"),
    ("", "echo x >> forge.toml", "forge.toml"),
    ("", "echo x > AGENTS.md", None),
    ("", ": > policies/default.toml", "policies/default.toml"),
    ("", "> forge.toml", "forge.toml"),
    ("", "make 2> forge.toml", "forge.toml"),
    ("", "make &> forge.toml", "forge.toml"),
    ("", "make >| .forge/changes/demo/breaker.yaml", ".forge/changes/demo/breaker.yaml"),
    ("", "make > build/log 2>&1", None),
    ("", "echo x > cfg-link", "forge.toml"),
    ("", "rm cfg-link", None),
    ("", "echo x > /dev/null", None),
    ("", "cat < forge.toml", None),
    ("", "{ echo a; echo b; } > forge.toml", "forge.toml"),
    # Changing in place.
    ("", "cat forge.toml | tee build/out", None),
    ("", "echo x | tee -a forge.toml", "forge.toml"),
    ("", "echo x | tee AGENTS.md", None),
    ("", "sed -i 's/a/b/' forge.toml", "forge.toml"),
    ("", "sed -i.bak -e 's/a/b/' policies/default.toml", "policies/default.toml"),
    ("", "sed -i '' 's/a/b/' forge.toml", "forge.toml"),
    ("", "sed -n 's/a/b/p' forge.toml", None),
    ("", "sed -i 's/a/b/' AGENTS.md src/app.py", None),
    ("", "perl -pi -e 's/a/b/' forge.toml", "forge.toml"),
    ("", "perl -ne 'print' forge.toml", None),
    ("", "truncate -s 0 forge.toml", "forge.toml"),
    ("", "truncate -s 0 AGENTS.md", None),
    ("", "dd if=/dev/zero of=forge.toml bs=1 count=1", "forge.toml"),
    ("", "touch policies/new.toml", "policies/new.toml"),
    ("", "chmod -R 777 policies", "policies"),
    ("", "chmod -R u+w .", "forge.toml"),
    ("", "chmod -w forge.toml", "forge.toml"),
    ("", "chmod +x src/app.py", None),
    # git.
    ("", "git clean -fdx", "forge.toml"),
    ("", "git clean -fd", ".forge/changes/demo/breaker.yaml"),  # nothing is tracked here
    ("", "git rm --cached forge.toml; git clean -f", "forge.toml"),
    ("", "git clean -f build", None),
    ("", "git clean -nd", None),
    ("", "git clean --dry-run -fd", None),
    ("src", "git clean -fdx", None),
    ("", "git clean -fd build", None),
    ("", "git clean -fd specs", "specs"),
    ("", "git -C src clean -fdx", None),
    ("src", "git -C .. clean -fdx", "forge.toml"),
    ("", "git rm forge.toml", "forge.toml"),
    ("", "git rm -r specs", "specs"),
    ("", "git rm -r --cached specs", None),
    ("", "git rm src/app.py", None),
    ("", "git checkout -- .", "forge.toml"),
    ("", "git checkout .", "forge.toml"),
    ("", "git checkout HEAD~1 -- forge.toml", "forge.toml"),
    ("", "git checkout -- AGENTS.md", None),
    ("", "git checkout --no-overlay HEAD -- specs", "specs"),
    ("", "git checkout main", None),
    ("", "git checkout -b feature", None),
    ("", "git checkout -f main", "forge.toml"),
    ("", "git restore forge.toml", "forge.toml"),
    ("", "git restore --staged forge.toml", None),
    ("", "git restore src", None),
    ("", "git restore --source=HEAD~2 specs", "specs"),
    ("", "git reset --hard", "forge.toml"),
    ("", "git reset --hard HEAD~3", "forge.toml"),
    ("", "git reset HEAD~1", None),
    ("", "git reset --soft HEAD~1", None),
    ("", "git stash -u", "forge.toml"),
    ("", "git stash", None),
    ("", "git stash pop", None),
    ("", "git switch --discard-changes main", "forge.toml"),
    ("", "git switch -c feature", None),
    ("", "git mv specs docs", "specs"),
    ("", "git status && git diff && git log -p", None),
    # find.
    ("", "find . -name '*.pyc' -delete", None),
    ("", "find . -name '*.md' -delete", "AGENTS.md"),
    ("", "find specs -delete", "specs"),
    ("", "find build -type f -delete", None),
    ("", "find . -type d -name __pycache__ -exec rm -rf {} +", None),
    ("", "find . -exec rm -rf {} \\;", "forge.toml"),
    ("", "find . -maxdepth 1 -name '*.md' -exec rm {} +", "AGENTS.md"),
    ("", "find . -mindepth 2 -name AGENTS.md -delete", None),
    ("", "find . -name '*.toml' -exec sed -i s/a/b/ {} \\;", "forge.toml"),
    ("", "find . -name '*.toml' -exec cat {} \\;", None),
    ("", "find . -newer src/app.py -delete", "forge.toml"),
    ("", "find {other} -delete", None),
    # Wrappers, lists and nesting.
    ("", "sudo rm -rf specs", "specs"),
    ("", "sudo -u root env FOO=1 nice -n 5 nohup timeout 5 rm -rf specs", "specs"),
    ("", "FOO=1 rm -rf specs", "specs"),
    ("", "command rm -rf specs", "specs"),
    ("", "command -v rm", None),
    ("", "env -C src rm -rf ../specs", "specs"),
    ("", "sh -c 'rm -rf specs'", "specs"),
    ("", 'bash -lc "cd src && rm -rf ../specs"', "specs"),
    ("", "sh -c 'rm -rf \"$1\"' _ specs", "specs"),
    ("", "eval 'rm -rf specs'", "specs"),
    ("", "echo $(rm -rf specs)", "specs"),
    ("", "echo `rm -rf specs`", "specs"),
    ("", "diff <(rm -rf specs) x", "specs"),
    ("", "echo ok && (rm -rf specs)", "specs"),
    ("", "{ rm -rf specs; }", "specs"),
    ("", "true || rm -rf specs", "specs"),
    ("", "ls; rm -rf specs &", "specs"),
    ("", "echo hi\nrm -rf specs", "specs"),
    ("", "if true; then rm -rf specs; fi", "specs"),
    ("", "while false; do rm -rf specs; done", "specs"),
    ("", "cleanup() { rm -rf specs; }; cleanup", "specs"),
    ("", 'for f in *.md; do rm "$f"; done', "AGENTS.md"),
    ("", 'for f in build/*; do rm -rf "$f"; done', None),
    ("", "X=specs; rm -rf $X", "specs"),
    ("", "arr=(a b); rm -rf build", None),
    ("", 'arr=(a b); rm -rf "${arr[@]}"', "forge.toml"),
    ("", 'export X=specs && rm -rf "$X"', "specs"),
    ("", "rm -rf $BUILD", None),
    ("", 'rm -rf "$PWD/specs"', "specs"),
    ("", 'rm -rf "$UNSET_VAR"/', "forge.toml"),
    ("", 'rm -rf "$(mktemp -d)"', "forge.toml"),
    ("src", 'rm -rf "$(mktemp -d)"', None),
    ("", "rm -rf build/$(date +%s)", None),
    ("", "ls | xargs rm -f", "forge.toml"),
    ("src", "ls | xargs rm -f", None),
    ("", "find . -name '*.pyc' -print0 | xargs -0 rm -f", None),
    ("", "find . -name '*.md' | xargs rm", "AGENTS.md"),
    ("", "find . -name '*.toml' | xargs -I{} sed -i s/a/b/ {}", "forge.toml"),
    ("", "xargs -I{} mv {} build/ < list", "forge.toml"),
    ("", "watch -n 1 'rm -rf specs'", "specs"),
    # cd within a list.
    ("", 'cd "$(git rev-parse --show-toplevel)" && rm -rf specs', "specs"),
    ("", "cd src && rm -rf *", None),
    ("", "cd src; cd ..; rm -rf specs", "specs"),
    ("", "cd src && cd - && rm -rf specs", "specs"),
    ("", "(cd src && rm -rf specs)", None),
    ("", "(cd src); rm -rf ../specs", None),
    ("", "cd src & rm -rf ../specs", None),
    ("", "pushd src && rm -rf ../specs", "specs"),
    ("", "cd ~ && rm -rf specs", None),
    # Here-documents and strings that merely mention a command.
    ("", "cat <<EOF > forge.toml\nx\nEOF", "forge.toml"),
    ("", "cat <<'EOF'\nrm -rf specs\nEOF\necho done", None),
    ("", "cat <<EOF\n$(rm -rf specs)\nEOF", "specs"),
    ("", "bash <<'EOF'\nrm -rf specs\nEOF", "specs"),
    ("", "bash <<< 'rm -rf specs'", "specs"),
    ("", "echo 'rm -rf specs'", None),
    ("", "echo rm -rf specs", None),
    ("", "git commit -m 'rm -rf specs; > forge.toml'", None),
    ("", "# rm -rf specs", None),
    ("", "echo hi # rm -rf specs", None),
    ("", "python -c 'print(1)' > build/out", None),
    # Unterminated input is read leniently.
    ("", 'rm -rf specs "unterminated', "specs"),
    ("", 'echo "unterminated', None),
    ("", "echo 'unterminated; rm -rf specs", None),
    ("", "(rm -rf specs", "specs"),
    ("", "rm -rf $(echo specs", "forge.toml"),
    # Escape attempts: absolute paths, .., symlinks, folders above the root.
    ("", "rm -f {root}/forge.toml", "forge.toml"),
    ("../other", "rm -f ../root/forge.toml", "forge.toml"),
    ("../other", "rm -rf {root}", "forge.toml"),
    ("", "rm -rf {tmp}", "forge.toml"),
    ("", "rm -rf /", "forge.toml"),
    ("", "rm link-to-specs", None),
    ("", "rm -rf link-to-specs/", "specs"),
    ("", "rm link-to-specs/a.md", "specs/a.md"),
    ("", "rm -f ./specs/../forge.toml", "forge.toml"),
    ("", "rm -f src/../forge.toml", "forge.toml"),
    ("../other", "rm -rf ../root-link/specs", "specs"),
    ("../other", "echo x > ../root-link/forge.toml", "forge.toml"),
    ("", "rm -rf ../other", None),
    ("", "echo x > ../root/forge.toml", "forge.toml"),
    ("", "rm -rf ~/scratch ~", None),
    # Nesting too deep to analyse is refused, whatever it holds.
    ("", "echo " + "$(" * 47 + "echo hi" + ")" * 47, None),
    ("", "echo " + "$(" * 48 + "echo hi" + ")" * 48, "."),
    ("", "echo " + "$(" * 60 + "rm -f AGENTS.md" + ")" * 60, "."),
    ("", "(" * 60 + "echo hi" + ")" * 60, "."),
    ("", "cat <<EOF\n" + "$(" * 60 + "echo hi" + ")" * 60 + "\nEOF", "."),
    ("", "eval " * 11 + "echo hi", None),
    ("", "eval " * 11 + "rm -f AGENTS.md", "AGENTS.md"),
    ("", "eval " * 12 + "echo hi", "."),
    ("", "eval " * 13 + "rm -f AGENTS.md", "."),
    ("", "sh -c 'eval " + "eval " * 11 + "echo hi'", "."),
    # (( … )): arithmetic to bash, two subshells to dash (sh).
    ("", "sh -c '((rm -rf specs))'", "specs"),
    ("", "((rm -rf specs))", "specs"),
    ("", "((rm -rf specs) )", "specs"),
    ("", "((cd src; rm -rf ../specs))", "specs"),
    ("", "echo $(( $(rm -rf specs) + 1 ))", "specs"),
    ("", "for ((i=$(rm -rf specs); i<3; i++)); do echo; done", "specs"),
    ("", "(( x << 2 ))\nrm -rf specs", "specs"),
    ("", "(( i++ )); (( n > 0 )) && echo $((1 + 2)) > build/out", None),
    ("", "for ((i=0; i<3; i++)); do echo $i; done", None),
    # find -exec's fixed arguments, wherever find starts.
    ("", "find /var -exec rm {root}/AGENTS.md \\;", "AGENTS.md"),
    ("", "find {other} -exec rm -f AGENTS.md \\;", "AGENTS.md"),
    ("", "find {other} -exec cp {} {root}/forge.toml \\;", "forge.toml"),
    ("", "find src -name nothing -exec cp {} forge.toml \\;", "forge.toml"),
    ("", 'find "$NOWHERE" -exec rm -f AGENTS.md \\;', "AGENTS.md"),
    ("", "find {other} -exec rm -rf {} \\;", None),
    ("", "find . -name '*.pyc' -exec rm -f {} +", None),
    # Trash commands delete a folder and all it holds.
    ("", "trash .forge", ".forge/changes/demo/breaker.yaml"),
    ("", "trash-put .forge", ".forge/changes/demo/breaker.yaml"),
    ("", "gio trash .forge", ".forge/changes/demo/breaker.yaml"),
    ("", "gvfs-trash .forge", ".forge/changes/demo/breaker.yaml"),
    ("", "rmtrash .forge", ".forge/changes/demo/breaker.yaml"),
    ("", "gio remove AGENTS.md", "AGENTS.md"),
    ("", "gio trash build", None),
    ("", "gio info forge.toml", None),
    # env -S / --split-string.
    ("", "env -S 'rm AGENTS.md'", "AGENTS.md"),
    ("", 'env --split-string "rm AGENTS.md"', "AGENTS.md"),
    ("", "env --split-string='rm -rf specs'", "specs"),
    ("", "env --split-string='ls -la'", None),
]


@pytest.mark.parametrize(("cwd", "command", "harmed"), TABLE, ids=[row[1] for row in TABLE])
def test_command(tree: Path, cwd: str, command: str, harmed: str | None) -> None:
    refusals = run(tree, cwd, command)
    paths = [r.path for r in refusals]
    if harmed is None:
        assert paths == [], [r.reason for r in refusals]
    else:
        assert harmed in paths, [r.reason for r in refusals]


def test_a_refusal_names_path_mode_and_reason(tree: Path) -> None:
    (refusal,) = run(tree, "", "rm -rf specs")
    assert (refusal.path, refusal.mode) == ("specs", "exist")
    assert refusal.reason == 'rm would delete "specs" (protected: exist)'
    (frozen,) = run(tree, "", "echo > forge.toml")
    assert frozen.mode == "frozen"
    assert frozen.reason == 'the redirection > would change "forge.toml" (protected: frozen)'


def test_a_recursive_delete_names_all_it_holds_with_their_rules(tree: Path) -> None:
    refusals = run(tree, "src", "rm -rf ..")
    assert refusals[0].reason == 'rm would delete "forge.toml" inside ".." (protected: frozen)'
    # A protected folder stands for what it holds.
    assert [(r.path, r.rule) for r in refusals] == [
        ("forge.toml", "frozen"),
        ("policies", "frozen"),
        (".forge/changes/demo/breaker.yaml", "Forge's own state"),
        ("AGENTS.md", "exist"),
        ("IMPLEMENTATION_PLAN.md", "exist"),
        ("specs", "exist"),
    ]
    assert refusals[2].reason.endswith("(protected: frozen, Forge's own state)")


def test_one_refusal_per_path_and_reason(tree: Path) -> None:
    refusals = run(tree, "", "rm -rf specs; rm -rf specs")
    assert len(refusals) == 1


def test_case_folding_spec_catches_other_cases(tree: Path) -> None:
    folded = ProtectSpec(exist=SPEC_EXIST, frozen=SPEC_FROZEN, fold=True)
    assert [r.path for r in run(tree, "", "rm -rf SPECS", folded)] == ["SPECS"]
    assert [r.path for r in run(tree, "", "echo > FORGE.toml", folded)] == ["FORGE.toml"]
    assert run(tree, "", "rm -rf Src", folded) == []
    # Case-sensitively, SPECS is another (and here missing) folder.
    assert run(tree, "", "rm -rf SPECS") == []


def test_a_glob_entry_deep_inside_a_folder(tree: Path) -> None:
    spec = ProtectSpec(frozen=("**/*.pyc",))
    assert [r.path for r in run(tree, "", "rm -rf build", spec)] == [
        "build/__pycache__/m.cpython-311.pyc",
        "build/x.pyc",
    ]
    assert run(tree, "", "rm -rf src", spec) == []


def test_a_missing_protected_path_is_not_harmed_by_deleting(tree: Path) -> None:
    spec = ProtectSpec(exist=("docs/",), frozen=("missing.toml",))
    assert run(tree, "", "rm -rf docs .", spec) == []
    # Creating a frozen path is a change, though.
    assert [r.path for r in run(tree, "", "touch missing.toml", spec)] == ["missing.toml"]


@pytest.mark.parametrize(
    ("cwd", "file_path", "harmed"),
    [
        ("", "forge.toml", "forge.toml"),
        ("", "policies/new.toml", "policies/new.toml"),
        ("", ".forge/changes/demo/breaker.yaml", ".forge/changes/demo/breaker.yaml"),
        ("", "cfg-link", "forge.toml"),
        ("src", "../forge.toml", "forge.toml"),
        ("../other", "../root-link/policies/default.toml", "policies/default.toml"),
        ("", "AGENTS.md", None),
        ("", "specs/new.md", None),
        ("", "src/app.py", None),
        ("", "../other/forge.toml", None),
    ],
)
def test_file_write(tree: Path, cwd: str, file_path: str, harmed: str | None) -> None:
    refusal = check_file_write(
        file_path, cwd=os.path.normpath(tree / cwd), root=str(tree), spec=SPEC
    )
    assert (refusal.path if refusal else None) == harmed
    if refusal is not None:
        assert refusal.mode == "frozen"


def test_file_write_by_absolute_path(tree: Path) -> None:
    refusal = check_file_write(str(tree / "forge.toml"), cwd="/", root=str(tree), spec=SPEC)
    assert refusal is not None
    assert refusal.reason == 'writing would change "forge.toml" (protected: frozen)'


SPEC_EXIST = ("AGENTS.md", "IMPLEMENTATION_PLAN.md", "specs/")
SPEC_FROZEN = ("forge.toml", "policies/", *forge_state_entries())


SHELLISH = st.lists(
    st.sampled_from(
        [
            *"ab *?[]{},;&|()<>$`'\"\\\n#~=-/.!0",
            *("rm ", "-rf ", "specs", "$(", "${", "<<", "EOF", "sh -c ", "cd ", "find "),
            *("-exec ", "{}", "git clean -fd", "xargs ", "for "),
        ]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.one_of(st.text(max_size=60), SHELLISH))
def test_any_text_is_analysed_without_error(tree: Path, command: str) -> None:
    refusals = run(tree, "", command)
    assert all(isinstance(r, Refusal) and r.mode in ("exist", "frozen") for r in refusals)
