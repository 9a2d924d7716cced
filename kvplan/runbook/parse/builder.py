"""Events -> runs: one ``Run`` per server start, and ``parse_log`` over a whole log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kvplan.runbook.long_context import LongContext
from kvplan.runbook.parse.events import (
    _NEUTRAL,
    _PHASE,
    _RESTART_ON_REPEAT,
    _SAME_AGAIN,
    CONFIG,
    LOAD,
    POOL,
    _Event,
    _events,
)
from kvplan.runbook.parse.records import _LineCount, _records, _split_lines
from kvplan.runbook.parse.values import (
    LOOKED_FOR,
    Args,
    At,
    Concurrency,
    Gib,
    KvAlloc,
    KvCacheSize,
    LoadEnd,
    LogError,
    MambaAlloc,
    MaxLenError,
    Override,
    ParsedLog,
    Run,
    Summary,
    SwaPool,
    T,
    V0Blocks,
    V0MaxLenError,
    V0Memory,
)

# --------------------------------------------------------------------------- runs from events


@dataclass
class _Builder:
    first_line: int
    engine: str | None = None
    events: list[_Event] = field(default_factory=list)
    seen: set[tuple[str, str | None]] = field(default_factory=set)
    phases: set[str] = field(default_factory=set)
    kv_per_rank: dict[str | None, int] = field(default_factory=dict)
    kv_mha: bool | None = None
    """Whether this run's pool lines are K/V (MHA/GQA) ones; every pool line of one start is the same kind."""
    last: dict[tuple[str, str | None], object] = field(default_factory=dict)

    def restarts(self, ev: _Event) -> bool:
        """Whether this event belongs to a new server start."""
        if not self.events:
            return False
        if self.engine is not None and ev.engine != self.engine and ev.kind in _PHASE:
            return True
        phase = _PHASE.get(ev.kind, CONFIG)
        if phase == CONFIG and POOL in self.phases:
            return True  # configuration lines (a dump, a banner, a page/dtype/backend choice) after the pool
        if phase == LOAD and POOL in self.phases:
            return True  # weights load again after the pool: a restart
        if ev.kind in _NEUTRAL:
            return False
        if ev.kind == "maxlen_error" and ("kv_size", ev.rank) in self.seen:
            return True  # V1 refuses before it prints 'GPU KV cache size': a refusal after one is another start
        if ev.kind == "kv":
            if self.kv_mha is not None and isinstance(ev.value, KvAlloc) and ev.value.mha != self.kv_mha:
                return True  # a K/V pool line after an MLA one (or back): another model's start
            return self.kv_per_rank.get(ev.rank, 0) >= 2  # target + draft per rank; a third is a new start
        if ev.kind in _SAME_AGAIN and self.last.get((ev.kind, ev.rank), ev) == ev.value:
            return False  # the same figure again (vLLM 0.10 prints its pool pair once a worker at tp 2): one start
        return ev.kind in _RESTART_ON_REPEAT and (ev.kind, ev.rank) in self.seen

    def add(self, ev: _Event) -> None:
        self.last[(ev.kind, ev.rank)] = ev.value
        self.events.append(ev)
        if ev.kind in _PHASE:
            self.engine = self.engine or ev.engine
            self.phases.add(_PHASE[ev.kind])
        self.seen.add((ev.kind, ev.rank))
        if ev.kind == "kv":
            self.kv_per_rank[ev.rank] = self.kv_per_rank.get(ev.rank, 0) + 1
            if self.kv_mha is None and isinstance(ev.value, KvAlloc):
                self.kv_mha = ev.value.mha

    def all_of(self, kind: str) -> list[_Event]:
        return [e for e in self.events if e.kind == kind]

    def first(self, kind: str) -> _Event | None:
        return next((e for e in self.events if e.kind == kind), None)

    def ats(self, kind: str) -> tuple[At[Gib], ...]:
        return tuple(At(e.value, e.line, e.rank) for e in self.all_of(kind) if isinstance(e.value, Gib))

    def freeze(self, index: int) -> Run:
        kv, draft, swa_kv = self._pool_lines()
        version, args, generation = self._config()
        first = self.first
        summary, kv_size, concurrency = first("summary"), first("kv_size"), first("concurrency")
        cli, override, maxlen = first("cli_args"), first("override"), first("maxlen_error")
        lines = [e.line for e in self.events]
        return Run(
            index=index, first_line=min(lines), last_line=max(lines), engine=self.engine, events=len(self.events),
            version=version, args=args, generation=generation, cli_args=_typed(cli, Args),
            baseline=self.ats("baseline"), load_begin=self.ats("load_begin"),
            load_end=tuple(At(e.value, e.line, e.rank) for e in self.all_of("load_end")
                           if isinstance(e.value, LoadEnd)),
            kv=kv, draft_kv=draft, swa_kv=swa_kv, pool_end=self.ats("pool_end"), summary=_typed(summary, Summary),
            page_size=_int_at(first("page")), dsa_kv_dtype=_str_at(first("dsa_dtype")),
            dsa_backends=_pair_at(first("dsa_backends")), model_loading=self.ats("model_loading"),
            available_kv=self.ats("available"), kv_cache_size=_typed(kv_size, KvCacheSize),
            concurrency=_typed(concurrency, Concurrency), dcp_multiplier=_int_at(first("dcp")),
            override=_typed(override, Override), block_size=_int_at(first("block")),
            kv_format=_str_at(first("format")), max_model_len=_int_at(first("max_len")),
            architecture=_str_at(first("architecture")), max_len_error=_typed(maxlen, MaxLenError),
            errors=tuple(At(str(e.value), e.line, e.rank) for e in self.all_of("error")),
            ranks=tuple(dict.fromkeys(e.rank for e in self.events if e.rank is not None)),
            v0_blocks=_typed(first("v0_blocks"), V0Blocks), v0_memory=self._v0_memory(),
            v0_max_len_error=_typed(first("v0_maxlen_error"), V0MaxLenError),
            profiling_override=_typed(first("profiling_override"), Override),
            negative_profile=_str_at(first("negative_profile")), total_tokens=_int_at(first("total_tokens")),
            mamba=tuple(At(e.value, e.line, e.rank) for e in self.all_of("mamba") if isinstance(e.value, MambaAlloc)),
            swa_pool=self._swa_pool(), hybrid_block=_int_at(first("hybrid_block")),
            mamba_padding=_str_at(first("mamba_padding")), long_context=_typed(first("long_context"), LongContext),
        )  # fmt: skip

    def _pool_lines(self) -> tuple[tuple[At[KvAlloc], ...], tuple[At[KvAlloc], ...], tuple[At[KvAlloc], ...]]:
        """The pool lines of each rank: the target's, an MTP draft's (a rank's second line), a SWA pool's."""
        kv: list[At[KvAlloc]] = []
        draft: list[At[KvAlloc]] = []
        targets: set[str | None] = set()
        summary = self.first("summary")
        kv_events = self.all_of("kv")
        if not kv_events and summary is not None and isinstance(summary.value, Summary):
            # SGLang 0.4.1 prints "KV Cache is allocated. K size: …, V size: …." with no #tokens: its rows are the
            # summary's max_total_num_tokens (no dcp then)
            rows = summary.value.max_total_num_tokens
            kv_events = [replace(e, value=replace(e.value, tokens=rows)) for e in self.all_of("kv_sizes")
                         if isinstance(e.value, KvAlloc)]  # fmt: skip
        swa_marks = [
            e.value for e in self.events if e.kind in ("swa_sizes", "swa_pool") and isinstance(e.value, SwaPool)
        ]
        swa_kv: list[At[KvAlloc]] = []
        full_sig = _full_signatures(kv_events) if swa_marks else set()
        for e in kv_events:
            assert isinstance(e.value, KvAlloc)
            if swa_marks:
                # SWAKVPool prints its SWA pool first, its full pool second (per rank): with two sizes the count says
                # which one a line is; with equal sizes the K/V sizes of a rank's second line do (a rank's first
                # line may be cut from an excerpt), else the order
                sizes = swa_marks[0]
                if sizes.full_tokens != sizes.swa_tokens and e.value.tokens in (sizes.full_tokens, sizes.swa_tokens):
                    is_swa = e.value.tokens == sizes.swa_tokens
                elif full_sig:
                    is_swa = _signature(e.value) not in full_sig
                else:
                    is_swa = e.rank not in targets
                (swa_kv if is_swa else kv).append(At(e.value, e.line, e.rank))
                targets.add(e.rank)
                continue
            (draft if e.rank in targets else kv).append(At(e.value, e.line, e.rank))
            targets.add(e.rank)
        return tuple(kv), tuple(draft), tuple(swa_kv)

    def _config(self) -> tuple[At[str] | None, At[Args] | None, str | None]:
        """The version (a banner, else the engine line's), the configuration (server_args, else the engine line's
        config) and V0 / V1 (the engine line)."""
        args = self.first("args")
        engine_config = self.first("engine_config")
        version = self.first("version")
        version_text: str | None = str(version.value) if version else None
        config_args: At[Args] | None = None
        if args is not None and isinstance(args.value, Args):
            config_args = At(args.value, args.line, args.rank)
        generation: str | None = None
        if engine_config is not None and isinstance(engine_config.value, tuple):
            v, cfg, generation = engine_config.value
            if config_args is None:
                config_args = At(cfg, engine_config.line, engine_config.rank)
            if v is not None:
                version_text = version_text or str(v)
                version = version or engine_config
        at_version = At(version_text, version.line, version.rank) if version and version_text else None
        return at_version, config_args, generation

    def _swa_pool(self) -> At[SwaPool] | None:
        """The SWA pool sizes, with the ``SWAKVPool mem usage`` figure where the log prints it."""
        sizes = [e for e in self.events if e.kind in ("swa_sizes", "swa_pool") and isinstance(e.value, SwaPool)]
        if not sizes:
            return None
        usage = next((e for e in sizes if isinstance(e.value, SwaPool) and e.value.usage is not None), None)
        e = usage or sizes[0]
        assert isinstance(e.value, SwaPool)
        return At(e.value, e.line, e.rank)

    def _v0_memory(self) -> At[V0Memory] | None:
        """V0's memory figures merged over its profile lines (0.6.5+: two lines), at the line with the KV figure."""
        parts = [e for e in self.events if e.kind in ("v0_profile", "v0_budget", "v0_terms", "v0_row")]
        if not parts:
            return None
        merged: dict[str, object] = {}
        line, rank = parts[-1].line, parts[-1].rank
        for e in parts:
            assert isinstance(e.value, V0Memory)
            for k, v in vars(e.value).items():
                if v is not None:
                    merged[k] = v
            if e.value.kv is not None:
                line, rank = e.line, e.rank
        return At(V0Memory(**merged), line, rank)  # type: ignore[arg-type]


