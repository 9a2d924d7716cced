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
    from collections.abc import Iterable

    from kvplan.engines.common import PoolPlan
    from kvplan.models.deploy import Requirements
    from kvplan.plan.gate import Figures, GateResult

ConfigsArg = Annotated[list[str], typer.Argument(help="Deployment YAML files (or preset names).", metavar="CONFIG...")]
LockOpt = Annotated[Path, typer.Option("--lock", "-l", help="The lock file.")]
CtxOpt = Annotated[str | None, typer.Option("--require-ctx", help="A context that must be admitted, e.g. 1M.")]
ConcOpt = Annotated[
    list[str] | None, typer.Option("--require-concurrency", help="N@CTX that must fit at once, e.g. 4@128K.")
]


def version_for(engine: str, spec: str) -> str | None:
    """The version a config of ``engine`` is re-planned at: ``0.5.9`` for every config, or per engine
    ``sglang=0.5.9,vllm=0.11.0`` (None: this engine is not named, its configs keep their own version)."""
    if not spec.strip():  # refused as gate --against-version '' is, never the config's own version in silence
        raise InputError("engine version '' is empty: write V (e.g. 0.5.23), or ENGINE=V[,ENGINE=V]")
    if "=" not in spec:
        return spec.strip()
    out: dict[str, str] = {}
    for item in spec.split(","):
        name, sep, version = item.partition("=")
        if not sep or name.strip() not in ("sglang", "vllm") or not version.strip():
            raise InputError(f"engine version {spec[:80]!r}: write V, or ENGINE=V[,ENGINE=V] with sglang / vllm")
        out[name.strip()] = version.strip()
    return out.get(engine)


def _plan_at(config: str, version: str, option: str) -> PoolPlan:
    """The config re-planned under another engine version's rules (the loader validates the version; the engine's
    own refusal, PlanError, is passed on for the caller to report)."""
    from kvplan.cli._common import load_plan
    from kvplan.errors import PlanError

    try:
        return load_plan(None, config, [f"engine_version={version}"])
    except PlanError:
        raise
    except InputError as e:
        raise InputError(f"{option} {version} for {config}: {str(e).removeprefix('--set: ')}") from None


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
    from kvplan.models.deployment import load_requirements

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
    from kvplan.models.deployment import deployment_model_ref

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
        from kvplan.engines.context import model_positions
        from kvplan.fsio import check_outputs, check_target, exclusive, write_atomic
        from kvplan.plan.gate import figures, lock_text, merge, promised_contexts
        from kvplan.render.gate_report import lock_report

        check_outputs([("--lock", lock_path)], configs)
        plans = [_plan(c) for c in configs]
        reads = _reads(configs, plans)
        check_target(lock_path, "--lock", reads)
        entries = {
            config_key(c, lock_path): figures(
                p, promised_contexts(_requirements(c, None, None, None), model_positions(p))
            )
            for c, p in zip(configs, plans, strict=True)
        }
        with exclusive(lock_path, "--lock"):
            old = _old_entries(lock_path, set(entries), prune)
            merged = merge(old, entries, prune=prune)
            write_atomic(lock_path, lock_text(merged), "--lock", reads, merge=True)  # its own old entries
        pruned = tuple(sorted(set(old) - set(merged)))
        emit(lock_report(merged, str(lock_path), tuple(sorted(entries)), pruned), fmt)


def _old_entries(path: Path, given: set[str], prune: bool) -> dict[str, Figures]:
    """The entries ``kvplan lock`` merges into: an edited lock (digest) is rebuilt only from configs given
    again, never by keeping its other entries (that would sign a hand edit as kvplan's own)."""
    from kvplan.limits import CONFIG, read_text
    from kvplan.plan.gate import parse_lock_untrusted

    if not os.path.lexists(path):
        return {}
    try:
        old, untrusted = parse_lock_untrusted(read_text(path, CONFIG, "lock file"), str(path))
    except InputError as e:
        raise InputError(f"{e} (kvplan lock merges into it: fix or delete it first)") from None
    kept = sorted(set(old) - given)
    if untrusted is not None and kept and not prune:
        shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
        raise InputError(f"{path} {untrusted}: its entries for {shown} cannot be kept; lock them again too, or "
                         "drop them with --prune")  # fmt: skip
    return old


def _deployment_files(configs: list[str], locked: Iterable[str], lock_path: Path | None) -> list[str]:
    """The configs that are kvplan deployments: a file with an entry in the lock, or a mapping with a `model`
    (README's minimal form) or an `engine` key. Each other YAML is skipped with a note on stderr."""
    from kvplan.models.reader import read_file

    keys = set(locked)
    keep = []
    for c in configs:
        if _looks_like_path(c) and (lock_path is None or config_key(c, lock_path) not in keys):
            data = read_file(Path(c)).data
            if not isinstance(data, dict) or not {"model", "engine"} & data.keys():
                sys.stderr.write(
                    f"kvplan: note: skipping {c}: not a kvplan deployment config (no model key, no lock entry)\n"
                )
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
    against_version: Annotated[
        str | None,
        typer.Option(
            "--against-version",
            metavar="V|ENGINE=V,...",
            help="Compare each config with itself re-planned under engine version V (an upgrade PR), instead of"
            " the lock; the capacity drop is checked against --max-capacity-drop (default 0%).",
        ),
    ] = None,
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

        if against_version is not None and lock_path is not None:
            raise InputError("--against-version compares each config with itself at another version: drop --lock")
        path = lock_path if lock_path is not None else (Path("kvplan.lock") if Path("kvplan.lock").exists() else None)
        path = None if against_version is not None else path
        locked = _read_lock(path) if path is not None else None
        if only_deployments:
            configs = _deployment_files(configs, locked or (), path)
            if not configs:
                sys.stderr.write("kvplan: note: no kvplan deployment configs to gate\n")
                raise typer.Exit(EXIT_OK)
        if against_version is not None:
            results = [_against_version(c, against_version, require_ctx, require_concurrency, max_capacity_drop)
                       for c in configs]  # fmt: skip
            _finish_gate(results, fmt)
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
        _finish_gate(results, fmt)


