"""The modules a `kvplan` command loads, read from a fresh interpreter (start-up tests of the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
from kvplan.cli import main
sys.argv = ["kvplan", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
sys.stderr.write(json.dumps(sorted(sys.modules)))
"""


ADMIT_RECORDS = """
import dataclasses, json, sys
import kvplan
from kvplan.cli import main
sys.argv = ["kvplan", "admit", "--ctx", "1M"]
try:
    main()
except SystemExit:
    pass
records = [c for n, m in list(sys.modules.items()) if n.startswith("kvplan") for c in vars(m).values()
           if isinstance(c, type) and c.__module__ == n and dataclasses.is_dataclass(c)]
"""
"""The start of a probe script: `kvplan admit --ctx 1M` run, then ``records``, every dataclass kvplan's modules
define once it ran (the caller's lines after it say what to write to stderr)."""


def run_probe(*argv: str) -> tuple[str, set[str]]:
    """`kvplan ARGV...` run in its own process: its stdout, and every module in sys.modules once it ran."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=False)
    return proc.stdout, set(json.loads(proc.stderr.strip().splitlines()[-1]))


def modules_after(*argv: str) -> set[str]:
    return run_probe(*argv)[1]
