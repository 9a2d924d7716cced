"""kvplan: KV-cache capacity planning for LLM serving on SGLang and vLLM.

The package's own code is the command's Ctrl-C handler, installed here, before anything heavy is imported
(stdlib only). A SIGINT while a file is being replaced (``kvplan.fsio.writing()``) unwinds, so the temporary file
is removed and the CLI's boundary says "interrupted", exit 130; a second one is ignored while that cleanup runs. At
any other moment nothing is half-written, so the process says "kvplan: interrupted" and exits 130 at once, whatever
it was importing: a KeyboardInterrupt raised inside import frames printed a traceback in 12 of 150 tries.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import Any

__version__ = "0.1.0"
DIST = "kvplan-llm"
"""The distribution name on the package index (`pip install kvplan-llm`); the command and import stay `kvplan`.
It was kvplan-dsa, which read as "DSA only" for a tool that plans every attention family."""

EXIT_INTERRUPTED = 130  # kvplan.errors.EXIT_INTERRUPTED (not imported: this runs before it may be)
_pid = os.getpid()
"""The command's own process: a forked worker (simulate --jobs) exits without a line of its own."""


def on_sigint(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    writing = getattr(sys.modules.get("kvplan.fsio"), "writing", None)  # None while fsio itself imports
    if writing is not None and writing():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt
    if os.getpid() == _pid:
        with contextlib.suppress(OSError):
            os.write(2, b"kvplan: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def install_interrupt() -> Any:
    """Install the handler; the previous one (None off the main thread, where signals cannot be set)."""
    try:
        return signal.signal(signal.SIGINT, on_sigint)
    except ValueError:
        return None


def is_the_command() -> bool:
    """This process is `kvplan` itself (the console script, or `python -m kvplan`), not a program importing it."""
    if os.path.basename(sys.argv[0]) in ("kvplan", "kvplan.exe"):
        return True
    # `python -m kvplan`: argv[0] is "-m" while runpy imports the package, and the interpreter was given it
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[0] == "-m" and "kvplan" in argv and argv[argv.index("kvplan") - 1] == "-m"


if is_the_command():
    install_interrupt()
