"""Hostile and broken traces (issue 10): regular files only, bounded lines, per-line UTF-8, bounded numbers,
gzip damage, and --skip-bad alike in every format. Each test names the defect it guards against."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim.trace import ReadStats, open_trace
from tests.sim.test_sim_cli import fail, invoke

GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}\n'
"""600 tokens in 512-token blocks: ceil(600 / 512) = 2 ids (the last block partial)."""
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZURE_GOOD = "2023-11-16 18:17:03.9799600,100,10\n"
KVPLAN_HEADER = '{"kvplan_trace": 1, "block_size": 64}\n'
KVPLAN_GOOD = '{"arrival_s": 0, "input_tokens": 128, "blocks": [1, 2]}\n'  # 128 / 64 = 2 blocks


def fill(template: str, value: object) -> str:
    """The template with ``@`` replaced by the value (JSON text here is full of braces)."""
    return template.replace("@", str(value))


def _read(path: Path, fmt: str | None = None, skip_bad: bool = False) -> tuple[int, ReadStats]:
    stats = ReadStats()
    n = sum(1 for _ in open_trace(path, fmt, skip_bad=skip_bad).read(stats))
    return n, stats


def _kvplan_cli(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process: a reader that blocks or loops fails the test by timing out."""
    code = "import sys; from kvplan.cli import main; sys.argv = ['kvplan', *sys.argv[1:]]; main()"
    env = {**os.environ, "KVPLAN_FORMAT": "json"}
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env
    )


def _one_error_line(stderr: str, *needles: str) -> None:
    assert stderr.startswith("kvplan: error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    for n in needles:
        assert n in stderr, stderr


# --------------------------------------------------------------------------- files that are not files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    # defect: open() on a FIFO blocks until a writer comes, so `kvplan simulate fifo.jsonl` hung for ever
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    r = _kvplan_cli("simulate", fifo, timeout=30)
    assert r.returncode == 2, r.stderr
    _one_error_line(r.stderr, f"trace {fifo}", "not a regular file")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_device_is_refused(device: str) -> None:
    # defect: /dev/zero as a Mooncake trace is one endless line (MemoryError or a hang)
    r = _kvplan_cli("simulate", device, "--trace-format", "mooncake", timeout=30)
    assert r.returncode == 2, r.stderr
    _one_error_line(r.stderr, device, "not a regular file")


def test_kvtester_directory_still_reads(tmp_path: Path) -> None:
    # a directory is fine for kv-cache-tester (its *.json files are regular files); a FIFO inside is not read
    (tmp_path / "a.json").write_text(json.dumps({"requests": [{"t": 0, "in": 128, "hash_ids": [1, 2]}]}))
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "b.json")
    n, stats = _read(tmp_path)
    assert (n, stats.bad) == (1, 0)


# --------------------------------------------------------------------------- long lines, gzip


