"""The doctor's verdict words and result dataclasses."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.plan.admit import Admission
from kvplan.plan.prefix import PrefixHit
from kvplan.runbook.evidence import Evidence
from kvplan.runbook.memory_chain import MemoryChain
from kvplan.runbook.parse import Gib, ParsedLog, Run

MATCH = "match"
MISMATCH = "mismatch"
CANNOT_CHECK = "cannot_check"
CANNOT_TELL = "cannot_tell"

# The class an engine prints for a model is not always the config's: SGLang and vLLM serve DeepSeek-V3.2 with the V3
# class (DeepseekV3ForCausalLM: the checkpoint's own architectures field says DeepseekV32ForCausalLM), and the MTP
# drafter prints its NextN class.
CLASS_ALIASES: dict[str, frozenset[str]] = {
    "DeepseekV32ForCausalLM": frozenset({"DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN"}),
    "DeepseekV3ForCausalLM": frozenset({"DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN"}),
    "KimiK25ForConditionalGeneration": frozenset({"DeepseekV3ForCausalLM"}),
    "DeepseekVLV2ForCausalLM": frozenset({"DeepseekVL2ForCausalLM"}),  # SGLang's name (configs/deepseekvl2.py)
}


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class ModelCheck:
    kind: str
    """'ok', 'unknown' (the log names no model class), 'class_differs', or 'mha' (a K/V pool: not MLA)."""
    log_class: str | None
    arch_class: str
    model_path: str | None


@dataclass(frozen=True, kw_only=True)
class Revealed:
    """A knob the log shows, against the config's resolved value."""

    knob: str
    value: object
    shown: str
    source: str
    line: int
    config_value: object
    config_origin: str
    differs: bool
    config_pool: int
    """The config plan's logged pool (tokens, or rows for a KV-line-only SGLang log)."""
    pool_after: int
    """The same with only this knob changed."""
    cell_before: int
    cell_after: int
    explained_by: str = ""
    consequence: bool = False
    """The config leaves the knob to the engine, and the engine picks the log's value once the log's other knobs
    are applied (dcp 8 -> trtllm and mem_fraction_static 0.897): not a drift of its own."""

    @property
    def changes_pool(self) -> bool:
        return self.differs and self.pool_after != self.config_pool

    @property
    def drift(self) -> bool:
        """A difference that is a finding: it changes the pool and is not a consequence of another knob."""
        return self.changes_pool and not self.consequence


@dataclass(frozen=True, kw_only=True)
class MemoryTerm:
    name: str
    config_bytes: int | None
    log: Gib | None
    """The figure as printed; None for a term the doctor derives."""
    low_bytes: int | None
    high_bytes: int | None
    line: int | None
    matches: bool | None


@dataclass(frozen=True, kw_only=True)
class LoggedPool:
    """The pool count the log prints, and what the doctor compares it with."""

    value: int
    unit: str
    """'tokens' (SGLang max_total_num_tokens = rows × dcp; vLLM GPU KV cache size), 'rows' (SGLang #tokens),
    'blocks' (vLLM's profiled num_gpu_blocks before an override) or 'needed' (bytes one max-length request needs,
    from vLLM's refusal)."""
    source: str
    line: int
    pool_tokens: int | None
    """Logical tokens of the pool as built (for admission); None when the engine did not build one."""
    max_model_len: int | None = None
    needed: Gib | None = None


@dataclass(frozen=True, kw_only=True)
class Comparison:
    logged: LoggedPool
    config: int
    """(a): the deployment as given."""
    revealed: int
    """(a'): with the knobs the log reveals."""
    expected: int
    """(b): with the log's memory figures too (= a' when the log has none)."""
    low: int
    high: int
    """(b) at both ends of the rounding interval of the log's memory figures."""
    slack: int
    within: bool
    memory_from_log: bool
    available_low: int | None = None
    available_high: int | None = None
    band: tuple[int, int, str] | None = None
    """A config-alone plan (no memory figure from the log): its band in the log's unit (low, high, what it rests
    on), from each estimate's measured error (kvplan.runbook.doctor.band); None where nothing is estimated."""

    @property
    def in_band(self) -> bool:
        """Outside the point, inside the band: within the expected error of a config-alone plan."""
        return not self.within and self.band is not None and self.band[0] <= self.logged.value <= self.band[1]


@dataclass(frozen=True, kw_only=True)
class Cause:
    key: str
    name: str
    change: str
    cell_bytes: int
    expected_cell_bytes: int
    value: int
    low: int
    high: int
    explains: bool
    plan: PoolPlan | None = None
    contradicted: str = ""
    """The byte fact of the log this cause contradicts (then it is never reported as the cause)."""
    fitted: bool = False
    """Found by fitting a knob the log does not show (a memory fraction, a cap), not from a figure of the log."""
    bytes_agree: bool | None = None
    """Whether this cause's rows have the bytes the log's byte figures give (None: not checked or no figure)."""


