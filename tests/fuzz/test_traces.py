"""Fuzz the trace readers (issue 10): Mooncake, kv-cache-tester, Azure and kvplan JSONL.

Random bytes, random interleavings of real lines (shared/traces when it is beside the repository, otherwise
lines in each format written here), truncation, ANSI codes, CRLF, binary noise, huge numbers, deep nesting and
gzip (whole or cut short). `kvplan simulate` on each ends in exit 0 (a replay), or 2 with one error line; never a
traceback, never exit 4, and within a work budget. The readers on their own yield requests whose numbers are in
kvplan's bounds, or raise InputError.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan import limits
from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.sim.trace import ReadStats, open_trace
from tests.fuzz.conftest import within_budget

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"
runner = CliRunner(env={"KVPLAN_FORMAT": None})


def _real_lines(path: Path, n: int, skip: int = 0) -> list[str]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(n + skip), f, strict=False)][skip:]


MOONCAKE = _real_lines(SHARED / "mooncake" / "conversation_trace.jsonl", 30) or [
    json.dumps({"timestamp": i * 10, "input_length": 600 + 512 * i, "output_length": 5, "hash_ids": list(range(i + 2))})
    for i in range(30)
]
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
AZURE = _real_lines(SHARED / "azure-llm-2023" / "AzureLLMInferenceTrace_code.csv", 30, skip=1) or [
    f"2023-11-16 18:17:{i:02d}.9799600,{100 + i},{i}" for i in range(30)
]
KVPLAN_HEADER = '{"kvplan_trace": 1, "block_size": 64, "chained": false}'
KVPLAN = [
    json.dumps({"arrival_s": i / 10, "input_tokens": 64 * (i % 5 + 1), "blocks": [f"b{j}" for j in range(i % 5 + 1)]})
    for i in range(30)
]
_KVT = sorted(SHARED.glob("kv-cache-tester-claude-code/*.json"))[:3]
KVTESTER = [p.read_text(encoding="utf-8") for p in _KVT if p.stat().st_size < 200_000] or [
    json.dumps(
        {
            "block_size": 64,
            "requests": [
                {"t": 0, "in": 128, "out": 4, "hash_ids": [1, 2]},
                {"t": 1.5, "type": "subagent", "requests": [{"t": 0.5, "in": 192, "hash_ids": [1, 2, 3]}]},
            ],
        }
    )
]

NOISE = [
    "\x1b[31m",
    "\x1b[0m",
    "[32m",
    "\r",
    "\ufeff",
    "9" * 5000,
    "1e400",
    "NaN",
    "-Infinity",
    "[" * 10_000,
    '{"a":' * 3000,
    '"\\ud800"',
    "null",
    "{}",
    "[]",
    ",,,,",
    '"',
    "\x00",
]

noise_bytes = st.one_of(
    st.binary(max_size=64), st.sampled_from(NOISE).map(str.encode), st.just(b"\xff\xfe\xfd"), st.just(b"\x80" * 9)
)


@st.composite
def mutated(draw: st.DrawFn, header: str | None, lines: list[str]) -> bytes:
    """Real lines in a random order, some mutated, with noise lines among them; maybe CRLF, maybe cut short."""
    picked = draw(st.lists(st.sampled_from(lines), min_size=0, max_size=12))
    out: list[bytes] = []
    if header is not None and draw(st.integers(0, 4)) > 0:  # mostly with its header
        out.append(header.encode())
    for line in picked:
        raw = line.encode()
        how = draw(st.integers(0, 9))
        if how == 0:
            raw = raw[: draw(st.integers(0, len(raw)))]  # truncated line
        elif how == 1:
            at = draw(st.integers(0, len(raw)))
            raw = raw[:at] + draw(noise_bytes) + raw[at:]  # noise inside a line
        elif how == 2:
            out.append(draw(noise_bytes))  # a noise line before it
        out.append(raw)
    sep = draw(st.sampled_from([b"\n", b"\r\n", b"\n\n"]))
    data = sep.join(out) + draw(st.sampled_from([b"", sep]))
    if draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(0, len(data)))]  # the file cut short
    return data


def _check_cli(args: list[str]) -> None:
    r = within_budget(lambda: runner.invoke(app, ["simulate", *args]), args)
    detail = f"exit {r.exit_code}, stderr {r.stderr[-600:]!r}, exception {r.exception!r}"
    assert r.exception is None or isinstance(r.exception, SystemExit), detail
    assert r.exit_code in (0, 2), detail
    assert "Traceback" not in r.stderr, detail
    if r.exit_code == 2:
        assert r.stderr.startswith("kvplan: error: ") and r.stderr.count("\n") == 1, detail
    else:
        assert r.stderr in ("",) or r.stderr.startswith("kvplan: warning: skipped "), detail
        assert r.stderr.count("\n") <= 1, detail


def _check_reader(path: Path, fmt: str, skip_bad: bool) -> None:
    try:
        tr = open_trace(path, fmt, skip_bad=skip_bad)
        for r in tr.read(ReadStats()):
            assert 0 <= r.input_tokens <= limits.MAX_REQUEST_TOKENS
            assert 0 <= r.output_tokens <= limits.MAX_REQUEST_TOKENS
            # Azure times count from the first row, so a row before it is negative (occupancy mode refuses it)
            assert abs(r.arrival_us) <= 2 * limits.MAX_TRACE_SECONDS * 1_000_000
    except InputError as e:
        assert "\n" not in str(e)


FORMATS = {
    "mooncake": (None, MOONCAKE, "t.jsonl", []),
    "kvplan": (KVPLAN_HEADER, KVPLAN, "t.jsonl", []),
    "azure": (AZURE_HEADER, AZURE, "t.csv", ["--semantics", "sglang", "--capacity", "1M"]),
}

fuzz = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _line_format_case(fmt: str, data: bytes, skip_bad: bool, packed: int) -> None:
    _, _, name, extra = FORMATS[fmt]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        if packed:
            path = path.with_name(name + ".gz")
            blob = gzip.compress(data)
            path.write_bytes(blob if packed == 1 else blob[: len(blob) * 2 // 3])  # 2: a truncated .gz
        else:
            path.write_bytes(data)
        _check_reader(path, fmt, skip_bad)
        _check_cli([str(path), "--trace-format", fmt, *extra, *(["--skip-bad"] if skip_bad else [])])


@fuzz
@given(data=st.data(), skip_bad=st.booleans(), packed=st.sampled_from([0, 0, 1, 2]))
def test_mooncake(data: st.DataObject, skip_bad: bool, packed: int) -> None:
    _line_format_case("mooncake", data.draw(mutated(None, MOONCAKE)), skip_bad, packed)


@fuzz
@given(data=st.data(), skip_bad=st.booleans(), packed=st.sampled_from([0, 0, 1, 2]))
def test_kvplan_jsonl(data: st.DataObject, skip_bad: bool, packed: int) -> None:
    _line_format_case("kvplan", data.draw(mutated(KVPLAN_HEADER, KVPLAN)), skip_bad, packed)


@fuzz
@given(data=st.data(), skip_bad=st.booleans(), packed=st.sampled_from([0, 0, 1, 2]))
def test_azure(data: st.DataObject, skip_bad: bool, packed: int) -> None:
    _line_format_case("azure", data.draw(mutated(AZURE_HEADER, AZURE)), skip_bad, packed)


@fuzz
@given(raw=st.binary(max_size=2048), fmt=st.sampled_from(sorted(FORMATS)), skip_bad=st.booleans())
def test_random_bytes_in_every_line_format(raw: bytes, fmt: str, skip_bad: bool) -> None:
    _line_format_case(fmt, raw, skip_bad, 0)


@st.composite
def kvtester_doc(draw: st.DrawFn) -> bytes:
    raw = draw(st.sampled_from(KVTESTER)).encode()
    how = draw(st.integers(0, 5))
    if how == 0:
        return raw[: draw(st.integers(0, len(raw)))]
    if how == 1:
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(noise_bytes) + raw[at:]
    if how == 2:
        return draw(st.binary(max_size=256))
    if how == 3:  # a value swapped for a hostile one
        doc = json.loads(raw)
        reqs = doc.get("requests") or [{}]
        target = reqs[draw(st.integers(0, len(reqs) - 1))]
        key = draw(st.sampled_from(["t", "in", "out", "hash_ids", "type", "requests"]))
        value = draw(st.sampled_from(["1e400", "NaN", "9" * 5000, "-1", '"x"', "[" * 200 + "]" * 200, "null", "[-1]"]))
        target[key] = "@@"
        return json.dumps(doc).replace('"@@"', value).encode()
    return raw


@fuzz
@given(docs=st.lists(kvtester_doc(), min_size=1, max_size=3), skip_bad=st.booleans(), packed=st.booleans())
def test_kvtester(docs: list[bytes], skip_bad: bool, packed: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        for i, doc in enumerate(docs):
            if packed and i == 0:
                blob = gzip.compress(doc)
                (Path(d) / f"c{i}.json.gz").write_bytes(blob[: len(blob) // 2] if i % 2 == 0 else blob)
            else:
                (Path(d) / f"c{i}.json").write_bytes(doc)
        _check_reader(Path(d), "kvtester", skip_bad)
        _check_cli([d, *(["--skip-bad"] if skip_bad else [])])
