"""Fuzz the log parser and `kvplan doctor` (issue 10).

Random interleavings of real startup lines (tests/data/logs, and shared/logs when it is beside the repository),
mutated: lines cut short, glued, wrapped, ANSI codes, CRLF and progress-bar carriage returns, binary noise,
invalid UTF-8, figures of thousands of digits, pathological runs. `kvplan doctor --log` on each ends in exit
0 or 1 (a verdict) or 2 with one error line; never a traceback, never exit 4, within a work budget. The parser on
its own returns runs or raises LogError.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.runbook.parse import LogError, log_lines, parse_log
from tests.fuzz.conftest import DOCTOR_CALLS, within_budget

DATA = Path(__file__).parents[1] / "data" / "logs"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "logs"
runner = CliRunner(env={"KVPLAN_FORMAT": None})


def _lines(folder: Path) -> list[str]:
    out: list[str] = []
    for p in sorted(folder.glob("*.log")):
        text = p.read_text(encoding="utf-8", errors="replace")
        out.extend(x for x in text.split("\n") if x.strip() and not x.startswith("#"))
    return out


REAL = _lines(DATA) + _lines(SHARED)
assert REAL, f"no fixture logs in {DATA}"

NOISE = [
    "\x1b[31m",
    "\x1b]0;title\x07",
    "[0m",
    "\r",
    "\x00",
    "9" * 4000,
    "1." + "5" * 4000,
    "non-default args: {" * 50,
    "{" * 500,
    "(" * 500,
    "'" * 500,
    "INFO 03-01 12:00:00 ",
    "[2026-03-01 12:00:00 TP7] ",
    "(EngineCore_DP0 pid=12) ",
    "sglang-1  | ",
    "Load weight end." * 20,
]
noise = st.one_of(st.sampled_from(NOISE).map(str.encode), st.binary(max_size=48), st.just(b"\xff\xfe\x80"))


@st.composite
def log_bytes(draw: st.DrawFn) -> bytes:
    picked = draw(st.lists(st.sampled_from(REAL), min_size=0, max_size=25))
    out: list[bytes] = []
    for line in picked:
        raw = line.encode()
        how = draw(st.integers(0, 11))
        if how == 0:
            raw = raw[: draw(st.integers(0, len(raw)))]  # cut short
        elif how == 1:
            at = draw(st.integers(0, len(raw)))
            raw = raw[:at] + draw(noise) + raw[at:]  # noise inside
        elif how == 2:
            at = draw(st.integers(0, len(raw)))
            raw = raw[:at] + b"\n" + raw[at:]  # wrapped by a terminal
        elif how == 3 and out:
            out[-1] += raw  # two records glued on one line
            continue
        elif how == 4:
            out.append(draw(noise))
        out.append(raw)
    sep = draw(st.sampled_from([b"\n", b"\r\n", b"\r\n\n", b"\n"]))
    return sep.join(out) + draw(st.sampled_from([b"", sep]))


def _check(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "server.log"
        path.write_bytes(data)
        try:
            parsed = parse_log(log_lines(path), str(path))
            assert parsed.runs and all(r.engine in ("sglang", "vllm") for r in parsed.runs)
        except LogError as e:
            assert "\n" not in str(e)
        r = within_budget(lambda: runner.invoke(app, ["doctor", "--log", str(path)]), budget=DOCTOR_CALLS)
    detail = f"exit {r.exit_code}, stderr {r.stderr[-600:]!r}, exception {r.exception!r}"
    assert r.exception is None or isinstance(r.exception, SystemExit), detail
    assert r.exit_code in (0, 1, 2), detail
    assert "Traceback" not in r.stderr, detail
    if r.exit_code == 2:
        assert r.stderr.startswith("kvplan: error: ") and r.stderr.count("\n") == 1, detail


fuzz = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@fuzz
@given(data=log_bytes())
def test_doctor_on_mutated_real_logs(data: bytes) -> None:
    _check(data)


@fuzz
@given(data=st.binary(max_size=4096))
def test_doctor_on_random_bytes(data: bytes) -> None:
    _check(data)
