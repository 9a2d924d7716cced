from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli._common import FormatOpt, boundary
from kvplan.errors import EXIT_OK, EXIT_REJECTED, InputError
from kvplan.render import OutputFormat, emit

if TYPE_CHECKING:
    from kvplan.engines.common import PoolPlan
    from kvplan.models.deploy import Requirements
    from kvplan.plan.gate import Figures

ConfigsArg = Annotated[list[str], typer.Argument(help="Deployment YAML files (or preset names).")]
LockOpt = Annotated[Path, typer.Option("--lock", "-l", help="The lock file.")]
CtxOpt = Annotated[str | None, typer.Option("--require-ctx", help="A context that must be admitted, e.g. 1M.")]
ConcOpt = Annotated[
    list[str] | None, typer.Option("--require-concurrency", help="N@CTX that must fit at once, e.g. 4@128K.")
]


def _requirements(config: str, ctx: str | None, conc: list[str] | None, drop: str | None) -> Requirements:
    from kvplan.models.deploy import Requirements
    from kvplan.models.load import load_requirements
    from kvplan.units import parse_concurrency, parse_option_tokens, parse_percent_ppm

    cli = Requirements(
        min_ctx_tokens=parse_option_tokens("--require-ctx", ctx) if ctx else None,
        concurrency=tuple(parse_concurrency(c) for c in conc or ()),
        max_capacity_drop_ppm=parse_percent_ppm(drop) if drop else None,
    )
    return load_requirements(config).merged(cli)


def _plan(config: str) -> PoolPlan:
    from kvplan.cli._common import load_plan

    return load_plan(None, config, None)


def _key(config: str) -> str:
    """The lock's name for a config: the path as given, with / separators."""
    return Path(config).as_posix()


def _read_lock(path: Path) -> dict[str, Figures]:
    from kvplan.plan.gate import read_lock

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such lock file (write one with kvplan lock)") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not valid JSON: {e.msg} (corrupt lock file?)") from None
    return read_lock(doc, str(path))


def lock(
    configs: ConfigsArg,
    lock_path: LockOpt = Path("kvplan.lock"),
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Write kvplan.lock: the key figures of each config, for `kvplan gate` to compare against.

    Example: kvplan lock deploy/prod.yaml deploy/canary.yaml
    """
    with boundary():
        from kvplan.plan.gate import figures, lock_document, promised_contexts
        from kvplan.render.gate_report import lock_report

        entries = {_key(c): figures(_plan(c), promised_contexts(_requirements(c, None, None, None))) for c in configs}
        text = json.dumps(lock_document(entries), indent=2, sort_keys=True) + "\n"
        tmp = lock_path.with_name(lock_path.name + ".tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(lock_path)  # nothing half-written
        except OSError as e:
            raise InputError(f"{lock_path}: cannot write: {e}") from None
        emit(lock_report(entries, str(lock_path)), fmt)


def gate(
    configs: ConfigsArg,
    lock_path: Annotated[
        Path | None, typer.Option("--lock", "-l", help="Lock file [default: ./kvplan.lock if present].")
    ] = None,
    max_capacity_drop: Annotated[
        str | None, typer.Option("--max-capacity-drop", help="Largest allowed pool capacity drop, e.g. 2%.")
    ] = None,
    require_ctx: CtxOpt = None,
    require_concurrency: ConcOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Re-plan each config, compare with the lock and the requirements; exit 1 on any violation.

    Example: kvplan gate deploy/prod.yaml --max-capacity-drop 2% --require-ctx 1M --format markdown
    """
    with boundary():
        from kvplan.plan.gate import check
        from kvplan.render.gate_report import gate_report

        path = lock_path if lock_path is not None else (Path("kvplan.lock") if Path("kvplan.lock").exists() else None)
        locked = _read_lock(path) if path is not None else None
        results = []
        for c in configs:
            req = _requirements(c, require_ctx, require_concurrency, max_capacity_drop)
            before = None
            if locked is not None:
                if _key(c) not in locked:
                    raise InputError(f"{path}: has no entry for {_key(c)}: run kvplan lock {c}")
                before = locked[_key(c)]
            elif not (req.min_ctx_tokens or req.concurrency):
                raise InputError(f"{c}: nothing to check: no lock file and no requirements")
            results.append(check(_key(c), _plan(c), req, before))
        report = gate_report(tuple(results))
        if os.environ.get("GITHUB_ACTIONS") == "true":
            out = sys.stderr if fmt is OutputFormat.json else sys.stdout
            for r in results:
                for rule in r.rules:
                    if not rule.ok:
                        out.write(f"::error file={r.config},title=kvplan gate::{rule.name}: {rule.detail}\n")
        emit(report, fmt)
    raise typer.Exit(EXIT_OK if all(r.ok for r in results) else EXIT_REJECTED)


def diff(
    old: Annotated[str, typer.Argument(help="The deployment before.")],
    new: Annotated[str, typer.Argument(help="The deployment after.")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Two configs side by side, with the capacity effect of each changed knob on its own.

    Example: kvplan diff deploy/prod.yaml deploy/prod-bf16.yaml
    """
    with boundary():
        from kvplan.plan.gate import diff as run_diff
        from kvplan.render.gate_report import diff_report

        a, b = _plan(old), _plan(new)
        effects = run_diff(a.arch, a.deployment, b.arch, b.deployment)
        emit(diff_report(old, new, effects, a.logged_tokens, b.logged_tokens), fmt)
