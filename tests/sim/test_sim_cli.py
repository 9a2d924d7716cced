"""`kvplan simulate` end to end: formats, exit codes, plots, and what it imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from kvplan.cli import _OneLineErrors
from kvplan.cli import app as main_app
from kvplan.cli.simulate import simulate

runner = CliRunner(env={"KVPLAN_FORMAT": None})


def _app() -> typer.Typer:
    """The real app once `simulate` is registered there; until then an app with the same error handling."""
    if any(c.callback is simulate for c in main_app.registered_commands):
        return main_app
    app = typer.Typer(cls=_OneLineErrors, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """kvplan (test harness)."""

    app.command()(simulate)
    return app


APP = _app()


def invoke(*args: str | Path) -> Result:
    return runner.invoke(APP, ["simulate", *map(str, args)])


def ok(result: Result, code: int = 0) -> str:
    detail = f"exit {result.exit_code}\nstdout: {result.stdout[-2000:]!r}\nstderr: {result.stderr!r}"
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{result.exception!r}\n{detail}"
    assert result.exit_code == code, detail
    assert result.stderr == "", detail
    return result.stdout


def js(*args: str | Path) -> dict[str, Any]:
    data = json.loads(ok(invoke(*args, "--format", "json")))
    assert isinstance(data, dict) and data["schema_version"] == 1 and data["command"] == "simulate"
    return data


def fail(result: Result, code: int, *needles: str) -> str:
    assert result.exit_code == code, f"exit {result.exit_code}: {result.stdout!r} {result.stderr!r}"
    err = result.stderr
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture
def synthetic(traces: Path) -> Path:
    return traces / "mooncake" / "synthetic_trace.jsonl"


def test_sweep_fig9_json_carries_the_published_points(synthetic: Path) -> None:
    d = js(synthetic, "--sweep", "fig9")
    assert d["semantics"] == "ideal" and d["method"] == "one pass (LRU stack distances)"
    pts = {p["capacity_units"]: p for p in d["points"]}
    # 3M tokens = 5,859 blocks of 512; Figure 9 reads 0.316 there
    assert pts[5_859]["published_ppm"] == 316_000
    assert abs(pts[5_859]["rate_ppm"] - 316_000) <= 15_000
    assert d["unbounded_hit_tokens"] == 39_852_661  # the reuse bound (test_sim_published.py)


def test_single_capacity_table_and_markdown(synthetic: Path) -> None:
    out = ok(invoke(synthetic, "--capacity", "3M", "--window", "last50"))
    assert "hit rate" in out and "last 50%" in out and "leaf-LRU" in out
    md = ok(invoke(synthetic, "--capacity", "6000 blocks", "--policy", "fifo", "--format", "markdown"))
    assert md.startswith("## kvplan simulate") and "| token-weighted |" in md and "block FIFO" in md


def test_capacity_units_agree(synthetic: Path) -> None:
    # 3M tokens (binary: 3,145,728) // 512 = 6,144 blocks; '6144 blocks' is the same pool
    a = js(synthetic, "--capacity", "3M")
    b = js(synthetic, "--capacity", "6144 blocks")
    assert a["capacity_units"] == b["capacity_units"] == 6_144
    assert a["hit"] == b["hit"]


def test_engine_order_mode_states_its_pool(synthetic: Path) -> None:
    d = js(synthetic, "--semantics", "vllm", "--capacity", "2M")
    assert d["unit"] == "page" and d["unit_tokens"] == 64 and d["capacity_units"] == 2 * 2**20 // 64
    assert "expanded" in d["paging"] and "length − 1" in d["semantics_text"]
    assert d["hit"]["tokens"] % 64 == 0


def test_bytes_capacity_uses_the_plan(synthetic: Path) -> None:
    # GLM-5.3 on the SGLang preset: 53,940 B per token on one GPU; 10 GiB // 53,940 = 199,059 tokens = 3,110 pages
    d = js(synthetic, "--semantics", "sglang", "--capacity", "10GiB")
    assert d["capacity_units"] == (10 * 2**30 // 53_940) // 64 == 3_110


def test_occupancy_on_the_planned_pool(synthetic: Path, tmp_path: Path) -> None:
    png = tmp_path / "occ.png"
    d = js(synthetic, "--deploy", "glm-5.3-8xh200-sglang", "--occupancy", "--plot", png)
    assert d["semantics"] == "sglang" and d["mode"] == "occupancy"
    assert d["capacity_units"] == 8_869  # the preset's planned pool: 567,616 tokens / 64
    o = d["occupancy"]
    assert o["completed"] == 3_993 and o["timeline"] and set(o["wait_us"]) == {"p50", "p90", "p99", "max"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_plot(synthetic: Path, tmp_path: Path) -> None:
    png = tmp_path / "curve.png"
    ok(invoke(synthetic, "--sweep", "1e5..1e7", "--points", "4", "--plot", png))
    assert png.stat().st_size > 10_000


def test_plot_without_matplotlib_exits_2(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a missing optional package is bad input with the install hint (exit 2), not "probe unavailable" (3)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    fail(invoke(synthetic, "--sweep", "1e5..1e7", "--plot", tmp_path / "x.png"), 2, "kvplan-llm[plot]")


def test_engine_sweep_runs_per_capacity(synthetic: Path) -> None:
    d = js(synthetic, "--semantics", "sglang", "--policy", "fifo", "--sweep", "1M,4M", "--jobs", "2")
    assert d["method"] == "one replay per capacity (2 processes)"
    rates = [p["rate_ppm"] for p in d["points"]]
    assert len(rates) == 2 and 0 < rates[0] < rates[1]


def test_bad_record_exit_2_and_skip_bad(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 600, "hash_ids": [0, 1]}\n'
        '{"timestamp": 1, "input_length": "x", "hash_ids": [0]}\n'
        '{"timestamp": 2, "input_length": 600, "hash_ids": [0, 2]}\n'
    )
    fail(invoke(p), 2, f"{p}:2:", "'input_length' must be a non-negative integer", "--skip-bad")
    r = invoke(p, "--skip-bad", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == "kvplan: warning: skipped 1 malformed record(s) (--skip-bad)\n"
    d = json.loads(r.stdout)
    assert d["trace"]["bad_records"] == 1 and d["window"]["requests"] == 2
    assert d["hit"]["tokens"] == 512  # the second request reuses block 0 (512 of its 600 tokens)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--semantics", "nope"], "--semantics 'nope'"),
        (["--occupancy"], "--occupancy needs an engine"),
        (["--policy", "lfu"], "ideal semantics has lru"),
        (["--semantics", "vllm", "--policy", "fifo"], "one order"),
        (["--semantics", "vllm", "--deploy", "glm-5.3-8xh200-sglang"], "does not match"),
        (["--capacity", "12 pages"], "counts blocks"),
        (["--capacity", "40GiB"], "bytes need a plan"),
        (["--sweep", "5e7..1e4"], "LOW..HIGH"),
        (["--capacity", "100"], "less than one block"),
        (["--window", "first"], "--window 'first'"),
        (["--plot", "x.png"], "--plot draws"),
    ],
)
def test_usage_errors(synthetic: Path, args: list[str], needle: str) -> None:
    fail(invoke(synthetic, *args), 2, needle)


def test_ideal_needs_blocks(traces: Path) -> None:
    fail(invoke(traces / "azure-llm-2023" / "AzureLLMInferenceTrace_code.csv"), 2, "has none")


def test_azure_occupancy_has_no_hits(traces: Path) -> None:
    d = js(traces / "azure-llm-2023" / "AzureLLMInferenceTrace_code.csv", "--semantics", "vllm", "--occupancy")
    assert d["hit"]["tokens"] == 0 and d["occupancy"]["completed"] == 8_819
    assert "no block ids" in d["paging"]


def test_no_sim_or_plot_modules_at_import() -> None:
    """Registering `simulate` must not slow other commands: its modules load only when it runs."""
    code = (
        "import sys, kvplan.cli, kvplan.cli.simulate\n"
        "bad = [m for m in sys.modules if m.startswith('kvplan.sim') or m.split('.')[0] in "
        "('matplotlib', 'numpy', 'torch', 'pynvml', 'kvcache_sim')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
