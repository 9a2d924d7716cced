"""Wall-clock latency of `kvplan admit --ctx 1M` against the cost of any typer + rich CLI, as users see it.

Three commands, each a whole process (benchmarks/_child.py), run in interleaved rounds (admit, floors, admit,
floors, ...) so that drift (CPU clocks, page cache, other users' load) hits all of them alike:

- `kvplan admit --ctx 1M`: the console script next to sys.executable, or `python -m kvplan` without one;
- `python -c pass`: interpreter start-up alone;
- `python -c "import typer, rich.console"`: the floor for any typer + rich CLI (the yardstick).

Each round runs twice: with stdout and stderr on a terminal (a pty, as when a user types the command: kvplan
imports rich to draw there) and off a terminal (a pipe, as in CI or `| less`). Writing to /dev/null would leave
rich out, which is no user's case. A ratio is taken per round (admit / import typer, rich.console, wall seconds)
and reported as min / median / max; the CPU-seconds ratio (less disturbed by other users' load) is printed beside it.

Targets (issue 31, verbatim; checked on the median per-round ratio): `kvplan admit --ctx 1M` <= 2x
`import typer, rich.console` on a terminal, and <= 1.5x off a terminal. The admit median must also stay under
0.25 s on a terminal (issue 15).

    python benchmarks/cli_latency.py            # 20 rounds
    python benchmarks/cli_latency.py --runs 50 --json
    python benchmarks/cli_latency.py --check    # exit 1 when a target is missed

A command that fails (admit: anything but 0 admitted / 1 rejected) stops the run with 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import _child

ROOT = Path(__file__).resolve().parents[1]
TARGET_MEDIAN_S = 0.25
"""The admit median the CLI must meet on a terminal, in seconds (issue 15)."""
RATIO_TARGETS = {"terminal": 2.0, "pipe": 1.5}
"""Issue 31: admit / `import typer, rich.console`, per round, median."""
ADMIT_OK_CODES = (0, 1)
"""kvplan admit exits 0 when the request is admitted and 1 when it is rejected; both are a complete run."""
ADMIT = "kvplan admit --ctx 1M"
PASS = "python -c pass"
FLOOR = "python -c 'import typer, rich.console'"


def admit_command() -> list[str]:
    """The installed console script next to this interpreter, else `python -m kvplan`."""
    bindir = Path(sys.executable).parent
    for name in ("kvplan", "kvplan.exe"):
        script = bindir / name
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script), "admit", "--ctx", "1M"]
    return [sys.executable, "-m", "kvplan", "admit", "--ctx", "1M"]


def commands() -> dict[str, tuple[list[str], tuple[int, ...]]]:
    """Label -> (argv, exit codes that count as success)."""
    return {
        ADMIT: (admit_command(), ADMIT_OK_CODES),
        PASS: ([sys.executable, "-c", "pass"], (0,)),
        FLOOR: ([sys.executable, "-c", "import typer, rich.console"], (0,)),
    }


def child_env(bytecode: bool, source: bool) -> dict[str, str]:
    """The environment the timed commands run in. With ``bytecode`` (the default) PYTHONDONTWRITEBYTECODE is
    dropped, so kvplan's modules are compiled once (the warm-up) and loaded from __pycache__ as in any installed
    copy. With ``source`` this checkout comes first on PYTHONPATH (so `python -m kvplan` runs it, not an installed
    copy). COLUMNS is left to the terminal."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if source:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("KVPLAN_FORMAT", None)
    return env


def run_once(argv: list[str], ok: tuple[int, ...], env: dict[str, str], pty: bool) -> _child.Child:
    """One run; exits with 2 if it failed."""
    c = _child.run(argv, env=env, pty=pty, ok=ok, timeout=60)
    if not c.ok:
        sys.stderr.write(f"{' '.join(argv)}: exit status {c.rc}\n{c.out.decode(errors='replace')[-2000:]}\n")
        raise SystemExit(2)
    return c


