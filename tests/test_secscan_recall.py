"""The shipped rules against planted secrets in many syntaxes, and against near-misses.

Every token here is generated at run time from the provider's public format
(a prefix, an alphabet, a length), so no string in this file looks like a
credential to a push-protection scanner.
"""

from __future__ import annotations

import base64
import json
import random
import string
import textwrap
from pathlib import Path

import pytest

from orchestra._secscan import Ruleset, find_secrets, load_rules, redact, scan_tree

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
PASSWORDISH = ALNUM + "!%^&+="


class Tokens:
    """Fake credentials in the providers' public formats, from a seeded generator."""

    def __init__(self, seed: int = 1234) -> None:
        self.rng = random.Random(seed)

    def chars(self, alphabet: str, count: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(count))

    def aws_key_id(self) -> str:
        return "AKIA" + self.chars(string.ascii_uppercase + "234567", 16)

    def aws_secret(self) -> str:
        return self.chars(B64, 40)

    def gcp_api_key(self) -> str:
        return "AIza" + self.chars(URLSAFE, 35)

    def azure_key(self) -> str:
        return base64.b64encode(self.rng.randbytes(64)).decode()

    def github(self, prefix: str) -> str:
        return f"{prefix}_" + self.chars(ALNUM, 36)

    def github_fine_grained(self) -> str:
        return "github_pat_" + self.chars(ALNUM, 22) + "_" + self.chars(ALNUM, 59)

    def gitlab(self) -> str:
        return "glpat-" + self.chars(URLSAFE, 20)

    def slack_bot(self) -> str:
        digits = string.digits
        return f"xoxb-{self.chars(digits, 12)}-{self.chars(digits, 13)}-{self.chars(ALNUM, 24)}"

    def slack_webhook(self) -> str:
        team, channel = self.chars(UPPER_DIGITS, 10), self.chars(UPPER_DIGITS, 10)
        return f"https://hooks.slack.com/services/T{team}/B{channel}/{self.chars(ALNUM, 24)}"

    def stripe(self, kind: str) -> str:
        return f"{kind}_live_" + self.chars(ALNUM, 24)

    def openai_project(self) -> str:
        return "sk-proj-" + self.chars(URLSAFE, 48) + self.chars(ALNUM, 8)

    def openai_legacy(self) -> str:
        return "sk-" + self.chars(ALNUM, 48)

    def anthropic(self) -> str:
        return "sk-ant-api03-" + self.chars(URLSAFE, 93) + "AA"

    def npm(self) -> str:
        return "npm_" + self.chars(ALNUM, 36)

    def huggingface(self) -> str:
        return "hf_" + self.chars(string.ascii_letters, 34)

    def sendgrid(self) -> str:
        return "SG." + self.chars(URLSAFE, 22) + "." + self.chars(URLSAFE, 43)

    def jwt(self) -> str:
        def part(data: object) -> str:
            raw = json.dumps(data, separators=(",", ":")).encode()
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")

        payload = {
            "sub": self.chars(string.digits, 10),
            "iat": self.rng.randrange(10**9, 2 * 10**9),
        }
        return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(payload)}.{self.chars(URLSAFE, 43)}"

    def pem_body(self, size: int = 600) -> list[str]:
        encoded = base64.b64encode(self.rng.randbytes(size)).decode()
        return textwrap.wrap(encoded, 64)

    def private_key(self, kind: str) -> str:
        label = f"{kind} PRIVATE KEY".strip()
        if kind == "PGP":
            label = "PGP PRIVATE KEY BLOCK"
        lines = [f"-----BEGIN {label}-----", *self.pem_body(), f"-----END {label}-----"]
        return "\n".join(lines) + "\n"

    def gcp_service_account(self) -> str:
        pem = "\n".join(
            ["-----BEGIN PRIVATE KEY-----", *self.pem_body(900), "-----END PRIVATE KEY-----", ""]
        )
        document = {
            "type": "service_account",
            "project_id": "demo-project",
            "private_key_id": self.chars("0123456789abcdef", 40),
            "private_key": pem,
            "client_email": "svc@demo-project.iam.gserviceaccount.com",
        }
        return json.dumps(document, indent=2) + "\n"

    def password(self) -> str:
        return self.chars(PASSWORDISH, 18)

    def api_token(self) -> str:
        return self.chars(ALNUM, 32)


# (relative path, rule id expected, line number (1-based), the file's text)
Planted = tuple[str, str, int, str]


