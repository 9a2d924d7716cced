"""``lines.count_lines``: the ``last50`` window's request count in 1 MiB reads, against the count line by line
(``raw_lines`` and ``counts``, what ``Trace.count`` did before) on lines that make the two differ if either is
wrong: blank and whitespace-only lines (``str.strip``'s ASCII set, \\x1c-\\x1f included), CRLF, a last line
without a newline, lines across reads, lines over the line limit, bytes past ASCII, gzip."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan import limits
from kvplan.sim import lines
from kvplan.sim.trace import open_trace

PIECES = [b"", b" ", b"\t", b"\r", b"\x1c", b"\x0b", b"{}", b"x", b"abcdefghij", b"\xc3\xa9", b"\xe2\x80\x83", b"\xff"]


def _by_line(path: Path) -> int:
    return sum(1 for line in lines.raw_lines(path) if lines.counts(line))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
@given(
    st.lists(st.lists(st.sampled_from(PIECES), max_size=4).map(b"".join), max_size=12),
    st.booleans(),
    st.integers(1, 9),
)
def test_the_same_count_as_line_by_line(tmp_path: Path, rows: list[bytes], newline_at_end: bool, read: int) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(rows) + (b"\n" if newline_at_end and rows else b""))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limits, "MAX_LINE_CHARS", 8)  # "abcdefghij" is over it: a problem line, counted
        mp.setattr(lines, "_COUNT_READ", read)  # lines across reads
        fast = lines.count_lines(path)
        slow = _by_line(path)
    ascii_short = all(r.isascii() and len(r) <= 8 for r in rows)
    assert fast == (slow if ascii_short else None)


def test_a_gzip_trace_is_counted_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(b"{}\n\n{}\n"))
    assert lines.count_lines(path) is None
    assert _by_line(path) == 2


def test_the_conversation_trace() -> None:
    # 12,031 requests (Mooncake FAST'25 conversation trace, one per line, no blank lines)
    path = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "mooncake" / "conversation_trace.jsonl"
    if not path.exists():
        pytest.skip("../shared/traces not here")
    assert lines.count_lines(path) == _by_line(path) == open_trace(path).count() == 12_031
