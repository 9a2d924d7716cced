"""Plots for `kvplan simulate` (the `plot` extra): matplotlib is imported here only, when a plot is asked for."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kvplan.fsio import check_target
from kvplan.render.plot import pyplot, save
from kvplan.sim.result import SimResult, Sweep


def plot_sweep(
    w: Sweep,
    path: Path,
    *,
    title: str,
    published: tuple[tuple[int, int], ...] = (),
    published_label: str = "",
    reads: Iterable[Path] = (),
) -> None:
    """Hit rate against capacity (tokens, log scale), with published points overlaid when given."""
    check_target(path, "--plot", reads)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    xs = [p.capacity_units * w.unit_tokens for p in w.points]
    ys = [p.hit_tokens / w.measured_tokens if w.measured_tokens else 0.0 for p in w.points]
    ax.plot(xs, ys, "-o", ms=3, label=f"kvplan: {w.semantics} {w.policy}, window {w.window}")
    if w.unbounded_hit_tokens is not None and w.measured_tokens:
        ax.axhline(w.unbounded_hit_tokens / w.measured_tokens, ls=":", color="grey", label="unbounded pool")
    if published:
        ax.plot(
            [c for c, _ in published],
            [v / 1e6 for _, v in published],
            "s",
            mfc="none",
            color="C3",
            label=published_label or "published",
        )
    ax.set_xscale("log")
    ax.set_xlabel("pool capacity (tokens)")
    ax.set_ylabel("prefix hit rate (token-weighted)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save(plt, fig, path, reads)


def plot_occupancy(r: SimResult, path: Path, *, title: str, reads: Iterable[Path] = ()) -> None:
    """Pages held and cached, running and waiting requests over simulated time."""
    check_target(path, "--plot", reads)
    plt = pyplot()
    o = r.occupancy
    assert o is not None
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    t = [s[0] / 1e6 for s in o.timeline]
    a1.stackplot(
        t,
        [s[3] for s in o.timeline],
        [s[4] for s in o.timeline],
        labels=["held by running requests", "cached, evictable"],
        alpha=0.8,
    )
    if r.capacity_units:
        a1.axhline(r.capacity_units, color="k", lw=0.8, label="pool")
    a1.set_ylabel(f"{r.unit}s")
    a1.legend(fontsize=8, loc="upper left")
    a2.plot(t, [s[1] for s in o.timeline], label="running")
    a2.plot(t, [s[2] for s in o.timeline], label="waiting")
    a2.set_xlabel("time (s)")
    a2.set_ylabel("requests")
    a2.legend(fontsize=8, loc="upper left")
    a1.set_title(title, fontsize=9)
    save(plt, fig, path, reads)
