"""`kvplan perf --trace FILE` end to end: a Mooncake slice read with simulate's readers, the single-request case
equal to the closed loop at concurrency 1, the output length assumed where a trace has none, bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "GITHUB_ACTIONS": None, "COLUMNS": "160"})
SLICE = Path(__file__).resolve().parents[1] / "data" / "traces" / "mooncake_conversation_40.jsonl"
VL, SG = "glm-5.3-8xh200-vllm", "glm-5.3-8xh200-sglang"


def perf(*args: str) -> tuple[int, Any]:
    r = runner.invoke(app, ["perf", *args, "--format", "json"])
    return r.exit_code, (json.loads(r.stdout) if r.exit_code == 0 else r.output)


def _kvplan_trace(path: Path, rows: list[tuple[float, int, int | None]]) -> Path:
    lines = [json.dumps({"kvplan_trace": 1, "block_size": 64})]
    for at, isl, osl in rows:
        rec: dict[str, Any] = {"arrival_s": at, "input_tokens": isl, "blocks": list(range(isl // 64))}
        if osl is not None:
            rec["output_tokens"] = osl
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_mooncake_slice_prices_every_request_with_its_own_lengths() -> None:
    rows = [json.loads(line) for line in SLICE.read_text().splitlines()]
    for deploy in (VL, SG):
        code, d = perf("-d", deploy, "--trace", str(SLICE))
        assert code == 0, d
        # the trace's own lengths: the means shown are ceil(Σ / 40) of its input_length and output_length
        assert d["num_prompts"] == 40 and d["concurrency"] == 0
        assert d["isl"] == -(-sum(r["input_length"] for r in rows) // 40)
        assert d["osl"] == -(-sum(r["output_length"] for r in rows) // 40)
        assert "all 40 requests" in d["trace"] and "Mooncake JSONL" in d["trace"]
        assert d["assumptions"][0].startswith("trace: ")
        for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "e2e_p90_ms", "ttft_p90_ms"):
            assert 0 < d[f"{k}_low"] <= d[k] <= d[f"{k}_high"], k
        assert d["ttft_ms"] <= d["ttft_p90_ms"] and d["e2e_ms"] <= d["e2e_p90_ms"]
        # total over output tokens a second: (Σ input + Σ output) / Σ output
        ratio = sum(r["input_length"] + r["output_length"] for r in rows) / sum(r["output_length"] for r in rows)
        assert abs(d["total_tokens_per_s_per_gpu"] - ratio * d["output_tokens_per_s_per_gpu"]) <= ratio


def test_requests_far_apart_price_as_one_client(tmp_path: Path) -> None:
    # three requests 1,000 s apart each find the engine idle, as the only client of a closed loop does: its TTFT
    # (the request latency + one prefill step), TPOT and end to end are the same figures
    trace = _kvplan_trace(tmp_path / "t.jsonl", [(0.0, 1024, 64), (1000.0, 1024, 64), (2000.0, 1024, 64)])
    for deploy in (VL, SG):
        code, t = perf("-d", deploy, "--trace", str(trace))
        code2, c = perf("-d", deploy, "--isl", "1024", "--osl", "64", "--concurrency", "1")
        assert code == code2 == 0
        for k in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"):
            assert t[k] == c[k], (deploy, k)
        assert t["peak_running"] == 1 and t["preemptions"] == 0


def test_a_trace_without_output_lengths_needs_osl_and_says_it_assumed_it(tmp_path: Path) -> None:
    trace = _kvplan_trace(tmp_path / "t.jsonl", [(0.0, 1024, None), (0.5, 2048, 16)])
    r = runner.invoke(app, ["perf", "-d", VL, "--trace", str(trace)])
    assert r.exit_code == 2 and f"{trace}:2: no output length in the trace: give --osl N" in r.output, r.output
    code, d = perf("-d", VL, "--trace", str(trace), "--osl", "32")
    assert code == 0 and "1 without an output length take --osl 32 (assumed)" in d["trace"]
    assert d["osl"] == (32 + 16) // 2


def test_bad_trace_input_is_one_line_exit_2(tmp_path: Path) -> None:
    cases = (
        (["--trace", str(SLICE), "--isl", "1K"], "leave out --isl"),
        (["--trace", str(SLICE), "--concurrency", "4"], "give --concurrency N (closed loop), --rate R/s"),
        (["--trace", str(tmp_path / "none.jsonl")], "no such file or directory"),
        (["--trace", str(SLICE), "--requests", "0"], "--requests"),
        (["--isl", "1K", "--concurrency", "4"], "give --isl and --osl"),
        (["--isl", "1K", "--osl", "8", "--concurrency", "4", "--requests", "5"], "--requests has no effect without"),
        (["--isl", "1K", "--osl", "8", "--concurrency", "4", "--trace-format", "azure"], "--trace-format has no"),
    )
    for args, words in cases:
        r = runner.invoke(app, ["perf", "-d", VL, *args])
        assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, (args, r.output)
    big = _kvplan_trace(tmp_path / "big.jsonl", [(0.0, 2_000_000, 8)])
    r = runner.invoke(app, ["perf", "-d", VL, "--trace", str(big)])
    assert r.exit_code == 2 and "larger than the whole pool" in r.output and f"{big}:2" in r.output, r.output