def measure(runs: int, env: dict[str, str]) -> dict[str, dict[str, list[_child.Child]]]:
    """Per output ("terminal", "pipe"), per command, each round's run."""
    cmds = commands()
    out: dict[str, dict[str, list[_child.Child]]] = {}
    for where in RATIO_TARGETS:
        pty = where == "terminal"
        for argv, ok in cmds.values():  # one untimed warm-up each: page cache, .pyc files
            run_once(argv, ok, env, pty)
        out[where] = {label: [] for label in cmds}
    for _ in range(runs):
        for where in RATIO_TARGETS:
            for label, (argv, ok) in cmds.items():
                out[where][label].append(run_once(argv, ok, env, where == "terminal"))
    return out


def summarize(samples: dict[str, dict[str, list[_child.Child]]], runs: int) -> dict[str, object]:
    figures: dict[str, object] = {}
    targets: dict[str, bool] = {}
    for where, s in samples.items():
        ratio = _child.pair_ratios(s[ADMIT], s[FLOOR], "wall_s")
        figures[where] = {
            "commands": {label: _child.spread([c.wall_s for c in v]) for label, v in s.items()},
            "ratio_admit_over_import_typer_rich": ratio,
            "ratio_admit_over_import_typer_rich_cpu": _child.pair_ratios(s[ADMIT], s[FLOOR]),
            "ratio_admit_over_pass": _child.pair_ratios(s[ADMIT], s[PASS], "wall_s"),
        }
        goal = RATIO_TARGETS[where]
        targets[f"kvplan admit --ctx 1M <= {goal:g}x import typer, rich.console, {where}"] = ratio["median"] <= goal
    admit_median = statistics.median(c.wall_s for c in samples["terminal"][ADMIT])
    targets[f"admit median <= {TARGET_MEDIAN_S:.2f} s on a terminal"] = admit_median <= TARGET_MEDIAN_S
    return {
        "runs": runs,
        "python": sys.version.split()[0],
        "machine": _child.machine(),
        "admit_command": " ".join(admit_command()),
        "outputs": figures,
        "targets": targets,
    }


def print_table(summary: dict[str, object]) -> None:
    print(f"{summary['runs']} interleaved rounds; {summary['machine']}")
    print(f"admit command: {summary['admit_command']}\n")
    print("| output | command | min | median | max |")
    print("|---|---|---|---|---|")
    outputs = summary["outputs"]
    assert isinstance(outputs, dict)
    for where, f in outputs.items():
        for label, v in f["commands"].items():
            ms = [v[k] * 1000 for k in ("min", "median", "max")]
            print(f"| {where} | `{label}` | {ms[0]:.0f} ms | {ms[1]:.0f} ms | {ms[2]:.0f} ms |")
    print(
        "\n| output | admit / import typer, rich.console, wall (per round: min / median / max) | same, CPU (median)"
        " | admit / pass (median) |"
    )
    print("|---|---|---|---|")
    for where, f in outputs.items():
        r = f["ratio_admit_over_import_typer_rich"]
        c = f["ratio_admit_over_import_typer_rich_cpu"]["median"]
        p = f["ratio_admit_over_pass"]["median"]
        print(f"| {where} | {r['min']:.2f}x / **{r['median']:.2f}x** / {r['max']:.2f}x | {c:.2f}x | {p:.2f}x |")
    print()
    targets = summary["targets"]
    assert isinstance(targets, dict)
    for name, met in targets.items():
        print(f"  {'met ' if met else 'MISS'} {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="interleaved rounds (default 20, at least 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE from the environment (every kvplan module recompiled on every run)",
    )
    parser.add_argument("--installed", action="store_true", help="time the installed kvplan, not this checkout")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    env = child_env(not args.no_bytecode_cache, not args.installed)
    summary = summarize(measure(args.runs, env), args.runs)
    summary["bytecode_cache"] = not args.no_bytecode_cache
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_table(summary)
    targets = summary["targets"]
    assert isinstance(targets, dict)
    return 1 if args.check and not all(targets.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
