"""Secret scan against detect-secrets: speed, incremental rescan, recall, false positives.

Every figure is printed next to its baseline, measured in the same run on the same
files:

1. Speed. A generated git repository (20,000 files of Python, JavaScript, JSON,
   YAML, Markdown, shell and env text, committed) is scanned in full, then again
   after 10 files are edited: ours through the Python API (``scan_tree`` with a
   cache) and as a whole command (``forge secscan --json``), detect-secrets as
   ``detect-secrets scan``. detect-secrets has no incremental mode (its
   ``scan --baseline`` update rescans every file too), so its rescan is a full
   scan of the edited tree; ``detect-secrets-hook`` given the 10 edited files'
   names is shown as well, although it needs the caller to know which files
   changed, which ours works out for itself.
2. Recall. Secrets generated at run time from the providers' public token formats
   (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, private keys, generic
   passwords), planted in env, shell, JSON, YAML, Python, ini, TOML and JavaScript
   files. A secret counts as found when a finding is reported on its file and line
   (any line of a multi-line private key).
3. False positives. A tree of near-misses only (placeholders, template variables,
   the AWS documentation keys, environment look-ups, uuids, digests, lockfile
   hashes, test ids): every finding there is a false positive.

Both tools scan git-tracked files; detect-secrets runs with ``-n`` (no network
verification of what it finds) on every core, ours in one process.

    .venv/bin/python bench/secscan_compare.py [--files 3000] [--seed 7] [--copies 3] [--quick]
"""

from __future__ import annotations

import argparse
import base64
import importlib.metadata
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from _quick import parse_args

from orchestra._secscan import load_rules, scan_tree
from orchestra._secscan._rules import Ruleset

BIN = Path(sys.executable).parent
FORGE = BIN / "forge"
DETECT_SECRETS = BIN / "detect-secrets"
DETECT_SECRETS_HOOK = BIN / "detect-secrets-hook"
EDITED_FILES = 10
# Everything generated is dated this far back, so that the cache's "racy clean"
# check (an mtime close to the scan's start means "read it again") trusts it.
AGE_SECONDS = 3600

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
BASE32 = string.ascii_uppercase + "234567"
PASSWORD_CHARS = ALNUM + "!@%^*-_+."
_WORD_TEXT = (
    "user order cart item total price config client server request response handler "
    "session cache index value result error status path name data payload retry timeout "
    "limit queue worker task job batch stream buffer"
)
WORDS = _WORD_TEXT.split()


# --------------------------------------------------------------------------- setup


def ensure_detect_secrets() -> str:
    """Install detect-secrets into this interpreter's environment if missing; its version."""
    try:
        import detect_secrets  # noqa: F401  # only probing whether it is installed
    except ImportError:
        print("installing detect-secrets into", sys.prefix, flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "detect-secrets"], check=True
        )
    return importlib.metadata.version("detect-secrets")