@dataclass(frozen=True, kw_only=True)
class ByteFact:
    """What the log's own byte figures say about the bytes of one pool row (SGLang: 'KV size' for '#tokens' rows;
    vLLM: 'Available KV cache memory' over the blocks), against the config's. Evidence first: a cause that
    contradicts it is never reported."""

    what: str
    line: int
    low: int
    high: int
    """Bytes per pool row (SGLang: per row of one rank; vLLM: per block) the figures allow."""
    config: int
    """The config's bytes for the same row or block."""
    unit: str
    """'B per row' or 'B per block'."""

    @property
    def agrees(self) -> bool:
        return self.low <= self.config <= self.high


@dataclass(frozen=True, kw_only=True)
class Headline:
    """The one line a person reads first: what the doctor can say, in evidence order."""

    kind: str
    """'match', 'band' (outside the point, inside the band of a config-alone plan), 'cause' (one known cause
    explains the log), 'memory' (the pool is the config's rows in the log's budget: the config's memory figures
    differ from the log's), 'model' (the log is from another model: its bytes per row disagree), 'refused' (the
    engine refused to start), 'mismatch' (a gap no known cause explains), or 'cannot_tell' (the log lacks what
    the verdict needs: ``missing`` says what to add)."""
    cause: Cause | None = None
    missing: tuple[str, ...] = ()
    knob: str = ""
    """For a cause the log prints (a revealed knob, ``cause`` None): the knob whose value closes the gap."""


@dataclass(frozen=True, kw_only=True)
class PerRank:
    rows: int
    logical: int
    dcp: int
    rows_line: int
    logical_line: int

    @property
    def consistent(self) -> bool:
        return self.logical == self.rows * self.dcp


@dataclass(frozen=True, kw_only=True)
class KvSize:
    """SGLang's ``KV size``: what the pool tensors take (padding rows and pages included)."""

    logged: Gib
    rows: int
    expected_bytes: int
    budget_bytes: int
    line: int

    @property
    def matches(self) -> bool:
        return self.logged.covers(self.expected_bytes)

    @property
    def overcommits(self) -> bool:
        """More than 1 % over the budget: beyond the padding page and index pages cell_size leaves out."""
        return self.expected_bytes > self.budget_bytes + self.budget_bytes // 100


@dataclass(frozen=True, kw_only=True)
class StartupCheck:
    message: str
    line: int
    max_model_len: int | None
    needed: Gib | None
    available: Gib | None
    estimated_max_len: int | None
    predicted: bool
    planned_needed_bytes: int | None
    planned_estimate_low: int | None
    planned_estimate_high: int | None
    planned_refuses: bool = False
    """The plan refuses at the log's max_model_len too (``predicted`` also needs its figures to be the log's)."""


@dataclass(frozen=True, kw_only=True)
class Implied:
    """Bytes per pool row the log's own figures imply, and model shapes that fit."""

    low: int
    high: int
    rows: int
    how: str
    shapes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DecodeRead:
    ctx_tokens: int
    indexer_bytes_per_token: int
    indexer_read_bytes: int
    sparse_read_bytes: int
    weights_bytes: int
    hbm_bytes_per_s: int
    indexer_us: int
    weights_us: int
    crossover_ctx: int
    """The context at which one request's indexer K read equals the weight read."""
    batch_equal: int
    """Requests of ``ctx_tokens`` whose indexer K read together equals the weight read of one step."""
    weights_source: str


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    log: ParsedLog
    run: Run
    status: str
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    model: ModelCheck
    # what a diagnosis that stops early (no config, a K/V log against an MLA config) leaves out: nothing planned
    config: PoolPlan | None = None
    revealed: tuple[Revealed, ...] = ()
    revealed_plan: PoolPlan | None = None
    memory: tuple[MemoryTerm, ...] = ()
    memory_matches: bool | None = None
    log_plan: PoolPlan | None = None
    comparison: Comparison | None = None
    causes: tuple[Cause, ...] = ()
    per_rank: PerRank | None = None
    kv_size: KvSize | None = None
    startup: StartupCheck | None = None
    implied: Implied | None = None
    log_budget: tuple[int, int] | None = None
    """For a pool kvplan cannot plan: the KV budget the log's own memory figures give (bytes, low and high)."""
    best: PoolPlan | None = None
    admission: Admission | None = None
    admission_asked: bool = False
    prefix: PrefixHit | None = None
    decode: DecodeRead | None = None
    byte_fact: ByteFact | None = None
    headline: Headline = Headline(kind="cannot_tell")
    evidence: Evidence | None = None
    chain: MemoryChain | None = None
    """SGLang's memory of one GPU term by term (held before loading, weights, the pool, the rest) against the plan."""

    @property
    def explaining(self) -> tuple[Cause, ...]:
        return tuple(c for c in self.causes if c.explains and not c.contradicted)

    @property
    def ok(self) -> bool:
        return self.status == MATCH