def _signature(a: KvAlloc) -> tuple[str | None, ...]:
    return tuple(g.text if g is not None else None for g in (a.kv, a.k, a.v))


def _full_signatures(events: list[_Event]) -> set[tuple[str | None, ...]]:
    """The K/V sizes of the full pool of a SWA hybrid: a rank's second 'KV Cache is allocated' line."""
    seen: dict[str | None, int] = {}
    out: set[tuple[str | None, ...]] = set()
    for e in events:
        if isinstance(e.value, KvAlloc):
            seen[e.rank] = seen.get(e.rank, 0) + 1
            if seen[e.rank] == 2:
                out.add(_signature(e.value))
    return out


def _typed(e: _Event | None, kind: type[T]) -> At[T] | None:
    return At(e.value, e.line, e.rank) if e is not None and isinstance(e.value, kind) else None


def _int_at(e: _Event | None) -> At[int] | None:
    return At(e.value, e.line, e.rank) if e is not None and isinstance(e.value, int) else None


def _str_at(e: _Event | None) -> At[str] | None:
    return At(e.value, e.line, e.rank) if e is not None and isinstance(e.value, str) else None


def _pair_at(e: _Event | None) -> At[tuple[str, str]] | None:
    if e is None or not isinstance(e.value, tuple):
        return None
    a, b = e.value
    return At((str(a), str(b)), e.line, e.rank)


def parse_log(text: str | Iterable[str], source: str = "log") -> ParsedLog:
    """Every server start in ``text`` (the whole log, or its lines one by one, as ``log_lines`` streams them);
    raises LogError when nothing is recognisable."""
    count = _LineCount()
    lines = _split_lines(text) if isinstance(text, str) else text
    runs: list[Run] = []
    builder: _Builder | None = None
    for rec in _records(lines, count):
        for ev in _events(rec):
            if builder is None or builder.restarts(ev):
                if builder is not None:
                    runs.append(builder.freeze(len(runs) + 1))
                builder = _Builder(ev.line)
            builder.add(ev)
    if builder is not None and builder.events:
        runs.append(builder.freeze(len(runs) + 1))
    runs = [r for r in runs if r.engine is not None]
    if not runs:
        raise LogError(f"{source}: no engine startup lines recognised; looked for {LOOKED_FOR}")
    return ParsedLog(source, count.lines, tuple(_renumber(runs)))


def _renumber(runs: list[Run]) -> list[Run]:
    return [replace(r, index=i) for i, r in enumerate(runs, start=1)]
