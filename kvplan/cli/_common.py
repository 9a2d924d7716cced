"""Shared options, the error boundary and the plan loader used by every command."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer

try:
    from typer._click.globals import get_current_context  # typer >= 0.25 vendors click
except ImportError:  # pragma: no cover - older typer on plain click
    from click import get_current_context  # type: ignore[import-not-found,no-redef]

from kvplan.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTED, KvplanError
from kvplan.fsio import StdoutError, quiet_closed_stdout, silence_stdout, stdout_failed
from kvplan.render import OutputFormat, error_document

if TYPE_CHECKING:  # the engines load in load_plan: a command that plans no pool (simulate a trace) never pays
    from kvplan.engines.common import PoolPlan
    from kvplan.models.deploy import Deployment

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="NAME|PATH|ORG/NAME[@REV]",
        help="Model preset name, kvplan model YAML, Hugging Face config.json or snapshot folder, or Hub repo id"
        " (cache first, then configs and safetensors headers only; HF_HUB_OFFLINE=1: cache only)"
        " [default: the deployment's].",
    ),
]
DeployOpt = Annotated[
    str | None,
    typer.Option(
        "--deploy",
        "-d",
        metavar="NAME|PATH",
        help="Deployment preset name or YAML file [default: glm-5.3-8xh200-sglang].",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        metavar="KNOB=VALUE",
        help="Override a deployment knob, e.g. --set dcp=8 (repeatable; kvplan knobs lists them).",
    ),
]
EmitCommandOpt = Annotated[
    str | None,
    typer.Option(
        "--emit-command",
        metavar="sglang|vllm|auto",
        help="Print the engine's launch command for this plan, in that engine version's own flags, instead of the "
        "report (auto: the deployment's engine; naming the other engine plans with --set engine=... first).",
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        "-f",
        case_sensitive=False,
        envvar="KVPLAN_FORMAT",
        metavar="table|json|markdown",
        help="Output format.",
    ),
]


def fail(message: str, code: int) -> typer.Exit:
    """One line on stderr (and, under --format json, an error document on stdout); the Exit to raise."""
    _report(message, code, wants_json=_format_is_json())
    return typer.Exit(code)


@contextmanager
def boundary() -> Iterator[None]:
    """Turn any exception into one line on stderr and the right exit code; no traceback.

    kvplan's own errors keep their code (2 bad input, 3 probe unavailable); see :func:`exit_for` for the rest.
    The group in ``kvplan.cli`` applies the same rules to everything outside a command, so none can escape.
    """
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise  # Ctrl-C: typer makes it Exit(130) and the group says "interrupted", once
    except BaseException as e:
        if hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int):
            raise  # click's usage errors: the group words them
        raise typer.Exit(exit_for(e)) from None


def exit_for(e: BaseException, argv: Sequence[str] | None = None) -> int:
    """Classify an exception, write its one line (and the JSON error document when asked), return the exit code.

    Exit 1 is never returned: it is the verdict's (rejected, gate failed, mismatch).
    """
    if isinstance(e, KeyboardInterrupt) or type(e).__name__ == "Abort":
        sys.stderr.write("kvplan: interrupted\n")
        return EXIT_INTERRUPTED
    if isinstance(e, BrokenPipeError):
        quiet_closed_stdout()  # the reader went away (| head): nothing to say, and nobody to say it to
        return EXIT_OK
    if isinstance(e, OSError) and not e.filename and e.errno in _WRITE_ERRNOS:
        e = stdout_failed(e)  # help or --version into a full disk: a write without a file is stdout
    code, message = _classify(e)

    # stdout failed: the JSON error document would fail the same way
    _report(message, code, wants_json=_format_is_json(argv) and not isinstance(e, StdoutError))
    if code == EXIT_INTERNAL and os.environ.get("KVPLAN_TRACEBACK"):
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    return code


_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""OSErrors only a write raises (readers name their file; these do not)."""


def _classify(e: BaseException) -> tuple[int, str]:
    if isinstance(e, KvplanError):
        return (EXIT_INTERNAL if e.exit_code == EXIT_REJECTED else e.exit_code), str(e)
    if isinstance(e, UnicodeDecodeError):
        return EXIT_BAD_INPUT, f"input is not UTF-8 text: {e.reason} at byte {e.start:,}"
    if isinstance(e, UnicodeEncodeError):
        return EXIT_BAD_INPUT, (
            f"cannot write {e.object[e.start : e.end]!r} in the output encoding {e.encoding}; "
            "set PYTHONIOENCODING=utf-8"
        )
    if isinstance(e, UnicodeError):
        return EXIT_BAD_INPUT, f"input is not valid text: {e}"
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        return EXIT_BAD_INPUT, f"cannot read {where}{e.strerror or type(e).__name__}"
    if isinstance(e, RecursionError):
        return EXIT_BAD_INPUT, "input is nested too deeply to read (Python's recursion limit)"
    if isinstance(e, MemoryError):
        return EXIT_BAD_INPUT, "out of memory reading the input; is it the file you meant?"
    return EXIT_INTERNAL, (
        f"{type(e).__name__}: {' '.join(str(e).split())} (this is a kvplan bug; please report it with the command line)"
    )


