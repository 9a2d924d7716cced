from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli._common import (
    EmitCommandOpt,
    FormatOpt,
    SetOpt,
    boundary,
    emit_sets,
    load_plan,
    model_ref_of,
    print_launch,
)
from kvplan.render import OutputFormat, emit

models_app = typer.Typer(help="Model presets.", no_args_is_help=True, rich_markup_mode=None)
deployments_app = typer.Typer(help="Deployment presets.", no_args_is_help=True, rich_markup_mode=None)


@models_app.command("list")
def models_list(fmt: FormatOpt = OutputFormat.table) -> None:
    """List the built-in model presets."""
    with boundary():
        from kvplan.models.from_hf import load_model
        from kvplan.models.presets import preset_names
        from kvplan.render.models_report import models_list_report

        emit(models_list_report([load_model(n) for n in preset_names("models")]), fmt)


@models_app.command("show")
def models_show(
    name: Annotated[str, typer.Argument(help="Preset name, model YAML or config.json.", metavar="NAME|PATH")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Show one model: layers, caches (and DSA indexer layers), parameter groups, measured weights."""
    with boundary():
        from kvplan.models.from_hf import load_model
        from kvplan.render.models_report import model_report

        emit(model_report(load_model(name)), fmt)


@deployments_app.command("list")
def deployments_list(fmt: FormatOpt = OutputFormat.table) -> None:
    """List the built-in deployment presets."""
    with boundary():
        from kvplan.models.presets import preset_names
        from kvplan.render.deployments_report import deployments_list_report

        emit(deployments_list_report([load_plan(None, n, None) for n in preset_names("deployments")]), fmt)


@deployments_app.command("show")
def deployments_show(
    name: Annotated[str, typer.Argument(help="Preset name or deployment YAML.", metavar="NAME|PATH")],
    set_: SetOpt = None,
    emit_command: EmitCommandOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Show one deployment with every knob resolved (defaulted ones marked) and its pool."""
    with boundary():
        from kvplan.render.deployments_report import deployment_report

        plan = load_plan(None, name, emit_sets(emit_command, set_))
        if emit_command is not None:
            print_launch(plan, model_ref_of(None, plan), "deployments show", fmt)
            return
        emit(deployment_report(plan), fmt)


def knobs(fmt: FormatOpt = OutputFormat.table) -> None:
    """List every deployment knob: the engine(s) that read it, its unit and its default.

    Example: kvplan knobs --format json
    """
    with boundary():
        from kvplan.render.deployments_report import knobs_report

        emit(knobs_report(), fmt)
