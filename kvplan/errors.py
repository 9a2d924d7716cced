"""kvplan's exceptions, each carrying the exit code the CLI returns for it.

Exit codes (DESIGN §3): 0 ok, 1 rejected / gate failed / mismatch (the verdict, and nothing else), 2 bad input,
3 probe unavailable, 4 an internal kvplan bug (any exception that is not one of these), 130 Ctrl-C.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_BAD_INPUT = 2
EXIT_PROBE_UNAVAILABLE = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130
"""128 + SIGINT, as shells report a command stopped by Ctrl-C."""


class KvplanError(Exception):
    """Base class: a message for the user and the exit code to return."""

    exit_code = EXIT_BAD_INPUT


class InputError(KvplanError):
    """Bad input: a malformed value, an unknown preset, a missing file."""


class ConfigError(InputError):
    """A problem in a config file, located by file, key path and line."""

    def __init__(self, message: str, *, source: str = "", key: str = "", line: int | None = None):
        self.source = source
        self.key = key
        self.line = line
        self.detail = message
        where = source
        if line is not None:
            where = f"{where}:{line}" if where else f"line {line}"
        parts = [p for p in (where, key) if p]
        super().__init__(": ".join([*parts, message]))


class PlanError(InputError):
    """A deployment the engine itself would refuse to start (e.g. no memory left for the KV cache)."""


class ProbeUnavailable(KvplanError):
    """No GPU, no NVML or no torch."""

    exit_code = EXIT_PROBE_UNAVAILABLE