def _finish_gate(results: list[GateResult], fmt: OutputFormat) -> None:
    from kvplan.render.gate_report import gate_report, github_annotations

    report = gate_report(tuple(results))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        sys.stderr.writelines(github_annotations(tuple(results)))  # never stdout: it may be the PR comment
    emit(report, fmt)
    raise typer.Exit(EXIT_OK if all(r.ok for r in results) else EXIT_REJECTED)


def _against_version(config: str, spec: str, ctx: str | None, conc: list[str] | None, drop: str | None) -> GateResult:
    """One config: its figures under its own engine version ("before") and the gate's rules under ``spec``."""
    from dataclasses import replace

    from kvplan.engines.context import model_positions
    from kvplan.errors import PlanError
    from kvplan.plan.gate import GateResult, Rule, check, figures, promised_contexts

    req = _requirements(config, ctx, conc, drop)
    now = _plan(config)
    version = version_for(now.engine, spec)
    before = figures(now, promised_contexts(req, model_positions(now)))
    name = f"{_display(config)} ({now.semantics} -> {version or now.engine_version})"
    try:
        new = _plan_at(config, version, "--against-version") if version is not None else now
    except PlanError as e:  # the engine at that version refuses the config: a failed gate, not bad input
        after = replace(before, engine=f"{now.engine} {version}", engine_starts=False, pool_tokens=0,
                        pool_rows_per_gpu=0, usable_pages=0, available_bytes=0, largest_admitted_ctx=0,
                        concurrency=dict.fromkeys(before.concurrency, 0))  # fmt: skip
        return GateResult(config=name, before=before, after=after, rules=(Rule("engine starts", False, str(e)),))
    return check(name, new, req, before)


def _display(config: str) -> str:
    """A config as reports and annotations name it: relative to the working folder (the repository root in CI)."""
    if not _looks_like_path(config):
        return config
    rel = os.path.relpath(os.path.abspath(config))
    return Path(rel if not rel.startswith("..") else config).as_posix()


def diff(
    configs: Annotated[
        list[str],
        typer.Argument(
            help="OLD NEW: the deployments before and after; with --engine-version, the configs to re-plan.",
            metavar="OLD NEW | CONFIG...",
        ),
    ],
    engine_version: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--engine-version",
            metavar="OLD NEW",
            help="Re-plan each CONFIG under engine versions OLD and NEW (V, or ENGINE=V,...): one row per config.",
        ),
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Two configs side by side, with the capacity effect of each changed knob on its own; or, with
    --engine-version OLD NEW, what an engine upgrade does to each config's pool and limits.

    Examples: kvplan diff deploy/prod.yaml deploy/prod-bf16.yaml;
    kvplan diff --engine-version 0.5.9 0.5.23 deploy/*.yaml
    """
    with boundary():
        if engine_version is not None:
            _version_diff(configs, engine_version, fmt)
            return
        if len(configs) != 2:
            n = len(configs)
            raise InputError(f"diff takes OLD NEW (two configs), got {n}; or --engine-version OLD NEW CONFIG...")
        from kvplan.plan.gate import diff as run_diff
        from kvplan.render.gate_report import diff_report

        old, new = configs
        a, b = _plan(old), _plan(new)
        effects = run_diff(a, b)
        refused = "; ".join(f"{n}: {p.startup_error}" for n, p in ((old, a), (new, b)) if p.startup_error) or None
        emit(diff_report(old, new, effects, a.logged_tokens, b.logged_tokens, startup_error=refused), fmt)


def _version_diff(configs: list[str], versions: tuple[str, str], fmt: OutputFormat) -> None:
    """One row per config: its pool and limits under each version's rules (kvplan.versions)."""
    from kvplan.errors import PlanError
    from kvplan.render.version_report import VersionRow, version_diff_report

    rows = []
    for c in configs:
        own = _plan(c)
        at: list[tuple[str, PoolPlan | None, str | None]] = []
        for spec in versions:
            v = version_for(own.engine, spec) or own.engine_version
            try:
                at.append((v, _plan_at(c, v, "--engine-version"), None))
            except PlanError as e:  # that version's engine refuses the config: a row, not bad input
                at.append((v, None, str(e)))
        (va, pa, ea), (vb, pb, eb) = at
        rows.append(VersionRow(_display(c), va, vb, pa, pb, ea, eb))
    emit(version_diff_report(tuple(rows)), fmt)
