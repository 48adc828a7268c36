"""`plot_layout(layout, save_directory="./tmp", name="layout", colormap="RdPu", verbose=False)`:
draw a `T.Fragment` over a 2-D tile as a grid of cells, one per logical index, each labelled with the
threads that hold it (`T...`) and its register slot (`L...`); a `T.Layout` on its 2-D physical grid,
each cell labelled with the logical index stored there (`L...`);
and save it as `name`.pdf / .png / .svg under `save_directory` (TileLang's tool, same files)."""
from __future__ import annotations

import itertools
import os


def _cells(layout):
    """{(i, j): (threads, local)} over the layout's input shape."""
    shape = [int(s) for s in layout.get_input_shape()]
    rep = int(getattr(layout, "replicate", 1) or 1)
    is_fragment = hasattr(layout, "map_forward_thread")
    out = {}
    for idx in itertools.product(*[range(s) for s in shape]):
        threads = [layout.map_forward_thread(list(idx), r) if rep > 1 else layout.map_forward_thread(list(idx))
                   for r in range(rep)] if is_fragment else []
        fwd = layout.map_forward_index(list(idx))
        out[idx] = (threads, fwd)
    return shape, out


def plot_layout(layout, save_directory="./tmp", name: str = "layout", colormap: str = "RdPu",
                verbose: bool = False) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches as patches
    import matplotlib.pyplot as plt

    shape, cells = _cells(layout)
    is_fragment = hasattr(layout, "map_forward_thread")
    if not is_fragment:
        # a plain layout is drawn on its physical (output) grid: each cell shows the logical index
        # that lands there, so any input rank with a 2-D output can be drawn
        out = {}
        for idx, (_, fwd) in cells.items():
            out[tuple(fwd)] = ([], list(idx))
        shape = [int(s) for s in layout.get_output_shape()]
        cells = out
    if len(shape) != 2:
        raise ValueError(f"plot_layout draws layouts over 2 dimensions; this one is over {shape}")
    nrows, ncols = shape
    if is_fragment:
        ncolors = max(t for ts, _ in cells.values() for t in ts) + 1
    else:  # a plain layout: colour by the logical row
        ncolors = max(f[0] for _, f in cells.values()) + 1
    cmap = plt.get_cmap(colormap, max(2, ncolors * 2))
    fig = plt.figure(figsize=(max(2, ncols), max(2, nrows)))
    ax = plt.gca()
    for (i, j), (threads, fwd) in sorted(cells.items()):
        if verbose:
            print(f"[{i}, {j}] -> threads {threads}, index {fwd}")
        key = threads[0] if is_fragment else fwd[0]
        ax.add_patch(patches.Rectangle((j, i), 1, 1, linewidth=0.5, edgecolor="black", facecolor=cmap(key)))
        top = ("T" + "/".join(map(str, threads))) if is_fragment else ""
        low = "L" + ",".join(map(str, fwd))
        if top:
            ax.text(j + 0.5, i + 0.3, top, ha="center", va="center", fontsize=min(14, 56 / max(4, len(top))))
        ax.text(j + 0.5, i + (0.7 if top else 0.5), low, ha="center", va="center",
                fontsize=min(14, 56 / max(4, len(low))))
    ax.set_xlim(0, ncols)
    ax.set_ylim(0, nrows)
    ax.invert_yaxis()
    plt.xticks([])
    plt.yticks([])
    os.makedirs(save_directory, exist_ok=True)
    plt.tight_layout()
    for ext in ("pdf", "png", "svg"):
        path = os.path.join(save_directory, f"{name}.{ext}")
        plt.savefig(path, bbox_inches="tight")
        print(f"Saved {ext} format into {path}")
    plt.close(fig)
