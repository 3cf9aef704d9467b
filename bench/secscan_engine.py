"""Secret-scan engine: RE2 against Python's re over a generated tree, every shipped rule.

Generates a tree of source-like files (Python, YAML, JSON, env, shell, Markdown,
with the words the rules key on — token, password, secret, URLs — at a realistic
density and a few planted secrets), then prints the matching throughput in MB/s
of both engines, with the keyword pre-filter (as the scan runs) and without it
(every rule over every file: the engines' raw difference). Last, it times
``scan_tree`` with each engine, cold and after touching 10 files.

    .venv/bin/python bench/secscan_engine.py [--files 2000] [--kib 12] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from _corpus import source_line, token
from _quick import parse_args

from orchestra._secscan import find_secrets, load_rules, scan_tree
from orchestra._secscan._rules import Ruleset


def generate(root: Path, files: int, kib: int, seed: int = 7) -> int:
    """Write ``files`` files of about ``kib`` KiB each; return the bytes written."""
    rng = random.Random(seed)
    total = 0
    suffixes = (".py", ".yaml", ".json", ".env", ".sh", ".md", ".ts")
    for index in range(files):
        folder = root / f"pkg{index % 40}" / f"mod{index % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        size = 0
        while size < kib * 1024:
            line = source_line(rng)
            lines.append(line)
            size += len(line) + 1
        if index % 97 == 0:  # a planted secret now and then
            lines.insert(rng.randrange(len(lines)), f"GITHUB_TOKEN=ghp_{token(rng, 36)}")
        if index % 131 == 0:
            lines.insert(rng.randrange(len(lines)), f'db_password = "{token(rng, 18)}"')
        data = ("\n".join(lines) + "\n").encode()
        (folder / f"file{index}{rng.choice(suffixes)}").write_bytes(data)
        total += len(data)
    return total


def _all_rules_run(ruleset: Ruleset, data: bytes) -> int:
    count = 0
    for rule in ruleset.rules:
        for _match in rule.pattern.finditer(data):
            count += 1
    return count


def measure(contents: list[bytes], engine: str, prefilter: bool, repeat: int) -> float:
    ruleset = load_rules("secscan", engine=engine)
    megabytes = sum(len(data) for data in contents) / 1e6
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for data in contents:
            if prefilter:
                find_secrets(data, ruleset)
            else:
                _all_rules_run(ruleset, data)
        best = min(best, time.perf_counter() - started)
    return megabytes / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--kib", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse_args(parser, files=40, kib=4, repeat=1)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "tree"
        total = generate(root, args.files, args.kib)
        contents = [path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()]
        print(f"tree: {len(contents)} files, {total / 1e6:.1f} MB")
        for prefilter in (True, False):
            label = "with keyword pre-filter" if prefilter else "every rule on every file"
            speeds = {
                engine: measure(contents, engine, prefilter, args.repeat)
                for engine in ("re2", "re")
            }
            print(
                f"{label:26} re2 {speeds['re2']:7.1f} MB/s   re {speeds['re']:7.1f} MB/s"
                f"   re2/re {speeds['re2'] / speeds['re']:.1f}x"
            )
        # Everything in the past, so that the rescan trusts the stat check.
        past = time.time() - 3600
        for path in root.rglob("*"):
            os.utime(path, (past, past))
        for engine in ("re2", "re"):
            ruleset = load_rules("secscan", engine=engine)
            cache = Path(folder) / f"cache-{engine}.sqlite3"
            cold = scan_tree(root, ruleset, cache_path=cache)
            for path in sorted(root.rglob("*.py"))[:10]:
                path.write_bytes(path.read_bytes() + b"# touched\n")
                os.utime(path, (past + 60, past + 60))
            warm = scan_tree(root, ruleset, cache_path=cache)
            print(
                f"scan_tree {engine:3}: cold {cold.duration:.2f}s "
                f"({cold.bytes_read / 1e6 / cold.duration:.1f} MB/s, {cold.files_read} read), "
                f"after touching 10: {warm.duration:.3f}s ({warm.files_read} read, "
                f"{warm.files_cached} from cache), findings {len(cold.findings)}"
            )


if __name__ == "__main__":
    main()
