"""What each engine line builds: a reader takes the line's match (and its record's text, for the readers that look
past the match) and returns its facts as (event kind, value) pairs; ``lines`` pairs each reader with its pattern."""

from __future__ import annotations

import re
from collections.abc import Callable

from kvplan.runbook.failures import failure_message
from kvplan.runbook.parse.patterns import (
    _LOAD_AVAIL,
    _LOAD_DTYPE,
    _LOAD_QUANT,
    _LOAD_TYPE,
    _LOAD_USAGE,
    _V0_ROW_FIELD,
    _VL_V0_DEVICE,
    _VL_V0_FIELD,
)
from kvplan.runbook.parse.records import _dict_pairs, kv_pairs
from kvplan.runbook.parse.values import (
    Args,
    Concurrency,
    Gib,
    KvAlloc,
    KvCacheSize,
    LoadEnd,
    MambaAlloc,
    MaxLenError,
    Override,
    Summary,
    SwaPool,
    V0Blocks,
    V0MaxLenError,
    V0Memory,
)

Fact = tuple[str, object]
"""An event's kind and its value."""
Read = Callable[[re.Match[str], str], tuple[Fact, ...]]
"""A line's reader: (its match, its record's text) -> its facts (none where the match is not the line after all)."""


def one(kind: str, value: Callable[[re.Match[str]], object]) -> Read:
    """A line that is one fact of one kind, built from its match alone."""

    def read(m: re.Match[str], _text: str) -> tuple[Fact, ...]:
        return ((kind, value(m)),)

    return read


def gib(m: re.Match[str]) -> Gib:
    return Gib.parse(m.group(1))


def integer(m: re.Match[str]) -> int:
    return int(m.group(1))


def word(m: re.Match[str]) -> str:
    return m.group(1)


def whole(m: re.Match[str]) -> str:
    return m.group(0)


def _tok(text: str) -> int:
    return int(text.replace(",", ""))


def _opt_gib(m: re.Match[str] | None) -> Gib | None:
    return Gib.parse(m.group(1)) if m else None


# --------------------------------------------------------------------------- SGLang


def sg_args(m: re.Match[str], text: str) -> tuple[Fact, ...]:
    return (("args", Args(kv_pairs(text, m.end()))),)


def load_end(m: re.Match[str]) -> LoadEnd:
    body = m.group(1)
    cls, dtype, quant = _LOAD_TYPE.search(body), _LOAD_DTYPE.search(body), _LOAD_QUANT.search(body)
    return LoadEnd(
        avail=_opt_gib(_LOAD_AVAIL.search(body)),
        usage=_opt_gib(_LOAD_USAGE.search(body)),
        model_class=cls.group(1) if cls else None,
        dtype=dtype.group(1) if dtype else None,
        quant=quant.group(1) if quant else None,
    )


def sg_kv(m: re.Match[str], _text: str) -> tuple[Fact, ...]:
    """'kv' with its #tokens; 'kv_sizes' without (0.4.1: the rows are the summary's)."""
    kv, k, v = m.group(3), m.group(4), m.group(5)
    alloc = KvAlloc(
        tokens=int(m.group("tokens") or 0),
        dtype=m.group("dtype"),
        kv=Gib.parse(kv) if kv else None,
        k=Gib.parse(k) if k else None,
        v=Gib.parse(v) if v else None,
    )
    return (("kv" if m.group("tokens") else "kv_sizes", alloc),)


def summary(m: re.Match[str]) -> Summary:
    return Summary(
        max_total_num_tokens=int(m.group(1)),
        chunked_prefill_size=int(m.group(2)) if m.group(2) is not None else None,
        max_prefill_tokens=int(m.group(3)),
        max_running_requests=int(m.group(4)),
        context_len=int(m.group(5)),
        available_gpu_mem=Gib.parse(m.group(6)) if m.group(6) else None,
    )


def sg_profiled(m: re.Match[str], _text: str) -> tuple[Fact, ...]:
    """A profiled pool at or below 0 is no pool at all: the start fails right after (not a cut log)."""
    return (("negative_profile", m.group(0)),) if int(m.group(2)) <= 0 else ()


def failed(engine: str) -> Read:
    """A line that says the start died: the error its message stands for."""
    return one("error", lambda m: failure_message(engine, m.group(0)))


def mamba(m: re.Match[str]) -> MambaAlloc:
    return MambaAlloc(int(m.group(1)), Gib.parse(m.group(2)), Gib.parse(m.group(3)))


def swa_sizes(m: re.Match[str]) -> SwaPool:
    return SwaPool(int(m.group(1)), int(m.group(2)))


