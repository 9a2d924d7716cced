"""What both engine pools offer the replay: a running sequence, and start / commit / grow / release."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kvplan.sim.trace import Request


class Seq:
    """A request while it holds pages: its page keys, its length now, and what the pool holds for it."""

    __slots__ = (
        "arrival_us",
        "committed",
        "decode_start_us",
        "first_admit_us",
        "gen",
        "generated",
        "generated_at_admit",
        "handle",
        "hit_pages",
        "keys",
        "measured",
        "private_pages",
        "req",
        "tokens",
    )

    def __init__(self, req: Request, keys: list[int], measured: bool) -> None:
        self.req = req
        self.keys = keys
        """Keys of the sequence's whole pages, at least ``tokens // page`` of them."""
        self.tokens = req.input_tokens
        self.measured = measured
        self.hit_pages = 0
        """Pages matched in the cache when the request (last) started."""
        self.private_pages = 0
        """SGLang: pages owned by the request outside the tree."""
        self.committed = 0
        """vLLM: leading blocks hashed so far (its hits and the whole blocks it computed and committed)."""
        self.handle: Any = None
        """SGLang: the locked tree node; vLLM: the request's block ids in order."""
        self.gen = 0
        """Bumped at each preemption, so that events scheduled before it are ignored."""
        self.generated = 0
        self.generated_at_admit = 0
        self.arrival_us = req.arrival_us
        self.first_admit_us = -1
        self.decode_start_us = 0


class Pool(Protocol):
    """An engine's paged pool with its prefix cache; every count is in pages."""

    semantics: str
    policy: str
    pages: int
    """Usable pages (vLLM's null block excluded)."""
    page_tokens: int
    evictions: int
    check: bool

    def free_pages(self) -> int: ...

    def cached_pages(self) -> int:
        """Pages that hold reusable KV no running request references (evictable)."""
        ...

    def held_pages(self) -> int:
        """Pages referenced by running requests (shared cache pages counted once)."""
        ...

    def can_ever_fit(self, tokens: int) -> bool: ...

    def start(self, seq: Seq) -> bool:
        """Match the prefix and allocate pages for ``seq.tokens``; False (and nothing held) when they do not fit."""
        ...

    def commit(self, seq: Seq) -> None:
        """Make the sequence's whole pages reusable by others now (as after a prefill)."""
        ...

    def grow(self, seq: Seq, pages: int) -> bool: ...

    def release(self, seq: Seq) -> None:
        """Cache the sequence's whole pages, free the rest, drop its references."""
        ...

    def verify(self) -> None:
        """Debug mode: assert the pool's invariants."""
        ...

    def describe(self) -> str: ...


def cached_prefix(get: Callable[[int], Any], keys: list[int], n: int) -> list[Any]:
    """``get(key)`` over the longest run of ``keys[:n]`` it finds (not None), looked up in C-level steps that grow
    from 8 (most requests miss early)."""
    found: list[Any] = []
    i = 0
    step = 8
    while i < n:
        got = list(map(get, keys[i : min(i + step, n)]))
        try:
            j = got.index(None)
        except ValueError:
            found += got
            i += len(got)
            step *= 4
            continue
        found += got[:j]
        break
    return found
