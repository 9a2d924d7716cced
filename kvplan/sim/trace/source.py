"""A trace on disk (``Trace``: its format, block size and files), how one is opened and its format detected, and
``CompactTrace``: a trace parsed once into flat arrays, to replay many times."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim.lines import count_lines, raw_lines
from kvplan.sim.lines import counts as _counts
from kvplan.sim.trace.formats import (
    MOONCAKE_BLOCK_TOKENS,
    _kvplan_header,
    _kvtester_block,
    _read_azure,
    _read_kvplan,
    _read_kvtester,
    _read_mooncake,
)
from kvplan.sim.trace.records import ReadStats, Request, _Bad, _first_line, _json

FORMATS = ("mooncake", "kvtester", "azure", "kvplan")


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
            n = count_lines(self.path)
            if n is None:
                n = sum(1 for line in raw_lines(self.path) if _counts(line))
            return n - (self.format != "mooncake")  # the kvplan header, the CSV header
        n = 0
        for _ in self.read():
            n += 1
        return n


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
    if line.text.startswith("TIMESTAMP,"):
        return "azure"
    try:
        first = _json(line.text)
    except _Bad as e:
        raise InputError(
            f"trace {path}:{line.number}: cannot tell the format ({e}): use --trace-format {'|'.join(FORMATS)}"
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
    if not p.is_dir():
        limits.check_regular(p, "trace")
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--trace-format {fmt!r}: use one of {', '.join(FORMATS)}")
    if block_tokens is not None:
        limits.bounded_int(block_tokens, name="--block-size", low=1, high=limits.MAX_REQUEST_TOKENS)
    kind = fmt or detect_format(p)
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
        bt = block_tokens or _kvtester_block(files, skip_bad)
    elif kind == "kvplan":
        header = _kvplan_header(p)
        bt = block_tokens or header["block_size"]
    else:
        bt = 0
    return Trace(p, kind, bt, files, skip_bad)


# --------------------------------------------------------------------------- one parse, shared


_BIG_ID = 1 << 63


class CompactTrace:
    """A trace parsed once into flat integer arrays (8 bytes a field and a block id, no object per request), to
    replay as many times as needed: a per-capacity sweep reads the file once and its worker processes, forked
    after, share the arrays' pages instead of each parsing the file again."""

    def __init__(self, trace: Trace) -> None:
        stats = ReadStats()
        self.arrival = array("q")
        self.input = array("q")
        self.output = array("q")
        self.line = array("q")
        self.file = array("q")
        self.ids = array("q")
        """Block ids below 2**63 as they are; the larger ones (the readers allow up to ``limits.MAX_INT_DIGITS``
        digits) stored as ``-1 - n`` (n: order of first sight) and read back as ``2**63 + n``: one to one, and
        every id in 8 bytes."""
        self.starts = array("q", [0])
        big: dict[int, int] = {}
        """Request i's blocks are ``ids[starts[i]:starts[i + 1]]``."""
        self.has_blocks = trace.has_blocks
        for r in trace.read(stats):
            self.arrival.append(r.arrival_us)
            self.input.append(r.input_tokens)
            self.output.append(r.output_tokens)
            self.line.append(r.line)
            self.file.append(r.file)
            if r.blocks is not None:
                at = len(self.ids)
                try:
                    self.ids.extend(r.blocks)
                except OverflowError:  # an id past 2**64 - 1: extend stopped part way
                    del self.ids[at:]
                    self.ids.extend(b if b < _BIG_ID else -1 - big.setdefault(b, len(big)) for b in r.blocks)
            self.starts.append(len(self.ids))
        self.bad = stats.bad
        self.renamed = bool(big)

    def __len__(self) -> int:
        return len(self.input)

    def read(self) -> Iterator[Request]:
        """The requests in trace order, as ``Trace.read`` gives them."""
        ids, st, blocks, renamed = self.ids, self.starts, self.has_blocks, self.renamed
        for i in range(len(self.input)):
            got = ids[st[i] : st[i + 1]].tolist() if blocks else None
            if renamed and got:
                got = [b if b >= 0 else _BIG_ID - 1 - b for b in got]
            yield Request(i, self.arrival[i], self.input[i], self.output[i], got, self.line[i], self.file[i])