def planted_corpus(tokens: Tokens) -> list[Planted]:
    t = tokens
    corpus: list[Planted] = []

    def plant(path: str, rule: str, lines: list[str], line: int) -> None:
        corpus.append((path, rule, line, "\n".join(lines) + "\n"))

    # Distinctive prefixes, in assorted syntaxes.
    plant(
        "aws/credentials.ini",
        "aws-access-key-id",
        ["[default]", f"aws_access_key_id = {t.aws_key_id()}"],
        2,
    )
    plant(
        "aws/credentials2.ini",
        "aws-secret-access-key",
        ["[default]", f"aws_secret_access_key = {t.aws_secret()}"],
        2,
    )
    plant(
        "aws/.env",
        "aws-secret-access-key",
        ["REGION=eu-west-1", f"AWS_SECRET_ACCESS_KEY={t.aws_secret()}"],
        2,
    )
    plant(
        "aws/keys.json",
        "aws-secret-access-key",
        ["{", f'  "SecretAccessKey": "{t.aws_secret()}",', "}"],
        2,
    )
    plant(
        "aws/client.py",
        "aws-secret-access-key",
        ["import boto3", f'client = boto3.client("s3", aws_secret_access_key="{t.aws_secret()}")'],
        2,
    )
    plant("gcp/maps.js", "gcp-api-key", [f'const MAPS_KEY = "{t.gcp_api_key()}";'], 1)
    corpus.append(
        ("gcp/service-account.json", "gcp-service-account-key", 5, t.gcp_service_account())
    )
    plant(
        "azure/app.config",
        "azure-storage-key",
        [
            '<add key="storage" value="DefaultEndpointsProtocol=https;AccountName=demo;'
            f'AccountKey={t.azure_key()};EndpointSuffix=core.windows.net" />'
        ],
        1,
    )
    plant("gh/.env", "github-pat", [f"GITHUB_TOKEN={t.github('ghp')}"], 1)
    plant("gh/ci.yaml", "github-oauth-token", ["auth:", f"  token: {t.github('gho')}"], 2)
    plant("gh/app.sh", "github-app-token", [f"export GH_TOKEN='{t.github('ghs')}'"], 1)
    plant("gh/user.py", "github-app-token", [f'USER_TOKEN = "{t.github("ghu")}"'], 1)
    plant(
        "gh/refresh.json", "github-refresh-token", [f'{{"refresh_token": "{t.github("ghr")}"}}'], 1
    )
    plant("gh/fine.toml", "github-fine-grained-pat", [f'token = "{t.github_fine_grained()}"'], 1)
    plant(
        "gitlab/.netrc.sh",
        "gitlab-pat",
        [f'curl --header "PRIVATE-TOKEN: {t.gitlab()}" https://gitlab.example.com'],
        1,
    )
    plant("slack/bot.py", "slack-token", [f'slack = WebClient(token="{t.slack_bot()}")'], 1)
    plant("slack/hook.yaml", "slack-webhook", [f"webhook_url: {t.slack_webhook()}"], 1)
    plant("stripe/live.env", "stripe-live-key", [f"STRIPE_KEY={t.stripe('sk')}"], 1)
    plant("stripe/restricted.py", "stripe-live-key", [f"stripe.api_key = '{t.stripe('rk')}'"], 1)
    plant("ai/openai.env", "openai-api-key", [f"OPENAI_API_KEY={t.openai_project()}"], 1)
    plant("ai/openai_legacy.py", "openai-api-key", [f'openai.api_key = "{t.openai_legacy()}"'], 1)
    plant("ai/anthropic.sh", "anthropic-api-key", [f"export ANTHROPIC_API_KEY={t.anthropic()}"], 1)
    plant("ai/hf.ini", "huggingface-token", ["[hub]", f"token = {t.huggingface()}"], 2)
    plant("mail/sendgrid.json", "sendgrid-api-key", [f'{{"sendgrid": "{t.sendgrid()}"}}'], 1)
    plant("npm/.npmrc", "npm-token", [f"//registry.npmjs.org/:_authToken={t.npm()}"], 1)
    plant("auth/session.txt", "jwt", [f"cookie={t.jwt()}"], 1)
    for index, kind in enumerate(("RSA", "EC", "OPENSSH", "DSA", "", "PGP")):
        corpus.append((f"keys/id_{index}.pem", "private-key", 1, t.private_key(kind)))
    # Generic assignments: env, JSON, YAML, Python, shell, ini, TOML.
    plant("generic/.env", "generic-password", ["DB_HOST=db", f"DB_PASSWORD={t.password()}"], 2)
    plant(
        "generic/settings.json",
        "generic-password",
        ["{", f'  "password": "{t.password()}"', "}"],
        2,
    )
    plant("generic/config.yaml", "generic-password", ["db:", f"  password: {t.password()}"], 2)
    plant("generic/quoted.yaml", "generic-password", [f"admin_passwd: '{t.password()}'"], 1)
    plant(
        "generic/db.py",
        "generic-password",
        ["import db", f'conn = db.connect(user="app", password="{t.password()}")'],
        2,
    )
    plant("generic/deploy.sh", "generic-password", [f"export MYSQL_PWD='{t.password()}'"], 1)
    plant("generic/app.ini", "generic-secret", ["[auth]", f"secret_key = {t.api_token()}"], 2)
    plant("generic/api.py", "generic-secret", [f'API_KEY = "{t.api_token()}"'], 1)
    plant("generic/client.json", "generic-secret", [f'{{"client_secret": "{t.api_token()}"}}'], 1)
    plant("generic/svc.yaml", "generic-secret", [f"auth_token: {t.api_token()}"], 1)
    plant("generic/run.sh", "generic-secret", [f'export SERVICE_TOKEN="{t.api_token()}"'], 1)
    plant("generic/conf.toml", "generic-secret", ["[service]", f'apikey = "{t.api_token()}"'], 2)
    plant("generic/go.go", "generic-secret", [f'accessKey := "{t.api_token()}"'], 1)
    plant(
        "generic/curl.sh",
        "bearer-token",
        [f'curl -H "Authorization: Bearer {t.api_token()}" https://api.example.com'],
        1,
    )
    plant(
        "generic/db.url",
        "url-credentials",
        [f"DATABASE_URL=postgres://app:{t.password()}@db.internal:5432/app"],
        1,
    )
    return corpus


