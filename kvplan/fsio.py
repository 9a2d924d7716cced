"""Writes to disk, as one policy (README "Writes are atomic").

Every file kvplan writes (the lock, `probe --emit-deploy`, `--plot`) goes through here:

- the target must be a regular file or not exist yet: never a symlink (kvplan does not write through one),
  a directory, a device, a FIFO or a socket, and never a file the same command reads;
- the bytes go to a temporary file with a unique name in the target's folder, are flushed and fsynced, and
  replace the target with one ``os.replace``; the folder is fsynced after. A run killed at any moment leaves
  the old file or the new one, never a mix, and a failed write leaves the old file as it was;
- a read-modify-write (``kvplan lock`` merging into an existing lock) holds an exclusive ``flock`` on a
  sidecar ``<target>.lck`` for its whole length, so two runs on one file serialize instead of racing; the
  holder removes temporaries a SIGKILLed writer left behind.

Each refusal is an :class:`InputError` (exit 2) naming the option and the path.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from kvplan.errors import InputError

LOCK_TIMEOUT_S = 30.0
"""How long a writer waits for another kvplan holding the same target's sidecar lock."""


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_target(path: Path, what: str, reads: Iterable[Path] = ()) -> None:
    """Refuse a target kvplan must not replace; a missing target in an existing folder is fine."""
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
        for r in reads:
            try:
                if _same_file(st, os.stat(r)):
                    raise InputError(f"{what} {path}: is {r}, which this command reads; write somewhere else")
            except OSError:
                continue
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


@contextlib.contextmanager
def atomic_file(path: Path, what: str, reads: Iterable[Path] = ()) -> Iterator[IO[bytes]]:
    """A binary handle on a temporary file that replaces ``path`` when the block ends without an error.

    On any error (or a signal raising in the block) the temporary file is removed and ``path`` is untouched.
    """
    check_target(path, what, reads)
    mode = _new_file_mode(path)
    # the name is chosen before the file exists, so a signal at any point after creation finds it to remove
    # (tempfile.mkstemp creates, then returns the name: a SIGINT in between left a stray temporary file)
    tmp = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    done = False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        check_target(path, what, reads)  # the target may have changed while we wrote
        os.replace(tmp, path)
        done = True
    except OSError as e:
        raise InputError(f"{what} {path}: cannot write: {e.strerror or e}") from None
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _fsync_dir(path.parent)


def write_atomic(path: Path, data: str | bytes, what: str, reads: Iterable[Path] = ()) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically; see the module doc."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path, what, reads) as f:
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
    """Hold an exclusive flock on ``<path>.lck`` (created if missing, never deleted) for the block.

    Another kvplan writing the same target waits up to ``timeout_s`` seconds, then exits 2. The sidecar
    stays behind on purpose: deleting it would let a third run lock a fresh file while the second holds the old.
    """
    try:
        import fcntl
    except ImportError:  # no flock on this platform: the atomic replace still never leaves a mix
        yield
        return
    timeout_s = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
    lck = sidecar(path)
    try:
        fd = os.open(lck, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot create the lock {lck}: {e.strerror or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{what} {path}: the lock {lck} is not a regular file")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise InputError(
                        f"{what} {path}: another kvplan has held {lck} for {timeout_s:g} s; try again when it ends"
                    ) from None
                time.sleep(0.02)
            except OSError as e:
                raise InputError(f"{what} {path}: cannot lock {lck}: {e.strerror or e}") from None
        _sweep_temporaries(path)
        yield
    finally:
        os.close(fd)  # releases the flock
