"""Install the agent CLIs the shipped executors were proven with, from the npm registry.

``python -m orchestra._scripted install DIR`` installs each shipped
definition's ``[cli]`` package at its ``proven`` release into ``DIR`` (its
programs in ``DIR/node_modules/.bin``), and does nothing when they are there
already. Node.js and npm must be installed. The test suite uses it; a version
bump is the one ``proven`` line of the executor's definition.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from .._errors import ConfigError
from .._executor import AgentCli, load_executor
from .._shipped import shipped_names

_NPM_TIMEOUT = 600  # seconds: a registry that never answers must not hang the suite


def proven_clis(project_root: Path | None = None) -> dict[str, AgentCli]:
    """Executor name to the CLI its shipped definition was proven with."""
    root = project_root or Path("/nonexistent")
    found = {}
    for name in sorted(shipped_names("executors")):
        cli = load_executor(name, root).spec.cli
        if cli is not None:
            found[name] = cli
    return found


def installed_version(folder: Path, package: str) -> str | None:
    """The release of ``package`` installed under ``folder``, or None."""
    manifest = folder / "node_modules" / package / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def bin_dir(folder: Path) -> Path:
    """Where the installed CLIs' programs are."""
    return folder / "node_modules" / ".bin"


def install(folder: Path) -> list[str]:
    """Install every proven CLI missing from ``folder``; the ``package@version`` installed.

    Raises:
        ConfigError: npm is missing, or it failed.
    """
    wanted = [
        f"{cli.package}@{cli.proven}"
        for cli in proven_clis().values()
        if installed_version(folder, cli.package) != cli.proven
    ]
    if not wanted:
        return []
    npm = shutil.which("npm")
    if npm is None:
        raise ConfigError(
            "npm is not installed: the agent CLIs come from the npm registry",
            hint="install Node.js and npm (Debian: apt-get install -y nodejs npm)",
        )
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "package.json").exists():
        (folder / "package.json").write_text('{"private": true}\n', encoding="utf-8")
    try:
        done = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "--prefix",
                str(folder),
                *wanted,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=_NPM_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"npm install took longer than {_NPM_TIMEOUT}s", hint="is the npm registry reachable?"
        ) from exc
    if done.returncode != 0:
        raise ConfigError(
            f"npm install failed (exit {done.returncode})",
            problems=done.stderr.strip().splitlines()[-10:],
        )
    return wanted
