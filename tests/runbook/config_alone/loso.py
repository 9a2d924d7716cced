"""The band of a config-alone plan, measured over the corpus, leave one source out (issue 28 items 1 and 4).

For each case, the modelled term outside the pool (kvplan.engines.band.FAMILY_TERM: SGLang's pre-load free
memory, vLLM's non-KV memory) has a true value: the one at which the engine's formula gives the pool the log
prints. It is solved by the secant on the plan itself (the pool is monotone and, page rounding aside, linear in
the term), with the log's own weights figure where the log prints one (SGLang ``Load weight end ... mem usage``,
vLLM ``Model loading took``, V0 ``model weights take``), so a weights miss is not charged to this term. The term's
error is (true − modelled) / modelled.

Leave one source out: a case's band uses the errors of the cases from every OTHER source (a source: one issue
thread, repo, blog or sweep), so no log helps predict its own band; a thin cell borrows as kvplan.engines.band.fitted
says. ``python -m tests.runbook.config_alone --loso`` prints the three figures of the issue and each case's row
(``--fit``: the fitted table kvplan ships, engines/band.ERRORS); ``--write`` rewrites both into band.py and README.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from kvplan.engines.band import (
    ERRORS,
    FAMILY_TERM,
    Fitted,
    PoolBand,
    family,
    fitted,
    gpu_class,
    plan_at,
    pool_band,
    version_range,
)
from kvplan.engines.common import PoolPlan
from kvplan.runbook.parse import LogError, log_lines, parse_log
from tests.runbook.config_alone import WITHIN, Case, all_cases, plan

IDS = frozenset({"pr", "issue", "issues", "pull"})
"""A number after one of these names the thread (sglang-pr-11309): it is part of the source."""


def _variant(tokens: list[str], i: int) -> bool:
    """A file-name token after the GPU that names a run of one source, not another source: tp8, ctx2048, kvfp8,
    0.6.4, rhai1, main."""
    tok = tokens[i]
    if tok == "main":
        return True
    return any(ch.isdigit() for ch in tok) and not (i > 0 and tokens[i - 1] in IDS)


def source_of(case: Case) -> str:
    """The case's source: its ``source`` field where it has one, else the file name's tail after the GPU token
    (``vllm-llama-3.1-8b-h100-llmd-planner-tp1.log`` -> ``llmd-planner``), the tokens that name a run dropped."""
    own = getattr(case, "source", "")
    if own:
        return str(own)
    stem = case.log.rsplit("/", 1)[-1].removesuffix(".log").split("-")
    gpu = next(s.split("=", 1)[1] for s in case.sets if s.startswith("gpu="))
    heads = {gpu.split("-")[0].lower(), gpu.replace("-", "").lower()}
    at = next((i for i, tok in enumerate(stem) if tok.lower() in heads), -1)
    rest = stem[at + 1 :] if at >= 0 else stem
    tail = [t for i, t in enumerate(rest) if not _variant(rest, i)]
    return "-".join(tail) or case.log


def logged_weights(case: Case) -> int | None:
    """The weights figure the log prints for one rank (bytes), if it prints one."""
    try:
        run = parse_log(log_lines(case.path())).chosen
    except (LogError, OSError):
        return None
    figures = [a.value.usage for a in run.load_end if a.value.usage is not None]
    figures += [a.value for a in run.model_loading]
    if run.v0_memory is not None and run.v0_memory.value.weights is not None:
        figures.append(run.v0_memory.value.weights)
    return max(f.bytes for f in figures) if figures else None


@dataclass(frozen=True)
class Measured:
    case: Case
    source: str
    family: str
    version_range: str
    gpu_class: str
    predicted: int
    term: str
    modelled: int
    true: int | None
    """None where the term does not move the pool (a pool capped by something else)."""

    @property
    def error(self) -> float:
        """(predicted − logged) / logged of the pool."""
        return (self.predicted - self.case.logged) / self.case.logged

    @property
    def term_ppm(self) -> int | None:
        if self.true is None or self.modelled <= 0:
            return None
        return abs(self.true - self.modelled) * 1_000_000 // self.modelled


def _solve(p: PoolPlan, knob: str, value: int, target: int) -> int | None:
    """The term value whose plan logs ``target`` (two secant steps)."""
    arch = p.arch
    x0, t0 = value, plan_at(arch, p, knob, value).logged_tokens
    for _ in range(2):
        step = max(x0 // 4, 256 << 20)
        t1 = plan_at(arch, p, knob, x0 + step).logged_tokens
        if t1 == t0:
            return None
        x0 = x0 + (target - t0) * step // (t1 - t0)
        t0 = plan_at(arch, p, knob, x0).logged_tokens
    return max(x0, 0)


@cache
def measured() -> tuple[Measured, ...]:
    out = []
    for case in all_cases():
        p = plan(case)
        fam = family(p.deployment)
        knob = FAMILY_TERM[fam]
        try:
            modelled = p.knob(knob).as_int()
        except KeyError:  # a chain without this term (nothing to measure): the case still counts in the figures
            modelled = 0
        base = p
        weights = logged_weights(case)
        if weights is not None and modelled:
            base = plan_at(p.arch, p, "weights_per_gpu", weights)
        true = _solve(base, knob, modelled, case.logged) if modelled else None
        cls = gpu_class(p.deployment.gpu)
        rng = version_range(fam, p.deployment.engine_version)
        out.append(Measured(case, source_of(case), fam, rng, cls, p.logged_tokens, knob, modelled, true))
    return tuple(out)


def fit(rows: Iterable[Measured]) -> dict[tuple[str, str, str], Fitted]:
    """Each (family, version range, GPU class) cell's widest term error, and the wider cells a thin one borrows
    from (kvplan.engines.band.fitted): (family, range, '*') and (family, '*', '*')."""
    cells: dict[tuple[str, str, str], list[Measured]] = {}
    for m in rows:
        if m.term_ppm is None:
            continue
        for key in dict.fromkeys(
            ((m.family, m.version_range, m.gpu_class), (m.family, m.version_range, "*"), (m.family, "*", "*"))
        ):
            cells.setdefault(key, []).append(m)
    table = {}
    for key, ms in sorted(cells.items()):
        worst = max(ms, key=lambda m: m.term_ppm or 0)
        table[key] = Fitted(
            worst.term_ppm or 0, len(ms), len({m.source for m in ms}), f"{worst.case.label}: {_signed(worst)}"
        )
    return table


def _signed(m: Measured) -> str:
    assert m.true is not None
    return f"{(m.true - m.modelled) / m.modelled * 100:+.1f} %".replace("-", "\u2212")


@dataclass(frozen=True)
class Held:
    """One case's band with its own source left out of the fit."""

    m: Measured
    band: PoolBand
    cell: str
    """The cell the band came from, fitted without the case's source (kvplan.engines.band.fitted)."""

    @property
    def holds(self) -> bool:
        return self.band.holds(self.m.case.logged)

    @property
    def half_width(self) -> float:
        return (self.band.high - self.band.low) / 2 / max(self.band.point, 1)


