"""Shared options, the error boundary and the plan loader used by every command."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import KvplanError
from kvplan.render import OutputFormat

ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Model preset name, kvplan model YAML, or Hugging Face config.json."),
]
DeployOpt = Annotated[
    str | None,
    typer.Option("--deploy", "-d", help="Deployment preset name or YAML file [default: glm-5.3-8xh200-sglang]."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a deployment knob, e.g. --set dcp=8 (repeatable)."),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", case_sensitive=False, envvar="KVPLAN_FORMAT", help="Output format."),
]


def fail(message: str, code: int) -> typer.Exit:
    sys.stderr.write(f"kvplan: error: {message}\n")
    return typer.Exit(code)


@contextmanager
def boundary() -> Iterator[None]:
    """Turn kvplan's own errors into one line on stderr and the right exit code; no traceback."""
    try:
        yield
    except KvplanError as e:
        raise fail(str(e), e.exit_code) from None


def load_plan(model: str | None, deploy: str | None, sets: list[str] | None) -> PoolPlan:
    from kvplan.models.load import deployment_model_ref, load_deployment, load_model

    dep = load_deployment(deploy, sets or ())
    arch = load_model(model or deployment_model_ref(dep))
    return plan_pool(arch, dep)
