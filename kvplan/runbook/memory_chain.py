"""SGLang's memory chain of one GPU, term by term against the plan.

SGLang prints free memory at three points of a start (model_runner.py): ``Load weight begin. avail mem=A GB``
before the weights, ``Load weight end. ... avail mem=B GB`` after them, and ``Memory pool end. avail mem=C GB``
after the KV pool and the request tables. With the GPU's total T they split one GPU into four terms:

- memory held before loading: T - A (CUDA context, NCCL / RCCL and custom all-reduce buffers, the runtime);
- the weights: A - B;
- the pool and its tables: B - C (the KV pool's tensors, req_to_token, the allocator's free lists);
- the rest: C (what CUDA graphs and activations get).

Each term is set against the plan's own: the config's pre-load free memory, its weights, the pool tensors it
allocates (``allocated_bytes`` + ``req_to_token_bytes``), and what it leaves (a public case at ``sglang_chain``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.runbook.parse import At, Gib, Run, smallest


@dataclass(frozen=True)
class ChainTerm:
    name: str
    how: str
    """Which log lines give the term."""
    log_low: int
    log_high: int
    """Bytes, each printed figure taken at ± half its last decimal."""
    plan: int
    line: int | None

    @property
    def agrees(self) -> bool:
        return self.log_low <= self.plan <= self.log_high

    @property
    def delta(self) -> int:
        """The plan's figure less the log's (0 inside the log's rounding)."""
        if self.agrees:
            return 0
        return self.plan - (self.log_high if self.plan > self.log_high else self.log_low)


@dataclass(frozen=True)
class MemoryChain:
    total_bytes: int
    gpu: str
    terms: tuple[ChainTerm, ...]
    fits_gpu: bool
    """False when the log's free memory before loading exceeds the plan's GPU: the log is from a larger GPU, and
    no term can be read against this one."""

    @property
    def held(self) -> ChainTerm:
        return self.terms[0]


def _same_rank(items: tuple[At[Gib], ...], rank: str | None) -> At[Gib] | None:
    return next((x for x in items if rank is not None and x.rank == rank), None) or smallest(items)


# The held term, a public case: ajith-sirra-amd/Issues GLM-5-FP8-MI355X-SGLANG-ERROR.md, SGLang 0.5.9 on ROCm: 'Load
# weight begin. avail mem=279.48 GB' on a 287.98 GiB MI355X is 8.50 GiB held before loading, where the same file's
# 0.5.8.post1 image prints 283.48 GB (4.50 GiB held); a plan that assumes the usual ~1 GiB overshoots the pool by the
# difference times mem_fraction_static.
def sglang_chain(run: Run, plan: PoolPlan, log_rows_tables: int | None = None) -> MemoryChain | None:
    """The four terms of the rank whose free memory after the weights is smallest (SGLang sizes the pool from the
    minimum over ranks); None unless the log prints free memory both before and after the weights.
    ``log_rows_tables``: the plan's pool tensors for the log's own #tokens plus its req_to_token table, so that the
    pool term compares like with like (else the config's pool)."""
    ends = tuple(At(e.value.avail, e.line, e.rank) for e in run.load_end if e.value.avail is not None)
    end = smallest(ends)
    if plan.engine != "sglang" or end is None or not run.load_begin:
        return None
    begin = _same_rank(run.load_begin, end.rank)
    assert begin is not None
    gpu = plan.deployment.gpu
    total = gpu.cuda_total_bytes
    b, e = begin.value, end.value
    pre = plan.knob("pre_load_free").as_int()
    weights = plan.knob("weights_per_gpu").as_int()
    own = log_rows_tables is not None
    tables = log_rows_tables if own else plan.allocated_bytes + int(plan.extras.get("req_to_token_bytes", 0))
    assert tables is not None
    held = ChainTerm("memory held before loading", "GPU total − Load weight begin avail mem",
                     total - b.high_bytes, total - b.low_bytes, total - pre, begin.line)  # fmt: skip
    loaded = ChainTerm("weights", "Load weight begin − Load weight end avail mem",
                       max(b.low_bytes - e.high_bytes, 0), b.high_bytes - e.low_bytes, weights, end.line)  # fmt: skip
    terms = [held, loaded]
    pool_end = _same_rank(run.pool_end, end.rank)
    if pool_end is not None:
        c = pool_end.value
        name = "the pool and its tables" + (" (the log's #tokens, with req_to_token)" if own else "")
        terms.append(ChainTerm(name, "Load weight end − Memory pool end avail mem",
                               max(e.low_bytes - c.high_bytes, 0), e.high_bytes - c.low_bytes, tables,
                               pool_end.line))  # fmt: skip
        terms.append(ChainTerm("the rest", "Memory pool end avail mem", c.low_bytes, c.high_bytes,
                               pre - weights - tables, pool_end.line))  # fmt: skip
    return MemoryChain(total, gpu.name, tuple(terms), fits_gpu=b.low_bytes <= total)


AFTER_LOAD_BYTES = 16 * 2**20
"""What SGLang may take between printing 'Load weight end. ... avail mem' and measuring the free memory its budget
uses (model_runner: the print in load_model, the measure in profile_max_num_token, after other start-up
allocations): not printed. The largest seen is 4,141,800 B (75 rows of 55,224 B: SGLang 0.5.9 GLM-5 on MI355X,
ajith-sirra-amd/Issues); the bound is 16 MiB. It only ever lowers the count."""


def rows_taken_after_load(plan: PoolPlan, unit: str) -> int:
    """How many rows that memory holds, for an SGLang count of rows or tokens (0 for any other)."""
    if plan.engine != "sglang" or unit not in ("rows", "tokens") or plan.cell.total_bytes <= 0:
        return 0
    return AFTER_LOAD_BYTES // plan.cell.total_bytes * (plan.dcp if unit == "tokens" else 1)


def taken_after_load(plan: PoolPlan, unit: str, logged: int, values: tuple[int, ...]) -> str | None:
    """The note when the log's count is under the range its memory figures give by no more than
    ``AFTER_LOAD_BYTES`` of rows (then the accounting holds: the rest is memory the log does not print)."""
    below = rows_taken_after_load(plan, unit)
    low = min(values)
    if not below or not low - below <= logged < low:
        return None
    return (
        f"the log's pool is {low - logged:,} rows under the range its memory figures give: memory SGLang took after "
        f"the 'Load weight end' line, which the log does not print (up to {below:,} rows are read so)"
    )


def gpu_hint(chain: MemoryChain) -> str | None:
    """What to add when the log's free memory before loading exceeds the plan's GPU: the log's GPU."""
    if chain.fits_gpu:
        return None
    return (
        f"--set gpu=<the log's GPU> (the {chain.gpu}'s total is under the free memory the log prints before "
        f"loading, line {chain.held.line})"
    )
