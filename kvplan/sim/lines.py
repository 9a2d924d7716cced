"""A trace file's lines as bytes, read with a bounded ``readline`` (never the whole file), the same lines decoded
to text for the checked path, and the fast decoder of Mooncake lines.

The decoder is msgspec's typed JSON decoder: it parses and type-checks a Mooncake line in C, several times faster
than ``json`` plus kvplan's checks in Python. It only ever *accepts*: a line it is not sure of (not ASCII, a field
it does not know, an id past int64, a type it does not check) comes back as None, and the reader runs the checked
path in ``trace.py`` on that line, which gives the same request or the same error as before.
``tests/sim/test_fast_reader.py`` checks that the two paths agree.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO, Annotated, NamedTuple

import msgspec

from kvplan import limits
from kvplan.errors import InputError


@contextmanager
def open_trace_file(path: Path) -> Iterator[IO[bytes]]:
    """A binary handle on a regular file, through gzip for ``.gz`` (a FIFO or a device is refused first)."""
    with limits.open_regular(path, "trace") as f:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=f, mode="rb") as g:
                yield g  # type: ignore[misc]
        else:
            yield f


GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


class RawLine(NamedTuple):
    """One line of a streamed trace as bytes, or why it has none (too long). A tuple: one a line."""

    number: int
    raw: bytes
    problem: str = ""


def raw_lines(path: Path) -> Generator[RawLine, None, None]:
    """The lines of a trace file, read with a bounded ``readline``.

    A line longer than ``limits.MAX_LINE_CHARS`` bytes comes back as a problem (its rest is read past in
    bounded pieces only if the caller asks for the next line); a damaged or truncated gzip stream, a read
    error and a trace past ``limits.TRACE`` bytes raise InputError with the line reached."""
    cap = limits.MAX_LINE_CHARS
    total_cap = limits.TRACE.effective()
    total = 0
    number = 0

    def read(f: IO[bytes], n: int) -> bytes:
        nonlocal total
        try:
            chunk = f.readline(n)
        except GZIP_ERRORS as e:
            raise InputError(
                f"trace {path}:{number}: the gzip stream is damaged or cut short ({e or type(e).__name__})"
            ) from None
        except OSError as e:
            raise InputError(f"trace {path}:{number}: cannot read: {e.strerror or e}") from None
        total += len(chunk)
        if total > total_cap:
            raise limits.LimitError(
                f"trace {path}:{number}: over kvplan's trace limit of {total_cap:,} bytes"
                f" (decompressed; set {limits.TRACE.env} to raise it)"
            )
        return chunk

    with open_trace_file(path) as f:
        while True:
            number += 1
            raw = read(f, cap + 1)
            if not raw:
                return
            if len(raw) > cap and not raw.endswith(b"\n"):
                yield RawLine(number, b"", f"longer than kvplan's limit of {cap:,} bytes a line")
                while (rest := read(f, cap)) and not rest.endswith(b"\n"):
                    pass
                continue
            yield RawLine(number, raw)


class Line(NamedTuple):
    """One line of a streamed trace: its text, or why it has none (too long, not UTF-8). A tuple: one a line."""

    number: int
    text: str
    problem: str = ""


def decoded(line: RawLine) -> Line:
    if line.problem:
        return Line(line.number, "", line.problem)
    try:
        return Line(line.number, line.raw.decode("utf-8-sig" if line.number == 1 else "utf-8"))
    except UnicodeDecodeError as e:
        return Line(line.number, "", f"not valid UTF-8 (byte 0x{line.raw[e.start]:02x})")


ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
"""What ``str.strip`` strips in ASCII (bytes.strip leaves \x1c-\x1f)."""


def counts(line: RawLine) -> bool:
    """Whether a line is a record (or a bad one) rather than blank, as ``text_lines`` tells, without decoding it."""
    if line.problem:
        return True
    if line.raw.isascii():
        return bool(line.raw.strip(ASCII_SPACE))
    d = decoded(line)
    return bool(d.problem or d.text.strip())


_COUNT_READ = 1 << 20
"""Bytes a read of ``count_lines`` (tests lower it to put lines across reads)."""


def count_lines(path: Path) -> int | None:
    """``sum(map(counts, raw_lines(path)))`` in reads of 1 MiB, about 3x faster (the ``last50`` window's count
    before a replay), where every line is ASCII and within ``limits.MAX_LINE_CHARS`` in an uncompressed file
    within ``limits.TRACE``: a line is then a record iff it is not blank, as ``counts`` says. None otherwise (a
    ``.gz``, a byte past ASCII, a long line, a file too large, one that cannot be read): the caller counts with
    ``raw_lines``, which gives the same number or the same error."""
    if path.suffix == ".gz":
        return None
    cap = limits.MAX_LINE_CHARS
    total_cap = limits.TRACE.effective()
    n = size = 0
    rest = b""
    try:
        with limits.open_regular(path, "trace") as f:
            while chunk := f.read(_COUNT_READ):
                size += len(chunk)
                if size > total_cap or not chunk.isascii():
                    return None
                parts = (rest + chunk).split(b"\n")
                rest = parts.pop()
                if len(rest) > cap or max(map(len, parts), default=0) > cap:
                    return None
                n += sum(1 for p in parts if p.strip(ASCII_SPACE))
    except (OSError, InputError):
        return None
    return n + bool(rest.strip(ASCII_SPACE))


def text_lines(path: Path) -> Generator[Line, None, None]:
    """The lines of a trace file, decoded one by one (``lines.raw_lines`` reads them, bounded)."""
    with closing(raw_lines(path)) as lines:
        for line in lines:
            yield decoded(line)


# --------------------------------------------------------------------------- Mooncake, typed

_Id = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]
"""Ids past int64 are legal up to MAX_INT_DIGITS digits, but rare: the checked path takes them."""


class MooncakeLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The fields of a Mooncake line kvplan reads. A line with any other field takes the checked path (which skips
    it, once it has checked its depth and its integers): so every value accepted here has a checked type."""

    input_length: int
    hash_ids: list[_Id]
    timestamp: int | float | None = None
    output_length: int | None = None
    block_size: int | msgspec.UnsetType = msgspec.UNSET
    """Absent: the trace's. ``null`` is an error on the checked path, so it is not accepted here."""


_DECODER = msgspec.json.Decoder(MooncakeLine)


def decode_mooncake(raw: bytes) -> MooncakeLine | None:
    """A Mooncake line msgspec parsed and typed, or None: the caller's checked path decides (or says why not).

    Accepted only where ``json.loads`` gives the same values: ASCII (so no UTF-8 or BOM question) and only the
    known fields, each of a fixed depth and type; the caller bounds the integers (ids are int64 here, lengths and
    times are range-checked), so none reaches MAX_INT_DIGITS digits."""
    if not raw.isascii():
        return None
    try:
        return _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