@cache
def held_out() -> tuple[Held, ...]:
    rows = measured()
    out = []
    for m in rows:
        table = fit(r for r in rows if r.source != m.source)
        _, cell = fitted(m.family, m.version_range, m.gpu_class, table)
        out.append(Held(m, pool_band(plan(m.case), table=table), cell.split(":")[0]))
    return tuple(out)


@dataclass(frozen=True)
class Figures:
    cases: int
    sources: int
    within: int
    holds: int
    median_half_width: float

    def lines(self) -> list[str]:
        n = self.cases
        return [
            f"Over {n} config-alone cases from {self.sources} sources, leave one source out:",
            f"- within 2 % from the config alone: {self.within} of {n} ({self.within / n:.1%})",
            f"- the band holds: {self.holds} of {n} ({self.holds / n:.1%})",
            f"- median band half-width: {self.median_half_width * 100:.1f} %",
        ]


def figures() -> Figures:
    rows = held_out()
    return Figures(
        cases=len(rows),
        sources=len({h.m.source for h in rows}),
        within=sum(1 for h in rows if abs(h.m.error) <= WITHIN),
        holds=sum(1 for h in rows if h.holds),
        median_half_width=statistics.median(h.half_width for h in rows),
    )


def report() -> str:
    """The three figures and one row a case: its error, its held-out band, the cell that band came from."""
    lines = [
        *figures().lines(),
        "",
        "| case | source | error | band (held out) | from | holds |",
        "|---|---|---|---|---|---|",
    ]
    for h in held_out():
        err = f"{h.m.error * 100:+.2f} %".replace("-", "\u2212")
        band = f"{h.band.low:,} – {h.band.high:,} (±{h.half_width * 100:.1f} %)"
        lines.append(
            f"| {h.m.case.label} | {h.m.source} | {err} | {band} | {h.cell} | {'yes' if h.holds else '**no**'} |"
        )
    return "\n".join(lines)


def table_literal(table: Mapping[tuple[str, str, str], Fitted]) -> str:
    """engines/band.ERRORS as Python source, laid out as ruff formats it (so a rewrite leaves format clean)."""
    rows = []
    for k, v in table.items():
        key = "(" + ", ".join(_q(x) for x in k) + ")"
        args = [str(v.ppm), str(v.cases), str(v.sources), _q(v.worst)]
        one = f"    {key}: Fitted({', '.join(args)}),"
        inner = f"        {', '.join(args)}"
        if len(one) <= LINE:
            rows.append(one)
        elif len(inner) <= LINE:
            rows.append(f"    {key}: Fitted(\n{inner}\n    ),")
        else:
            rows.append(f"    {key}: Fitted(\n" + "".join(f"        {a},\n" for a in args) + "    ),")
    return "ERRORS: Mapping[tuple[str, str, str], Fitted] = {\n" + "\n".join(rows) + "\n}"


LINE = 120
"""pyproject's ruff line-length."""


def _q(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def shipped_is_fitted() -> bool:
    return dict(ERRORS) == fit(measured())
