"""Source-like lines for the secret-scan and redaction benches, generated from a seed.

The words the rules key on (token, password, secret, URLs) appear at a
realistic density, so the keyword pre-filter and the rules do the work they
do on a real tree; planting secrets is left to each bench.
"""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits
_WORD_TEXT = (
    "user order cart item total price config client server request response handler session "
    "cache index value result error status path name data payload retry timeout limit queue "
    "worker task job batch stream buffer"
)
WORDS = _WORD_TEXT.split()


def ident(rng: random.Random) -> str:
    """A snake_case name of one to three words."""
    return "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def token(rng: random.Random, length: int) -> str:
    """Random letters and digits, as a secret's body."""
    return "".join(rng.choice(ALNUM) for _ in range(length))


def source_line(rng: random.Random) -> str:
    """A line of source or configuration, sometimes with a word a rule keys on."""
    name = ident(rng)
    roll = rng.random()
    if roll < 0.30:
        return f"    {name} = {rng.choice(['self', 'ctx', 'cfg'])}.{ident(rng)}({ident(rng)})"
    if roll < 0.45:
        return f'    "{name}": "{ident(rng)}-{rng.randint(0, 9999)}",'
    if roll < 0.55:
        return f"{name}: {rng.choice(WORDS)}  # {' '.join(rng.choices(WORDS, k=6))}"
    if roll < 0.62:
        key = rng.choice(["token", "password", "secret", "api_key", "access_token"])
        return f"    {name}_{key} = os.environ.get('{name.upper()}_{key.upper()}')"
    if roll < 0.67:
        return f"# see https://docs.example.org/{name}/{rng.choice(WORDS)} for the task-{name}"
    if roll < 0.70:
        return f"    {name}_tokens = tokenize({ident(rng)}, max_tokens={rng.randint(1, 9999)})"
    if roll < 0.72:
        return f"    digest = '{rng.getrandbits(160):040x}'  # commit of {name}"
    if roll < 0.73:
        return f'    headers = {{"Authorization": f"Bearer {{{name}}}"}}'
    return f"    {' '.join(rng.choices(WORDS, k=rng.randint(3, 10)))}"
