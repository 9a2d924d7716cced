"""Plots (the `plot` extra): matplotlib is imported here only, when a plot is asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.errors import InputError, ProbeUnavailable
from kvplan.plan.prefix import PrefixHit


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or exit 3 with a sentence when the plot extra is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ProbeUnavailable("--plot needs matplotlib, which is not installed: pip install 'kvplan[plot]'") from None
    return plt


def save(plt: Any, fig: Any, path: Path) -> None:
    """Write the figure (a bad path is bad input) and close it on every path."""
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as e:
        raise InputError(f"--plot {path}: cannot write: {e}") from None
    finally:
        plt.close(fig)


def plot_prefix_sweep(curve: tuple[PrefixHit, ...], path: Path) -> None:
    plt = pyplot()
    ctx = curve[-1].ctx_tokens if curve else 1
    x = [h.hit_tokens / ctx for h in curve]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [h.naive_ppm / 1e6 for h in curve], "--", label="naive: hit ratio = compute saved")
    ax.plot(x, [h.saved_ppm / 1e6 for h in curve], "-o", label="indexer compute really saved")
    ax.set_xlabel(f"cached prefix / context ({ctx:,} tokens)")
    ax.set_ylabel("fraction saved")
    if curve:
        p = curve[0].plan
        ax.set_title(f"{p.arch.name} on {p.semantics}: what a prefix hit saves")
    ax.legend()
    ax.grid(alpha=0.3)
    save(plt, fig, path)
