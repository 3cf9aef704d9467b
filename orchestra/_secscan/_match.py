"""Finding secrets in text and redacting them: pure functions, no I/O.

A rule's regex runs only over text that holds one of its keywords; each match
must then pass the rule's checks before it is a secret: not a placeholder
(``${VAR}``, ``<your-token>``, ``xxxx``, the AWS documentation examples ...),
no stopword, long enough, and for heuristic rules (those with an entropy
floor) random enough and shaped like a literal rather than code or prose.
Where two rules find the same secret, the rule listed first in the file wins.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterable

import attrs

from ._engine import match_spans
from ._rules import Rule, Ruleset

# Documentation examples that are public and never live credentials.
_KNOWN_EXAMPLES = (
    "akiaiosfodnn7example",
    "wjalrxutnfemi/k7mdeng/bpxrficyexamplekey",
    "je7mtgbclwbf/2zp9utk/h3yciq/lfsz7lcvbdbbq",
)
_TEMPLATE = re.compile(
    r"\$\{|\$\(|^\$[A-Za-z_]|\{\{|\}\}|\{%|%\(|^%[A-Za-z_]+%$|^<[^<>]*>$|^\[[^\[\]]*\]$|^@@\w+@@$"
)
_FILLER_RUN = re.compile(r"[xX*#.•_-]{5,}|(.)\1{7,}")
# A value made of identifiers joined by dots is a reference (settings.SECRET,
# process.env.TOKEN); a single all-lower, all-upper, camelCase or PascalCase
# identifier is a name.
_REFERENCE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[a-z_]+|[A-Z_]+"
    r"|_*[A-Za-z][a-z]+(?:[A-Z][a-z]+)+"
)
_EXPRESSION = re.compile(r"[()\[\]{}]|^(?:true|false|null|none|nil|undefined)$", re.IGNORECASE)
_WORDS = re.compile(
    r"[a-z][a-z0-9]*(?:[-_./ ][a-z][a-z0-9]*)+|[A-Z][A-Z0-9]*(?:[-_./][A-Z][A-Z0-9]*)+"
)
_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]+)+/?")
# A path segment mixing lower, upper and digits is random data, not a folder name:
# a base64 key may start with "/" and hold more of them.
_MIXED = re.compile(r"(?=[^/]*[a-z])(?=[^/]*[A-Z])(?=[^/]*[0-9])")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_-]{16,}={0,2}")

REDACTED = "[redacted]"


@attrs.frozen
class SecretHit:
    """One secret found in a text, located by byte offsets.

    The secret itself is kept out of ``repr`` and equality so that it cannot
    leak into a log line by accident; only the scan that found it reads it.
    """

    rule: Rule = attrs.field(repr=False)
    start: int
    end: int
    secret: str = attrs.field(repr=False, eq=False)

    @property
    def rule_id(self) -> str:
        return self.rule.id


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0 for an empty string)."""
    if not value:
        return 0.0
    length = len(value)
    return -sum(count / length * math.log2(count / length) for count in Counter(value).values())


def is_placeholder(value: str) -> bool:
    """Whether a value is a stand-in rather than a credential.

    Covers templates and variables (``${VAR}``, ``$VAR``, ``{{ x }}``,
    ``${{ secrets.X }}``, ``%(x)s``, ``<your-token>``), runs of filler
    (``xxxx``, ``****``, ``aaaaaaaa``) and the public AWS documentation keys.
    """
    lowered = value.lower()
    if any(example in lowered for example in _KNOWN_EXAMPLES):
        return True
    if _TEMPLATE.search(value):
        return True
    # Filler must make up a good part of the value: real keys (OpenSSH bodies
    # especially) hold the odd run of "AAAAAAAA".
    filler = sum(len(run.group()) for run in _FILLER_RUN.finditer(value))
    return filler * 10 >= len(value) * 3


def looks_like_literal(value: str) -> bool:
    """Whether a heuristic rule's value could be a literal secret.

    Not a reference (``settings.API_KEY``, ``os.environ[``), a path, a URL,
    a UUID, lowercase words (``my-app-production``) or base64 of plain text.
    """
    value = value.rstrip(";,")  # statement and list punctuation after an unquoted value
    if _EXPRESSION.search(value) or "://" in value:
        return False
    for shape in (_REFERENCE, _WORDS, _UUID):
        if shape.fullmatch(value):
            return False
    if _PATH.fullmatch(value) and not any(_MIXED.search(part) for part in value.split("/")):
        return False
    return not _is_base64_text(value)


def _is_base64_text(value: str) -> bool:
    if not _BASE64.fullmatch(value):
        return False
    padded = value + "=" * (-len(value) % 4)
    try:
        decoded = base64.b64decode(padded, altchars=b"-_" if "-" in value or "_" in value else None)
    except (binascii.Error, ValueError):
        return False
    if len(decoded) < 8:
        return False
    printable = sum(1 for byte in decoded if 32 <= byte < 127 or byte in (9, 10, 13))
    return printable / len(decoded) > 0.95 and b" " in decoded


def _accept(rule: Rule, ruleset: Ruleset, secret: str) -> bool:
    if len(secret) < rule.min_length or is_placeholder(secret):
        return False
    lowered = secret.lower()
    if any(word in lowered for word in rule.stopwords_lower) or any(
        word in lowered for word in ruleset.stopwords_lower
    ):
        return False
    if rule.entropy is None:  # a distinctive format: the regex said enough
        return True
    return looks_like_literal(secret) and shannon_entropy(secret) >= rule.entropy


def find_secrets(data: bytes, ruleset: Ruleset, *, path: str | None = None) -> list[SecretHit]:
    """Every secret in ``data``, in order of position, overlaps resolved by rule order.

    Args:
        data: The text, as bytes (a file's content, or UTF-8 text).
        ruleset: The rules to apply.
        path: The file's relative POSIX path, for the rules' ``allow_paths``;
            None applies every rule.
    """
    if not ruleset.applies_to(path):
        return []
    present = ruleset.keyword_finder.present(data.lower())
    if not present:
        return []
    hits: list[SecretHit] = []
    for rule in ruleset.rules:
        if present.isdisjoint(rule.keywords_bytes) or not rule.applies_to(path):
            continue
        for start, end in match_spans(rule.pattern, data, rule.secret_group):
            if start < 0:
                continue
            secret = data[start:end].decode("latin-1")
            if _accept(rule, ruleset, secret):
                hits.append(SecretHit(rule, start, end, secret))
    return _first_rule_wins(hits)


def _first_rule_wins(hits: Iterable[SecretHit]) -> list[SecretHit]:
    # Hits arrive in rule order, so a later rule's overlapping hit is dropped.
    kept: list[SecretHit] = []
    for hit in hits:
        if all(hit.end <= other.start or hit.start >= other.end for other in kept):
            kept.append(hit)
    return sorted(kept, key=lambda hit: (hit.start, hit.end))


def preview(secret: str) -> str:
    """A display form that cannot give the secret away: a few leading characters at most."""
    shown = min(4, len(secret) // 4)
    return f"{secret[:shown]}…{REDACTED}"
