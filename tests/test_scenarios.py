"""Unit tests for orchestra._verify._scenarios: spec scenarios and the tests that name them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestra._verify._scenarios import (
    Scenario,
    ScenarioCoverage,
    covered_ids,
    files_under,
    measure_coverage,
    scenarios_in,
    slugify,
)

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ids(text: str, *, gherkin: bool = False) -> list[str]:
    return [s.id for s in scenarios_in(text, path="spec", gherkin=gherkin)]


# --- slugify -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Checkout with a declined card", "checkout-with-a-declined-card"),
        ("  Checkout   with a declined card  ", "checkout-with-a-declined-card"),
        ("Login: wrong password!", "login-wrong-password"),
        ("User's cart (empty) -> 404", "user-s-cart-empty-404"),
        ("Retry / back-off, 3 times", "retry-back-off-3-times"),
        ("already-a-slug", "already-a-slug"),
        ("UPPER case", "upper-case"),
        ("Café crème brûlée", "cafe-creme-brulee"),
        ("Ünïcödé Ñame", "unicode-name"),
        ("ﬁle ligature", "file-ligature"),
        ("tabs\tand\nnewlines", "tabs-and-newlines"),
        ("snake_case_words", "snake-case-words"),
        ("!!!", ""),
        ("", ""),
        ("日本語のシナリオ", "日本語のシナリオ"),
        ("Корзина пуста", "корзина-пуста"),
    ],
)
def test_slugify(title: str, slug: str) -> None:
    assert slugify(title) == slug


@DETERMINISTIC
@given(st.text(max_size=60))
def test_slugify_yields_a_well_formed_idempotent_slug(title: str) -> None:
    slug = slugify(title)
    assert slug == slugify(slug)
    if slug:
        assert covered_ids(f"scenario: {slug}") == {slug}
        assert not slug.startswith("-")
        assert not slug.endswith("-")
        assert "--" not in slug
        assert all(c == "-" or c.isalnum() for c in slug)
        assert slug == slug.casefold()


# --- Markdown specs ------------------------------------------------------------------


@pytest.mark.parametrize("hashes", ["#", "##", "###", "####", "#####", "######"])
def test_markdown_headings_of_any_level(hashes: str) -> None:
    assert ids(f"{hashes} Scenario: Checkout with a declined card\n") == [
        "checkout-with-a-declined-card"
    ]


def test_markdown_scenario_fields() -> None:
    text = "# Payments\n\nIntro.\n\n## Scenario: Checkout with a declined card ##\nbody\n"
    assert list(scenarios_in(text, path="specs/pay.md", gherkin=False)) == [
        Scenario(
            id="checkout-with-a-declined-card",
            title="Checkout with a declined card",
            path="specs/pay.md",
            line=5,
        )
    ]


@pytest.mark.parametrize(
    "line",
    [
        "## scenario: Lower case",
        "## SCENARIO: Lower case",
        "   ## Scenario: Lower case",
        "##\tScenario:\tLower case",
        "## Scenario:Lower case",
        "## Scenario: Lower case   ",
        "## Scenario: Lower case ###",
    ],
)
def test_markdown_heading_variants(line: str) -> None:
    assert ids(line + "\n") == ["lower-case"]


@pytest.mark.parametrize(
    "line",
    [
        "Scenario: not a heading",
        "####### Scenario: seven hashes is not a heading",
        "##Scenario: no space after the hashes",
        "    ## Scenario: indented four spaces is code",
        "## The Scenario: not at the start",
        "- Scenario: list item",
        "## Scenario:",
        "## Scenario: ---",
    ],
)
def test_markdown_non_scenarios(line: str) -> None:
    assert ids(line + "\n") == []


def test_markdown_fenced_code_blocks_are_ignored() -> None:
    text = (
        "## Scenario: Before\n"
        "```markdown\n"
        "## Scenario: Inside backticks\n"
        "```\n"
        "## Scenario: Between\n"
        "~~~\n"
        "## Scenario: Inside tildes\n"
        "~~~\n"
        "  ```python\n"
        "# Scenario: Inside indented fence\n"
        "  ```\n"
        "## Scenario: After\n"
    )
    assert ids(text) == ["before", "between", "after"]


def test_markdown_unclosed_fence_hides_the_rest() -> None:
    assert ids("## Scenario: One\n```\n## Scenario: Two\n") == ["one"]


@pytest.mark.parametrize(
    "text",
    [
        # A fence closes only on the same character (CommonMark): "~~~" inside a
        # backtick fence is code, not the end of the block.
        "```markdown\n~~~\n## Scenario: Hidden\n```\n## Scenario: Visible\n",
        # ... and only on a run at least as long as the opening one.
        "````markdown\n```\n## Scenario: Hidden\n````\n## Scenario: Visible\n",
    ],
)
def test_markdown_fence_closes_only_on_a_matching_fence(text: str) -> None:
    assert ids(text) == ["visible"]


def test_markdown_line_numbers_are_one_based() -> None:
    found = list(scenarios_in("\n\n## Scenario: Third\n", path="p", gherkin=False))
    assert [s.line for s in found] == [3]


def test_markdown_ignores_gherkin_style_lines() -> None:
    assert ids("  Scenario: Not a heading\n") == []


# --- Gherkin specs -------------------------------------------------------------------


def test_gherkin_scenarios_and_outlines() -> None:
    text = (
        "Feature: Checkout\n"
        "\n"
        "  Background:\n"
        "    Given a cart\n"
        "\n"
        "  Scenario: Checkout with a declined card\n"
        "    When I pay\n"
        "\n"
        "  Scenario Outline: Pay with <method>\n"
        "    Examples:\n"
        "      | method |\n"
        "\n"
        "  Scenario Template: Refund a purchase\n"
        "  scenario:   lower case keyword   \n"
        "  Scenarios: not a scenario\n"
        "  # Scenario in a comment without colon\n"
    )
    found = list(scenarios_in(text, path="features/pay.feature", gherkin=True))
    assert [(s.id, s.title, s.line) for s in found] == [
        ("checkout-with-a-declined-card", "Checkout with a declined card", 6),
        ("pay-with-method", "Pay with <method>", 9),
        ("refund-a-purchase", "Refund a purchase", 13),
        ("lower-case-keyword", "lower case keyword", 14),
    ]
    assert {s.path for s in found} == {"features/pay.feature"}


def test_gherkin_does_not_read_markdown_headings_or_fences() -> None:
    assert ids("## Scenario: Markdown\n", gherkin=True) == []
    assert ids('"""\n```\n"""\nScenario: After a docstring\n', gherkin=True) == [
        "after-a-docstring"
    ]


# --- covered_ids ---------------------------------------------------------------------


def test_covered_ids_in_comments_docstrings_and_markers() -> None:
    text = (
        "# scenario: checkout-with-a-declined-card\n"
        "def test_x() -> None:\n"
        '    """Covers scenario: refund-a-purchase."""\n'
        '@pytest.mark.covers("scenario: pay-with-method")\n'
        "// SCENARIO:Upper-Case-ID\n"
        "scenario:\tafter-a-tab\n"
    )
    assert covered_ids(text) == {
        "checkout-with-a-declined-card",
        "refund-a-purchase",
        "pay-with-method",
        "upper-case-id",
        "after-a-tab",
    }


def test_covered_ids_takes_the_whole_longer_id_not_its_prefix() -> None:
    found = covered_ids("# scenario: checkout-with-a-declined-card-twice\n")
    assert found == {"checkout-with-a-declined-card-twice"}
    assert "checkout-with-a-declined-card" not in found
    assert "checkout" not in found


@pytest.mark.parametrize(
    "text",
    ["scenario checkout", "scenarios checkout", "scenario:", "scenario: -", "scenario: \n x"],
)
def test_covered_ids_needs_the_keyword_and_an_id(text: str) -> None:
    assert covered_ids(text) == set()


def test_covered_ids_stops_at_trailing_punctuation() -> None:
    assert covered_ids("see scenario: login-fails. And scenario: logout-works,") == {
        "login-fails",
        "logout-works",
    }


# --- measure_coverage ---------------------------------------------------------------


def test_measure_coverage_over_specs_and_tests(tmp_path: Path) -> None:
    write(
        tmp_path / "specs" / "checkout.md",
        "# Checkout\n## Scenario: Checkout with a declined card\n### Scenario: Refund\n",
    )
    write(
        tmp_path / "specs" / "login.feature",
        "Feature: Login\n  Scenario: Wrong password\n  Scenario Outline: Lockout after <n>\n",
    )
    write(tmp_path / "specs" / "notes.txt", "## Scenario: Not a spec file\n")
    write(
        tmp_path / "tests" / "test_checkout.py",
        "# scenario: checkout-with-a-declined-card\n# scenario: not-in-any-spec\n",
    )
    write(tmp_path / "tests" / "unit" / "test_login.py", '"""scenario: wrong-password"""\n')

    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])

    assert coverage.spec_files == 2
    assert [(s.id, s.path, s.line) for s in coverage.scenarios] == [
        ("checkout-with-a-declined-card", "specs/checkout.md", 2),
        ("refund", "specs/checkout.md", 3),
        ("wrong-password", "specs/login.feature", 2),
        ("lockout-after-n", "specs/login.feature", 3),
    ]
    assert coverage.covered == frozenset({"checkout-with-a-declined-card", "wrong-password"})
    assert [s.id for s in coverage.uncovered] == ["refund", "lockout-after-n"]
    assert coverage.covered_count == 2
    assert coverage.counts
    assert not coverage.passed


def test_measure_coverage_all_covered_passes(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "a.md", "## Scenario: Only one\n")
    write(tmp_path / "tests" / "test_a.py", "# scenario: only-one\n")
    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])
    assert coverage.passed
    assert coverage.counts
    assert coverage.covered_count == 1


def test_measure_coverage_prefix_of_a_longer_id_does_not_cover(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "a.md", "## Scenario: Checkout\n")
    write(tmp_path / "tests" / "test_a.py", "# scenario: checkout-twice\n")
    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])
    assert coverage.covered == frozenset()
    assert not coverage.passed


def test_measure_coverage_with_globs(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "top.md", "## Scenario: Top level\n")
    write(tmp_path / "docs" / "a" / "b" / "deep.md", "## Scenario: Deep down\n")
    write(tmp_path / "docs" / "a" / "skip.txt", "## Scenario: Not markdown\n")
    write(tmp_path / "other" / "out.md", "## Scenario: Not matched\n")
    write(tmp_path / "tests" / "test_one.py", "# scenario: deep-down\n")
    write(tmp_path / "tests" / "helper.py", "# scenario: top-level\n")

    coverage = measure_coverage(tmp_path, ["docs/**/*.md"], ["tests/test_*.py"])

    assert coverage.spec_files == 2
    assert {s.id for s in coverage.scenarios} == {"top-level", "deep-down"}
    assert coverage.covered == frozenset({"deep-down"})


def test_measure_coverage_accepts_a_single_file_pattern(tmp_path: Path) -> None:
    write(tmp_path / "SPEC.md", "## Scenario: From a file\n")
    write(tmp_path / "test_spec.py", "# scenario: from-a-file\n")
    coverage = measure_coverage(tmp_path, ["SPEC.md"], ["test_spec.py"])
    assert coverage.spec_files == 1
    assert coverage.passed


def test_measure_coverage_counts_duplicates_once(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "a.md", "## Scenario: Shared\n## Scenario: Shared\n")
    write(tmp_path / "specs" / "b.md", "## Scenario: shared!\n")
    write(tmp_path / "tests" / "test_a.py", "# scenario: shared\n")
    write(tmp_path / "tests" / "test_b.py", "# scenario: shared\n")

    # The same files named twice over, by folder and by glob.
    coverage = measure_coverage(
        tmp_path, ["specs", "specs/*.md", "specs/a.md"], ["tests", "tests/*.py"]
    )

    assert coverage.spec_files == 2
    assert coverage.scenarios == (Scenario(id="shared", title="Shared", path="specs/a.md", line=1),)
    assert coverage.covered_count == 1
    assert coverage.passed


def test_measure_coverage_ignores_a_symlink_pointing_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "project"
    outside = tmp_path / "outside"
    write(outside / "evil.md", "## Scenario: From outside\n")
    write(outside / "test_evil.py", "# scenario: inside\n")
    write(root / "specs" / "real.md", "## Scenario: Inside\n")
    (root / "tests").mkdir()
    os.symlink(outside / "evil.md", root / "specs" / "linked.md")
    os.symlink(outside, root / "specs" / "linked-dir")
    os.symlink(outside / "test_evil.py", root / "tests" / "test_linked.py")

    coverage = measure_coverage(root, ["specs", "specs/*", "../outside"], ["tests"])

    assert coverage.spec_files == 1
    assert [s.id for s in coverage.scenarios] == ["inside"]
    assert coverage.covered == frozenset()
    assert list(files_under(root, ["specs/**/*.md"])) == [root / "specs" / "real.md"]


def test_measure_coverage_follows_a_symlink_inside_the_root_once(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "a.md", "## Scenario: Linked\n")
    os.symlink(tmp_path / "specs" / "a.md", tmp_path / "specs" / "b.md")
    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])
    assert coverage.spec_files == 1
    assert [s.path for s in coverage.scenarios] == ["specs/a.md"]


def test_measure_coverage_skips_binary_files(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "binary.md").write_bytes(b"## Scenario: Binary\n\x00\x01\x02")
    write(tmp_path / "specs" / "text.md", "## Scenario: Text\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_bin.py").write_bytes(b"# scenario: text\n\x00")

    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])

    assert coverage.spec_files == 1
    assert [s.id for s in coverage.scenarios] == ["text"]
    assert coverage.covered == frozenset()


def test_measure_coverage_reads_invalid_utf8_with_replacement(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "latin1.md").write_bytes(b"## Scenario: Caf\xe9 ok\n")
    coverage = measure_coverage(tmp_path, ["specs"], [])
    assert [s.id for s in coverage.scenarios] == ["caf-ok"]


def test_measure_coverage_skips_tool_folders(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "a.md", "## Scenario: Kept\n")
    for skipped in ("node_modules", ".git", ".venv", "__pycache__"):
        write(tmp_path / "specs" / skipped / "x.md", f"## Scenario: In {skipped}\n")
    coverage = measure_coverage(tmp_path, ["specs"], [])
    assert [s.id for s in coverage.scenarios] == ["kept"]
    assert coverage.spec_files == 1


def test_no_spec_files_means_coverage_does_not_count(tmp_path: Path) -> None:
    write(tmp_path / "tests" / "test_a.py", "# scenario: anything\n")
    coverage = measure_coverage(tmp_path, ["specs", "docs/**/*.md"], ["tests"])
    assert coverage == ScenarioCoverage(
        scenarios=(),
        covered=frozenset(),
        spec_files=0,
        unmatched_patterns=("specs", "docs/**/*.md"),
    )
    assert not coverage.counts
    assert coverage.passed
    assert coverage.covered_count == 0


def test_spec_files_without_scenarios_do_not_count(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "a.md", "# Just prose\n")
    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])
    assert coverage.spec_files == 1
    assert not coverage.counts


def test_an_unreadable_spec_fails_coverage_instead_of_vanishing(tmp_path: Path) -> None:
    write(tmp_path / "specs" / "ok.md", "## Scenario: Fine\n")
    (tmp_path / "specs" / "blob.md").write_bytes(b"## Scenario: Hidden\n\0\0binary")
    write(tmp_path / "tests" / "t.py", "# scenario: fine\n")
    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])
    assert coverage.skipped_specs == (("specs/blob.md", "binary content"),)
    assert coverage.counts
    assert not coverage.passed


def test_an_unreadable_spec_alone_still_counts(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "blob.feature").write_bytes(b"\0")
    coverage = measure_coverage(tmp_path, ["specs"], ["tests"])
    assert coverage.counts
    assert not coverage.passed


def test_globs_skip_tool_folders(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "a.md", "## Scenario: Real\n")
    write(tmp_path / "node_modules" / "pkg" / "README.md", "## Scenario: Vendored\n")
    write(tmp_path / ".forge" / "x.md", "## Scenario: Internal\n")
    coverage = measure_coverage(tmp_path, ["**/*.md"], ["tests"])
    assert [s.id for s in coverage.scenarios] == ["real"]
