"""The protect lists for the agent hooks, without loading the policy each time.

``forge guard`` and ``forge hook pre-tool-use`` run on every tool call, and
loading the layered policy (TOML, attrs, cattrs) costs several times the
interpreter's own start. So the effective ``[protect]`` lists are cached in
``.forge/cache/protect.json``, keyed by the identity of every policy file they
were built from (forge.toml, what it extends, and whether each existed: its
device, inode, size, modification and change times) and sealed by a digest of
those files' content and of the lists themselves. A stale, unreadable or
edited cache (say, its lists emptied) is rebuilt from the real policy: the
cache can make a hook faster, never more lenient.

Hot path: standard library only, and only its cheap parts.
"""

from __future__ import annotations

import json
import os

try:  # hashlib's own BLAKE2, without the OpenSSL that importing hashlib loads (2 ms)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

from .._project_root import CONFIG_NAME
from .._version import __version__
from ._spec import ProtectSpec

CACHE = os.path.join(".forge", "cache", "protect.json")
_VERSION = 2
# What the digest covers, besides the policy files' content.
_SEALED = ("version", "config", "forge", "sources", "exist", "frozen", "fold")


def _stamp(path: str) -> list[object]:
    """A policy file's identity: rewritten, replaced or touched, it differs."""
    try:
        info = os.stat(path)
    except OSError:
        return [path, -1, -1, -1, -1, -1]
    return [path, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _digest(data: dict[str, object]) -> str | None:
    """The seal of a cache: its lists and sources, and the sources' content (None: unreadable)."""
    seal = blake2b(json.dumps([data.get(key) for key in _SEALED]).encode(), digest_size=16)
    sources = data.get("sources")
    for source in sources if isinstance(sources, list) else ():
        if not isinstance(source, list) or source[1] == -1:
            continue  # a file that did not exist: its stamp says so
        try:
            with open(str(source[0]), "rb") as handle:
                content = handle.read()
        except OSError:
            return None
        seal.update(len(content).to_bytes(8, "big"))
        seal.update(content)
    return seal.hexdigest()


def load_spec(root: str, config: str | None) -> ProtectSpec:
    """The effective protect spec of the project at ``root``.

    Raises:
        orchestra._errors.ConfigError: when the policy cannot be loaded (the
        hooks then refuse: a guard that cannot read its policy fails closed).
    """
    cache_path = os.path.join(root, CACHE)
    cached = _read_cache(cache_path, config)
    if cached is None:
        cached = _rebuild(root, config, cache_path)
    exist, frozen = cached["exist"], cached["frozen"]
    if not isinstance(exist, list) or not isinstance(frozen, list):
        raise ValueError(f"{cache_path}: the protect lists are not lists")  # _read_cache checked
    return ProtectSpec(tuple(map(str, exist)), tuple(map(str, frozen)), fold=bool(cached["fold"]))


def _read_cache(cache_path: str, config: str | None) -> dict[str, object] | None:
    try:
        with open(cache_path, "rb") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return None
    if data.get("config") != config or data.get("forge") != __version__:
        return None
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        return None
    for source in sources:
        if not isinstance(source, list) or len(source) != 6 or _stamp(str(source[0])) != source:
            return None
    if not all(isinstance(data.get(k), list) for k in ("exist", "frozen")) or "fold" not in data:
        return None
    digest = _digest(data)
    if digest is None or data.get("digest") != digest:
        return None  # edited since it was built, or its policy is not what it was
    return data


def _rebuild(root: str, config: str | None, cache_path: str) -> dict[str, object]:
    # The slow path: the real policy loader, imported only when needed.
    from ._check import protect_lists

    exist, frozen, files, fold = protect_lists(root, config)
    # The policy file that may appear later counts too: forge.toml absent now.
    watched = [os.path.join(root, CONFIG_NAME), *files]
    data: dict[str, object] = {
        "version": _VERSION,
        "config": config,
        "forge": __version__,  # another forge may have other defaults
        "sources": [_stamp(path) for path in dict.fromkeys(watched)],
        "exist": list(exist),
        "frozen": list(frozen),
        "fold": fold,
    }
    data["digest"] = _digest(data)
    _write_quietly(cache_path, json.dumps(data, indent=1).encode())
    return data


def _write_quietly(path: str, data: bytes) -> None:
    """Write the cache if we can; a read-only project just goes without one."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        _discard(tmp)


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        return
