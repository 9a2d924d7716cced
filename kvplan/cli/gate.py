from __future__ import annotations

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

ConfigsArg = Annotated[list[str], typer.Argument(help="Deployment YAML files (or preset names).", metavar="CONFIG...")]
LockOpt = Annotated[Path, typer.Option("--lock", "-l", help="The lock file.")]
CtxOpt = Annotated[str | None, typer.Option("--require-ctx", help="A context that must be admitted, e.g. 1M.")]
ConcOpt = Annotated[
    list[str] | None, typer.Option("--require-concurrency", help="N@CTX that must fit at once, e.g. 4@128K.")
]


def option_requirements(ctx: str | None, conc: list[str] | None, drop: str | None = None) -> Requirements:
    """--require-ctx, --require-concurrency N@CTX and --max-capacity-drop as Requirements (malformed: exit 2);
    `gate` and `fit` read them here."""
    from kvplan.models.deploy import Requirements
    from kvplan.units import parse_concurrency, parse_option_tokens, parse_percent_ppm

    return Requirements(
        min_ctx_tokens=parse_option_tokens("--require-ctx", ctx) if ctx else None,
        concurrency=tuple(parse_concurrency(c) for c in conc or ()),
        max_capacity_drop_ppm=parse_percent_ppm(drop) if drop else None,
    )


def _requirements(config: str, ctx: str | None, conc: list[str] | None, drop: str | None) -> Requirements:
    from kvplan.models.load import load_requirements

    return load_requirements(config).merged(option_requirements(ctx, conc, drop))


def _plan(config: str) -> PoolPlan:
    from kvplan.cli._common import load_plan

    return load_plan(None, config, None)


def _looks_like_path(config: str) -> bool:
    """The loader's rule: a path has a separator or a config suffix; anything else is a preset name."""
    return any(ch in config for ch in "/\\") or config.endswith((".yaml", ".yml", ".json"))


def _real(path: Path) -> Path:
    """The absolute path with the folder's symlinks resolved (the file's own name kept: a linked config is itself)."""
    p = Path(os.path.abspath(path))
    return p.parent.resolve() / p.name


def config_key(config: str, lock_path: Path) -> str:
    """The lock's name for a config: its path relative to the lock file's folder, with / separators.

    `gate ./base.yaml`, `gate $PWD/base.yaml` and `gate ci/base.yaml --lock ci/kvplan.lock` name one entry.
    A config outside the lock's folder is named with ../ (on another drive: its absolute path); a preset name
    is its own key.
    """
    if not _looks_like_path(config):
        return config
    target, base = _real(Path(config)), _real(lock_path).parent
    try:
        return Path(os.path.relpath(target, base)).as_posix()
    except ValueError:  # Windows: another drive
        return target.as_posix()


def _reads(configs: list[str], plans: list[PoolPlan]) -> list[Path]:
    """The files this command reads: the configs and the model files they name (never to be written over)."""
    from kvplan.models.load import deployment_model_ref

    out = [Path(c) for c in configs if _looks_like_path(c)]
    for p in plans:
        ref = deployment_model_ref(p.deployment)
        if _looks_like_path(ref):
            out.append(Path(ref))
    return out


def _read_lock(path: Path) -> dict[str, Figures]:
    from kvplan.limits import CONFIG, read_text
    from kvplan.plan.gate import parse_lock

    if not os.path.lexists(path):
        raise InputError(f"{path}: no such lock file (write one with kvplan lock)")
    return parse_lock(read_text(path, CONFIG, "lock file"), str(path))


