"""Request traces, read as streams: one request at a time, never the whole trace in Python objects.

Formats (``--trace-format``, detected when not given):

- ``mooncake``: Mooncake FAST'25 JSON Lines, ``{"timestamp": ms, "input_length": n, "output_length": n,
  "hash_ids": [..]}``. ``hash_ids`` are prefix-chained ids of 512-token blocks (a line may carry its own
  ``block_size``, as kvcache-simulator's minimal format does); the last block is partial when the input is not a
  multiple of the block (ceil listing). ``timestamp`` is optional in order mode.
- ``kvtester``: kv-cache-tester JSON, one conversation per file (a file or a directory of ``*.json``). Ids are
  64-token blocks local to each file, so every file gets its own id namespace; only full blocks are listed (floor
  listing). Sub-agent entries nest their own ``requests`` whose ``t`` counts from the sub-agent's ``t``; they are
  flattened into the parent conversation (same namespace) and ordered by absolute ``t``. Files are replayed one
  after another in name order; in occupancy mode each conversation starts when the previous one's last request
  arrived.
- ``azure``: Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``): arrivals and lengths
  only, no block ids, so no request can reuse another's KV.
- ``kvplan``: kvplan's own JSON Lines for users' traces. The first line is a header, then one request a line::

      {"kvplan_trace": 1, "block_size": 64, "chained": true}
      {"arrival_s": 0.0, "input_tokens": 4096, "output_tokens": 256, "blocks": [17, 18, 19, 20]}

  ``blocks`` are ids (integers or strings) of the request's ``block_size``-token blocks in order: the
  full blocks (floor listing) or also the partial last one (ceil listing). With ``"chained": true`` an id names
  the block *and everything before it* (Mooncake's convention); with ``"chained": false`` ids name block
  contents only and kvplan chains them itself (a block is reused only after the same prefix).
  ``arrival_s`` (seconds, optional, default: the previous request's) and ``output_tokens`` (default 0) are
  optional. Blank lines are skipped.

A malformed line stops the read with ``FILE:LINE: what is wrong`` (exit 2); with ``skip_bad`` it is skipped and
counted instead.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import IO, Any

from kvplan.errors import InputError
from kvplan.units import cdiv

FORMATS = ("mooncake", "kvtester", "azure", "kvplan")
MOONCAKE_BLOCK_TOKENS = 512
KVTESTER_BLOCK_TOKENS = 64
_ID_LIMIT = 1 << 40
"""kv-cache-tester ids are namespaced per file as ``file << 40 | id``."""


class Request:
    """One request of a trace: lengths, arrival and prefix-chained block ids (None: no reuse information)."""

    __slots__ = ("arrival_us", "blocks", "file", "index", "input_tokens", "line", "output_tokens")

    def __init__(
        self,
        index: int,
        arrival_us: int,
        input_tokens: int,
        output_tokens: int,
        blocks: list[int] | None,
        line: int,
        file: int = 0,
    ) -> None:
        self.index = index
        self.arrival_us = arrival_us
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.blocks = blocks
        self.line = line
        self.file = file

    def __repr__(self) -> str:
        n = "none" if self.blocks is None else len(self.blocks)
        return (
            f"Request(#{self.index}, t={self.arrival_us}us, in={self.input_tokens}, out={self.output_tokens}, "
            f"blocks={n})"
        )


@dataclass
class ReadStats:
    """What a read skipped (with ``skip_bad``) and how many requests it gave."""

    requests: int = 0
    bad: int = 0
    first_bad: list[str] = field(default_factory=list)

    def skip(self, message: str) -> None:
        self.bad += 1
        if len(self.first_bad) < 5:
            self.first_bad.append(message)


class _Bad(Exception):
    """A malformed record; the reader adds where it is."""


@dataclass(frozen=True)
class Trace:
    """A trace on disk and how to read it. ``read()`` may be called any number of times (each re-reads)."""

    path: Path
    format: str
    block_tokens: int
    """Tokens per trace block (0: the trace has no blocks)."""
    files: tuple[Path, ...]
    skip_bad: bool = False

    @property
    def has_blocks(self) -> bool:
        return self.format != "azure"

    @property
    def name(self) -> str:
        return self.path.name

    def where(self, r: Request) -> str:
        if self.format == "kvtester":
            return f"{self.files[r.file].name}: request {r.line}"
        return f"{self.path}:{r.line}"

    def describe(self) -> str:
        return {
            "mooncake": f"Mooncake JSONL, {self.block_tokens}-token prefix-chained blocks (last block partial)",
            "kvtester": f"kv-cache-tester JSON ({len(self.files)} conversation file(s)), "
            f"{self.block_tokens}-token blocks local to each file, full blocks only",
            "azure": "Azure CSV: arrivals and lengths only, no block ids (no reuse possible)",
            "kvplan": f"kvplan JSONL, {self.block_tokens}-token blocks",
        }[self.format]

    def read(self, stats: ReadStats | None = None) -> Iterator[Request]:
        """The requests in trace order, numbered from 0."""
        st = stats if stats is not None else ReadStats()
        reader = {
            "mooncake": _read_mooncake,
            "kvtester": _read_kvtester,
            "azure": _read_azure,
            "kvplan": _read_kvplan,
        }[self.format]
        for r in reader(self, st):
            st.requests += 1
            yield r

    def count(self) -> int:
        """Requests in the trace, in one streaming pass.

        Line formats without ``skip_bad`` count non-blank lines (a malformed one stops the replay anyway);
        otherwise every record is parsed and checked as ``read`` does."""
        if self.format in ("mooncake", "kvplan", "azure") and not self.skip_bad:
            with _open(self.path) as f:
                n = sum(1 for line in f if line.strip())
            return n - (self.format != "mooncake")  # the kvplan header, the CSV header
        n = 0
        for _ in self.read():
            n += 1
        return n


# --------------------------------------------------------------------------- opening and detection


def _open(path: Path) -> IO[str]:
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
        return path.open(encoding="utf-8")
    except OSError as e:
        raise InputError(f"trace {path}: cannot open: {e.strerror or e}") from None


def _first_line(path: Path) -> str:
    with _open(path) as f:
        try:
            for line in f:
                if line.strip():
                    return line
        except (UnicodeDecodeError, OSError, EOFError) as e:
            raise InputError(f"trace {path}: cannot read: {e}") from None
    raise InputError(f"trace {path}: empty file")


def detect_format(path: Path) -> str:
    """The format of a trace file or directory, from its name and its first line."""
    if path.is_dir():
        return "kvtester"
    name = path.name.removesuffix(".gz")
    if name.endswith(".csv"):
        return "azure"
    if name.endswith(".json"):
        return "kvtester"
    line = _first_line(path)
    if line.startswith("TIMESTAMP,"):
        return "azure"
    try:
        first = json.loads(line)
    except json.JSONDecodeError:
        raise InputError(
            f"trace {path}: cannot tell the format (line 1 is not JSON): use --trace-format {'|'.join(FORMATS)}"
        ) from None
    if isinstance(first, dict):
        if "kvplan_trace" in first:
            return "kvplan"
        if "input_length" in first and isinstance(first.get("hash_ids"), list):
            return "mooncake"
        if isinstance(first.get("hash_ids"), dict):
            raise InputError(
                f"trace {path}: categorized hash_ids (RAGPulse) are not prefix-chained; convert the trace to "
                "kvplan JSONL with the chain you mean (see kvplan simulate --help)"
            )
    raise InputError(f"trace {path}: cannot tell the format from line 1: use --trace-format {'|'.join(FORMATS)}")


def open_trace(
    path: str | Path, fmt: str | None = None, *, skip_bad: bool = False, block_tokens: int | None = None
) -> Trace:
    """A ``Trace`` for a path; ``fmt`` overrides detection, ``block_tokens`` the format's block size."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"trace {p}: no such file or directory")
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--trace-format {fmt!r}: use one of {', '.join(FORMATS)}")
    kind = fmt or detect_format(p)
    if block_tokens is not None and block_tokens <= 0:
        raise InputError(f"--block-size must be positive, got {block_tokens}")
    files: tuple[Path, ...] = (p,)
    if kind == "kvtester" and p.is_dir():
        files = tuple(sorted(x for x in p.iterdir() if x.name.endswith((".json", ".json.gz")) and x.is_file()))
        if not files:
            raise InputError(f"trace {p}: a kv-cache-tester directory needs *.json files; found none")
    elif p.is_dir():
        raise InputError(f"trace {p}: is a directory; only kv-cache-tester traces are read from directories")
    if kind == "mooncake":
        bt = block_tokens or MOONCAKE_BLOCK_TOKENS
    elif kind == "kvtester":
        bt = block_tokens or _kvtester_block(files[0])
    elif kind == "kvplan":
        header = _kvplan_header(p)
        bt = block_tokens or int(header["block_size"])
    else:
        bt = 0
    return Trace(p, kind, bt, files, skip_bad)


