"""doctor's steps: the log read, the config it is held against chosen (or the log read alone), the exit code."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import EXIT_OK, EXIT_REJECTED, InputError
from kvplan.fsio import check_outputs, write_atomic
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Deployment
from kvplan.models.deployment import deployment_model_ref, load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.retarget import retarget
from kvplan.render.doctor_report import deployment_yaml
from kvplan.runbook.doctor import (
    CANNOT_CHECK,
    CANNOT_TELL,
    CLASS_ALIASES,
    Diagnosis,
    diagnose,
    examine,
    proposed_deployment,
)
from kvplan.runbook.parse import ParsedLog, log_lines, parse_log
from kvplan.runbook.verdict import unnamed_why
from kvplan.units import parse_option_tokens as tokens


def diagnosis_of(
    log: Path,
    ctx: str | None,
    hit: str | None,
    emit_deploy: Path | None,
    model: str | None,
    deploy: str | None,
    set_: list[str] | None,
) -> tuple[Diagnosis, list[Path]]:
    """The diagnosis of the log's chosen start, and the files read (for --emit-deploy's writer rule)."""
    reads = check_outputs([("--emit-deploy", emit_deploy)], [log, model, deploy])
    length = tokens("--ctx", ctx) if ctx is not None else None
    cached = tokens("--hit", hit) if hit is not None else None
    if length is not None and length <= 0:
        raise InputError(f"--ctx must be positive, got {length}")
    if cached is not None and length is not None and cached > length:  # with or without --model
        raise InputError(f"--hit {cached:,} is longer than --ctx {length:,}")
    parsed = parse_log(log_lines(log), str(log))
    explicit = model is not None or deploy is not None or bool(set_)
    dep = load_deployment(deploy, set_ or ())
    arch = load_model(model if model is not None else deployment_model_ref(dep))
    dep = retarget(dep, arch) if model is not None or dep.model != dep.written_for else dep  # its own knobs
    why = None if explicit else _not_the_default(parsed, arch, dep)
    if why is not None:
        return examine(parsed, why=why, arch_class=arch.architecture), reads
    return _diagnosed(parsed, arch, dep, explicit, length, cached), reads


def _not_the_default(parsed: ParsedLog, arch: ModelArch, dep: Deployment) -> str | None:
    """Why a log read without --model, --deploy or --set is not the default deployment's (None: it may be)."""
    cls = parsed.chosen.model_class
    path = parsed.chosen.model_path
    if cls is not None and cls != arch.architecture and cls not in CLASS_ALIASES.get(arch.architecture, frozenset()):
        return f"the log is from {cls}, the default deployment {dep.name} serves {arch.architecture}"
    if parsed.chosen.hybrid is not None and not arch.is_hybrid:
        return (
            f"the log's pool is a hybrid's ({parsed.chosen.hybrid} + full attention), the default deployment "
            f"{dep.name} serves {arch.name}, which is not one"
        )
    if cls is None and path is not None and arch.name.split("-")[0] not in path.lower():
        return f"the log is from {path}, the default deployment {dep.name} serves {arch.name}"
    return unnamed_why(arch, dep.name, parsed)


def _diagnosed(
    parsed: ParsedLog, arch: ModelArch, dep: Deployment, explicit: bool, length: int | None, cached: int | None
) -> Diagnosis:
    """The log held against the config; without one named, the log read alone where the default's plan fails or
    its rows are not the log's."""
    try:
        result = diagnose(arch, dep, parsed, ctx=length, hit=cached)
    except InputError as e:
        if explicit or cached is not None:  # only the diagnosis reads --hit: never dropped in silence
            raise
        why = f"the default deployment {dep.name} cannot be planned for this log ({e})"
        return examine(parsed, why=why, arch_class=arch.architecture)
    fact = result.byte_fact
    if not explicit and result.model.kind == "mha":
        why = f"the log's pool is K/V rows, the default deployment {dep.name} serves an MLA model ({arch.name})"
        return examine(parsed, why=why, arch_class=arch.architecture)
    if not explicit and result.chain is not None and not result.chain.fits_gpu:
        why = (
            f"the log's free memory before loading (line {result.chain.held.line}) is more than the default "
            f"deployment {dep.name}'s {result.chain.gpu} has: the log is from another GPU"
        )
        return examine(parsed, why=why, arch_class=arch.architecture)
    if not explicit and fact is not None and not fact.agrees and not _rows_explained(result):
        why = (
            f"the log's rows ({fact.what}, line {fact.line}) are not those of {arch.name}, the default "
            f"deployment's model"
        )
        return examine(parsed, why=why, arch_class=arch.architecture)
    return result


def _rows_explained(result: Diagnosis) -> bool:
    """A cause of the default deployment's model whose own rows have the log's bytes (bf16 rows of GLM-5.3): only
    then does a log whose rows are not the default's keep a cause of that model."""
    cause = result.headline.cause
    return result.headline.kind == "cause" and cause is not None and cause.bytes_agree is True


def write_deployment(result: Diagnosis, path: Path, reads: list[Path]) -> None:
    """--emit-deploy: the deployment the log implies, as YAML."""
    write_atomic(path, deployment_yaml(proposed_deployment(result)), "--emit-deploy", reads)


def exit_code(result: Diagnosis) -> int:
    """1 is a verdict (a cause, another model, a refused start); a match or a 'cannot tell' is 0."""
    return EXIT_OK if result.ok or result.status in (CANNOT_TELL, CANNOT_CHECK) else EXIT_REJECTED
