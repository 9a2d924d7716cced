"""Log text -> records, key=value dumps read. Real logs are messy, and the reader copes with:
- ANSI colour codes (with or without their ESC byte), carriage returns (progress bars), container prefixes
  (``sglang-1  | ``, ``2026-04-19 12:18:49.415 | ``);
- interleaved ranks, including two ranks' records glued on one line: a line is split at every record prefix
  (``[2026-03-01 12:00:00 TP3]``, ``(Worker_TP0 pid=12)``, ``INFO 03-01 12:00:00``);
- lines wrapped by a terminal: a line that does not begin with a record prefix continues the previous record and
  is joined to it with no separator (a terminal wrap splits words and numbers); a blank line ends a record;
- several server starts in one file: a new ``server_args=`` dump, vLLM's banner or engine-config line, a weight
  load after the pool lines, a second pool line from the same rank, or a switch of engine begins a new run. The
  doctor uses the last complete run (one that reached its pool lines or a startup error).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kvplan import limits
from kvplan.errors import InputError
from kvplan.runbook.parse.patterns import _DICT_ITEM, _VL_V0_BLOCKS

# --------------------------------------------------------------------------- records

# Every pattern here runs over untrusted lines of up to limits.MAX_LINE_CHARS, so every repeat is bounded
# ({m,n}) or stops at a character the next part needs; none can backtrack over a whole line
# (tests/runbook/test_parse_limits.py feeds each one a pathological line).
_ANSI = re.compile(
    r"\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\[\d{1,3}(?:;\d{1,3}){0,16}m"  # a colour code whose ESC byte was lost in a paste
)
_SGLANG_PREFIX = r"\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?P<sg>(?:[ \t][^\]\[]{0,39})?)\]"
"""SGLang's record prefix: ``[2026-03-01 12:00:00 DP1 TP2 EP2]``; 0.3.x printed the time alone (``[22:30:52 TP0]``)."""
_LEVEL = r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)[ \t]{1,16}\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
_VLLM_PREFIX = (
    rf"\((?P<proc>[^()\s]{{1,64}}(?: [^()\s]{{1,64}})?) pid=(?P<pid>\d{{1,10}})(?:, ip=[\w.:]{{1,64}})?\)"
    rf"(?:[ \t]{{0,16}}{_LEVEL})?"
)
_START = re.compile(f"{_SGLANG_PREFIX}|{_VLLM_PREFIX}|{_LEVEL}")
_CONTAINER = re.compile(
    r"^(?:[│┃▎][ \t]{0,8}|>[ \t]{1,8}|[\w.-]{1,128}[ \t]{1,64}\|\s"
    r"|\d{4}-\d\d-\d\d[ T][\d:.,]{1,32}Z?[ \t]{0,8}\|[ \t]{0,8}"
    r"|\d{4}-\d\d-\d\dT[\d:.,]{1,32}Z?\s)"
)


@dataclass
class _Record:
    line: int
    rank: str | None
    parts: list[str]
    size: int = 0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def extend(self, more: str) -> None:
        """A terminal wrap: joined with no separator, up to ``limits.MAX_LINE_CHARS`` (the rest is dropped)."""
        room = limits.MAX_LINE_CHARS - self.size
        if room > 0:
            piece = more[:room]
            self.parts.append(piece)
            self.size += len(piece)


def _rank(m: re.Match[str]) -> str | None:
    """The process and rank a record prefix names: SGLang's ``DP1 TP2 EP2``; vLLM's process name where it carries a
    rank (``Worker_TP3``, ``EngineCore_DP0``, ``VllmWorker rank=2``), else the name and pid (``VllmWorkerProcess
    pid=106022``: V0's workers share one name), so that per-worker lines of one start are told apart."""
    sg = m.group("sg")
    if sg is not None:
        return sg.strip() or None
    proc = m.group("proc")
    if not proc:
        return None
    proc = proc.strip()
    return proc if any(c.isdigit() for c in proc) else f"{proc} pid={m.group('pid')}"


def clean_line(raw: str) -> str:
    line = _ANSI.sub("", raw[: limits.MAX_LINE_CHARS]).replace("\r", "")
    return _CONTAINER.sub("", line, count=1)


@dataclass
class _LineCount:
    lines: int = 0


