"""Allocate, with torch, exactly the tensors the engine would, and hold the plan against three counts:
Σ nbytes (must equal the prediction), the caching allocator's counters, and NVML's used memory."""

from __future__ import annotations

import datetime
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from kvplan import DIST
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError, ProbeUnavailable
from kvplan.plan.workspace import WorkspaceQuery, workspace
from kvplan.probes.tensors import TensorSpec, pool_tensors, predicted_bytes, workspace_tensors

ROUND_LARGE = 2 << 20
"""The CUDA caching allocator rounds requests over 1 MiB up to 2 MiB (kRoundLarge)."""


def load_torch() -> Any:
    """torch, imported quietly: without numpy torch warns at import (an error under -W error), and
    kvplan only needs numpy where torch.distributed does (``need_numpy``)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
            import torch
    except ImportError:
        raise ProbeUnavailable(
            f"torch is not installed: pip install '{DIST}[probe]' (or torch for your CUDA)"
        ) from None
    return torch


def need_numpy() -> None:
    """torch.distributed.gather_object turns the gathered bytes back with Tensor.numpy(): without numpy every
    rank would crash after its work; say so before the process group starts."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise ProbeUnavailable(
            f"torchrun runs gather results with torch.distributed, which needs numpy: pip install '{DIST}[probe]'"
        ) from None


def scaled(plan: PoolPlan, tokens: int) -> PoolPlan:
    """The same layer structure with a pool of about ``tokens`` tokens (and the context capped to it), re-planned."""
    if tokens <= 0:
        raise InputError(f"--tokens must be positive, got {tokens}")
    ctx = min(plan.context_len, max(tokens, plan.logical_page_tokens))
    dep = replace(plan.deployment, max_total_tokens=max(tokens // plan.dcp, plan.page_tokens), context_length=ctx)
    return plan_pool(plan.arch, dep)


@dataclass(frozen=True, kw_only=True)
class Measured:
    rank: int
    device: str
    tensors: int
    predicted_bytes: int
    nbytes: int
    allocated_delta: int | None
    reserved_delta: int | None
    nvml_used_delta: int | None
    workspace_bytes: int
    workspace_ok: bool
    free_after_bytes: int | None
    slack_bytes: int | None
    error: str | None = None
    failed_at: str | None = None
    notes: tuple[str, ...] = field(default=())

    @staticmethod
    def failure(
        plan: PoolPlan, rank: int, device: str, error: str, tensors: int = 0, nbytes: int = 0, at: str | None = None
    ) -> Measured:
        """A rank whose allocation (or whole run) failed: it still reports, with what it had built."""
        return Measured(
            rank=rank,
            device=device,
            tensors=tensors,
            predicted_bytes=predicted_bytes(plan),
            nbytes=nbytes,
            allocated_delta=None,
            reserved_delta=None,
            nvml_used_delta=None,
            workspace_bytes=0,
            workspace_ok=False,
            free_after_bytes=None,
            slack_bytes=plan.extras.get("slack_bytes"),
            error=error,
            failed_at=at,
        )

    @property
    def held(self) -> bool:
        return self.error is None and self.nbytes == self.predicted_bytes and self.workspace_ok

    @property
    def rounding_bytes(self) -> int | None:
        if self.reserved_delta is None:
            return None
        return self.reserved_delta - self.nbytes


def _nvml_used(index: int) -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            return int(pynvml.nvmlDeviceGetMemoryInfo(h).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def allocate(specs: list[TensorSpec], torch: Any, device: str, held: list[Any]) -> str | None:
    """Allocate each spec into ``held``; the name of the one that failed, or None."""
    for s in specs:
        try:
            held.append(torch.zeros(s.shape, dtype=getattr(torch, s.dtype), device=device))
        except (RuntimeError, MemoryError):
            return s.name
    return None


def validate(plan: PoolPlan, *, device: str = "cuda", rank: int = 0, torch: Any | None = None) -> Measured:
    """Build the pool and the workspaces, count three ways, free everything on every path."""
    t = torch if torch is not None else load_torch()
    cuda = device.startswith("cuda")
    if cuda and not t.cuda.is_available():
        raise ProbeUnavailable("no CUDA GPU is visible to torch: use --device cpu with --tokens for a small pool")
    index = int(device.split(":")[1]) if ":" in device else 0
    specs = pool_tensors(plan)
    ws = workspace(plan, WorkspaceQuery())
    wspecs = workspace_tensors(ws)
    held: list[Any] = []
    notes: list[str] = []
    try:
        if cuda:
            t.cuda.set_device(index)
            t.cuda.init()
            t.zeros(1, device=device)  # the CUDA context, outside the pool's count
            t.cuda.synchronize()
            a0, r0 = t.cuda.memory_allocated(index), t.cuda.memory_reserved(index)
        nv0 = _nvml_used(index) if cuda else None
        failed = allocate(specs, t, device, held)
        if failed is not None:
            nbytes = sum(int(x.nbytes) for x in held)
            return Measured.failure(plan, rank, device, f"allocation failed at {failed}", len(held), nbytes, failed)
        nbytes = sum(int(x.nbytes) for x in held)
        alloc_d = res_d = nv_d = free_after = None
        if cuda:
            t.cuda.synchronize()
            alloc_d = t.cuda.memory_allocated(index) - a0
            res_d = t.cuda.memory_reserved(index) - r0
            nv1 = _nvml_used(index)
            nv_d = nv1 - nv0 if nv1 is not None and nv0 is not None else None
            free_after = int(t.cuda.mem_get_info(index)[0])
        pool_count = len(held)
        wfail = allocate(wspecs, t, device, held)
        wbytes = sum(int(x.nbytes) for x in held[pool_count:])
        if wfail is not None:
            notes.append(f"workspace allocation failed at {wfail}")
        return Measured(
            rank=rank,
            device=device,
            tensors=pool_count,
            predicted_bytes=predicted_bytes(plan),
            nbytes=nbytes,
            allocated_delta=alloc_d,
            reserved_delta=res_d,
            nvml_used_delta=nv_d,
            workspace_bytes=wbytes,
            workspace_ok=wfail is None,
            free_after_bytes=free_after,
            slack_bytes=plan.extras.get("slack_bytes"),
            notes=tuple(notes),
        )
    finally:
        held.clear()
        if cuda:
            t.cuda.synchronize()
            t.cuda.empty_cache()


# --------------------------------------------------------------------------- several ranks (torchrun)


def world() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment; (0, 1, 0) otherwise."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


def validate_ranks(plan: PoolPlan, *, device: str, timeout_s: int = 120) -> tuple[Measured, ...] | None:
    """Each rank validates its own shard; rank 0 gets every rank's result (None on the other ranks).

    A rank that fails still reports (its error travels as a result), so no rank waits for a missing one;
    the process group has a timeout for a rank that dies.
    """
    rank, size, local = world()
    if size == 1:
        return (validate(plan, device=device),)
    t = load_torch()
    need_numpy()

    import torch.distributed as dist

    cuda = device.startswith("cuda")
    dev = f"cuda:{local}" if cuda else "cpu"
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=timeout_s))
    try:
        try:
            mine = validate(plan, device=dev, rank=rank, torch=t)
        except Exception as e:  # report, don't hang the others
            mine = Measured.failure(plan, rank, dev, str(e) or type(e).__name__)
        gathered: list[Any] | None = [None] * size if rank == 0 else None
        dist.gather_object(mine, gathered, dst=0)
        return tuple(gathered) if gathered is not None else None
    finally:
        dist.destroy_process_group()
