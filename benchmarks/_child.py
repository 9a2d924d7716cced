"""Whole processes, timed as users get them: CPU, wall and peak memory of one child, and pairs run interleaved.

Every command runs under a small trampoline (``python -S``, about 8 MiB) that forks it, waits for it with
``os.wait4`` and writes its figures to a file. So the peak RSS is the command's own: a child forked straight from
this script would inherit this script's resident size into ``ru_maxrss`` (Linux keeps the pre-exec high-water
mark), and a script that ran a peer in process would be hundreds of MiB. CPU seconds are user + system of the
command and every process it waited for (a C++ backend it runs, say). Wall seconds are the trampoline's, from
fork to wait, so the trampoline's own start-up is not in them. With ``pty=True`` the command's stdout and
stderr are a terminal (a pty the trampoline reads to the end), as when a user types it.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_TRAMPOLINE = r"""
import json, os, pty, sys, time
out, use_pty, argv = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
t0 = time.perf_counter()
if use_pty:
    pid, fd = pty.fork()
else:
    pid, fd = os.fork(), -1
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
if fd >= 0:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        os.write(1, chunk)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss * 1024], f)
"""


@dataclass(frozen=True)
class Child:
    rc: int
    out: bytes
    cpu_s: float
    wall_s: float
    peak_rss_bytes: int
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


def run(
    cmd: Sequence[str],
    *,
    timeout: float = 600.0,
    pty: bool = False,
    env: dict[str, str] | None = None,
    ok: tuple[int, ...] = (0,),
) -> Child:
    """One command as its own process, under the trampoline; a run past ``timeout`` (wall) is killed."""
    with tempfile.TemporaryDirectory(prefix="kvplan-bench-") as tmp:
        figures = os.path.join(tmp, "figures.json")
        with open(os.path.join(tmp, "stdout"), "w+b") as out:
            argv = [sys.executable, "-S", "-c", _TRAMPOLINE, figures, "1" if pty else "0", *cmd]
            p = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                return Child(-9, b"", float("inf"), float("inf"), 0, timed_out=True)
            out.seek(0)
            text = out.read()
        try:
            with open(figures) as f:
                rc, cpu, wall, rss = json.load(f)
        except (OSError, ValueError):
            return Child(p.returncode or -1, text, float("inf"), float("inf"), 0)
    return Child(0 if rc in ok else rc or 1, text, cpu, wall, rss)


def interleaved(a: Callable[[], Child], b: Callable[[], Child], pairs: int) -> tuple[list[Child], list[Child]]:
    """``pairs`` runs of each, A B A B ...: drift (load from other users, CPU clocks, page cache) hits both alike."""
    ra: list[Child] = []
    rb: list[Child] = []
    for _ in range(pairs):
        ra.append(a())
        rb.append(b())
    return ra, rb


def spread(values: list[float]) -> dict[str, float]:
    """min / median / max."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def pair_ratios(slow: list[Child], fast: list[Child], what: str = "cpu_s") -> dict[str, float]:
    """Per pair, ``slow / fast`` of ``what`` (so > 1: ``fast`` is faster), as min / median / max."""
    return spread([getattr(s, what) / getattr(f, what) for s, f in zip(slow, fast, strict=True)])


def machine() -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = ", load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        load = ""
    return f"{cpu}, {os.cpu_count()} CPUs{load}, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
