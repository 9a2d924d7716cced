from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit

if TYPE_CHECKING:
    from kvplan.runbook.doctor import Diagnosis


def doctor(
    log: Annotated[Path, typer.Option("--log", "-l", help="An SGLang or vLLM server log (startup lines).")],
    ctx: Annotated[
        str | None,
        typer.Option("--ctx", help="Check admission of a request this long with the log's pool: 1M, 128K, or a count."),
    ] = None,
    hit: Annotated[
        str | None,
        typer.Option(
            "--hit", help="A cached prefix (tokens): what it cannot save of the attention (DSA: indexer) work."
        ),
    ] = None,
    emit_deploy: Annotated[
        Path | None,
        typer.Option(
            "--emit-deploy",
            metavar="FILE",
            help="Write the deployment the log implies (YAML) for 'kvplan admit --deploy FILE'.",
        ),
    ] = None,
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Is the pool in an engine log the pool the config implies? If not, which known cause explains the gap.

    Without --model, --deploy or --set the doctor compares the log with the default deployment when the log is
    from its model (or names none), and otherwise reads the log alone: its evidence, what it implies, and what to
    add. Exit 0 on a match or when it cannot tell, 1 with a finding (a cause, another model, a refused start), 2
    when the log holds no start-up line at all.

    Example: kvplan doctor --log server.log --set dcp=8 --ctx 1M
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.fsio import check_outputs, write_atomic
        from kvplan.models.deployment import deployment_model_ref, load_deployment
        from kvplan.models.from_hf import load_model
        from kvplan.models.retarget import retarget
        from kvplan.render.doctor_report import deployment_yaml, doctor_report
        from kvplan.runbook.doctor import (
            CANNOT_CHECK,
            CANNOT_TELL,
            CLASS_ALIASES,
            diagnose,
            examine,
            proposed_deployment,
        )
        from kvplan.runbook.parse import log_lines, parse_log
        from kvplan.runbook.verdict import unnamed_why
        from kvplan.units import parse_option_tokens as tokens

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
        cls = parsed.chosen.model_class
        path = parsed.chosen.model_path
        if (
            not explicit
            and cls is not None
            and cls != arch.architecture
            and cls not in CLASS_ALIASES.get(arch.architecture, frozenset())
        ):
            why = f"the log is from {cls}, the default deployment {dep.name} serves {arch.architecture}"
            result = examine(parsed, why=why, arch_class=arch.architecture)
        elif not explicit and parsed.chosen.hybrid is not None and not arch.is_hybrid:
            why = (
                f"the log's pool is a hybrid's ({parsed.chosen.hybrid} + full attention), the default deployment "
                f"{dep.name} serves {arch.name}, which is not one"
            )
            result = examine(parsed, why=why, arch_class=arch.architecture)
        elif not explicit and cls is None and path is not None and arch.name.split("-")[0] not in path.lower():
            why = f"the log is from {path}, the default deployment {dep.name} serves {arch.name}"
            result = examine(parsed, why=why, arch_class=arch.architecture)
        elif not explicit and (alone := unnamed_why(arch, dep.name, parsed)) is not None:
            result = examine(parsed, why=alone, arch_class=arch.architecture)
        else:
            try:
                result = diagnose(arch, dep, parsed, ctx=length, hit=cached)
            except InputError as e:
                if explicit or cached is not None:  # only the diagnosis reads --hit: never dropped in silence
                    raise
                why = f"the default deployment {dep.name} cannot be planned for this log ({e})"
                result = examine(parsed, why=why, arch_class=arch.architecture)
            fact = result.byte_fact
            if not explicit and result.model.kind == "mha":
                why = f"the log's pool is K/V rows, the default deployment {dep.name} serves an MLA model ({arch.name})"
                result = examine(parsed, why=why, arch_class=arch.architecture)
            elif not explicit and fact is not None and not fact.agrees and not _rows_explained(result):
                why = (
                    f"the log's rows ({fact.what}, line {fact.line}) are not those of {arch.name}, the default "
                    f"deployment's model"
                )
                result = examine(parsed, why=why, arch_class=arch.architecture)
        emit(doctor_report(result), fmt)
        if emit_deploy is not None:
            write_atomic(emit_deploy, deployment_yaml(proposed_deployment(result)), "--emit-deploy", reads)
            typer.echo(f"kvplan: wrote the deployment the log implies to {emit_deploy}", err=True)
    # exit 1 is a verdict (a cause, another model, a refused start); a match or a 'cannot tell' is exit 0
    raise typer.Exit(EXIT_OK if result.ok or result.status in (CANNOT_TELL, CANNOT_CHECK) else EXIT_REJECTED)


def _rows_explained(result: Diagnosis) -> bool:
    """A cause of the default deployment's model whose own rows have the log's bytes (bf16 rows of GLM-5.3): only
    then does a log whose rows are not the default's keep a cause of that model."""
    cause = result.headline.cause
    return result.headline.kind == "cause" and cause is not None and cause.bytes_agree is True