def lock(
    configs: ConfigsArg,
    lock_path: LockOpt = Path("kvplan.lock"),
    prune: Annotated[
        bool, typer.Option("--prune", help="Drop the lock's entries for configs not given (default: keep them).")
    ] = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Write kvplan.lock: the key figures of each config, for `kvplan gate` to compare against.

    The configs given are (re)computed; the lock's other entries are kept (--prune drops them). Entries are
    keyed by the config's path relative to the lock file. The write is atomic, and two runs on one lock wait
    for each other.

    Example: kvplan lock deploy/prod.yaml deploy/canary.yaml
    """
    with boundary():
        from kvplan.fsio import check_target, exclusive, write_atomic
        from kvplan.plan.gate import figures, lock_text, merge, promised_contexts
        from kvplan.render.gate_report import lock_report

        check_target(lock_path, "--lock", [Path(c) for c in configs if _looks_like_path(c)])
        plans = [_plan(c) for c in configs]
        reads = _reads(configs, plans)
        check_target(lock_path, "--lock", reads)
        entries = {
            config_key(c, lock_path): figures(
                p, promised_contexts(_requirements(c, None, None, None), p.arch.max_position_embeddings)
            )
            for c, p in zip(configs, plans, strict=True)
        }
        with exclusive(lock_path, "--lock"):
            old: dict[str, Figures] = {}
            if os.path.lexists(lock_path):
                try:
                    old = _read_lock(lock_path)
                except InputError as e:
                    raise InputError(f"{e} (kvplan lock merges into it: fix or delete it first)") from None
            merged = merge(old, entries, prune=prune)
            write_atomic(lock_path, lock_text(merged), "--lock", reads)
        pruned = tuple(sorted(set(old) - set(merged)))
        emit(lock_report(merged, str(lock_path), tuple(sorted(entries)), pruned), fmt)


def _deployment_files(configs: list[str]) -> list[str]:
    """The configs that are kvplan deployments; each other YAML is skipped with a note on stderr."""
    from kvplan.models.load import read_file

    keep = []
    for c in configs:
        if _looks_like_path(c):
            data = read_file(Path(c)).data
            if not isinstance(data, dict) or "engine" not in data:
                sys.stderr.write(f"kvplan: note: skipping {c}: not a kvplan deployment config (no engine key)\n")
                continue
        keep.append(c)
    return keep


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
    only_deployments: Annotated[
        bool,
        typer.Option(
            "--only-deployments",
            help="Skip (with a note on stderr) YAML files that are not kvplan deployment configs (pre-commit).",
        ),
    ] = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Re-plan each config, compare with the lock and the requirements; exit 1 on any violation.

    On GitHub Actions each violated rule is also an ::error annotation, always on stderr.

    Example: kvplan gate deploy/prod.yaml --max-capacity-drop 2% --require-ctx 1M --format markdown
    """
    with boundary():
        from kvplan.plan.gate import check
        from kvplan.render.gate_report import gate_report, github_annotations

        if only_deployments:
            configs = _deployment_files(configs)
            if not configs:
                sys.stderr.write("kvplan: note: no kvplan deployment configs to gate\n")
                raise typer.Exit(EXIT_OK)
        path = lock_path if lock_path is not None else (Path("kvplan.lock") if Path("kvplan.lock").exists() else None)
        locked = _read_lock(path) if path is not None else None
        results = []
        for c in configs:
            req = _requirements(c, require_ctx, require_concurrency, max_capacity_drop)
            before = None
            if locked is not None and path is not None:
                key = config_key(c, path)
                if key not in locked:
                    raise InputError(
                        f"{path}: has no entry for {key} (keys are relative to the lock): run kvplan lock {c}"
                    )
                before = locked[key]
            elif not (req.min_ctx_tokens or req.concurrency):
                raise InputError(f"{c}: nothing to check: no lock file and no requirements")
            results.append(check(_display(c), _plan(c), req, before))
        report = gate_report(tuple(results))
        if os.environ.get("GITHUB_ACTIONS") == "true":
            sys.stderr.writelines(github_annotations(tuple(results)))  # never stdout: it may be the PR comment
        emit(report, fmt)
    raise typer.Exit(EXIT_OK if all(r.ok for r in results) else EXIT_REJECTED)


def _display(config: str) -> str:
    """A config as reports and annotations name it: relative to the working folder (the repository root in CI)."""
    if not _looks_like_path(config):
        return config
    rel = os.path.relpath(os.path.abspath(config))
    return Path(rel if not rel.startswith("..") else config).as_posix()


def diff(
    old: Annotated[str, typer.Argument(help="The deployment before.", metavar="OLD")],
    new: Annotated[str, typer.Argument(help="The deployment after.", metavar="NEW")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Two configs side by side, with the capacity effect of each changed knob on its own.

    Example: kvplan diff deploy/prod.yaml deploy/prod-bf16.yaml
    """
    with boundary():
        from kvplan.plan.gate import diff as run_diff
        from kvplan.render.gate_report import diff_report

        a, b = _plan(old), _plan(new)
        effects = run_diff(a, b)
        refused = "; ".join(f"{n}: {p.startup_error}" for n, p in ((old, a), (new, b)) if p.startup_error) or None
        emit(diff_report(old, new, effects, a.logged_tokens, b.logged_tokens, startup_error=refused), fmt)