def write_tree(root: Path, files: list[tuple[str, str]]) -> None:
    for relative, text in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def ruleset() -> Ruleset:
    return load_rules()


def test_every_planted_secret_is_found_with_its_rule(tmp_path: Path, ruleset: Ruleset) -> None:
    corpus = planted_corpus(Tokens())
    write_tree(tmp_path, [(path, text) for path, _rule, _line, text in corpus])
    result = scan_tree(tmp_path, ruleset)
    found = {(f.path, f.rule_id, f.line) for f in result.findings}
    expected = {(path, rule, line) for path, rule, line, _text in corpus}
    assert expected - found == set(), "missed"
    assert found - expected == set(), "unexpected"


@pytest.mark.parametrize("seed", range(5))
def test_recall_holds_for_other_random_tokens(seed: int, ruleset: Ruleset) -> None:
    for path, rule, _line, text in planted_corpus(Tokens(seed)):
        hits = find_secrets(text.encode(), ruleset, path=path)
        assert [hit.rule_id for hit in hits] == [rule], (path, seed)


def test_python_re_finds_the_same_as_re2() -> None:
    fallback = load_rules(engine="re")
    primary = load_rules(engine="re2")
    texts = [(path, text) for path, _rule, _line, text in planted_corpus(Tokens(11))]
    texts += list(near_miss_data().items())
    for path, text in texts:
        data = text.encode()
        expected = [
            (hit.rule_id, hit.start, hit.end) for hit in find_secrets(data, primary, path=path)
        ]
        assert [
            (hit.rule_id, hit.start, hit.end) for hit in find_secrets(data, fallback, path=path)
        ] == expected, path


def test_severities_follow_how_distinctive_the_rule_is(ruleset: Ruleset) -> None:
    by_id = {rule.id: rule for rule in ruleset.rules}
    for rule_id in ("aws-access-key-id", "github-pat", "private-key", "stripe-live-key"):
        assert by_id[rule_id].severity in ("high", "critical")
    for rule_id in ("generic-password", "generic-secret", "bearer-token", "url-credentials"):
        assert by_id[rule_id].severity in ("low", "medium")
        assert by_id[rule_id].keywords


