"""The kvplan command line: one typer app, one module per command, each thin."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kvplan import __version__
from kvplan.cli.admit import admit
from kvplan.cli.budget import budget
from kvplan.cli.doctor import doctor
from kvplan.cli.gate import diff, gate, lock
from kvplan.cli.prefix import prefix
from kvplan.cli.presets import deployments_app, models_app
from kvplan.cli.probe import probe, validate
from kvplan.cli.simulate import simulate
from kvplan.cli.transfer import transfer
from kvplan.cli.workspace import workspace


class _OneLineErrors(TyperGroup):
    """Usage errors (a bad option value, a missing or unknown option) as one line on stderr, exit 2."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except Exception as e:
            # click's UsageError family, vendored or not: duck-typed on its interface
            code = getattr(e, "exit_code", None)
            if hasattr(e, "format_message") and isinstance(code, int):
                if type(e).__name__ == "NoArgsIsHelpError":
                    sys.stdout.write(e.format_message() + "\n")
                else:
                    message = " ".join(e.format_message().split())
                    sys.stderr.write(f"kvplan: error: {message} (see kvplan --help)\n")
                sys.exit(code)
            if type(e).__name__ == "Abort":
                sys.stderr.write("kvplan: aborted\n")
                sys.exit(1)
            raise
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


app = typer.Typer(
    cls=_OneLineErrors,
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
app.command()(workspace)
app.command()(prefix)
app.command()(transfer)
app.command()(doctor)
app.command()(lock)
app.command()(gate)
app.command()(diff)
app.command()(probe)
app.command()(validate)
app.command()(simulate)
app.add_typer(models_app, name="models")
app.add_typer(deployments_app, name="deployments")


def main() -> None:
    app()
