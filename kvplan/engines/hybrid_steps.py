"""The hybrid steps SGLang's memory chain (kvplan.engines.sglang.plan_pools) runs for a hybrid model: the state pool
taken out of the budget first, the SWA pool beside the full pool, running requests capped by the state slots. The
one implementation is kvplan.engines.sglang_hybrid_sizer.HybridSizer, where each step cites SGLang's source."""

from __future__ import annotations

from typing import Protocol

from kvplan.engines.common import Knob


class HybridSteps(Protocol):
    def take_state(self, rest_gib: float, attn_tp: int) -> tuple[float, int, str | None]: ...

    def pool_tokens(self, available: int, full_cell: int, dtype: str, attn_tp: int, page: int) -> tuple[int, int]: ...

    def swa_tokens_for(self, full_tokens: int, page: int) -> int: ...

    def check_swa_pool(self, swa_tokens: int, page: int) -> str | None: ...

    def swa_alloc_bytes(self, swa_tokens: int, dtype: str, attn_tp: int, page: int) -> int: ...

    def state_alloc_bytes(self, slots: int, attn_tp: int) -> int: ...

    def running_cap(self, slots: int) -> int | None: ...

    def cap_note(self, knob: Knob, mrr: int, cap: int, slots: int) -> tuple[Knob, list[str], str | None]: ...
