"""The kvplan command line: one typer app, one module per command, each thin.

This module stays light on purpose: ``main`` installs the SIGINT handler first, then imports the app inside the
error boundary, so that Ctrl-C at any moment of start-up is one line and exit 130, and the output channels follow
one policy (kvplan.fsio): a closed pipe keeps the exit code, a full disk is exit 2 with one line.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.cli._app import _OneLineErrors, app

import kvplan
from kvplan import fsio
from kvplan.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED

__all__ = ["_OneLineErrors", "app", "main"]


def main() -> None:
    previous = kvplan.install_interrupt()  # kvplan/__init__ already did for the command itself; a caller's is restored
    try:
        code = _run()
    finally:
        if previous is not None:
            # the command itself: a Ctrl-C once the answer is out leaves its exit code (the interpreter's own
            # shutdown would otherwise die of it, status -2); a caller embedding main gets its handler back
            own = previous is kvplan.on_sigint
            signal.signal(signal.SIGINT, signal.SIG_IGN if own else previous)
    sys.exit(code)


def _run() -> str | int | None:
    stdout_closed = fsio.open_channels()
    code: str | int | None = 0
    try:
        from kvplan.cli._app import app

        app()
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        sys.stderr.write("kvplan: interrupted\n")
        code = EXIT_INTERRUPTED
    try:
        fsio.flush_stdout()
    except fsio.StdoutError as e:  # the report is lost: no verdict can stand on it
        _say(f"kvplan: error: {e}")
        return EXIT_BAD_INPUT if code in (0, 1, None) else code
    if stdout_closed:
        _say("kvplan: note: stdout is closed; the report was not written (the exit code is the verdict's)")
    return code


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def __getattr__(name: str) -> Any:
    if name in ("app", "_OneLineErrors"):
        from kvplan.cli import _app

        return getattr(_app, name)
    raise AttributeError(f"module 'kvplan.cli' has no attribute {name!r}")