def _chars(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def git_commit_all(root: Path) -> None:
    """Make ``root`` a git repository with every file in it committed."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
         "commit", "-q", "--no-verify", "-m", "generated"],
    ):  # fmt: skip
        subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)


def age_files(root: Path) -> None:
    """Date every file AGE_SECONDS back (see AGE_SECONDS)."""
    past = time.time() - AGE_SECONDS
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if name != ".git"]
        for name in files:
            os.utime(os.path.join(folder, name), (past, past))


# --------------------------------------------------------------------------- the speed tree

SPEED_SUFFIXES = (".py", ".py", ".js", ".ts", ".json", ".yaml", ".md", ".sh", ".env", ".toml")
LINE_POOL = 5000


def _ident(rng: random.Random) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def _speed_line(rng: random.Random, suffix: str) -> str:
    """One line of ordinary code or text, with the words secret rules key on now and then."""
    name, other = _ident(rng), _ident(rng)
    roll = rng.random()
    if roll < 0.04:
        return f"# commit {rng.getrandbits(160):040x} of {name}"
    if roll < 0.06:
        return f"# see https://docs.example.org/{name}/{other}"
    if suffix in (".py",):
        if roll < 0.12:
            return f'    {name}_token = os.environ.get("{name.upper()}_TOKEN")'
        if roll < 0.15:
            return f"def {name}({other}, *, timeout={rng.randint(1, 90)}):"
        return f"    {name} = {other}.{rng.choice(WORDS)}({_ident(rng)}, {rng.randint(0, 999)})"
    if suffix in (".js", ".ts"):
        if roll < 0.12:
            return f"  const {name} = process.env.{other.upper()}_SECRET;"
        if roll < 0.15:
            return f"export async function {name}({other}) {{"
        return f"  const {name} = await {other}.{rng.choice(WORDS)}({_ident(rng)});"
    if suffix == ".json":
        if roll < 0.10:
            return f'  "{name}_sha256": "{rng.getrandbits(256):064x}",'
        return f'  "{name}": "{other}-{rng.randint(0, 9999)}",'
    if suffix == ".yaml":
        if roll < 0.12:
            return f"  {name}_password: ${{{name.upper()}_PASSWORD}}"
        return f"  {name}: {other}-{rng.randint(0, 99)}"
    if suffix == ".md":
        return " ".join(rng.choices(WORDS, k=rng.randint(5, 16))).capitalize() + "."
    if suffix in (".sh", ".env"):
        prefix = "export " if suffix == ".sh" else ""
        if roll < 0.12:
            return f'{prefix}{name.upper()}_TOKEN="${{{name.upper()}_TOKEN:-}}"'
        return f"{prefix}{name.upper()}={other}-{rng.randint(0, 999)}"
    return f'{name} = "{other}"'  # .toml


def generate_speed_tree(root: Path, files: int, seed: int) -> int:
    """Write ``files`` files of ordinary text under ``root``; return the bytes written.

    Sizes are log-normal (median 24 lines, mean about 34, some of several hundred);
    lines are drawn from a pool per file type, which keeps generation quick.
    """
    rng = random.Random(seed)
    pools = {
        suffix: [_speed_line(rng, suffix) for _ in range(LINE_POOL)]
        for suffix in dict.fromkeys(SPEED_SUFFIXES)  # a set would be ordered by hash seed
    }
    total = 0
    for index in range(files):
        folder = root / f"pkg{index % 50:02d}" / f"mod{index % 9}"
        folder.mkdir(parents=True, exist_ok=True)
        suffix = rng.choice(SPEED_SUFFIXES)
        lines = max(3, int(rng.lognormvariate(3.2, 0.8)))
        text = "\n".join(rng.choices(pools[suffix], k=lines)) + "\n"
        data = text.encode()
        (folder / f"file{index}{suffix}").write_bytes(data)
        total += len(data)
    (root / "forge.toml").write_text("# the bench project\n")  # for `forge secscan`
    return total


def edit_files(root: Path, count: int, seed: int) -> list[str]:
    """Append a line to ``count`` tracked Python files; return their relative paths."""
    rng = random.Random(seed)
    candidates = sorted(path for path in root.glob("pkg*/mod*/*.py"))
    chosen = rng.sample(candidates, count)
    for path in chosen:
        with path.open("a") as handle:
            handle.write(f"# edited {rng.getrandbits(32):08x}\n")
    return [path.relative_to(root).as_posix() for path in chosen]


# --------------------------------------------------------------------------- runners


Secret = dict[str, object]  # one entry of detect-secrets' JSON results


@dataclass(frozen=True)
class Run:
    """One timed scan: wall seconds, files read, findings' lines by file, findings by rule."""

    seconds: float
    files_read: int | None  # None: the tool does not say
    findings: dict[str, list[int]]
    rules: Counter[str]

    @property
    def count(self) -> int:
        return sum(len(lines) for lines in self.findings.values())


def ours_api(root: Path, ruleset: Ruleset, cache: Path | None) -> Run:
    started = time.perf_counter()
    result = scan_tree(root, ruleset, cache_path=cache)
    seconds = time.perf_counter() - started
    findings: dict[str, list[int]] = {}
    for finding in result.findings:
        findings.setdefault(finding.path, []).append(finding.line)
    rules = Counter(finding.rule_id for finding in result.findings)
    return Run(seconds, result.files_read, findings, rules)


def ours_cli(root: Path) -> Run:
    started = time.perf_counter()
    done = subprocess.run(
        [str(FORGE), "secscan", "--json"], cwd=root, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: findings at or above fail_on
        raise RuntimeError(f"forge secscan failed ({done.returncode}): {done.stderr[-2000:]}")
    document = json.loads(done.stdout)
    findings: dict[str, list[int]] = {}
    for finding in document["findings"]:
        findings.setdefault(finding["path"], []).append(finding["line"])
    rules = Counter(finding["rule_id"] for finding in document["findings"])
    return Run(seconds, document["files"]["read"], findings, rules)


def _ds_run(seconds: float, files_read: int | None, results: dict[str, list[Secret]]) -> Run:
    findings = {
        path: [int(str(secret["line_number"])) for secret in secrets]
        for path, secrets in results.items()
    }
    rules = Counter(str(secret["type"]) for secrets in results.values() for secret in secrets)
    return Run(seconds, files_read, findings, rules)


def detect_secrets_scan(root: Path) -> Run:
    started = time.perf_counter()
    done = subprocess.run(
        [str(DETECT_SECRETS), "scan", "-n"], cwd=root, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"detect-secrets scan failed: {done.stderr[-2000:]}")
    return _ds_run(seconds, None, json.loads(done.stdout)["results"])


def detect_secrets_hook(root: Path, paths: list[str]) -> Run:
    started = time.perf_counter()
    done = subprocess.run(
        [str(DETECT_SECRETS_HOOK), "-n", "--json", *paths],
        cwd=root,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: it found secrets
        raise RuntimeError(f"detect-secrets-hook failed: {done.stderr[-2000:]}")
    results = json.loads(done.stdout)["results"] if done.stdout.strip() else {}
    return _ds_run(seconds, len(paths), results)


# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Raw:
    """A right-hand side written as is (an expression), not as a quoted string."""

    text: str


Value = str | Raw
SYNTAXES = ("env", "shell", "json", "yaml", "python", "ini", "toml", "js")
SUFFIX = {
    "env": ".env",
    "shell": ".sh",
    "json": ".json",
    "yaml": ".yaml",
    "python": ".py",
    "ini": ".ini",
    "toml": ".toml",
    "js": ".js",
}


def _styled(name: str, syntax: str) -> str:
    """``DB_PASSWORD`` as the syntax usually spells it: DB_PASSWORD, db_password, dbPassword."""
    if syntax in ("env", "shell", "python"):
        return name
    lower = name.lower()
    if syntax == "js":
        head, *rest = lower.split("_")
        return head + "".join(part.capitalize() for part in rest)
    return lower


def _plain_yaml(value: str) -> bool:
    return bool(value) and value[0] in ALNUM and all(c in ALNUM + "_./+-" for c in value)


def _assignment(syntax: str, name: str, value: Value) -> list[str]:
    """The lines assigning ``value`` to ``name`` in ``syntax``."""
    key = _styled(name, syntax)
    if isinstance(value, Raw):
        rhs = value.text
        return {
            "env": [f"{key}={rhs}"],
            "shell": [f"export {key}={rhs}"],
            "json": [f'  "{key}": {rhs},'],
            "yaml": [f"  {key}: {rhs}"],
            "python": [f"{key} = {rhs}"],
            "ini": [f"{key} = {rhs}"],
            "toml": [f"{key} = {rhs}"],
            "js": [f"  {key}: {rhs},"],
        }[syntax]
    lines = value.split("\n")
    if len(lines) == 1:
        return {
            "env": [f"{key}={value}"],
            "shell": [f'export {key}="{value}"'],
            "json": [f"  {json.dumps(key)}: {json.dumps(value)},"],
            "yaml": [f"  {key}: {value if _plain_yaml(value) else json.dumps(value)}"],
            "python": [f'{key} = "{value}"'],
            "ini": [f"{key} = {value}"],
            "toml": [f"{key} = {json.dumps(value)}"],
            "js": [f'  {key}: "{value}",'],
        }[syntax]
    # A multi-line value (a private key): each syntax's own way of writing one.
    if syntax == "env":
        return [f'{key}="{lines[0]}', *lines[1:-1], f'{lines[-1]}"']
    if syntax == "shell":
        return [f'export {key}="{lines[0]}', *lines[1:-1], f'{lines[-1]}"']
    if syntax == "json":
        return [f"  {json.dumps(key)}: {json.dumps(value)},"]
    if syntax == "yaml":
        return [f"  {key}: |", *(f"    {line}" for line in lines)]
    if syntax == "python":
        return [f'{key} = """{lines[0]}', *lines[1:-1], f'{lines[-1]}"""']
    if syntax == "ini":
        return [f"{key} = {lines[0]}", *(f"    {line}" for line in lines[1:])]
    if syntax == "toml":
        return [f'{key} = """', *lines, '"""']
    return [f"  {key}: `{lines[0]}", *lines[1:-1], f"{lines[-1]}`,"]  # js


_FRAME = {
    "env": (["# service configuration", "APP_ENV=production", "LOG_LEVEL=info"], ["PORT=8080"]),
    "shell": (
        ["#!/usr/bin/env bash", "set -euo pipefail", "export APP_ENV=production"],
        ['exec ./server --port "${PORT:-8080}"'],
    ),
    "json": (["{", '  "app_env": "production",'], ['  "port": 8080', "}"]),
    "yaml": (["service:", "  env: production"], ["  port: 8080"]),
    "python": (['"""Settings."""', "import os", "", "DEBUG = False"], ["TIMEOUT = 30"]),
    "ini": (["[default]", "region = eu-west-1"], ["output = json"]),
    "toml": (["[service]", 'env = "production"'], ["port = 8080"]),
    "js": (['"use strict";', "const config = {", '  env: "production",'], ["  port: 8080,", "};"]),
}


def render(syntax: str, entries: Iterable[tuple[str, Value]]) -> tuple[str, list[range]]:
    """A whole file in ``syntax`` holding ``entries``, and the line numbers of each entry."""
    head, tail = _FRAME[syntax]
    lines = list(head)
    spans: list[range] = []
    for name, value in entries:
        block = _assignment(syntax, name, value)
        spans.append(range(len(lines) + 1, len(lines) + len(block) + 1))
        lines.extend(block)
    lines.extend(tail)
    return "\n".join(lines) + "\n", spans


# --------------------------------------------------------------------------- recall corpus


def _private_key(rng: random.Random) -> str:
    kind = rng.choice(("RSA ", "EC ", "OPENSSH ", ""))
    body = base64.b64encode(rng.randbytes(rng.choice((384, 600)))).decode()
    rows = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join(
        [f"-----BEGIN {kind}PRIVATE KEY-----", *rows, f"-----END {kind}PRIVATE KEY-----"]
    )


# kind -> the (variable name, token generator) pairs it plants in one file.
SECRET_KINDS: dict[str, list[tuple[str, Callable[[random.Random], str]]]] = {
    "aws-key-id": [("AWS_ACCESS_KEY_ID", lambda r: "AKIA" + _chars(r, BASE32, 16))],
    "aws-secret-key": [("AWS_SECRET_ACCESS_KEY", lambda r: _chars(r, B64, 40))],
    "github-ghp": [("GITHUB_TOKEN", lambda r: "ghp_" + _chars(r, ALNUM, 36))],
    "github-pat": [
        ("GITHUB_PAT", lambda r: f"github_pat_{_chars(r, ALNUM, 22)}_{_chars(r, ALNUM, 59)}")
    ],
    "gitlab-glpat": [("GITLAB_TOKEN", lambda r: "glpat-" + _chars(r, B64URL, 20))],
    "slack-xoxb": [
        (
            "SLACK_BOT_TOKEN",
            lambda r: (
                f"xoxb-{_chars(r, string.digits, 11)}-{_chars(r, string.digits, 13)}-"
                + _chars(r, ALNUM, 24)
            ),
        )
    ],
    "stripe-live": [
        ("STRIPE_SECRET_KEY", lambda r: "sk_live_" + _chars(r, ALNUM, r.choice((24, 99))))
    ],
    "openai-proj": [
        (
            "OPENAI_API_KEY",
            lambda r: f"sk-proj-{_chars(r, B64URL, 74)}T3BlbkFJ{_chars(r, B64URL, 74)}",
        )
    ],
    "anthropic": [("ANTHROPIC_API_KEY", lambda r: f"sk-ant-api03-{_chars(r, B64URL, 93)}AA")],
    "private-key": [("TLS_PRIVATE_KEY", _private_key)],
    "generic-password": [("DB_PASSWORD", lambda r: _chars(r, PASSWORD_CHARS, 20))],
}
# The AWS pair travels together, as it does in real files.
KIND_FILES = {"aws": ["aws-key-id", "aws-secret-key"]} | {
    kind: [kind] for kind in SECRET_KINDS if not kind.startswith("aws-")
}


@dataclass(frozen=True)
class Planted:
    kind: str
    syntax: str
    path: str
    lines: range


def plant_corpus(root: Path, seed: int, copies: int = 3) -> list[Planted]:
    """Write one file per (kind, syntax, copy); return where every secret is."""
    rng = random.Random(seed)
    planted: list[Planted] = []
    for group, kinds in KIND_FILES.items():
        for syntax in SYNTAXES:
            for copy in range(copies):
                entries = [(name, make(rng)) for kind in kinds for name, make in SECRET_KINDS[kind]]
                text, spans = render(syntax, entries)
                path = f"{syntax}/{group}-{copy}{SUFFIX[syntax]}"
                (root / syntax).mkdir(exist_ok=True)
                (root / path).write_text(text)
                planted.extend(
                    Planted(kind, syntax, path, span)
                    for kind, span in zip(kinds, spans, strict=True)
                )
    return planted


def found(planted: Planted, findings: dict[str, list[int]]) -> bool:
    return any(line in planted.lines for line in findings.get(planted.path, ()))


# --------------------------------------------------------------------------- false-positive corpus


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def _b64_text(rng: random.Random) -> str:
    sentence = " ".join(rng.choices(WORDS, k=rng.randint(6, 12))).capitalize() + "."
    return base64.b64encode(sentence.encode()).decode()


ENV_LOOKUP: dict[str, Value] = {
    "env": Raw("$GITHUB_TOKEN"),
    "shell": Raw('"$(cat /run/secrets/github_token)"'),
    "yaml": Raw("${GITHUB_TOKEN}"),
    "python": Raw('os.environ["GITHUB_TOKEN"]'),
    "ini": Raw("%(github_token)s"),
    "js": Raw("process.env.GITHUB_TOKEN"),
}
ENV_LOOKUP_GET: dict[str, Value] = {
    "python": Raw('os.environ.get("DB_PASSWORD", "")'),
    "js": Raw('process.env["DB_PASSWORD"] ?? ""'),
    "shell": Raw('"${DB_PASSWORD:?set DB_PASSWORD}"'),
}

# category -> (syntax, rng) -> entries; every value is a near-miss, never a secret.
NEAR_MISSES: dict[str, Callable[[str, random.Random], list[tuple[str, Value]]]] = {
    "${VAR} placeholder": lambda s, r: [
        ("GITHUB_TOKEN", "${GITHUB_TOKEN}"),
        ("DB_PASSWORD", "${DB_PASSWORD}"),
        ("STRIPE_SECRET_KEY", "$STRIPE_SECRET_KEY"),
    ],
    "{{ x }} template": lambda s, r: [
        ("API_KEY", "{{ api_key }}"),
        ("DB_PASSWORD", "{{ .Values.postgres.password }}"),
    ],
    "${{ secrets.X }}": lambda s, r: [
        ("NPM_TOKEN", "${{ secrets.NPM_TOKEN }}"),
        ("AWS_SECRET_ACCESS_KEY", "${{ secrets.AWS_SECRET_ACCESS_KEY }}"),
    ],
    "<your-token>": lambda s, r: [
        ("GITHUB_TOKEN", "<your-token>"),
        ("OPENAI_API_KEY", "<YOUR_OPENAI_API_KEY>"),
        ("SLACK_BOT_TOKEN", "your-slack-bot-token-here"),
    ],
    "changeme": lambda s, r: [
        ("DB_PASSWORD", "changeme"),
        ("ADMIN_PASSWORD", "CHANGE_ME_BEFORE_DEPLOY"),
    ],
    "xxxxxxxx": lambda s, r: [
        ("SECRET_KEY", "xxxxxxxxxxxxxxxxxxxxxxxx"),
        ("GITHUB_TOKEN", "ghp_" + "x" * 36),
        ("STRIPE_SECRET_KEY", "sk_live_" + "x" * 24),
        ("DB_PASSWORD", "********"),
    ],
    "AWS doc example keys": lambda s, r: [
        ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ],
    'password = ""': lambda s, r: [("DB_PASSWORD", ""), ("API_TOKEN", "")],
    "env look-up": lambda s, r: [
        (name, lookup[s])
        for name, lookup in (("GITHUB_TOKEN", ENV_LOOKUP), ("DB_PASSWORD", ENV_LOOKUP_GET))
        if s in lookup
    ],
    "uuid": lambda s, r: [
        ("REQUEST_ID", str(uuid.UUID(int=r.getrandbits(128), version=4))),
        ("TENANT_ID", str(uuid.UUID(int=r.getrandbits(128), version=4))),
    ],
    "git SHA": lambda s, r: [("COMMIT", _hex(r, 40)), ("BASE_REVISION", _hex(r, 40))],
    "sha256 digest": lambda s, r: [("SHA256", _hex(r, 64)), ("ARCHIVE_CHECKSUM", _hex(r, 64))],
    "base64 of text": lambda s, r: [("BANNER_B64", _b64_text(r)), ("PAYLOAD", _b64_text(r))],
    "test ids": lambda s, r: [
        ("TEST_RUN_ID", _chars(r, ALNUM, 32)),
        ("FIXTURE_ID", "tst_" + _chars(r, ALNUM, 28)),
        ("IDEMPOTENCY_KEY_ID", _chars(r, B64URL, 40)),
    ],
    "secret-named references": lambda s, r: [
        ("PASSWORD_FILE", "/run/secrets/db_password"),
        ("TOKEN_URL", "https://oauth2.googleapis.com/token"),
        ("SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf"),
        ("MAX_TOKENS", Raw("4096")),
    ],
}
LOCKFILES = "lockfile integrity"


def _integrity(rng: random.Random) -> str:
    return "sha512-" + base64.b64encode(rng.randbytes(64)).decode()


def _lockfiles(root: Path, rng: random.Random) -> dict[str, int]:
    """package-lock.json, yarn.lock and pnpm-lock.yaml; return path -> near-miss lines."""
    names = [f"pkg-{_chars(rng, string.ascii_lowercase, 6)}" for _ in range(40)]
    packages = {
        f"node_modules/{name}": {
            "version": f"1.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
            "resolved": f"https://registry.npmjs.org/{name}/-/{name}-1.0.0.tgz",
            "integrity": _integrity(rng),
        }
        for name in names
    }
    lock = {"name": "app", "lockfileVersion": 3, "packages": packages}
    (root / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    yarn = "".join(
        f'{name}@^1.0.0:\n  version "1.0.0"\n  resolved "https://registry.yarnpkg.com/{name}"\n'
        f"  integrity {_integrity(rng)}\n\n"
        for name in names
    )
    (root / "yarn.lock").write_text(yarn)
    pnpm = "lockfileVersion: '9.0'\npackages:\n" + "".join(
        f"  {name}@1.0.0:\n    resolution: {{integrity: {_integrity(rng)}}}\n" for name in names
    )
    (root / "pnpm-lock.yaml").write_text(pnpm)
    return {"package-lock.json": 40, "yarn.lock": 40, "pnpm-lock.yaml": 40}


def clean_corpus(root: Path, seed: int) -> tuple[dict[str, str], Counter[str]]:
    """Write the near-miss tree; return path -> category and near-miss lines per category."""
    rng = random.Random(seed)
    categories: dict[str, str] = {}
    planted: Counter[str] = Counter()
    for category, make in NEAR_MISSES.items():
        slug = "".join(c if c.isalnum() else "-" for c in category.lower()).strip("-")
        for syntax in SYNTAXES:
            entries = make(syntax, rng)
            if not entries:
                continue
            text, _ = render(syntax, entries)
            path = f"{syntax}/{slug}{SUFFIX[syntax]}"
            (root / syntax).mkdir(exist_ok=True)
            (root / path).write_text(text)
            categories[path] = category
            planted[category] += len(entries)
    for path, count in _lockfiles(root, rng).items():
        categories[path] = LOCKFILES
        planted[LOCKFILES] += count
    return categories, planted


# --------------------------------------------------------------------------- report


def _by_rule(run: Run) -> str:
    if not run.rules:
        return ""
    return " (" + ", ".join(f"{rule} {count}" for rule, count in run.rules.most_common()) + ")"


def _rate(count: float, seconds: float) -> str:
    return f"{count / seconds:>10,.0f}" if seconds > 0 else f"{'-':>10}"


def _speed_row(label: str, ours: Run, theirs: Run, files: int, megabytes: float) -> str:
    return (
        f"{label:<34} {ours.seconds:>7.2f} {_rate(files, ours.seconds)} "
        f"{megabytes / ours.seconds:>7.1f}   {theirs.seconds:>7.2f} "
        f"{_rate(files, theirs.seconds)} {megabytes / theirs.seconds:>7.1f}   "
        f"{ours.seconds / theirs.seconds:>7.3f}"
    )


def speed_section(workdir: Path, files: int, seed: int, ruleset: Ruleset) -> None:
    root = workdir / "speed"
    started = time.perf_counter()
    total = generate_speed_tree(root, files, seed)
    git_commit_all(root)
    age_files(root)
    listed = subprocess.run(
        ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    megabytes = total / 1e6
    print(
        f"\n1. SPEED — tree: {len(listed):,} git-tracked files, {megabytes:.1f} MB "
        f"(generated and committed in {time.perf_counter() - started:.1f} s)"
    )
    cache = workdir / "api-cache.sqlite3"
    api_full = ours_api(root, ruleset, cache)
    ds_full = detect_secrets_scan(root)
    cli_full = ours_cli(root)
    edited = edit_files(root, EDITED_FILES, seed)
    api_rescan = ours_api(root, ruleset, cache)
    ds_rescan = detect_secrets_scan(root)
    ds_hook = detect_secrets_hook(root, edited)
    cli_rescan = ours_cli(root)

    empty = workdir / "empty"
    empty.mkdir()
    (empty / "forge.toml").write_text("# empty project\n")
    git_commit_all(empty)
    cli_empty, ds_empty = ours_cli(empty), detect_secrets_scan(empty)

    print(
        "   files/s and MB/s are the whole tree over the wall time, so a rescan shows its\n"
        "   effective rate; ratio = ours seconds / detect-secrets seconds (< 1: ours faster)\n"
    )
    print(
        f"{'':<34} {'ours':>7} {'':>10} {'':>7}   {'d-s':>7}\n"
        f"{'step':<34} {'s':>7} {'files/s':>10} {'MB/s':>7}   {'s':>7} {'files/s':>10} "
        f"{'MB/s':>7}   {'ratio':>7}"
    )
    n = len(listed)
    print(_speed_row("full scan: API vs `scan`", api_full, ds_full, n, megabytes))
    print(
        _speed_row(
            f"rescan, {EDITED_FILES} edited: API vs `scan`", api_rescan, ds_rescan, n, megabytes
        )
    )
    print(_speed_row("full: `forge secscan --json`", cli_full, ds_full, n, megabytes))
    print(_speed_row("rescan: `forge secscan --json`", cli_rescan, ds_rescan, n, megabytes))
    print(
        f"{'rescan: API vs d-s-hook on 10 names':<34} {api_rescan.seconds:>7.2f} {'':>10} "
        f"{'':>7}   {ds_hook.seconds:>7.2f} {'':>10} {'':>7}   "
        f"{api_rescan.seconds / ds_hook.seconds:>7.3f}"
    )
    print(
        f"{'command start-up, empty repo':<34} {cli_empty.seconds:>7.2f} {'':>10} {'':>7}   "
        f"{ds_empty.seconds:>7.2f} {'':>10} {'':>7}   "
        f"{cli_empty.seconds / ds_empty.seconds:>7.3f}"
    )
    print(
        f"\n   files read — ours: full {api_full.files_read:,}, rescan {api_rescan.files_read:,} "
        f"(CLI: {cli_full.files_read:,}, {cli_rescan.files_read:,}); detect-secrets reads "
        f"every file each `scan` ({os.cpu_count()} worker processes), the hook "
        f"{EDITED_FILES}.\n"
        f"   findings on this ordinary-code tree (all false positives) — ours {api_full.count}"
        f"{_by_rule(api_full)}, detect-secrets {ds_full.count}{_by_rule(ds_full)}."
    )


def recall_section(workdir: Path, seed: int, ruleset: Ruleset, copies: int) -> None:
    root = workdir / "planted"
    root.mkdir()
    planted = plant_corpus(root, seed, copies)
    git_commit_all(root)
    ours = ours_api(root, ruleset, None).findings
    theirs = detect_secrets_scan(root).findings
    print(f"\n2. RECALL — {len(planted)} planted secrets in {len(SYNTAXES)} syntaxes")
    header = f"   {{:<18}} {'ours':>9} {'d-s':>9}"
    for title, key in (("by kind", "kind"), ("by syntax", "syntax")):
        print("\n" + header.format(title))
        groups: dict[str, list[Planted]] = {}
        for item in planted:
            groups.setdefault(getattr(item, key), []).append(item)
        for group, items in groups.items():
            hit_ours = sum(found(item, ours) for item in items)
            hit_ds = sum(found(item, theirs) for item in items)
            print(f"   {group:<18} {hit_ours:>4}/{len(items):<4} {hit_ds:>4}/{len(items):<4}")
    total_ours = sum(found(item, ours) for item in planted)
    total_ds = sum(found(item, theirs) for item in planted)
    print(
        f"   {'TOTAL':<18} {total_ours:>4}/{len(planted):<4} {total_ds:>4}/{len(planted):<4}"
        f"   recall ours {total_ours / len(planted):.1%}, detect-secrets "
        f"{total_ds / len(planted):.1%}"
    )
    missed = Counter(f"{p.kind} in {p.syntax}" for p in planted if not found(p, ours))
    print(
        "   missed by ours: "
        + (", ".join(f"{name} ×{count}" for name, count in sorted(missed.items())) or "none")
    )
    missed_ds = Counter(f"{p.kind} in {p.syntax}" for p in planted if not found(p, theirs))
    print(
        "   missed by detect-secrets: "
        + (", ".join(f"{name} ×{count}" for name, count in sorted(missed_ds.items())) or "none")
    )


def false_positive_section(workdir: Path, seed: int, ruleset: Ruleset) -> None:
    root = workdir / "clean"
    root.mkdir()
    categories, planted = clean_corpus(root, seed)
    git_commit_all(root)
    ours = ours_api(root, ruleset, None).findings
    theirs = detect_secrets_scan(root).findings
    print(
        f"\n3. FALSE POSITIVES — {sum(planted.values())} near-miss lines in "
        f"{len(categories)} files (findings; every one is a false positive)\n"
    )
    print(f"   {'near-miss':<26} {'lines':>6} {'ours':>6} {'d-s':>6}")

    def tally(findings: dict[str, list[int]]) -> Counter[str]:
        counts: Counter[str] = Counter()
        for path, lines in findings.items():
            counts[categories.get(path, "(other file)")] += len(lines)
        return counts

    ours_by, theirs_by = tally(ours), tally(theirs)
    for category in [*NEAR_MISSES, LOCKFILES]:
        print(
            f"   {category:<26} {planted[category]:>6} {ours_by[category]:>6} "
            f"{theirs_by[category]:>6}"
        )
    print(
        f"   {'TOTAL':<26} {sum(planted.values()):>6} {sum(ours_by.values()):>6} "
        f"{sum(theirs_by.values()):>6}"
    )
    flagged = sorted(f"{path}:{line}" for path, lines in ours.items() for line in lines)
    if flagged:
        print("   ours flagged: " + ", ".join(flagged))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3_000, help="files in the speed tree")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--copies", type=int, default=3, help="planted files per secret kind and syntax"
    )
    args = parse_args(parser, files=150, copies=1)
    version = ensure_detect_secrets()
    ruleset = load_rules("secscan")
    print(
        f"secret scan bench — ours ({len(ruleset.rules)} shipped rules, {ruleset.engine} engine) "
        f"vs detect-secrets {version}; seed {args.seed}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="secscan-bench-") as folder:
        workdir = Path(folder)
        speed_section(workdir, args.files, args.seed, ruleset)
        recall_section(workdir, args.seed, ruleset, args.copies)
        false_positive_section(workdir, args.seed, ruleset)
    print(
        f"\n(bench took {time.perf_counter() - started:.0f} s; "
        f"load average now {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