def swa_pool(m: re.Match[str]) -> SwaPool:
    return SwaPool(int(m.group(3)), int(m.group(2)), Gib.parse(m.group(1)))


# --------------------------------------------------------------------------- vLLM


def engine_config(m: re.Match[str]) -> tuple[str | None, Args, str]:
    gen = m.group("gen") or "V0"  # "Initializing an LLM engine (v0.6.4.post1)": V0 before 0.9 named itself
    return (m.group("v"), Args(kv_pairs(m.group("cfg"))), gen)


def cli_args(m: re.Match[str], text: str) -> tuple[Fact, ...]:
    """The dict runs to the record's last ``}`` (found once, so many starts stay linear)."""
    close = text.rfind("}")
    return (("cli_args", Args(_dict_pairs(text[m.end() - 1 : close + 1]))),) if close >= m.end() else ()


def available(m: re.Match[str], _text: str) -> tuple[Fact, ...]:
    if m.group(1):
        return (("error", f"Available KV cache memory: -{m.group(2)} GiB (the weights and activations left none)"),)
    return (("available", Gib.parse(m.group(2))),)


def override(m: re.Match[str], _text: str) -> tuple[Fact, ...]:
    """0 profiled blocks is the profiling run's override, not the pool's."""
    o = Override(int(m.group(1)), int(m.group(2)))
    return (("profiling_override" if o.profiled_blocks == 0 else "override", o),)


def kv_size(m: re.Match[str]) -> KvCacheSize:
    return KvCacheSize(
        tokens=_tok(m.group(1)),
        max_model_len=_tok(m.group(2)) if m.group(2) else None,
        concurrency=m.group(3),
    )


def concurrency(m: re.Match[str]) -> Concurrency:
    return Concurrency(_tok(m.group(1)), m.group(2))


def maxlen_error(m: re.Match[str]) -> MaxLenError:
    return MaxLenError(
        max_model_len=int(m.group(1)),
        needed=Gib.parse(m.group(2)),
        available=Gib.parse(m.group(3).lstrip("-")),
        estimated_max_len=_tok(m.group(4)) if m.group(4) else None,
    )


def v0_blocks(m: re.Match[str], text: str) -> tuple[Fact, ...]:
    """The device word before ``blocks:`` (``GPU``, ``cuda``, ``rocm``) is read back from the record."""
    device = _VL_V0_DEVICE.search(text, max(m.start() - 16, 0), m.start())
    return (("v0_blocks", V0Blocks(int(m.group(1)), int(m.group(2)), device.group(1) if device else "GPU")),)


def v0_profile(m: re.Match[str], text: str) -> tuple[Fact, ...]:
    """The ``key=value[GiB]`` fields after ``Memory profiling results: `` (up to 4 KiB of them)."""
    start = m.end()
    fields = {f.group(1): f.group(2) for f in _VL_V0_FIELD.finditer(text, start, min(len(text), start + 4096))}

    def field_gib(key: str) -> Gib | None:
        v = fields.get(key)
        return Gib.parse(v) if v is not None else None

    memory = V0Memory(
        total=field_gib("total_gpu_memory"),
        utilization=fields.get("gpu_memory_utilization"),
        peak=field_gib("peak_torch_memory"),
        non_torch=field_gib("non_torch_memory"),
        kv=field_gib("kv_cache_size"),
    )
    return (("v0_profile", memory),)


def v0_budget(m: re.Match[str]) -> V0Memory:
    return V0Memory(total=Gib.parse(m.group(1)), utilization=m.group(2))


def v0_terms(m: re.Match[str], _text: str) -> tuple[Fact, ...]:
    """A negative rest for the KV cache is also a failed start."""
    kv_text = ("-" if m.group(4) else "") + m.group(5)
    terms = V0Memory(weights=Gib.parse(m.group(1)), non_torch=Gib.parse(m.group(2)), peak=Gib.parse(m.group(3)),
                     kv=None if m.group(4) else Gib.parse(kv_text))  # fmt: skip
    if m.group(4):
        return ("v0_terms", terms), ("error", f"the rest of the memory reserved for KV Cache is {kv_text} GiB")
    return (("v0_terms", terms),)


def v0_row(m: re.Match[str]) -> V0Memory:
    key = _V0_ROW_FIELD[m.group(1)]
    g = Gib.parse(m.group(2))
    return {
        "utilization": V0Memory(utilization=m.group(2)),
        "total": V0Memory(total=g),
        "weights": V0Memory(weights=g),
        "non_torch": V0Memory(non_torch=g),
        "peak": V0Memory(peak=g),
    }.get(key, V0Memory(kv=g))


def v0_maxlen(m: re.Match[str]) -> V0MaxLenError:
    return V0MaxLenError(int(m.group(1)), int(m.group(2)))
