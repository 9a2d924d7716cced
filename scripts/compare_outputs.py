"""Does this checkout print what a reference checkout prints? Byte for byte, for README's commands.

    python scripts/compare_outputs.py /path/to/an/older/checkout [--jobs 2]

Each `$ kvplan ARGS  # exit N` command of this checkout's README (and `kvplan admit --ctx 1M`) runs in both trees
as a subprocess (`python -m kvplan`, the tree first on PYTHONPATH, its root as the working directory, COLUMNS=200,
no KVPLAN_FORMAT); stdout, stderr and the exit code are compared and each difference is printed as a diff. The
only rewrite is each tree's own root path to `<ROOT>`, so that two checkouts in different folders can agree.
Exit 0 when every command agrees, 1 when any differs, 2 when REF is not a kvplan checkout. A refactor that is meant
to change nothing runs this against a checkout of the commit before it (`git worktree add /tmp/ref HEAD~1`).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = re.compile(r"^\$ kvplan (?P<args>.*?)\s+# exit (?P<code>\d+)\s*$")
ALWAYS = (("admit", "--ctx", "1M"),)  # the README's first screen, compared even if the README drops it
TIMEOUT_S = 600


@dataclass(frozen=True)
class Output:
    code: int
    stdout: bytes
    stderr: bytes


def readme_commands(readme: Path) -> list[tuple[str, ...]]:
    """The console blocks' `$ kvplan ... # exit N` commands, in README order, each once, `admit --ctx 1M` first."""
    seen: list[tuple[str, ...]] = list(ALWAYS)
    in_console = False
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console"
            continue
        m = COMMAND.match(line) if in_console else None
        if m and tuple(shlex.split(m["args"])) not in seen:
            seen.append(tuple(shlex.split(m["args"])))
    return seen


def run(tree: Path, args: tuple[str, ...]) -> Output:
    env = {k: v for k, v in os.environ.items() if k != "KVPLAN_FORMAT"}
    env.update(COLUMNS="200", PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(
        [sys.executable, "-m", "kvplan", *args], cwd=tree, env=env, capture_output=True, timeout=TIMEOUT_S
    )
    root = str(tree).encode()
    return Output(r.returncode, r.stdout.replace(root, b"<ROOT>"), r.stderr.replace(root, b"<ROOT>"))


def differences(new: Output, ref: Output) -> list[str]:
    """One text per stream that differs: the exit codes, or a unified diff of stdout / stderr (ref -> this)."""
    out = []
    if new.code != ref.code:
        out.append(f"exit code: reference {ref.code}, this checkout {new.code}")
    for name, a, b in (("stdout", ref.stdout, new.stdout), ("stderr", ref.stderr, new.stderr)):
        if a != b:
            old, now = a.decode(errors="replace"), b.decode(errors="replace")
            diff = difflib.unified_diff(old.splitlines(), now.splitlines(), f"reference {name}", name, lineterm="")
            out.append("\n".join(diff) or f"{name}: differs in whitespace or line endings only ({a!r} vs {b!r})")
    return out


def compare(ref: Path, args: tuple[str, ...]) -> list[str]:
    return differences(run(ROOT, args), run(ref, args))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ref", type=Path, help="a reference checkout of kvplan (for example a git worktree of HEAD~1)")
    p.add_argument("--jobs", type=int, default=2, help="commands run side by side (default 2)")
    ns = p.parse_args(argv)
    ref = ns.ref.resolve()
    if not (ref / "kvplan" / "__main__.py").is_file():
        print(f"compare_outputs: {ref} is not a kvplan checkout (no kvplan/__main__.py)", file=sys.stderr)
        return 2
    commands = readme_commands(ROOT / "README.md")
    with ThreadPoolExecutor(max_workers=max(1, ns.jobs)) as pool:
        results = list(pool.map(lambda a: compare(ref, a), commands))
    failed = 0
    for args, diffs in zip(commands, results, strict=True):
        if diffs:
            failed += 1
            print(f"--- kvplan {shlex.join(args)}")
            print("\n".join(diffs))
    print(f"{len(commands) - failed} of {len(commands)} commands print the same as {ref}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
