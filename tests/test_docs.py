"""The documentation stays true: generated parts, links, and the lines scripts grep."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestra._policy import (
    Policy,
    generated_section,
    leaf_keys,
    markdown_reference,
    with_reference,
)

from .support import Repo, failing_policy

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.MULTILINE)


def prose(text: str) -> str:
    """Markdown without fenced blocks or code spans, where links and headings live."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """The heading anchors GitHub gives a Markdown file."""
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, suffix = slug, 0
        while candidate in found:
            suffix += 1
            candidate = f"{slug}-{suffix}"
        found.add(candidate)
    return found


def test_the_policy_reference_is_generated_from_the_model() -> None:
    text = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    assert generated_section(text) == markdown_reference(), (
        "docs/policy.md is stale: regenerate it with `make docs`"
    )


def test_the_policy_reference_names_every_key_with_its_default() -> None:
    reference = markdown_reference()
    for dotted in leaf_keys(Policy):
        table, _, key = dotted.rpartition(".")
        section = reference.split(f"### `[{table}]`\n", 1)[1].split("\n### ", 1)[0]
        assert f"| `{key}` | " in section, dotted
    assert '| `timeout` | `"15m"` | ' in reference
    assert '| `exist` | `["AGENTS.md", ' in reference
    assert "| `max_tokens` | unset (e.g. `2000000`) | " in reference
    assert "&lt;name&gt;" in reference  # executors/<name>.toml is not taken for a tag


def test_regenerating_replaces_only_the_generated_section() -> None:
    text = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    stale = with_reference(text, "### `[verify]`\n\nout of date\n")
    assert stale != text
    assert with_reference(stale, markdown_reference()) == text
    with pytest.raises(ValueError, match="markers"):
        with_reference("# no markers here\n", markdown_reference())


def test_python_m_regenerates_a_stale_reference(tmp_path: Path) -> None:
    from orchestra._policy.__main__ import main

    text = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    stale = tmp_path / "policy.md"
    stale.write_text(with_reference(text, "out of date\n"), encoding="utf-8")
    assert main([str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_relative_links_resolve(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    broken = []
    for target in _LINK.findall(prose(text)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto: …
        path_part, _, fragment = target.partition("#")
        linked = (document.parent / path_part).resolve() if path_part else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and fragment not in anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, broken


def test_the_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("## A `forge run` heading\n\n[ok](#a-forge-run-heading) [bad](#nope)\n")
    assert "a-forge-run-heading" in anchors(page.read_text())
    assert "nope" not in anchors(page.read_text())
    assert _LINK.findall(prose("`[not](a-link.md)` [real](x.md)")) == ["x.md"]


def test_bench_figures_live_under_docs() -> None:
    assert (ROOT / "docs" / "benchmarks.md").is_file()
    assert not (ROOT / "BENCHMARKS.md").exists()


def readme_block(heading: str) -> list[str]:
    """The lines of the first fenced block after a README heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    after = readme.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"^```[a-z]*\n(.*?)^```", after, re.MULTILINE | re.DOTALL)
    assert block is not None, heading
    return block.group(1).splitlines()


def test_the_readme_contract_lines_are_what_forge_prints(repo: Repo) -> None:
    printed: list[str] = []

    def forge(*args: str, code: int) -> list[str]:
        done = repo.forge(*args)
        assert done.code == code, done
        printed.extend(done.lines)
        return done.lines

    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    forge("verify", code=0)
    forge("run", "--change", "checkout", "--cmd", "true", "--max-iterations", "3", code=0)
    forge("run", "--change", "done-once", "--cmd", "echo FORGE_DONE", "--yes", code=0)
    failing_policy(repo)
    for code in (0, 0, 1):
        forge("verify", "--change", "checkout", code=code)
    stopped = forge("run", "--change", "checkout", "--cmd", "echo FORGE_DONE", "--yes", code=1)
    forge("verify", "--reset-breaker", "--change", "checkout", code=0)

    contract = readme_block("## Lines scripts can grep")
    assert len(contract) >= 9
    missing = [line for line in contract if line not in printed]
    assert not missing, missing
    # The first run's stopped block, word for word, in the order forge prints it.
    readme_text = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme_text.split("run: STOPPED after 0 iteration(s) — gate-open\n", 1)[1]
    expected = ["run: STOPPED after 0 iteration(s) — gate-open", *shown.splitlines()[:3]]
    start = stopped.index(expected[0])
    assert stopped[start : start + 4] == expected
