"""How many tensors a ``model.safetensors.index.json`` may list (bounded work for every input)."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import ConfigError

MAX_INDEX_TENSORS = 500_000
"""Most tensors a ``model.safetensors.index.json`` may list: the largest public indexes list about 210,000 (an
INT4 Kimi-K2: 61 layers × 384 experts × 3 projections × 3 tensors). `kvplan budget` on a snapshot whose index
lists 500,000 took 2.3 s and 190 MB; a larger index is refused before it is parsed (1M took 29 s, 922 MB)."""


def refuse_many_tensors(path: Path, n: int) -> None:
    """An index listing more than MAX_INDEX_TENSORS tensors is bad input, said before any more work is done."""
    if n <= MAX_INDEX_TENSORS:
        return
    raise ConfigError(
        f"lists {n:,} tensors, over kvplan's limit of {MAX_INDEX_TENSORS:,} (the largest real checkpoints list "
        "about 210,000); move the index out of the folder to plan from config.json alone",
        source=str(path),
        key="weight_map",
    )
