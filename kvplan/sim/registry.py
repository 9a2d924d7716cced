"""Which pool an engine's replay runs on: the factory over the pool modules, above their shared base
(kvplan.sim.pool), as SGLang's own ``mem_cache/registry.py`` sits above its caches."""

from __future__ import annotations

from kvplan.sim.blockchunks import ChunkPool
from kvplan.sim.blockpool import BlockPool
from kvplan.sim.paging import Paging
from kvplan.sim.pool import Pool
from kvplan.sim.radix import RadixPool


def engine_pool(
    semantics: str,
    pages: int,
    page_tokens: int,
    paging: Paging,
    *,
    policy: str = "lru",
    eagle: bool = False,
    check: bool = False,
) -> Pool:
    """An engine's pool of ``pages`` pages: SGLang's radix tree, or vLLM's block pool, kept per trace block
    (``ChunkPool``, the same pool page for page) when the trace's blocks are whole pages."""
    if semantics == "sglang":
        return RadixPool(pages, page_tokens, policy=policy, eagle=eagle, check=check)
    if paging.mode == "expand":
        return ChunkPool(pages, page_tokens, paging.factor, eagle_drop=eagle, check=check)
    return BlockPool(pages, page_tokens, eagle_drop=eagle, check=check)
