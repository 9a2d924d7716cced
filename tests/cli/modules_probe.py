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


def run_probe(*argv: str) -> tuple[str, set[str]]:
    """`kvplan ARGV...` run in its own process: its stdout, and every module in sys.modules once it ran."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=False)
    return proc.stdout, set(json.loads(proc.stderr.strip().splitlines()[-1]))


def modules_after(*argv: str) -> set[str]:
    return run_probe(*argv)[1]
