"""Hostile logs (issue 10): every pattern of the parser is linear, wrapped lines join in linear time, long
figures are not converted, and log files are streamed (regular files only, a bounded readline, limits.LOG)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from kvplan import limits
from kvplan.runbook.parse import Args, LogError, log_lines, parse_log, records
from tests.runbook.conftest import LOGS, parse_patterns
from tests.work import assert_linear

N = 1 << 20
"""1 MiB of pathological text per line (the line cap, limits.MAX_LINE_CHARS). Each pattern runs on a quarter of
it and on all of it: a linear pattern's CPU time grows 4x, a quadratic one's 16x (seconds at 1 MiB)."""

# For each pattern: (a text that starts a match, the characters the pattern would loop on after it).
PATHOLOGICAL: dict[str, list[tuple[str, str]]] = {
    "_ANSI": [("\x1b[", "0"), ("\x1b[", " "), ("\x1b]", "a"), ("[1", ";1")],
    "_START": [
        ("(", "a"),
        ("(a ", "b"),
        ("(a pid=", "1"),
        ("INFO", " "),
        ("INFO 03-01 12:00:00.", "1"),
        ("[2026-03-01 12:00:00", "x"),
        ("[2026-03-01 12:00:00.", "1"),
    ],
    "_CONTAINER": [("", "a"), ("a", " "), ("2026-03-01 12:00:00", "0"), ("2026-03-01T", ":"), (">", " "), ("▎", " ")],
    "_ARG_INT": [("-", "1"), ("", "1")],
    "_ARG_NUMBER": [("1.", "1"), ("", "1")],
    "_DICT_ITEM": [("'", "a"), ("'a':", " "), ("'a': '", "b"), ("'a': ", "b")],
    "_LOAD_AVAIL": [("avail mem=", "1"), ("avail mem=1.", "1")],
    "_LOAD_USAGE": [("mem usage=", "1")],
    "_LOAD_TYPE": [("type=", "a")],
    "_LOAD_DTYPE": [("dtype=", "a.")],
    "_LOAD_QUANT": [("quant=", "a")],
    "_SG_ARGS": [("server_args=ServerArgs", "(")],
    "SG_PROFILED": [("max_total_tokens=", "1"), ("max_total_tokens=1 is larger than the profiled value ", "1")],
    "SG_FAILED": [("Scheduler hit an", " "), ("Capture cuda graph", " ")],
    "VL_FAILED": [("WorkerProc hit an", " "), ("Engine core", " "), ("EngineCore failed to", " ")],
    "VL_LONG_LEN": [("User-specified max_model_len (", "1"), ("User-specified max_model_len ", " ")],
    "SG_LONG_LEN": [("User-specified context_length (", "1"), ("User-specified context_length ", " ")],
    "LONG_ENV": [
        ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", " "),
        ("", "env var "),
        ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=", '"'),
    ],
    "_SG_BASELINE": [("Memory baseline taken. mem usage=", "1")],
    "_SG_LOAD_BEGIN": [("Load weight begin. avail mem=", "1")],
    "_SG_LOAD_END": [("Load weight end.", "x"), ("Load weight end.", "Load weight")],
    "_SG_KV": [
        ("KV Cache is allocated. dtype: ", "a"),
        ("KV Cache is allocated. #tokens: ", "1"),
        ("KV Cache is allocated. #tokens: 1, KV size: ", "1"),
    ],
    "_SG_POOL_END": [("Memory pool end. avail mem=", "1")],
    "_SG_SUMMARY": [
        ("max_total_num_tokens=", "1"),
        (
            "max_total_num_tokens=1, chunked_prefill_size=1, max_prefill_tokens=1, max_running_requests=1, "
            "context_len=",
            "1",
        ),
    ],
    "_SG_PAGE": [("Setting page size to ", "1")],
    "_SG_KV_DTYPE": [("Setting KV cache dtype to ", "a")],
    "_SG_BACKENDS": [("Set DSA backends for ", "a"), ("Set DSA backends for a KV Cache: prefill=", "a")],
    "_SG_ERROR": [("Not enough memory", ". ")],
    "_VL_VERSION": [("vLLM API server version ", "a")],
    "_VL_ENGINE": [
        ("Initializing a V1 LLM engine (v", "1"),
        ("Initializing a V1 LLM engine (v1) with config: ", "a=("),
    ],
    "_VL_NON_DEFAULT": [("non-default args: {", "{")],
    "_VL_BLOCK": [("Setting kv cache block size to ", "1")],
    "_VL_FORMAT": [("Using ", "a")],
    "_VL_LOADING": [("Model loading took ", "1")],
    "_VL_AVAILABLE": [("Available KV cache memory: ", "1")],
    "_VL_OVERRIDE": [
        ("Overriding num_gpu_blocks=", "1"),
        ("Overriding num_gpu_blocks=1 with num_gpu_blocks_override=", "1"),
    ],
    "_VL_DCP": [("Multiplying the GPU KV cache size by the dcp_world_size ", "1")],
    "_VL_KV_SIZE": [("GPU KV cache size: ", "1,"), ("GPU KV cache size: 1 tokens, Maximum concurrency for ", "1")],
    "_VL_CONCURRENCY": [("Maximum concurrency for ", "1,"), (", Maximum concurrency for ", "1")],
    "_VL_MAX_LEN": [("Using max model len ", "1")],
    "_VL_ARCH": [("Resolved architecture: ", "a")],
    "_VL_MAXLEN_ERROR": [
        ("To serve at least one request with the model's max seq len (", "1"),
        (
            "To serve at least one request with the model's max seq len (1), (1 GiB KV cache is needed, which is "
            "larger than the available KV cache memory (",
            "1",
        ),
    ],
    "_VL_NO_MEMORY": [("No available memory for the cache", " ")],
    "_SG_NEGATIVE": [("max_total_num_tokens", " "), ("max_total_num_tokens", "max_total_num_tokens ")],
    "_VL_BANNER": [("█ ", " "), ("█ version 1", "a")],
    "_VL_V0_BLOCKS": [(" ", "a"), (" blocks: ", "1"), ("# GPU blocks: 1, # CPU blocks: ", "1")],
    "_VL_V0_DEVICE": [("", "a"), ("a", " ")],
    "_MESSAGE_START": [(" ", " "), ("a", "a"), ("[a", "a"), ("[a:", "1"), ("# ", "a")],
    "_VL_V0_ROW": [("total_gpu_memory", " "), ("total_gpu_memory ", "1"), ("model weights take", " ")],
    "_VL_V0_PROFILE": [("Memory profiling results:", " ")],
    "_VL_V0_FIELD": [("a=", "1"), ("", "a"), ("a=1.", "1")],
    "_VL_V0_BUDGET": [
        ("can use total_gpu_memory (", "1"),
        ("can use total_gpu_memory (1GiB) x gpu_memory_utilization (", "1"),
    ],
    "_VL_V0_TERMS": [("model weights take ", "1"), ("model weights take 1GiB; non_torch_memory takes ", "1")],
    "_VL_V0_MAXLEN": [("The model's max seq len (", "1")],
    "_SG_MAMBA": [
        ("Mamba Cache is allocated. max_mamba_cache_size: ", "1"),
        ("Mamba Cache is allocated. max_mamba_cache_size: 1, conv_state size: ", "1"),
    ],
    "_SG_TOTAL": [("max_total_num_tokens=", "1"), ("max_total_num_tokens=1", " ")],
    "_SG_SWA_SIZES": [("Use sliding window memory pool. full_layer_tokens=", "1")],
    "_SG_SWA_POOL": [("SWAKVPool mem usage: ", "1"), ("SWAKVPool mem usage: 1 GB, swa size: ", "1")],
    "_VL_HYBRID_BLOCK": [("Setting attention block size to ", "1")],
    "_VL_MAMBA_PADDING": [("Padding mamba page size by ", "1")],
}


def _patterns() -> dict[str, re.Pattern[str]]:
    return parse_patterns()


def test_every_pattern_has_a_pathological_case() -> None:
    # a new pattern in runbook/parse/ must be added to the table above (and so be shown linear)
    assert sorted(_patterns()) == sorted(PATHOLOGICAL)


def _lines(start: str, loop: str, n: int = N) -> list[str]:
    """One start then n characters of its loop; the start repeated with short loops; the start alone, repeated."""
    return [
        (start + loop * n)[:n],
        ((start + loop * 3) * (n // (len(start) + 3 * len(loop)) + 1))[:n],
        (start * (n // max(len(start), 1) + 1))[:n] if start else loop * n,
    ]


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_each_pattern_is_linear_on_a_pathological_line(name: str) -> None:
    pattern = _patterns()[name]

    def scan(line: str) -> None:
        for _ in pattern.finditer(line):
            pass
        pattern.fullmatch(line)

    for start, loop in PATHOLOGICAL[name]:
        for kind in range(3):
            line = {n: _lines(start, loop, n)[kind] for n in (N // 4, N)}
            assert_linear(lambda n: scan(line[n]), N // 4, f"{name} on {start!r} + {loop!r}…")  # noqa: B023


# --------------------------------------------------------------------------- the parse as a whole


def _parse(text: str) -> None:
    with contextlib.suppress(LogError):
        parse_log(text)


def test_repeated_non_default_args_is_linear() -> None:
    # defect: `non-default args: (\{.*\})` rescanned to the line's end from every start: 41 s for 1 MB
    assert_linear(lambda n: _parse("INFO 03-01 12:00:00 " + "non-default args: {" * (n // 19)), N // 4)


def test_non_default_args_still_read() -> None:
    run = parse_log(
        "INFO 03-01 12:00:00 non-default args: {'model': 'zai-org/GLM-5.3', 'block_size': 64}\n"
        "INFO 03-01 12:00:01 Available KV cache memory: 30.5 GiB\n"
    ).chosen
    assert run.cli_args is not None and run.cli_args.value.integer("block_size") == 64


def test_wrapped_lines_join_in_linear_time() -> None:
    # defect: each line without a record prefix was joined by copying the whole record so far (quadratic:
    # 2.5 s at 2 MB, 102 s at 10 MB); here 8 MB of wrapped lines after one record
    def text(n: int) -> str:
        return "INFO 03-01 12:00:00 Available KV cache memory: 10.25 GiB\n" + ("x" * 79 + "\n") * (n // 80)

    assert_linear(lambda n: parse_log(text(n)), 2 * N)
    parsed = parse_log(text(8 * N))
    (avail,) = parsed.chosen.available_kv
    assert avail.value.units == 1025 and avail.line == 1  # 10.25 GiB = 1025 hundredths
    assert parsed.lines == 1 + 8 * N // 80


def test_joined_record_stops_at_the_line_cap() -> None:
    rec_parts = list(records._records(iter(["INFO 03-01 12:00:00 a"] + ["x" * 1000] * 3000), records._LineCount()))
    (rec,) = rec_parts
    assert rec.size == len(rec.text) == limits.MAX_LINE_CHARS  # 3,000,000+ characters offered, 1 MiB kept


def test_long_figures_are_not_engine_lines() -> None:
    # defect: a 5,000-digit figure passed Python's int-string limit (ValueError traceback); a 4,000-digit
    # one was converted and carried into the arithmetic
    for line in (
        "[2026-03-01 12:00:00 TP0] max_total_num_tokens=" + "9" * 5000 + ", chunked_prefill_size=1, "
        "max_prefill_tokens=1, max_running_requests=1, context_len=1",
        "INFO 03-01 12:00:00 Available KV cache memory: " + "9" * 4000 + ".5 GiB",
        "INFO 03-01 12:00:00 Available KV cache memory: 1." + "5" * 4000 + " GiB",
        "INFO 03-01 12:00:00 Using max model len " + "9" * 5000,
    ):
        with pytest.raises(LogError, match="no engine startup lines recognised"):
            parse_log(line)


def test_thirty_digit_figures_are_read() -> None:
    # boundary: MAX_INT_DIGITS = 30 digits is still a figure
    run = parse_log("INFO 03-01 12:00:00 Available KV cache memory: " + "9" * 30 + ".25 GiB").chosen
    (avail,) = run.available_kv
    assert avail.value.units == int("9" * 30 + "25")


def test_server_args_with_long_integers() -> None:
    # defect: Args.integer ran int() on any run of digits (5,000 digits: ValueError)
    args = Args((("tp_size", "9" * 5000), ("dp_size", "9" * 30), ("mem_fraction_static", "0." + "8" * 4000)))
    assert args.integer("tp_size") is None
    assert args.integer("dp_size") == int("9" * 30)
    assert args.number("mem_fraction_static") is None


# --------------------------------------------------------------------------- reading the file


def _kvplan_cli(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = "import sys; from kvplan.cli import main; sys.argv = ['kvplan', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_log_is_refused_without_blocking(tmp_path: Path) -> None:
    # defect: `kvplan doctor --log fifo` blocked in open() until a writer came
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    r = _kvplan_cli("doctor", "--log", fifo, timeout=30)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"kvplan: error: log {fifo}: not a regular file"), r.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_device_log_is_refused() -> None:
    # defect: /dev/zero as a log was read whole (MemoryError)
    r = _kvplan_cli("doctor", "--log", "/dev/zero", timeout=30)
    assert r.returncode == 2 and "not a regular file" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_long_log_line_is_cut_while_streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # defect: the log was read whole; here the cap is 64 KiB and one line 8 MiB, so a reader that holds the
    # line (or the file) peaks above 8 MiB
    monkeypatch.setattr(limits, "MAX_LINE_CHARS", 64 << 10)
    p = tmp_path / "server.log"
    with p.open("w") as f:
        f.write("INFO 03-01 12:00:00 " + "y" * (8 << 20) + "\n")
        f.write("INFO 03-01 12:00:01 Available KV cache memory: 10.25 GiB\n")
    lines = log_lines(p)
    first = next(lines)
    assert len(first) == 64 << 10
    tracemalloc.start()
    try:
        parsed = parse_log(log_lines(p), str(p))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, f"peak {peak:,} B"
    assert parsed.lines == 2 and parsed.chosen.available_kv[0].line == 2


def test_log_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "server.log"
    p.write_text("INFO 03-01 12:00:01 Available KV cache memory: 10.25 GiB\n")  # 57 bytes
    monkeypatch.setenv(limits.LOG.env, "56")
    with pytest.raises(limits.LimitError, match="57 bytes is over kvplan's log limit of 56 bytes"):
        list(log_lines(p))
    monkeypatch.setenv(limits.LOG.env, "57")
    assert len(list(log_lines(p))) == 1


def test_invalid_utf8_in_a_log_is_replaced(tmp_path: Path) -> None:
    p = tmp_path / "server.log"
    p.write_bytes(b"\xff\xfe garbage\nINFO 03-01 12:00:01 Available KV cache memory: 10.25 GiB\n")
    parsed = parse_log(log_lines(p), str(p))
    assert parsed.chosen.available_kv[0].line == 2


@pytest.mark.parametrize("name", sorted(x.name for x in LOGS.glob("*.log")))
def test_streamed_parse_equals_the_whole_text(name: str) -> None:
    # streaming changes nothing: the same runs, lines and figures as parsing the whole text
    path = LOGS / name
    text = path.read_bytes().decode("utf-8", errors="replace")
    try:
        whole = parse_log(text, str(path))
    except LogError as e:
        with pytest.raises(LogError, match=re.escape(str(e))):
            parse_log(log_lines(path), str(path))
        return
    assert parse_log(log_lines(path), str(path)) == whole


# --------------------------------------------------------------------------- found by tests/fuzz/test_logs.py


def test_mla_and_mha_pool_lines_are_two_starts(tmp_path: Path) -> None:
    # defect (fuzz): an MLA pool line and an MHA (K size / V size) one glued into one run made the doctor
    # call the run MHA but render the MLA line as if it had K and V sizes (AssertionError, exit 4)
    text = (
        "[2026-03-01 12:05:20 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 330560, KV size: 28.52 GB"
        "[2025-03-08 12:29:21 TP1] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"
    )
    parsed = parse_log(text)
    assert [[k.value.mha for k in r.kv] for r in parsed.runs] == [[False], [True]]
    p = tmp_path / "server.log"
    p.write_text(text)
    r = _kvplan_cli("doctor", "--log", p)
    # a verdict, never exit 4: since issue 14 a K/V log against the default (MLA) deployment is read alone: exit 0
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