def usage_error(e: BaseException, code: int, argv: Sequence[str]) -> int:
    """A click usage error as one line pointing at the subcommand's own help; exit 2 (never click's 1)."""
    message = " ".join(e.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(e, "ctx", None)
    names = []
    while ctx is not None and getattr(ctx, "parent", None) is not None:
        names.append(ctx.info_name)  # the root's own name varies: python -m kvplan, test runners
        ctx = ctx.parent
    path = " ".join(["kvplan", *reversed(names)])
    _report(f"{message} (see {path} --help)", EXIT_BAD_INPUT, wants_json=_format_is_json(argv))
    return EXIT_BAD_INPUT


def _report(message: str, code: int, *, wants_json: bool) -> None:
    label = "internal error" if code == EXIT_INTERNAL else "error"
    # one line whatever the message quotes from the input: control characters (newlines, escapes) shown escaped
    message = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in message)
    if not (wants_json and sys.stderr is sys.stdout):  # stderr closed: the JSON document alone says it
        try:
            sys.stderr.write(f"kvplan: {label}: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # 2> /dev/full: the exit code still says it
            pass
    if wants_json:
        try:
            sys.stdout.write(error_document(message, code))
            sys.stdout.flush()
        except (OSError, ValueError):
            silence_stdout()


def _current_context() -> Any:
    return get_current_context(silent=True)


def _format_is_json(argv: Sequence[str] | None = None) -> bool:
    """--format json in force: the running command's parsed option, else the command line, else KVPLAN_FORMAT."""
    ctx = _current_context()
    if ctx is not None and "fmt" in ctx.params:
        return str(getattr(ctx.params["fmt"], "value", ctx.params["fmt"])).lower() == "json"
    args = list(argv) if argv is not None else sys.argv[1:]
    for i, a in enumerate(args):
        if a in ("--format", "-f") and i + 1 < len(args):
            return args[i + 1].lower() == "json"
        if a.startswith("--format="):
            return a.split("=", 1)[1].lower() == "json"
        if a.startswith("-f") and not a.startswith("--") and len(a) > 2:
            return a[2:].lower() == "json"
    return os.environ.get("KVPLAN_FORMAT", "").lower() == "json"


def load_plan(model: str | None, deploy: str | None, sets: list[str] | None) -> PoolPlan:
    from kvplan.engines import plan_pool
    from kvplan.models.deployment import check_model_for_deployment, deployment_model_ref, load_deployment
    from kvplan.models.from_hf import load_model
    from kvplan.models.retarget import retarget

    dep = load_deployment(deploy, sets or ())
    arch = load_model(model if model is not None else deployment_model_ref(dep))
    dep = retarget(dep, arch) if model is not None or dep.model != dep.written_for else dep  # its own knobs
    dep, mtp_note = _drop_foreign_mtp(arch, dep, sets or ())
    check_model_for_deployment(arch, dep)
    plan = plan_pool(arch, dep)
    if dep.carry is not None and not dep.carry.builtin:  # the user's file: name only the knobs the engine kept
        kept = tuple((k, v) for k, v in dep.carry.carried if _applied_as_set(plan, k))
        plan = replace(plan, deployment=replace(dep, carry=replace(dep.carry, carried=kept)))
    return replace(plan, notes=(*plan.notes, mtp_note)) if mtp_note else plan


def _drop_foreign_mtp(arch: Any, dep: Deployment, sets: Sequence[str]) -> tuple[Deployment, str | None]:
    """A deployment file written for another model does not give its MTP draft tokens to a model without MTP
    layers (gpt-oss on a GLM-5.3 file); a --set speculative_num_draft_tokens is kept as given."""
    from kvplan.models.deployment import canonical_key

    foreign = dep.name and dep.model not in ("", arch.name)
    set_here = {canonical_key(s.partition("=")[0], abbrev=True) for s in sets}
    if not foreign or not dep.mtp or arch.num_mtp_layers or "speculative_num_draft_tokens" in set_here:
        return dep, None
    note = (
        f"deployment {dep.name} was written for {dep.model}: its speculative_num_draft_tokens="
        f"{dep.speculative_num_draft_tokens} is not applied to {arch.name}, which has no MTP layers"
    )
    return replace(dep, speculative_num_draft_tokens=0), note


def _applied_as_set(plan: Any, knob: str) -> bool:
    """Whether the plan kept a deployment knob as set (a knob the plan does not list is taken as kept)."""
    try:
        return bool(plan.knob(knob).origin == "set")
    except KeyError:
        return True


def emit_sets(emit_command: str | None, sets: list[str] | None) -> list[str] | None:
    """--set items with the engine --emit-command names (auto: the deployment's own); bad value: exit 2."""
    if emit_command is None or emit_command == "auto":
        return sets
    from kvplan.errors import InputError
    from kvplan.models.deploy import ENGINES

    if emit_command not in ENGINES:
        raise InputError(f"--emit-command {emit_command!r}: choose sglang, vllm or auto")
    return [*(sets or []), f"engine={emit_command}"]


def print_launch(plan: PoolPlan, model_ref: str, command: str, fmt: OutputFormat) -> None:
    """The plan's launch command on stdout (kvplan.plan.launch; kvplan.render.launch_report)."""
    from kvplan.plan.launch import launch_command
    from kvplan.render.launch_report import emit_launch

    emit_launch(launch_command(plan, model_ref), command, fmt)


def model_ref_of(model: str | None, plan: PoolPlan) -> str:
    from kvplan.models.deployment import deployment_model_ref

    return model if model is not None else deployment_model_ref(plan.deployment)
