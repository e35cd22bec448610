"""Pictures of Transformer math (chapter 4). matplotlib is imported only when a plot is drawn."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ._errors import InvalidValueError
from ._models import ModelSpec, model as _model
from ._transformer import FLOP_COMPONENTS, PARAM_COMPONENTS, params, train_flops
from ._units import fmt
from ._validate import flag, positive, shown

#: One colour per component, the same in every panel.
COLOURS = {"mlp": "#4C78A8", "attention": "#F58518", "dot_product": "#E45756", "embeddings": "#54A24B",
           "norms": "#9D9D9D"}
LABELS = {"mlp": "MLP", "attention": "attention projections", "dot_product": "dot-product attention",
          "embeddings": "embeddings / unembedding", "norms": "norms"}


def _model_list(models) -> list[ModelSpec]:
    if isinstance(models, (str, ModelSpec)):
        models = (models,)
    if not isinstance(models, Iterable):
        raise InvalidValueError(f"`models` must be a model name, a ModelSpec, or a sequence of them, "
                                f"got {shown(models)}")
    specs = [_model(m, arg="models") for m in models]
    if not specs:
        raise InvalidValueError("`models` must name at least one model, got none")
    return specs


def _seq_lens(seq_lens) -> list[float]:
    values = np.atleast_1d(positive("seq_lens", seq_lens))
    if values.ndim != 1 or len(values) > 8:
        raise InvalidValueError(f"`seq_lens` must be one to eight sequence lengths, got {shown(seq_lens)}")
    return [float(v) for v in values]


def _stacked(ax, rows, components, totals):
    """Horizontal bars, one per row, split into each component's share (%); the total written at the end."""
    y = np.arange(len(rows))[::-1]
    left = np.zeros(len(rows))
    for c in components:
        share = np.array([r[c] for r in rows]) / np.array([sum(r.values()) for r in rows]) * 100
        ax.barh(y, share, left=left, color=COLOURS[c], label=LABELS[c], edgecolor="white", linewidth=0.5, gid=c)
        left += share
    for yi, text in zip(y, totals):
        ax.text(101, yi, text, va="center", fontsize=8)
    ax.set_xlim(0, 100)
    ax.grid(axis="x", alpha=0.3)


def plot_model_breakdown(models=("llama-3-8b", "llama-3-70b", "llama-3.1-405b", "mixtral-8x7b", "deepseek-v3"), *,
                         seq_lens=(4096, 32768, 131072), causal=False, ax=None):
    """Where a model's parameters sit, and where its training FLOPs go, component by component.

    Two panels of stacked bars: each model's parameters split into MLP, attention projections,
    embeddings and norms (its total written beside it, and for an MoE the parameters a token uses);
    and each model's training FLOPs per token at each sequence length, split into MLP, attention
    projections, dot-product attention and the unembedding. Shares are in percent, so models of
    very different sizes sit side by side.

    Formula:
        share of a component = its count / the total (params, and training FLOPs per token at T)

    Args:
        models: model names or ModelSpecs.
        seq_lens: sequence lengths T (tokens) at which to split the FLOPs (one to eight).
        causal: count only the unmasked half of dot-product attention.
        ax: a pair of matplotlib Axes to draw on, or None for a new figure.

    Returns:
        the two matplotlib Axes (parameters, FLOPs).

    Chapter:
        4 (Transformer math)

    Example:
        >>> ax_params, ax_flops = plot_model_breakdown(["llama-3-70b"], seq_lens=[8192])
        >>> ax_flops.get_xlabel()
        'share of training FLOPs per token (%)'
    """
    specs = _model_list(models)
    lengths = _seq_lens(seq_lens)
    causal = flag("causal", causal)
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if ax is None:
        rows = len(specs) * (1 + len(lengths))
        heights = [len(specs), len(specs) * len(lengths)]
        _, (ax_p, ax_f) = plt.subplots(2, 1, figsize=(6.5, 3.4 + 0.3 * rows), gridspec_kw={"height_ratios": heights})
    elif isinstance(ax, (list, tuple, np.ndarray)) and len(ax) == 2 and all(isinstance(a, Axes) for a in ax):
        ax_p, ax_f = ax
    else:
        raise InvalidValueError(f"`ax` must be a pair of matplotlib Axes or None, got {shown(ax)}")

    param_rows, param_totals = [], []
    for m in specs:
        param_rows.append({c: params(m, component=c) for c in PARAM_COMPONENTS})
        total = fmt(params(m), "params")
        param_totals.append(total + (f" ({fmt(params(m, active=True), '')} active)" if m.is_moe else ""))
    _stacked(ax_p, param_rows, PARAM_COMPONENTS, param_totals)
    ax_p.set_yticks(np.arange(len(specs))[::-1], [m.name for m in specs], fontsize=8)
    ax_p.set_xlabel("share of parameters (%)")
    ax_p.set_title("Parameters by component")

    flop_rows, flop_totals, labels = [], [], []
    for m in specs:
        for T in lengths:
            flop_rows.append({c: train_flops(m, seq_len=T, component=c, causal=causal) for c in FLOP_COMPONENTS})
            flop_totals.append(fmt(train_flops(m, seq_len=T, causal=causal), "FLOP"))
            labels.append(f"{m.name}, T = {T:,.6g}")
    _stacked(ax_f, flop_rows, FLOP_COMPONENTS, flop_totals)
    ax_f.set_yticks(np.arange(len(labels))[::-1], labels, fontsize=8)
    ax_f.set_xlabel("share of training FLOPs per token (%)")
    ax_f.set_title("Training FLOPs by component" + (" (causal attention kernel)" if causal else ""))

    handles = {h.get_label(): h for a in (ax_p, ax_f) for h in a.get_legend_handles_labels()[0]}
    order = [LABELS[c] for c in ("mlp", "attention", "dot_product", "embeddings", "norms")]
    ax_f.figure.legend([handles[k] for k in order], order, loc="lower center", ncol=3, fontsize=9, frameon=False)
    ax_f.figure.tight_layout(rect=(0, 0.07, 0.8, 1))
    if ax is None:
        from ._plot import _legible

        _legible(ax_f.figure)
        ax_f.figure.tight_layout(rect=(0, 0.07, 0.8, 1))
    return ax_p, ax_f
