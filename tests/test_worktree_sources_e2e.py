"""A loop in its own worktree verifies the worktree's code, not an editable install's.

The project is a real src-layout package installed editable, by pip, into a
real virtual environment made for the test: pip runs the project's own
in-tree PEP 517 backend (no network, no setuptools needed), whose editable
wheel is what setuptools makes for a src layout, a ``.pth`` file naming the
main checkout's ``src/``. Its verify imports the package from the worktree
only when Forge puts the worktree's sources first.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .support import Repo, run_forge

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")

BACKEND = '''"""An in-tree PEP 517 backend: the editable wheel is a .pth naming the sources."""

import base64
import hashlib
import zipfile
from pathlib import Path

NAME, VERSION = "calc", "0.1"
DIST = f"{NAME}-{VERSION}.dist-info"
WHEEL = "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    sources = Path(__file__).resolve().parent.parent / "FOLDER"
    files = {
        f"__editable__.{NAME}-{VERSION}.pth": f"{sources}\\n",
        f"{DIST}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n",
        f"{DIST}/WHEEL": WHEEL,
    }
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as wheel:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
            wheel.writestr(path, data)
        wheel.writestr(f"{DIST}/RECORD", "\\n".join([*record, f"{DIST}/RECORD,,"]) + "\\n")
    return name


build_wheel = build_editable


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("editable installs only")
'''

OLD = "def answer():\n    return 41\n"
NEW = OLD + "\n\ndef double(n):\n    return 2 * n\n"


def editable_project(repo: Repo, folder: str = "src") -> dict[str, str]:
    """The package ``calc`` under ``folder``, installed editable; the PATH that uses it."""
    repo.write(
        "pyproject.toml",
        '[build-system]\nrequires = []\nbuild-backend = "editable_backend"\n'
        'backend-path = ["backend"]\n\n[project]\nname = "calc"\nversion = "0.1"\n',
    )
    repo.write("backend/editable_backend.py", BACKEND.replace("FOLDER", folder))
    repo.write(f"{folder}/calc/__init__.py", OLD)
    repo.write("tests/check.py", "from calc import double\n\nassert double(21) == 42\n")
    repo.write(".gitignore", ".venv/\n")
    venv = repo.root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = ["install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    pip = [sys.executable, "-m", "pip", "--python", str(python), *install]
    subprocess.run([*pip, "-e", str(repo.root)], check=True, capture_output=True)
    # pip's own editable install: recorded as one, and the main checkout's code is what imports.
    [direct_url] = venv.glob("lib/python*/site-packages/calc-0.1.dist-info/direct_url.json")
    assert json.loads(direct_url.read_text())["dir_info"] == {"editable": True}
    imported = subprocess.run(
        [str(python), "-c", "import calc; print(calc.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=repo.root.parent,
    )
    assert imported.stdout.strip() == str(repo.root.resolve() / folder / "calc" / "__init__.py")
    return {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def worktree_loop(repo: Repo, folder: str = "src") -> Path:
    """A loop in its worktree whose agent adds ``double`` and notes where its Python imports."""
    seen = repo.root.parent / "agent-imports.txt"
    step = {
        "write": {f"{folder}/calc/__init__.py": NEW},
        "shell": shlex.join(
            [
                "python",
                "-c",
                "import calc, sys; open(sys.argv[1], 'w').write(calc.__file__)",
                str(seen),
            ]
        ),
        "print": "FORGE_DONE\n",
    }
    script = repo.root.parent / "agent.json"
    script.write_text(json.dumps({"steps": [step]}))
    cmd = shlex.join([sys.executable, str(FAKE_AGENT), str(script)])
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "python tests/check.py"\nspecs = []\n'
        '[breaker]\non_open = "escalate"\n\n'
        f'[[loop]]\nchange = "calc"\nworktree = true\ncmd = {json.dumps(cmd)}\n'
        "max_iterations = 3\n",
    )
    repo.commit("calc")
    return seen


def the_loop(done: str) -> dict[str, object]:
    [loop] = json.loads(done)["loops"]
    assert isinstance(loop, dict)
    return loop


def test_a_worktrees_verify_imports_the_worktrees_package(repo: Repo) -> None:
    env = editable_project(repo)
    seen = worktree_loop(repo)
    done = repo.forge("supervise", "--json", env=env)
    assert done.code == 0, done
    loop = the_loop(done.out)
    assert (loop["reason"], loop["iterations"]) == ("done", 1)
    worktree = repo.root.resolve() / ".forge" / "worktrees" / "calc"
    # The agent's own commands import the worktree's package too.
    assert seen.read_text() == str(worktree / "src" / "calc" / "__init__.py")
    assert (repo.root / "src" / "calc" / "__init__.py").read_text() == OLD  # main untouched
    # `forge verify` run by hand in the worktree tests the worktree's code as well.
    by_hand = run_forge(["verify"], cwd=worktree, env=env)
    assert "Verdict: PASS" in by_hand.out, by_hand


def test_a_layout_forge_does_not_see_stops_before_the_first_iteration(repo: Repo) -> None:
    env = editable_project(repo, folder="lib")  # lib/, declared nowhere
    worktree_loop(repo, folder="lib")
    done = repo.forge("supervise", "--json", env=env)
    assert done.code == 1, done
    loop = the_loop(done.out)
    assert (loop["reason"], loop["iterations"]) == ("worktree-failed", 0)
    detail = str(loop["detail"])
    main_lib = repo.root.resolve() / "lib"
    said = f"would import the main checkout's code, not its own: Python imports from {main_lib},"
    assert said in detail
    assert "export PYTHONPATH=<that folder, relative>" in detail
    assert "[tool.setuptools] package-dir" in detail
    # The fix it names works.
    again = repo.forge("supervise", "--json", env={**env, "PYTHONPATH": "lib"})
    assert again.code == 0, again
    assert the_loop(again.out)["reason"] == "done"


def test_init_puts_a_src_layouts_sources_first_in_its_verify(repo: Repo) -> None:
    repo.write("pyproject.toml", '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\n')
    repo.write("src/calc/__init__.py", OLD)
    repo.write(
        "tests/test_calc.py", "from calc import answer\n\n\ndef test_it():\n    assert answer()\n"
    )
    written = repo.forge("init")
    assert written.code == 0, written
    policy = (repo.root / "forge.toml").read_text()
    assert (
        'command = "PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} pytest -q '
        '--junitxml=.forge/junit.xml"'
    ) in policy
    assert "# Found: a Python project with tests in a src layout" in policy
    # Not installed at all, the tests still import src/.
    tools = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    verified = repo.forge("verify", env=tools)
    assert "Verdict: PASS" in verified.out, verified


def _counting_python(repo: Repo, env: dict[str, str]) -> tuple[dict[str, str], Path]:
    """``python3`` first on PATH that logs each import probe, then runs the real one."""
    real = shutil.which("python3", path=env["PATH"])
    assert real is not None
    log = repo.root.parent / "probes.log"
    wrapper = repo.root.parent / "counting-bin" / "python3"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *find_spec*) echo probe >> {shlex.quote(str(log))};; esac\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {"PATH": f"{wrapper.parent}{os.pathsep}{env['PATH']}"}, log


def test_the_worktrees_of_one_batch_ask_the_interpreter_once(repo: Repo) -> None:
    env, log = _counting_python(repo, editable_project(repo))
    worktree_loop(repo)
    toml = (repo.root / "forge.toml").read_text()
    second = toml[toml.index("[[loop]]") :].replace('change = "calc"', 'change = "calc-two"')
    repo.write("forge.toml", toml + "\n" + second)
    repo.commit("two loops")
    done = repo.forge("supervise", "--json", env=env)
    assert done.code == 0, done
    loops = json.loads(done.out)["loops"]
    assert [(loop["reason"], loop["iterations"]) for loop in loops] == [("done", 1)] * 2
    # Both worktrees were made alike: the first answer (clean) stands for the second.
    assert log.read_text().splitlines() == ["probe"]
