from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli._common import DeployOpt, FormatOpt, ModelOpt, SetOpt, boundary, load_plan
from kvplan.errors import EXIT_OK, EXIT_REJECTED
from kvplan.render import OutputFormat, emit


def probe(
    emit_deploy: Annotated[
        Path | None,
        typer.Option("--emit-deploy", help="Write a deployment YAML whose GPU is this machine's, as it is now."),
    ] = None,
    gpu_index: Annotated[int, typer.Option("--gpu", help="Which GPU --emit-deploy measures.")] = 0,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Read every GPU through NVML (and torch, if installed) and compare it with the catalog. Exit 3 without one.

    Example: kvplan probe --emit-deploy here.yaml && kvplan admit --ctx 1M --deploy here.yaml
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.fsio import check_outputs
        from kvplan.probes.nvml import measured_gpu, read_gpus, with_torch
        from kvplan.render.probe_report import deployment_yaml, probe_report

        reads = check_outputs([("--emit-deploy", emit_deploy)], [deploy])  # before NVML: a symlink, --deploy
        readings = with_torch(read_gpus())
        if emit_deploy is not None:
            from kvplan.fsio import write_atomic
            from kvplan.models.deployment import load_deployment

            if not 0 <= gpu_index < len(readings):
                raise InputError(f"--gpu {gpu_index}: this machine has GPUs 0..{len(readings) - 1}")
            base = load_deployment(deploy, set_ or ())
            overhead = base.runtime_overhead if base.runtime_overhead is not None else 1 << 30
            gpu, pre = measured_gpu(readings[gpu_index], overhead)
            write_atomic(emit_deploy, deployment_yaml(base, gpu, pre), "--emit-deploy", reads)
        emit(probe_report(readings), fmt)


def validate(
    tokens: Annotated[str | None, typer.Option("--tokens", help="Allocate a pool of about N tokens instead.")] = None,
    scale: Annotated[float | None, typer.Option("--scale", help="Allocate this fraction of the planned pool.")] = None,
    device: Annotated[str, typer.Option("--device", help="cuda or cpu (the CPU build of torch).")] = "cuda",
    model: ModelOpt = None,
    deploy: DeployOpt = None,
    set_: SetOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Allocate the exact tensors of the plan with torch and compare Σ nbytes, the allocator and NVML with it.

    Under torchrun each rank builds its own shard and rank 0 prints a row per rank:
    torchrun --standalone --nproc-per-node 2 -m kvplan validate --device cpu --tokens 4096
    """
    with boundary():
        from kvplan.errors import InputError
        from kvplan.probes.validate import load_torch, scaled, validate_ranks
        from kvplan.render.probe_report import validate_report
        from kvplan.units import parse_option_tokens

        if tokens is not None and scale is not None:
            raise InputError("give --tokens or --scale, not both")
        if device not in ("cuda", "cpu"):
            raise InputError(f"--device {device!r}: use cuda or cpu")
        load_torch()
        plan = load_plan(model, deploy, set_)
        if plan.startup_error and plan.rows == 0:  # the weights do not load, or leave no KV budget
            raise InputError(
                f"{plan.deployment.name}: the engine would not start ({plan.startup_error}), so it builds no pool "
                "to validate; change the deployment (kvplan admit lists changes that start it)"
            )
        target = None
        if tokens is not None:
            target = parse_option_tokens("--tokens", tokens)
        elif scale is not None:
            if not 0 < scale <= 1:
                raise InputError(f"--scale {scale}: use a fraction in (0, 1]")
            target = max(int(plan.logged_tokens * scale), plan.logical_page_tokens)
        elif device == "cpu":
            raise InputError("--device cpu needs --tokens or --scale (a full pool is tens of GiB)")
        if target is not None:
            plan = scaled(plan, target)
        results = validate_ranks(plan, device=device)
        if results is None:  # not rank 0 under torchrun: rank 0 prints for everyone
            raise typer.Exit(EXIT_OK)
        emit(validate_report(plan, results, target), fmt)
    raise typer.Exit(EXIT_OK if all(m.held for m in results) else EXIT_REJECTED)
