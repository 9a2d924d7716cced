"""The kvplan command line: one typer app, one module per command, each thin."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan import __version__
from kvplan.cli.admit import admit
from kvplan.cli.budget import budget
from kvplan.cli.presets import deployments_app, models_app

app = typer.Typer(
    name="kvplan",
    help="Capacity planning for DSA models (GLM-5.x, DeepSeek-V3.2) on SGLang and vLLM.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Capacity planning for DSA models (GLM-5.x, DeepSeek-V3.2) on SGLang and vLLM."""


app.command()(admit)
app.command()(budget)
app.add_typer(models_app, name="models")
app.add_typer(deployments_app, name="deployments")


def main() -> None:
    app()