def _records(lines: Iterable[str], count: _LineCount) -> Iterator[_Record]:
    """Records in log order, each yielded once no later line can extend it; linear in the log's size."""
    pending: _Record | None = None
    open_record = False
    preface = True
    for number, raw in enumerate(lines, start=1):
        count.lines = number
        line = clean_line(raw)
        if not line.strip():
            open_record = False
            continue
        if preface:
            if _is_comment(line):
                continue  # a header of comment lines before the log (a fixture's provenance, a pasted note)
            preface = False
        starts = list(_START.finditer(line))
        head_end = starts[0].start() if starts else len(line)
        head = line[:head_end]
        if head.strip():
            if open_record and pending is not None and _MESSAGE_START.match(head.lstrip()) is None:
                pending.extend(head)  # a terminal wrap: no separator
            else:
                if pending is not None:
                    yield pending
                pending = _Record(number, None, [head], len(head))
        for i, m in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
            if pending is not None:
                yield pending
            pending = _Record(number, _rank(m), [line[m.start() : end]], end - m.start())
        open_record = True
    if pending is not None:
        yield pending


_MESSAGE_START = re.compile(
    r"(?:ValueError: |RuntimeError: |\[[\w./-]{1,64}:\d{1,6}\] )?"
    r"(?:Loading model weights took|Model loading took|Memory profiling results|# \w{1,16} blocks: |GPU blocks: "
    r"|Maximum concurrency for|Available KV cache memory|GPU KV cache size"
    r"|The model's max seq len|To serve at least"
    r"|KV Cache is allocated|Load weight (?:begin|end)|Memory pool end|max_total_num_tokens=|server_args="
    r"|Initializing an? |the current vLLM instance|model weights take|vLLM API server version)"
)
"""A line with no record prefix that begins with an engine message is a new record (a log pasted without its
prefixes), not a terminal wrap of the previous one."""


def _is_comment(line: str) -> bool:
    """A ``#`` comment line of a preface; not V0's ``# GPU blocks: N, # CPU blocks: M`` pasted without its prefix."""
    stripped = line.lstrip()
    return stripped.startswith("#") and _VL_V0_BLOCKS.search(stripped[:200]) is None


def _split_lines(text: str) -> Iterator[str]:
    """``text.split("\\n")`` one line at a time, without a final empty line after a trailing newline."""
    start = 0
    n = len(text)
    while start < n:
        end = text.find("\n", start)
        if end < 0:
            end = n
        yield text[start:end]
        start = end + 1


def log_lines(path: Path) -> Iterator[str]:
    """The lines of a log file, streamed: a regular file only, under ``limits.LOG``, each line read with a
    bounded readline and cut at ``limits.MAX_LINE_CHARS`` bytes; bytes that are not UTF-8 become U+FFFD."""
    st = limits.check_regular(path, "log")
    cap = limits.LOG.effective()
    if st.st_size > cap:
        raise limits.LimitError(
            f"log {path}: {st.st_size:,} bytes is over kvplan's log limit of {cap:,} bytes (set {limits.LOG.env})"
        )
    line_cap = limits.MAX_LINE_CHARS
    total = 0
    number = 0
    with limits.open_regular(path, "log") as f:
        while True:
            try:
                raw = f.readline(line_cap + 1)
                total += len(raw)
                if len(raw) > line_cap and not raw.endswith(b"\n"):
                    while (rest := f.readline(line_cap)) and not rest.endswith(b"\n"):
                        total += len(rest)
                    total += len(rest)
            except OSError as e:
                raise InputError(f"log {path}:{number + 1}: cannot read: {e.strerror or e}") from None
            if not raw:
                return
            number += 1
            if total > cap:
                raise limits.LimitError(f"log {path}:{number}: over kvplan's log limit of {cap:,} bytes")
            yield raw[:line_cap].decode("utf-8", errors="replace").rstrip("\n")


# --------------------------------------------------------------------------- key=value dumps


def kv_pairs(text: str, start: int = 0) -> tuple[tuple[str, str], ...]:
    """``a=1, b='x, y', c=Foo(d=2)`` -> (('a', '1'), ('b', "'x, y'"), ('c', 'Foo(d=2)')).

    Commas split only at depth 0 outside quotes; an unmatched closing bracket ends the list (the ``)`` of
    ``ServerArgs(...)``).
    """
    parts: list[str] = []
    depth = 0
    quote = ""
    i = start
    begin = start
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
        i += 1
    parts.append(text[begin:i])
    out: list[tuple[str, str]] = []
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if sep and key.isidentifier():
            out.append((key, value.strip()))
    return tuple(out)


def _dict_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """vLLM's ``non-default args: {...}`` as key/raw-value pairs (literal_eval, else a lenient regex)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return tuple((str(k), repr(v)) for k, v in value.items())
    return tuple((m.group(1), m.group(2).strip()) for m in _DICT_ITEM.finditer(text))
