"""Plots (the `plot` extra): matplotlib is imported here only, when a plot is asked for."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvplan import DIST
from kvplan.errors import InputError
from kvplan.fsio import atomic_file, check_target
from kvplan.plan.prefix import PrefixHit


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or bad input (exit 2) with the install command when the plot
    extra is missing: a missing optional package is not a missing GPU (exit 3)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(f"--plot needs matplotlib, which is not installed: pip install '{DIST}[plot]'") from None
    return plt


def save(plt: Any, fig: Any, path: Path, reads: Iterable[Path] = ()) -> None:
    """Write the figure atomically (kvplan.fsio: the old file stays whole if anything fails) and close it on
    every path. The format follows the suffix (png without one); one matplotlib cannot write is bad input."""
    try:
        fmt = path.suffix[1:].lower() or "png"
        if fmt not in fig.canvas.get_supported_filetypes():
            kinds = ", ".join(sorted(fig.canvas.get_supported_filetypes()))
            raise InputError(f"--plot {path}: matplotlib cannot write .{fmt} files (use one of: {kinds})")
        with atomic_file(path, "--plot", reads) as f:
            fig.savefig(f, format=fmt, dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)


def plot_prefix_sweep(curve: tuple[PrefixHit, ...], path: Path, reads: Iterable[Path] = ()) -> None:
    check_target(path, "--plot", reads)  # before drawing: refuse a symlink, a folder or an input early
    plt = pyplot()
    ctx = curve[-1].ctx_tokens if curve else 1
    x = [h.hit_tokens / ctx for h in curve]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, [h.naive_ppm / 1e6 for h in curve], "--", label="naive: hit ratio = compute saved")
    work = "indexer" if curve and curve[0].plan.arch.has_indexer else "attention"  # DSA scores with its indexer
    ax.plot(x, [h.saved_ppm / 1e6 for h in curve], "-o", label=f"{work} compute really saved")
    ax.set_xlabel(f"cached prefix / context ({ctx:,} tokens)")
    ax.set_ylabel("fraction saved")
    if curve:
        p = curve[0].plan
        ax.set_title(f"{p.arch.name} on {p.semantics}: what a prefix hit saves")
    ax.legend()
    ax.grid(alpha=0.3)
    save(plt, fig, path, reads)