def test_gzip_bomb_line_is_cut_while_streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # defect: a small .gz that expands to one huge line was read whole (a 4 GiB line from a 4 MB file);
    # here the cap is 64 KiB and the line 8 MiB, so a reader that holds the line peaks above 8 MiB
    monkeypatch.setattr(limits, "MAX_LINE_CHARS", 64 << 10)
    p = tmp_path / "bomb.jsonl.gz"
    with gzip.open(p, "wb") as g:
        g.write(GOOD.encode())
        g.write(b"x" * (8 << 20) + b"\n")
        g.write(GOOD.encode())
    assert p.stat().st_size < 64 << 10
    with pytest.raises(InputError, match=rf"{p}:2: longer than kvplan's limit of 65,536 bytes a line"):
        _read(p)
    tracemalloc.start()
    try:
        n, stats = _read(p, skip_bad=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (n, stats.bad) == (2, 1)  # lines 1 and 3 are read, line 2 is skipped
    assert peak < 2 << 20, f"peak {peak:,} B: the long line was held"


def test_line_at_the_cap_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # boundary: a line of exactly MAX_LINE_CHARS bytes before its newline is read; one byte more is not
    line = GOOD.rstrip("\n")
    p = tmp_path / "t.jsonl"
    p.write_text(GOOD + GOOD)
    monkeypatch.setattr(limits, "MAX_LINE_CHARS", len(line))
    assert _read(p, "mooncake")[0] == 2
    monkeypatch.setattr(limits, "MAX_LINE_CHARS", len(line) - 1)
    with pytest.raises(InputError, match=rf"{p}:1: longer than"):
        _read(p, "mooncake")


def _truncated_gz(tmp_path: Path, rows: int = 20_000) -> Path:
    data = b"".join(
        f'{{"timestamp": {i}, "input_length": 600, "hash_ids": [{2 * i}, {2 * i + 1}]}}\n'.encode() for i in range(rows)
    )
    packed = gzip.compress(data)
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(packed[: len(packed) // 2])
    return p


def test_truncated_gzip_is_exit_2_with_the_line(tmp_path: Path) -> None:
    # defect: a truncated .gz raised EOFError through the CLI ("kvplan: aborted", exit 1)
    p = _truncated_gz(tmp_path)
    for extra in ([], ["--skip-bad"]):  # damage to the stream is not a malformed record: no flag skips it
        err = fail(invoke(p, *extra), 2, f"trace {p}:", "the gzip stream is damaged or cut short")
        line = int(err.split(f"{p}:", 1)[1].split(":", 1)[0])
        assert 1 < line <= 20_000  # the line reached, somewhere inside the file


def test_not_gzip_at_all(tmp_path: Path) -> None:
    p = tmp_path / "plain.jsonl.gz"
    p.write_text(GOOD)
    with pytest.raises(InputError, match=rf"trace {p}:1: the gzip stream is damaged"):
        _read(p, "mooncake")


def test_trace_size_cap_counts_decompressed_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.jsonl.gz"
    with gzip.open(p, "wb") as g:
        g.write(GOOD.encode() * 100)  # 100 lines of len(GOOD) bytes
    monkeypatch.setenv(limits.TRACE.env, str(len(GOOD) * 50))
    with pytest.raises(limits.LimitError, match=r":51: over kvplan's trace limit"):  # line 51 passes the cap
        _read(p, "mooncake")


# --------------------------------------------------------------------------- numbers and JSON


@pytest.mark.parametrize(
    ("name", "fmt", "head", "bad"),
    [
        ("t.jsonl", "mooncake", "", '{"timestamp": 1, "input_length": @, "hash_ids": [0]}\n'),
        ("t.jsonl", "kvplan", KVPLAN_HEADER, '{"input_tokens": @, "blocks": [1]}\n'),
        ("t.csv", "azure", AZURE_HEADER, "2023-11-16 18:17:04.0,@,1\n"),
    ],
)
def test_huge_integers_are_bad_lines(tmp_path: Path, name: str, fmt: str, head: str, bad: str) -> None:
    # defect: a 5,000-digit integer passed Python's int-string limit (ValueError traceback)
    good = {"mooncake": GOOD, "kvplan": KVPLAN_GOOD, "azure": AZURE_GOOD}[fmt]
    p = tmp_path / name
    p.write_text(head + good + fill(bad, "9" * 5000) + good)
    line = 2 + bool(head)
    with pytest.raises(InputError, match=rf"{p}:{line}: .*5,000 digits is past kvplan's limit of 30"):
        _read(p, fmt)
    n, stats = _read(p, fmt, skip_bad=True)
    assert (n, stats.bad) == (2, 1)


def test_thirty_digit_ids_are_read(tmp_path: Path) -> None:
    # boundary: MAX_INT_DIGITS = 30 digits is still an id; 31 is not
    p = tmp_path / "t.jsonl"
    p.write_text(fill('{"input_length": 512, "hash_ids": [@]}\n', ("9" * 30)))
    assert _read(p, "mooncake")[0] == 1
    p.write_text(fill('{"input_length": 512, "hash_ids": [@]}\n', ("9" * 31)))
    with pytest.raises(InputError, match="31 digits"):
        _read(p, "mooncake")


def test_deep_json_is_a_bad_line_not_a_recursion_error(tmp_path: Path) -> None:
    # defect: JSON nested 10,000 deep raised RecursionError in json.loads
    p = tmp_path / "t.jsonl"
    p.write_text(GOOD + "[" * 10_000 + "]" * 10_000 + "\n" + GOOD)
    with pytest.raises(InputError, match=rf"{p}:2: JSON nested deeper than kvplan's limit of 64"):
        _read(p, "mooncake")
    assert _read(p, "mooncake", skip_bad=True)[1].bad == 1
    d = tmp_path / "kvt"
    d.mkdir()
    (d / "a.json").write_text('{"requests": ' + "[" * 10_000 + "]" * 10_000 + "}")
    (d / "b.json").write_text(json.dumps({"requests": [{"t": 0, "in": 128, "hash_ids": [1, 2]}]}))
    with pytest.raises(InputError, match=r"a\.json: JSON nested deeper"):
        _read(d)
    n, stats = _read(d, skip_bad=True)
    assert (n, stats.bad) == (1, 1)


def test_depth_at_the_limit_is_fine(tmp_path: Path) -> None:
    # boundary: a record nested exactly MAX_DEPTH deep (the object plus 63 lists) is JSON kvplan reads;
    # Mooncake then refuses its 'hash_ids' for not being a list of integers, not for the depth
    nested = "[" * (limits.MAX_DEPTH - 1) + "]" * (limits.MAX_DEPTH - 1)
    p = tmp_path / "t.jsonl"
    p.write_text(fill('{"input_length": 0, "hash_ids": @}\n', nested))
    with pytest.raises(InputError, match="ids must be non-negative integers"):
        _read(p, "mooncake")
    p.write_text(fill('{"input_length": 0, "hash_ids": [@]}\n', nested))  # one deeper
    with pytest.raises(InputError, match="nested deeper"):
        _read(p, "mooncake")


@pytest.mark.parametrize("ts", ["NaN", "Infinity", "-Infinity", "1e400", "-1", "1e300", '"3"'])
def test_non_finite_or_absurd_timestamps(tmp_path: Path, ts: str) -> None:
    # defect: NaN / Infinity / 1e400 timestamps reached round() (ValueError, OverflowError tracebacks)
    p = tmp_path / "t.jsonl"
    p.write_text(GOOD + fill('{"timestamp": @, "input_length": 600, "hash_ids": [0, 1]}\n', ts))
    with pytest.raises(InputError, match=rf"{p}:2: "):
        _read(p, "mooncake")
    k = tmp_path / "k.jsonl"
    k.write_text(KVPLAN_HEADER + fill('{"arrival_s": @, "input_tokens": 128, "blocks": [1, 2]}\n', ts))
    with pytest.raises(InputError, match=rf"{k}:2: "):
        _read(k, "kvplan")
    d = tmp_path / "kvt"
    d.mkdir()
    (d / "a.json").write_text(fill('{"requests": [{"t": @, "in": 128, "hash_ids": [1, 2]}]}', ts))
    with pytest.raises(InputError, match=r"a.json: "):
        _read(d)


def test_latest_time_is_accepted(tmp_path: Path) -> None:
    # boundary: MAX_TRACE_SECONDS = 2**40 s is 2**40 * 1,000 ms; one more millisecond is refused
    p = tmp_path / "t.jsonl"
    top = limits.MAX_TRACE_SECONDS * 1000
    p.write_text(fill('{"timestamp": @, "input_length": 512, "hash_ids": [1]}\n', top))
    assert next(open_trace(p, "mooncake").read()).arrival_us == top * 1000
    p.write_text(fill('{"timestamp": @, "input_length": 512, "hash_ids": [1]}\n', (top + 1)))
    with pytest.raises(InputError, match="between 0 and 1,099,511,627,776,000 milliseconds"):
        _read(p, "mooncake")


def test_request_length_cap(tmp_path: Path) -> None:
    # defect: an Azure row with a 1e10-token context was accepted and replayed page by page
    p = tmp_path / "t.csv"
    top = limits.MAX_REQUEST_TOKENS  # 2**24 = 16,777,216
    p.write_text(AZURE_HEADER + f"2023-11-16 18:17:03.1,{top},0\n" + "2023-11-16 18:17:04.1,10000000000,0\n")
    with pytest.raises(InputError, match=rf"{p}:3: 'ContextTokens' is 10,000,000,000 tokens, past .*16,777,216"):
        _read(p, "azure")
    n, stats = _read(p, "azure", skip_bad=True)
    assert (n, stats.bad) == (1, 1)  # the row of exactly 2**24 tokens is read


def test_azure_field_past_the_csv_module_limit(tmp_path: Path) -> None:
    # defect: a field over csv's 131,072-character limit raised csv.Error (traceback)
    p = tmp_path / "t.csv"
    p.write_text(AZURE_HEADER + "x" * 200_000 + ",1,1\n" + AZURE_GOOD)
    with pytest.raises(InputError, match=rf"{p}:2: TIMESTAMP 'xxx"):
        _read(p, "azure")
    assert _read(p, "azure", skip_bad=True)[0] == 1


@pytest.mark.parametrize("fmt", ["mooncake", "azure", "kvplan"])
def test_invalid_utf8_is_a_bad_line_with_its_number(tmp_path: Path, fmt: str) -> None:
    # defect: invalid UTF-8 raised UnicodeDecodeError mid-read, even with --skip-bad
    head, good = {"mooncake": ("", GOOD), "azure": (AZURE_HEADER, AZURE_GOOD), "kvplan": (KVPLAN_HEADER, KVPLAN_GOOD)}[
        fmt
    ]
    p = tmp_path / "t.txt"
    p.write_bytes(head.encode() + good.encode() + b"\xff\xfe garbage\n" + good.encode())
    line = 2 + bool(head)
    with pytest.raises(InputError, match=rf"{p}:{line}: not valid UTF-8 \(byte 0xff\)"):
        _read(p, fmt)
    n, stats = _read(p, fmt, skip_bad=True)
    assert (n, stats.bad) == (2, 1)


def test_invalid_utf8_in_the_cli_with_skip_bad(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(GOOD.encode() + b'{"timestamp": 1, "input_length": 600, "hash_ids": [0, 1], "x": "\xff"}\n')
    fail(invoke(p), 2, f"{p}:2: not valid UTF-8")
    r = invoke(p, "--skip-bad")
    assert r.exit_code == 0 and r.stderr == "kvplan: warning: skipped 1 malformed record(s) (--skip-bad)\n"


# --------------------------------------------------------------------------- --skip-bad alike in every format


def test_kvtester_skip_bad_is_like_jsonl(tmp_path: Path) -> None:
    # defect: an unreadable first kv-cache-tester file was exit 2 even with --skip-bad (its block size was read
    # before anything else), while the same damage on a JSONL line is skipped
    (tmp_path / "a.json").write_bytes(b"\xff\xfe not json")
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b'{"requests": []}')[:10])  # truncated
    (tmp_path / "c.json").write_text(json.dumps({"requests": [{"t": 0, "in": 128, "hash_ids": [1, 2]}]}))
    fail(invoke(tmp_path), 2, "a.json: line 1: not valid UTF-8", "--skip-bad")
    r = invoke(tmp_path, "--skip-bad", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == "kvplan: warning: skipped 2 malformed record(s) (--skip-bad)\n"
    d = json.loads(r.stdout)
    assert d["trace"]["bad_records"] == 2 and d["window"]["requests"] == 1


def test_kvtester_file_size_cap_is_a_bad_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = json.dumps({"requests": [{"t": 0, "in": 128, "hash_ids": [1, 2]}]})
    (tmp_path / "a.json").write_text(doc + " " * 100)
    (tmp_path / "b.json").write_text(doc)
    monkeypatch.setenv(limits.TRACE_JSON.env, str(len(doc) + 50))  # b fits, a is 50 bytes over
    with pytest.raises(InputError, match=r"a.json: over kvplan's trace-json limit"):
        _read(tmp_path)
    n, stats = _read(tmp_path, skip_bad=True)
    assert (n, stats.bad) == (1, 1)


def test_block_size_option_is_bounded(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(GOOD)
    with pytest.raises(InputError, match="--block-size: 0 is below 1"):
        open_trace(p, block_tokens=0)
    with pytest.raises(InputError, match="--block-size: 16777217 is above"):
        open_trace(p, block_tokens=limits.MAX_REQUEST_TOKENS + 1)
