"""The typer app: one group whose ``main`` is the error boundary, each command built only when it is run.

``COMMANDS`` names every command's module and function; the group's command table is a ``_LazyCommands`` mapping
whose keys are all the names (for help, completion and "did you mean") and whose values are built by typer on first
access. ``kvplan admit`` therefore imports and builds ``admit`` alone: no other command's imports, no other
command's parameters (``benchmarks/cli_latency.py`` measures it).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kvplan import __version__
from kvplan.cli._common import exit_for, usage_error
from kvplan.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTED
from kvplan.fsio import command_reads

COMMANDS: dict[str, tuple[str, str]] = {
    "admit": ("kvplan.cli.admit", "admit"),
    "budget": ("kvplan.cli.budget", "budget"),
    "workspace": ("kvplan.cli.workspace", "workspace"),
    "prefix": ("kvplan.cli.prefix", "prefix"),
    "transfer": ("kvplan.cli.transfer", "transfer"),
    "doctor": ("kvplan.cli.doctor", "doctor"),
    "lock": ("kvplan.cli.gate", "lock"),
    "gate": ("kvplan.cli.gate", "gate"),
    "diff": ("kvplan.cli.gate", "diff"),
    "probe": ("kvplan.cli.probe", "probe"),
    "validate": ("kvplan.cli.probe", "validate"),
    "simulate": ("kvplan.cli.simulate", "simulate"),
    "knobs": ("kvplan.cli.presets", "knobs"),
    "gpus": ("kvplan.cli.gpus", "gpus"),
    "fit": ("kvplan.cli.fit", "fit"),
    "perf": ("kvplan.cli.perf", "perf"),
    "models": ("kvplan.cli.presets", "models_app"),
    "deployments": ("kvplan.cli.presets", "deployments_app"),
    "schema": ("kvplan.cli.schema", "schema"),
}
"""Every command, in the order help lists them: name -> (module, function or typer sub-app)."""


def build_command(name: str) -> Any:
    """The click command typer builds for ``name`` (a function becomes a command, a sub-app a group)."""
    from typer.main import get_command_from_info, get_group_from_info
    from typer.models import CommandInfo, TyperInfo

    module, attr = COMMANDS[name]
    target = getattr(importlib.import_module(module), attr)
    if isinstance(target, typer.Typer):
        return get_group_from_info(
            TyperInfo(target, name=name), pretty_exceptions_short=True, rich_markup_mode=None, suggest_commands=True
        )
    from kvplan.cli._once import SingleValues  # a single-value option given twice is refused

    return get_command_from_info(CommandInfo(name=name, callback=target, cls=SingleValues),
                                 pretty_exceptions_short=True, rich_markup_mode=None)  # fmt: skip


class _LazyCommands(MutableMapping[str, Any]):
    """The group's command table: every name known up front, each command built when first looked up."""

    def __init__(self, built: MutableMapping[str, Any]) -> None:
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = build_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._built if n not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(1 for n in self._built if n not in COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._built


class _OneLineErrors(TyperGroup):
    """The error boundary around every command (and around click's own parsing): one line, the right exit code.

    Usage errors name the subcommand's help; kvplan's errors exit 2 (3 for a probe); anything else is a kvplan
    bug, exit 4; Ctrl-C exits 130. Exit 1 stays the verdict's. Its commands are built lazily (``_LazyCommands``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        del ctx
        return list(self.commands)

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
            with command_reads():  # every file the command reads, for its writers to refuse (kvplan.fsio)
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
    help="KV-cache capacity planning for LLM serving on SGLang and vLLM: dense (GQA/MHA), MLA, DSA and hybrid models.",
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
    """KV-cache capacity planning for LLM serving on SGLang and vLLM: dense (GQA/MHA), MLA, DSA and hybrid models."""