NEAR_MISSES = {
    ".env.example": """\
DB_PASSWORD=changeme
API_TOKEN=<your-token>
SECRET_KEY=${SECRET_KEY}
AUTH_TOKEN=$AUTH_TOKEN
PASSWORD=xxxxxxxxxxxxxxxx
STRIPE_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx
GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
OPENAI_API_KEY=sk-...
PWD=/home/user/project
""",
    "config.yaml": """\
database:
  password: ${DB_PASSWORD}
  token: "{{ vault_token }}"
  api_key: ${{ secrets.API_KEY }}
  secret: ""
  password_file: /run/secrets/db_password
  secret_name: prod/db/credentials
  token_url: https://oauth2.example.com/oauth/token
  tokenizer: bert-base-uncased-vocab
""",
    ".github/workflows/ci.yml": """\
env:
  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}
  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}
steps:
  - uses: actions/checkout@v4
    with:
      token: ${{ github.token }}
""",
    "app/settings.py": """\
password = ""
token = os.environ["X"]
api_key = os.getenv("API_KEY")
secret = settings.SECRET_KEY
db_password = getpass.getpass()
auth_token = request.headers["Authorization"]
max_tokens = 4096
password_hash_algorithm = "pbkdf2_sha256"
SECRET_KEY = get_secret("django")
ACCESS_TOKEN = None
headers = {"Authorization": f"Bearer {token}"}
DATABASE_URL = "postgres://user:password@localhost/app"
REPLICA_URL = f"postgres://user:{password}@replica/app"
CACHE_URL = "redis://:${REDIS_PASSWORD}@cache:6379"
def login(username: str, password: str) -> None: ...
""",
    "app/aws_docs.py": """\
# The examples from the AWS documentation are not secrets.
aws_access_key_id = "AKIAIOSFODNN7EXAMPLE"
aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
""",
    "web/login.ts": """\
interface Login { password: string; token?: string }
const apiKey = process.env.API_KEY;
const secret = config.get('secret');
""",
    "docs/keys.md": """\
Put your key in `id_rsa`:

    -----BEGIN RSA PRIVATE KEY-----
    ...
    -----END RSA PRIVATE KEY-----

Slack webhook: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX
Set `Authorization: Bearer <token>`.
""",
}


def near_miss_data() -> dict[str, str]:
    rng = random.Random(99)
    shas = [f"{rng.getrandbits(160):040x}" for _ in range(3)]
    uuids = [
        "-".join(f"{rng.getrandbits(bits):0{bits // 4}x}" for bits in (32, 16, 16, 16, 48))
        for _ in range(3)
    ]
    prose = b"The quick brown fox jumps over the lazy dog, twice over."
    encoded = base64.b64encode(prose).decode()
    data = dict(NEAR_MISSES)
    data["app/ids.py"] = "\n".join(
        [
            f'REQUEST_ID = "{uuids[0]}"',
            f'token_id = "{uuids[1]}"',
            f"session_token: {uuids[2]}",
            f'COMMIT = "{shas[0]}"',
            f"rev: {shas[1]}",
            f'"sha": "{shas[2]}",',
            f'GREETING_B64 = "{encoded}"',
            f"secret_message: {encoded}",
            "",
        ]
    )
    return data


def test_near_misses_are_not_findings(tmp_path: Path, ruleset: Ruleset) -> None:
    write_tree(tmp_path, list(near_miss_data().items()))
    result = scan_tree(tmp_path, ruleset)
    assert [(f.path, f.line, f.rule_id) for f in result.findings] == []
    assert result.files_considered == len(near_miss_data())


def test_redact_replaces_every_planted_secret(ruleset: Ruleset) -> None:
    for path, rule, _line, text in planted_corpus(Tokens(7)):
        hits = find_secrets(text.encode(), ruleset, path=path)
        redacted = redact(text, ruleset)
        assert f"[redacted:{rule}]" in redacted, path
        for hit in hits:
            assert hit.secret not in redacted, path


def test_redact_leaves_clean_text_alone(ruleset: Ruleset) -> None:
    for text in near_miss_data().values():
        for line in text.splitlines():
            assert redact(line, ruleset) == line
    plain = "collected 12 items — all passed in 0.41s"
    assert redact(plain, ruleset) is plain


def test_redact_keeps_the_rest_of_the_line(ruleset: Ruleset) -> None:
    token = Tokens(3).github("ghp")
    line = f"pushing with token={token} to origin ✓"
    assert redact(line, ruleset) == "pushing with token=[redacted:github-pat] to origin ✓"


def test_redact_survives_undecodable_output(ruleset: Ruleset) -> None:
    raw = b"\xff\xfe token=" + Tokens(4).github("ghp").encode() + b" \x80"
    text = raw.decode("utf-8", "surrogateescape")
    assert redact(text, ruleset).endswith("token=[redacted:github-pat] \udc80")


def test_unreadable_bytes_and_other_encodings_are_scanned(tmp_path: Path, ruleset: Ruleset) -> None:
    token = Tokens(5).github("ghp")
    (tmp_path / "latin1.txt").write_bytes("café = ".encode("latin-1") + token.encode() + b"\n")
    (tmp_path / "utf16.txt").write_bytes(f"x {token}".encode("utf-16-le"))
    result = scan_tree(tmp_path, ruleset)
    # UTF-16 text holds NUL bytes: like git, the scan takes it for binary and
    # reads its text parts, here single characters, so its token is not found.
    assert [(f.path, f.rule_id) for f in result.findings] == [("latin1.txt", "github-pat")]
    assert result.files_skipped == 0
