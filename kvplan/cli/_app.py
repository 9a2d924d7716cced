"""The typer app: every command registered on one group whose ``main`` is the error boundary."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kvplan import __version__
from kvplan.cli._common import exit_for, usage_error
from kvplan.cli.admit import admit
from kvplan.cli.budget import budget
from kvplan.cli.doctor import doctor
from kvplan.cli.gate import diff, gate, lock
from kvplan.cli.gpus import gpus
from kvplan.cli.prefix import prefix
from kvplan.cli.presets import deployments_app, knobs, models_app
from kvplan.cli.probe import probe, validate
from kvplan.cli.simulate import simulate
from kvplan.cli.transfer import transfer
from kvplan.cli.workspace import workspace
from kvplan.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTED


class _OneLineErrors(TyperGroup):
    """The error boundary around every command (and around click's own parsing): one line, the right exit code.

    Usage errors name the subcommand's help; kvplan's errors exit 2 (3 for a probe); anything else is a kvplan
    bug, exit 4; Ctrl-C exits 130. Exit 1 stays the verdict's.
    """

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except SystemExit as e:
            if e.code == EXIT_REJECTED and type(sys.stdout).__name__ == "PacifyFlushWrapper":
                sys.exit(EXIT_OK)  # click's answer to a closed pipe (--help | head -1) is exit 1, which is no verdict
            raise
        except BaseException as e:
            code = getattr(e, "exit_code", None)
            if hasattr(e, "format_message") and isinstance(code, int):
                # click's UsageError family (vendored by typer): duck-typed on its interface
                if type(e).__name__ == "NoArgsIsHelpError":
                    with contextlib.suppress(BrokenPipeError):  # help asked for by giving nothing: not an error
                        sys.stdout.write(e.format_message() + "\n")
                    sys.exit(EXIT_OK)
                sys.exit(usage_error(e, code, argv))
            if type(e).__name__ == "Exit":  # typer/click Exit under standalone_mode=False
                sys.exit(code if isinstance(code, int) else EXIT_OK)
            try:
                sys.exit(exit_for(e, argv))
            except SystemExit:
                raise
            except BaseException:  # the boundary itself must not leak a traceback
                sys.stderr.write(f"kvplan: internal error: {type(e).__name__}: {e} (this is a kvplan bug)\n")
                sys.exit(EXIT_INTERNAL)
        if rv == EXIT_INTERRUPTED:  # typer turns Ctrl-C into Exit(130), silently
            sys.stderr.write("kvplan: interrupted\n")
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else EXIT_OK)
        return rv


app = typer.Typer(
    cls=_OneLineErrors,
    name="kvplan",
    help="Capacity planning for DSA models (GLM-5.x, DeepSeek-V3.2) on SGLang and vLLM.",
    no_args_is_help=True,
    rich_markup_mode=None,  # help text is plain text: "[default: ...]" and "kvplan[plot]" are not markup
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
app.command()(knobs)
app.command()(gpus)
app.add_typer(models_app, name="models")
app.add_typer(deployments_app, name="deployments")
