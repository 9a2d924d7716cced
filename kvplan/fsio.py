"""Writes to disk and the output channels, as one policy (README "Writes are atomic", "Output").

Every file kvplan writes (the lock, `probe --emit-deploy`, `--plot`) goes through here: the target is a regular
file or absent, never a symlink, a device or a file the same command reads (compared by ``st_dev``/``st_ino``);
the bytes go to a temporary beside it, fsynced, then one ``os.replace``, so a killed run leaves the old file or
the new one; a read-modify-write holds an exclusive ``flock`` on a sidecar ``<target>.lck``, removed before it lets
go. Each refusal is an :class:`InputError` (exit 2) naming the option and the path.

Output: a stdout or stderr the shell closed becomes devnull at start-up; a reader that went away (``| head -1``)
keeps the verdict's exit code; a stdout that cannot be written is :class:`StdoutError`, exit 2 with one line.
``writing()`` tells the SIGINT handler whether a file is being replaced (unwind) or not (exit 130 at once).
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from kvplan.errors import InputError

_writing = 0
"""How many ``atomic_file`` blocks are open: a SIGINT then unwinds instead of exiting at once."""


def writing() -> bool:
    return _writing > 0


LOCK_TIMEOUT_S = 30.0
"""How long a writer waits for another kvplan holding the same target's sidecar lock."""


_read_ids: dict[tuple[int, int], list[str]] | None = None
"""(st_dev, st_ino) -> the names every file read while a command runs was read by (None outside ``command_reads``)."""


@contextlib.contextmanager
def command_reads() -> Iterator[None]:
    """Note every file read in the block (the CLI wraps each command), for the writers to refuse."""
    global _read_ids
    saved, _read_ids = _read_ids, {}
    try:
        yield
    finally:
        _read_ids = saved


def note_read(path: Path, st: os.stat_result) -> None:
    """Called by the readers (``limits.check_regular``) for each file opened; a no-op outside a command."""
    if _read_ids is not None:
        names = _read_ids.setdefault((st.st_dev, st.st_ino), [])
        if str(path) not in names:
            names.append(str(path))


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _refuse_inputs(st: os.stat_result, path: Path, what: str, reads: Iterable[Path], merge: bool) -> None:
    for r in reads:
        try:
            if _same_file(st, os.stat(r)):
                raise InputError(f"{what} {path}: is {r}, which this command reads; write somewhere else")
        except OSError:
            continue
    # with merge the target's own old version, read by the target's own name, is not an input
    for read in (_read_ids or {}).get((st.st_dev, st.st_ino), ()):
        if not (merge and read == str(path)):
            raise InputError(f"{what} {path}: is {read}, which this command reads; write somewhere else")


def check_target(path: Path, what: str, reads: Iterable[Path] = (), *, merge: bool = False) -> None:
    """Refuse a target kvplan must not replace; a missing target in an existing folder is fine.

    ``reads`` are the inputs the command names; the files it has read so far are refused too, except, with
    ``merge``, the target itself read as its own old version (``kvplan lock`` merging into its lock).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"{what} {path}: cannot write: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"{what} {path}: is a symlink; kvplan does not write through one (give the real path)")
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{what} {path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{what} {path}: not a regular file (a FIFO, device or socket); kvplan writes files only")
        _refuse_inputs(st, path, what, reads, merge)
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"{what} {path}: folder {parent} does not exist")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # not every platform opens folders
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _new_file_mode(path: Path) -> int:
    """The mode the replaced file keeps, or what the umask gives a new file (mkstemp makes 0600)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def input_paths(values: Iterable[str | os.PathLike[str] | None]) -> list[Path]:
    """A command's input option values as paths (None dropped); a preset name that is no file matches nothing."""
    return [Path(v) for v in values if v is not None and str(v) != ""]


def _where(path: Path) -> str:
    """One spelling of a target that may not exist yet: its folder resolved, its own name kept."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def check_outputs(
    outputs: Sequence[tuple[str, Path | None]], inputs: Iterable[str | os.PathLike[str] | None]
) -> list[Path]:
    """The writer rule, once per command before any work: every output it was given (option, path) checked
    against every input it was given, whatever option named it, and no two outputs one file.

    Returns the inputs as paths, for the writes to check again (with what the command read meanwhile).
    """
    reads = input_paths(inputs)
    seen: dict[str, str] = {}
    for what, path in outputs:
        if path is None:
            continue
        check_target(path, what, reads)
        where = _where(path)
        if where in seen:
            raise InputError(f"{what} {path}: {seen[where]} writes the same file; give each output its own")
        seen[where] = what
    return reads


@contextlib.contextmanager
def atomic_file(path: Path, what: str, reads: Iterable[Path] = (), *, merge: bool = False) -> Iterator[IO[bytes]]:
    """A binary handle on a temporary file that replaces ``path`` when the block ends without an error.

    On any error (or a signal raising in the block) the temporary file is removed and ``path`` is untouched.
    ``reads`` and ``merge`` as for :func:`check_target`.
    """
    global _writing
    reads = list(reads)
    check_target(path, what, reads, merge=merge)
    mode = _new_file_mode(path)
    _writing += 1
    # the name is chosen before the file exists, so a signal at any point after creation finds it to remove
    # (tempfile.mkstemp creates, then returns the name: a SIGINT in between left a stray temporary file)
    tmp = str(path.parent / f".{path.name}.{os.getpid()}.{os.urandom(8).hex()}.tmp")  # secrets.token_hex(8)
    done = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        check_target(path, what, reads, merge=merge)  # the target may have changed while we wrote
        os.replace(tmp, path)
        done = True
    except OSError as e:
        raise InputError(f"{what} {path}: cannot write: {e.strerror or e}") from None
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _writing -= 1
    _fsync_dir(path.parent)


def write_atomic(path: Path, data: str | bytes, what: str, reads: Iterable[Path] = (), *, merge: bool = False) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically; see the module doc."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path, what, reads, merge=merge) as f:
        f.write(raw)


def _sweep_temporaries(path: Path) -> None:
    """Remove what a writer killed with SIGKILL left (``.<name>.*.tmp``): holding the lock, no writer is live."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(stale).st_mode):
                os.unlink(stale)


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".lck")


