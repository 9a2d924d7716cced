"""Fuzz the parser and the evidence of `kvplan doctor` (issue 14): random interleavings of real start-up lines
from the corpus (tests/data/logs, ../shared/logs), truncation, ANSI colour codes, CRLF line ends, binary noise.

Contract: no exception but LogError (a log with no start-up line) and within the work budget; the same run gives
the same figures whatever the noise (ANSI codes and CRLF around its lines, noise lines between them), and the
evidence the doctor gathers from a run never raises.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvplan.runbook.evidence import gather
from kvplan.runbook.parse import LogError, Run, parse_log
from tests.fuzz.conftest import one_line_error

DATA = Path(__file__).parents[1] / "data" / "logs"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "logs"


def _bodies() -> list[list[str]]:
    out = []
    for folder in (DATA / "field", DATA, SHARED):
        for p in sorted(folder.glob("*.log")) if folder.is_dir() else ():
            if folder == DATA and not p.name.startswith("doctor-"):
                continue
            text = p.read_text(encoding="utf-8", errors="replace")
            body = text.split("\n\n", 1)[1] if text.startswith("#") else text
            lines = [x for x in body.split("\n") if x.strip()]
            if lines:
                out.append(lines)
    return out


BODIES = _bodies()
LINES = [x for b in BODIES for x in b]
assert len(BODIES) >= 30, len(BODIES)

ANSI = st.sampled_from(["\x1b[32m", "\x1b[0m", "\x1b[1;31m", "[0m", "\x1b]0;title\x07"])
NOISE = st.one_of(
    st.binary(min_size=1, max_size=40).map(lambda b: b.decode("latin-1")),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60),
)


def _figures(run: Run) -> tuple[object, ...]:
    """What the doctor reads from a run, without line numbers (noise lines shift them)."""
    return (
        run.engine,
        run.version.value if run.version else None,
        tuple(k.value for k in run.kv),
        run.summary.value if run.summary else None,
        tuple(a.value for a in run.available_kv),
        run.kv_cache_size.value if run.kv_cache_size else None,
        run.v0_blocks.value if run.v0_blocks else None,
        run.v0_memory.value if run.v0_memory else None,
        run.max_len_error.value if run.max_len_error else None,
        run.v0_max_len_error.value if run.v0_max_len_error else None,
        tuple(e.value.avail for e in run.load_end),
        tuple(e.value for e in run.errors),
    )


def _begins_a_record(line: str) -> bool:
    """A line the parser never joins to the one before (a record prefix, or an engine message where the prefix
    would be): only before such a line is a blank line noise. Before a terminal wrap's continuation (a refusal
    pasted over three lines, eugr/spark-vllm-docker#396) a blank line ends the record, as a real one does."""
    from kvplan.runbook.parse.records import _MESSAGE_START, _START, clean_line

    c = clean_line(line)
    m = _START.search(c)
    head = c[: m.start()] if m else c
    return not head.strip() or _MESSAGE_START.match(head.lstrip()) is not None


def _parse(text: str) -> object:
    def go() -> object:
        try:
            log = parse_log(text)
        except LogError:
            return None
        for run in log.runs:
            gather(run)  # the evidence of any run never raises
        return log

    return one_line_error(go)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(LINES), min_size=1, max_size=30), st.data())
def test_interleavings_truncation_and_noise_never_raise(lines: list[str], data: st.DataObject) -> None:
    out = []
    for line in lines:
        cut = data.draw(st.integers(min_value=0, max_value=len(line)))
        line = line[:cut] if data.draw(st.booleans()) else line
        if data.draw(st.booleans()):
            line = data.draw(ANSI) + line + data.draw(ANSI)
        out.append(line)
        if data.draw(st.integers(0, 4)) == 0:
            out.append(data.draw(NOISE))
    ending = data.draw(st.sampled_from(["\n", "\r\n"]))
    _parse(ending.join(out))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(BODIES))), st.data())
def test_same_run_same_figures_whatever_the_noise(index: int, data: st.DataObject) -> None:
    lines = BODIES[index]
    clean = _parse("\n".join(lines))
    noisy_lines = []
    for i, line in enumerate(lines):
        if data.draw(st.booleans()):
            line = data.draw(ANSI) + line + data.draw(ANSI)
        noisy_lines.append(line)
        if data.draw(st.integers(0, 3)) == 0 and (i + 1 == len(lines) or _begins_a_record(lines[i + 1])):
            noisy_lines.append("")  # a blank line: ends a record, begins nothing
    ending = data.draw(st.sampled_from(["\n", "\r\n"]))
    noisy = _parse(ending.join(noisy_lines))
    if clean is None:
        assert noisy is None
    assume(clean is not None)  # the case this is about: a run with figures (hypothesis fails if none occurs)
    assert noisy is not None
    a = [_figures(r) for r in clean.runs]  # type: ignore[attr-defined]
    b = [_figures(r) for r in noisy.runs]  # type: ignore[attr-defined]
    assert a == b