# --------------------------------------------------------------------------- field checks


def _int(rec: dict[str, Any], key: str, *, default: int | None = None) -> int:
    v = rec.get(key)
    if v is None:
        if default is not None:
            return default
        raise _Bad(f"missing {key!r}")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _Bad(f"{key!r} must be a non-negative integer, got {v!r}")
    return v


def _check_listing(n_blocks: int, input_tokens: int, block_tokens: int) -> None:
    lo = input_tokens // block_tokens
    hi = cdiv(input_tokens, block_tokens)
    if not lo <= n_blocks <= hi:
        want = f"{lo}" if lo == hi else f"{lo} (full blocks) or {hi} (with the partial one)"
        raise _Bad(
            f"{n_blocks} block ids for {input_tokens} input tokens in {block_tokens}-token blocks: expected {want}"
        )


def _int_ids(v: object, key: str) -> list[int]:
    if not isinstance(v, list):
        raise _Bad(f"{key!r} must be a list of block ids")
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise _Bad(f"{key!r} holds {x!r}: ids must be non-negative integers")
    _check_distinct(v)
    return v


def _check_distinct(ids: list[Any]) -> None:
    if len(set(ids)) != len(ids):
        raise _Bad("a block id repeats within the request, which prefix-chained ids cannot do")


