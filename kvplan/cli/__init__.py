"""The kvplan command line: one typer app, one module per command, each thin.

This module stays light on purpose: ``main`` imports the app inside the error boundary, so that Ctrl-C during
start-up is one line and exit 130, and a closed stdout (``| head -1``) never changes the exit code.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.cli._app import _OneLineErrors, app

from kvplan.errors import EXIT_INTERRUPTED

__all__ = ["_OneLineErrors", "app", "main"]


def main() -> None:
    code: str | int | None = 0
    try:
        from kvplan.cli._app import app

        app()
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        sys.stderr.write("kvplan: interrupted\n")
        code = EXIT_INTERRUPTED
    quiet_closed_stdout()
    sys.exit(code)


def quiet_closed_stdout() -> None:
    """Flush stdout; if the reader has gone (``| head -1``), point stdout at devnull so exit stays silent."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        import os

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def __getattr__(name: str) -> Any:
    if name in ("app", "_OneLineErrors"):
        from kvplan.cli import _app

        return getattr(_app, name)
    raise AttributeError(f"module 'kvplan.cli' has no attribute {name!r}")