@contextlib.contextmanager
def exclusive(path: Path, what: str, timeout_s: float | None = None) -> Iterator[None]:
    """Hold an exclusive flock on ``<path>.lck`` for the block, and remove it before releasing it.

    Another kvplan writing the same target waits up to ``timeout_s`` seconds, then exits 2. Nothing is left
    beside the lock (a config repository's ``git add -A`` would commit it): the holder unlinks the
    sidecar while it still holds it, and a waiter that then gets the flock of the unlinked file sees that the
    name no longer points at its file and starts over on the current one, so two runs never hold it at once.
    Only a run killed by SIGKILL leaves one behind, which the next run takes and removes.
    """
    try:
        import fcntl
    except ImportError:  # no flock on this platform: the atomic replace still never leaves a mix
        yield
        return
    timeout_s = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    lck = sidecar(path)
    while True:
        fd = _open_sidecar(path, what, lck)
        try:
            if _flock_until(fcntl, fd, deadline, path, what, lck, timeout_s) and _still_named(fd, lck):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the holder unlinked the file we waited on: lock the one the name points at now
    try:
        _sweep_temporaries(path)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lck)  # while still held: a waiter on this file starts over
        os.close(fd)  # releases the flock


def _open_sidecar(path: Path, what: str, lck: Path) -> int:
    try:
        fd = os.open(lck, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot create the lock {lck}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{what} {path}: the lock {lck} is not a regular file")
    return fd


def _flock_until(fcntl: Any, fd: int, deadline: float, path: Path, what: str, lck: Path, timeout_s: float) -> bool:
    """Take the flock on ``fd`` before ``deadline`` (True), or raise the one-line error naming the holder's lock."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise InputError(
                    f"{what} {path}: another kvplan has held {lck} for {timeout_s:g} s; try again when it ends"
                ) from None
            time.sleep(0.02)
        except OSError as e:
            raise InputError(f"{what} {path}: cannot lock {lck}: {e.strerror or e}") from None


def _still_named(fd: int, lck: Path) -> bool:
    """Whether ``lck`` still names the file ``fd`` holds (not unlinked, nor replaced, by the run before)."""
    try:
        held, named = os.fstat(fd), os.lstat(lck)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


# --------------------------------------------------------------------------- the output channels


class StdoutError(InputError):
    """stdout cannot take the report (a full disk, an I/O error): exit 2, one line on stderr, no JSON document."""


def silence_stdout() -> None:
    """Point stdout's descriptor at devnull: the reader is gone or the disk full, and the interpreter's own flush
    at exit must not fail again (a second error, a traceback, exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def stdout_failed(e: OSError) -> StdoutError:
    silence_stdout()
    return StdoutError(f"cannot write stdout: {e.strerror or e}")


def quiet_closed_stdout() -> None:
    """Flush stdout; if the reader has gone (``| head -1``), point stdout at devnull so exit stays silent."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # a broken pipe here; a full disk was already said where it was written
        silence_stdout()


def flush_stdout() -> None:
    """Flush stdout: a reader that went away is silence (the verdict's code stands); any other failure is a
    :class:`StdoutError`."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        silence_stdout()
    except OSError as e:
        raise stdout_failed(e) from None


def _devnull_fd(fd: int) -> None:
    """Occupy a descriptor the shell closed, so a file kvplan opens later never lands on 1 or 2."""
    with contextlib.suppress(OSError):
        os.fstat(fd)
        return
    with contextlib.suppress(OSError):
        new = os.open(os.devnull, os.O_RDWR)
        if new != fd:
            os.dup2(new, fd)
            os.close(new)


def open_channels() -> bool:
    """At start-up: a stdout or stderr the shell closed (``>&-``; Python then sets it to None) becomes devnull,
    and a closed stderr's lines go to stdout. Returns whether stdout was closed (the report cannot be written)."""
    stdout_closed, stderr_closed = sys.stdout is None, sys.stderr is None
    for fd, closed in ((1, stdout_closed), (2, stderr_closed)):
        if closed:
            _devnull_fd(fd)
    if stdout_closed:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    if stderr_closed:
        sys.stderr = sys.stdout  # the one channel still open (devnull too when both are closed)
    return stdout_closed