def _fail_or_skip(trace: Trace, stats: ReadStats, where: str, why: str) -> None:
    message = f"{where}: {why}"
    if not trace.skip_bad:
        raise InputError(f"{message} (--skip-bad skips and counts such lines)")
    stats.skip(message)


# --------------------------------------------------------------------------- Mooncake


def _read_mooncake(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    bt0 = trace.block_tokens
    index = 0
    last_arrival = 0
    loads = json.loads
    with _open(trace.path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                try:
                    rec = loads(line)
                except json.JSONDecodeError as e:
                    raise _Bad(f"not JSON ({e.msg})") from None
                if not isinstance(rec, dict):
                    raise _Bad("not a JSON object")
                length = _int(rec, "input_length")
                ids = _int_ids(rec.get("hash_ids"), "hash_ids")
                bt = rec.get("block_size", bt0)
                if isinstance(bt, bool) or not isinstance(bt, int) or bt <= 0:
                    raise _Bad(f"'block_size' must be a positive integer, got {bt!r}")
                if bt != bt0:
                    raise _Bad(f"block_size {bt} differs from the trace's {bt0} (use --block-size {bt})")
                _check_listing(len(ids), length, bt)
                ts = rec.get("timestamp")
                if ts is None:
                    arrival = last_arrival
                elif isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
                    raise _Bad(f"'timestamp' must be a non-negative number of milliseconds, got {ts!r}")
                else:
                    arrival = round(ts * 1000)
                out = _int(rec, "output_length", default=0)
            except _Bad as e:
                _fail_or_skip(trace, stats, f"{trace.path}:{lineno}", str(e))
                continue
            last_arrival = arrival
            yield Request(index, arrival, length, out, ids, lineno)
            index += 1


# --------------------------------------------------------------------------- kv-cache-tester


def _load_json_file(path: Path) -> Any:
    with _open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise _Bad(f"line {e.lineno}: not JSON ({e.msg})") from None
        except (UnicodeDecodeError, OSError, EOFError) as e:
            raise _Bad(f"cannot read: {e}") from None


def _kvtester_block(path: Path) -> int:
    try:
        doc = _load_json_file(path)
    except _Bad as e:
        raise InputError(f"{path}: {e}") from None
    bt = doc.get("block_size", KVTESTER_BLOCK_TOKENS) if isinstance(doc, dict) else None
    if isinstance(bt, bool) or not isinstance(bt, int) or bt <= 0:
        raise InputError(f"{path}: 'block_size' must be a positive integer, got {bt!r}")
    return bt


def _kvtester_entries(doc: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """(absolute arrival in us, where, record) of every LLM request, sub-agents flattened."""
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
        raise _Bad("not a kv-cache-tester conversation (no 'requests' list)")
    out: list[tuple[int, str, dict[str, Any]]] = []
    for i, entry in enumerate(doc["requests"]):
        if not isinstance(entry, dict):
            out.append((0, f"requests[{i}]", {"_bad": "not a JSON object"}))
            continue
        t = entry.get("t", 0)
        if isinstance(t, bool) or not isinstance(t, int | float) or t < 0:
            out.append((0, f"requests[{i}]", {"_bad": f"'t' must be a non-negative number, got {t!r}"}))
            continue
        if entry.get("type") == "subagent":
            subs = entry.get("requests")
            if not isinstance(subs, list):
                out.append((0, f"requests[{i}]", {"_bad": "sub-agent entry without a 'requests' list"}))
                continue
            for j, sub in enumerate(subs):
                st = sub.get("t", 0) if isinstance(sub, dict) else None
                if not isinstance(sub, dict) or isinstance(st, bool) or not isinstance(st, int | float) or st < 0:
                    out.append((0, f"requests[{i}].requests[{j}]", {"_bad": "not a request with a non-negative 't'"}))
                    continue
                out.append((round((t + st) * 1_000_000), f"requests[{i}].requests[{j}]", sub))
        else:
            out.append((round(t * 1_000_000), f"requests[{i}]", entry))
    out.sort(key=lambda e: e[0])
    return out


def _read_kvtester(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    bt = trace.block_tokens
    index = 0
    offset = 0
    for file_no, path in enumerate(trace.files):
        try:
            doc = _load_json_file(path)
            fbt = doc.get("block_size", bt) if isinstance(doc, dict) else bt
            if fbt != bt:
                raise _Bad(f"block_size {fbt!r} differs from the trace's {bt}")
            entries = _kvtester_entries(doc)
        except _Bad as e:
            _fail_or_skip(trace, stats, str(path), str(e))
            continue
        namespace = file_no * _ID_LIMIT
        last = 0
        for n, (t_us, where, rec) in enumerate(entries, 1):
            try:
                if "_bad" in rec:
                    raise _Bad(rec["_bad"])
                length = _int(rec, "in")
                out = _int(rec, "out", default=0)
                ids = _int_ids(rec.get("hash_ids"), "hash_ids")
                _check_listing(len(ids), length, bt)
                if any(x >= _ID_LIMIT for x in ids):
                    raise _Bad(f"hash ids must be below 2**40 (one namespace per file), got {max(ids)}")
            except _Bad as e:
                _fail_or_skip(trace, stats, f"{path.name}: {where}", str(e))
                continue
            last = max(last, t_us)
            blocks = [namespace + x for x in ids] if namespace else ids
            yield Request(index, offset + t_us, length, out, blocks, n, file_no)
            index += 1
        offset += last


# --------------------------------------------------------------------------- Azure


def _azure_time_us(text: str) -> int:
    """'2023-11-16 18:17:03.9799600' -> microseconds since 0001-01-01 (fraction truncated to microseconds)."""
    day, _, clock = text.strip().partition(" ")
    y, m, d = (int(x) for x in day.split("-"))
    hh, mm, ss = clock.split(":")
    sec, _, frac = ss.partition(".")
    micros = int((frac + "000000")[:6])
    seconds = date(y, m, d).toordinal() * 86_400 + int(hh) * 3600 + int(mm) * 60 + int(sec)
    return seconds * 1_000_000 + micros


def _read_azure(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    index = 0
    start: int | None = None
    with _open(trace.path) as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:3]] != ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]:
            raise InputError(f"{trace.path}:1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens")
        for row in rows:
            lineno = rows.line_num
            if not row or not "".join(row).strip():
                continue
            try:
                if len(row) < 3:
                    raise _Bad(f"expected 3 columns, got {len(row)}")
                try:
                    t = _azure_time_us(row[0])
                except (ValueError, TypeError):
                    raise _Bad(f"TIMESTAMP {row[0]!r} is not 'YYYY-MM-DD HH:MM:SS.fraction'") from None
                try:
                    length, out = int(row[1]), int(row[2])
                except ValueError:
                    raise _Bad(f"token counts must be integers, got {row[1]!r}, {row[2]!r}") from None
                if length < 0 or out < 0:
                    raise _Bad("token counts must be non-negative")
            except _Bad as e:
                _fail_or_skip(trace, stats, f"{trace.path}:{lineno}", str(e))
                continue
            if start is None:
                start = t
            yield Request(index, t - start, length, out, None, lineno)
            index += 1


# --------------------------------------------------------------------------- kvplan JSONL


def _kvplan_header(path: Path) -> dict[str, Any]:
    line = _first_line(path)
    try:
        head = json.loads(line)
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or head.get("kvplan_trace") != 1:
        raise InputError(f'{path}:1: a kvplan trace starts with a header like {{"kvplan_trace": 1, "block_size": 64}}')
    bt = head.get("block_size")
    if isinstance(bt, bool) or not isinstance(bt, int) or bt <= 0:
        raise InputError(f"{path}:1: 'block_size' must be a positive integer, got {bt!r}")
    if not isinstance(head.get("chained", True), bool):
        raise InputError(f"{path}:1: 'chained' must be true or false")
    return head


def _read_kvplan(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    bt = trace.block_tokens
    chained = bool(_kvplan_header(trace.path).get("chained", True))
    names: dict[object, int] = {}
    index = 0
    last_arrival = 0
    header_seen = False
    with _open(trace.path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if not header_seen:
                header_seen = True
                continue
            try:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise _Bad(f"not JSON ({e.msg})") from None
                if not isinstance(rec, dict):
                    raise _Bad("not a JSON object")
                length = _int(rec, "input_tokens")
                out = _int(rec, "output_tokens", default=0)
                raw = rec.get("blocks")
                if not isinstance(raw, list):
                    raise _Bad("'blocks' must be a list of block ids")
                for x in raw:
                    if isinstance(x, bool) or not isinstance(x, int | str):
                        raise _Bad(f"'blocks' holds {x!r}: ids are integers or strings")
                _check_listing(len(raw), length, bt)
                if chained:
                    _check_distinct(raw)
                ts = rec.get("arrival_s")
                if ts is None:
                    arrival = last_arrival
                elif isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
                    raise _Bad(f"'arrival_s' must be a non-negative number of seconds, got {ts!r}")
                else:
                    arrival = round(ts * 1_000_000)
            except _Bad as e:
                _fail_or_skip(trace, stats, f"{trace.path}:{lineno}", str(e))
                continue
            blocks: list[int] = []
            parent: object = None
            for x in raw:
                name: object = (parent, x) if not chained else x
                key = names.get(name)
                if key is None:
                    key = names[name] = len(names)
                blocks.append(key)
                parent = key
            last_arrival = arrival
            yield Request(index, arrival, length, out, blocks, lineno)
            index += 1
