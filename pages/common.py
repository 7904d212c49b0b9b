"""The one module between the pages and l2d_core: cached loaders and shared widgets.

Heavy objects (prepared benchmark, encoder, fitted estimators) load once per process with
``st.cache_resource``; derived tables are ``st.cache_data``. Pages import from here and only
draw. Errors from l2d_core become messages on the page, never tracebacks.
"""

from __future__ import annotations

import html
from contextlib import contextmanager

import numpy as np
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from l2d_core.agent_cache import AgentCache
from l2d_core.agents import get_agent, get_pool, list_pools
from l2d_core.costs import CostConfig, InvalidCostError
from l2d_core.data import DATASETS, DataFormatError, load_dataset
from l2d_core.experiment import BETA_POINTS, Benchmark, fit_plugin, prepare, sdl_is_cached
from l2d_core.explorer import (
    POLICY_LABELS,
    PolicyView,
    answer_spans,
    highlight_segments,
    retrain_view,
    reweight_view,
    sweep_frame,
)
from l2d_core.routing_data import AgentNotCachedError, ensure_cached

DATASET_CHOICES = ("squad11", "squad20")


def _use_app_navigation() -> None:
    """A first visit to a deep link (e.g. /cost_explorer) on a fresh server would run the page
    in Streamlit's legacy ``pages/`` mode, skipping app.py (wrong sidebar, no page config).
    Leave that mode and rerun, so app.py's st.navigation serves the same URL."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory and st.runtime.exists():
        PagesManager.uses_pages_directory = False
        st.rerun()


_use_app_navigation()
USER_ERRORS = (DataFormatError, FileNotFoundError, InvalidCostError, KeyError, ValueError, LookupError)


@contextmanager
def shown_errors():
    """Turn the errors users can cause into a message on the page and stop the page."""
    try:
        yield
    except USER_ERRORS as exc:
        st.error(f"{type(exc).__name__}: {exc}")
        st.stop()


@st.cache_resource(show_spinner="Preparing the benchmark (embeddings are cached on disk)…")
def benchmark(dataset: str, pool: str) -> Benchmark:
    return prepare(dataset, pool)


@st.cache_resource(show_spinner="Learning error probabilities (once per pool)…")
def plugin_errors(dataset: str, pool: str) -> np.ndarray:
    """p̂ of every test question: the reweight policy needs nothing else."""
    bench = benchmark(dataset, pool)
    return fit_plugin(bench).error_proba(bench.X_test)


@st.cache_resource
def agent_cache() -> AgentCache:
    return AgentCache()


@st.cache_data(show_spinner=False)
def agent_summary(dataset: str, agent_ids: tuple[str, ...]):
    ds = load_dataset(dataset)
    cache = agent_cache()
    ensure_cached(ds, [get_agent(a) for a in agent_ids], cache)
    df = cache.summary(dataset, list(agent_ids))
    df["role"] = ["main" if i == 0 else f"expert {i}" for i in range(len(df))]
    df["params"] = [get_agent(a).params for a in agent_ids]
    df["name"] = [get_agent(a).name for a in agent_ids]
    return df


def reweight(dataset: str, pool: str, costs: CostConfig) -> PolicyView:
    """Plug-in policy for a cost setting: instant."""
    return reweight_view(benchmark(dataset, pool), costs, plugin_errors(dataset, pool))


def select_pool(sidebar: bool = True) -> tuple[str, str]:
    """Dataset and pool pickers, shared by every page through session state."""
    where = st.sidebar if sidebar else st
    for key in ("dataset", "pool"):  # keep the choice across pages (each page makes new widgets)
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    dataset = where.selectbox(
        "Dataset", DATASET_CHOICES, key="dataset", format_func=lambda d: f"{d} — {DATASETS[d].description}"
    )
    pools = [p.name for p in list_pools(dataset)]
    if not pools:
        st.error(f"no pool is defined for {dataset}")
        st.stop()
    if st.session_state.get("pool") not in pools:
        st.session_state["pool"] = pools[0] if "P3" not in pools else "P3"
    pool = where.selectbox(
        "Pool", pools, key="pool", format_func=lambda p: f"{p}: {' → '.join(get_pool(p).agent_ids)}"
    )
    return dataset, pool


def cost_from_state(bench: Benchmark) -> CostConfig:
    """The cost setting chosen on the cost explorer (BENCHMARK.md default: β₁ = 0.05, α = 1)."""
    saved = st.session_state.get("costs")
    if isinstance(saved, CostConfig) and saved.n_experts == len(bench.pool.experts):
        return saved
    return bench.costs(0.05)


__all__ = [
    "AgentNotCachedError",
    "DATASET_CHOICES",
    "agent_cache",
    "agent_summary",
    "benchmark",
    "cost_from_state",
    "plugin_errors",
    "reweight",
    "select_pool",
    "shown_errors",
]


# --- cost explorer and routing decisions pages ------------------------------------------------

MODES = ("Reweight", "Retrain")
# Highlight colours: gold answers first, then one per agent in pool order.
GOLD_COLOR = "#ffd54f"
AGENT_COLORS = (
    "#90caf9",
    "#a5d6a7",
    "#f48fb1",
    "#ce93d8",
    "#ffab91",
    "#80deea",
    "#e6ee9c",
    "#bcaaa4",
    "#b0bec5",
    "#fff59d",
    "#c5e1a5",
    "#9fa8da",
)


@st.cache_resource(show_spinner=False, max_entries=64)
def _retrain(dataset: str, pool: str, alpha: tuple[float, ...], beta: tuple[float, ...]) -> PolicyView:
    return retrain_view(benchmark(dataset, pool), CostConfig(alpha, beta))


def retrain(dataset: str, pool: str, costs: CostConfig) -> PolicyView:
    """SDL rejector trained for a cost setting, with a spinner; a setting trained before is
    loaded from disk (instant)."""
    sdl_rejector(dataset, pool, costs)  # trains with a spinner, or loads from disk
    return _retrain(dataset, pool, costs.alpha, costs.beta)


def policy_view(dataset: str, pool: str, costs: CostConfig, mode: str) -> PolicyView:
    """The view of ``mode`` ("Reweight" = plug-in, "Retrain" = SDL) at ``costs``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return reweight(dataset, pool, costs) if mode == "Reweight" else retrain(dataset, pool, costs)


@st.cache_data(show_spinner=False, max_entries=32)
def sweep(dataset: str, pool: str, policy: str, alpha: tuple[float, ...]):
    """β₁ sweep (BENCHMARK.md points, GFLOPs rule) of one policy at fixed α, labelled by policy."""
    bench = benchmark(dataset, pool)
    p_err = plugin_errors(dataset, pool) if policy == "plugin" else None
    return sweep_frame(bench, policy, alpha=alpha, p_err=p_err).assign(policy=POLICY_LABELS[policy])


def train_sweep(dataset: str, pool: str, alpha: tuple[float, ...]):
    """The SDL sweep: one rejector per β₁ (cached on disk), with a progress bar."""
    bench = benchmark(dataset, pool)
    bar = st.progress(0.0)
    for k, b in enumerate(BETA_POINTS):
        costs = bench.costs(b, alpha)
        bar.progress(k / len(BETA_POINTS), text=f"SDL rejector at β₁ = {b} ({k + 1}/{len(BETA_POINTS)})…")
        _retrain(dataset, pool, costs.alpha, costs.beta)
    bar.empty()
    return sweep(dataset, pool, "sdl", alpha)


def previous_metrics(slot: str, setting, metrics: dict) -> dict | None:
    """Metrics of the setting shown before the current one in ``slot`` (kept in session state),
    so metric tiles can show deltas; reruns of the same setting keep the same previous."""
    store = st.session_state.setdefault("_previous_metrics", {})
    shown = store.get(slot)
    if shown is None:
        store[slot] = (setting, metrics, None)
        return None
    if shown[0] == setting:
        return shown[2]
    store[slot] = (setting, metrics, shown[1])
    return shown[1]


def metric_row(tiles: list[dict], per_row: int = 5) -> None:
    """Draw metric tiles (from l2d_core.explorer.metric_tiles), ``per_row`` to a row."""
    for start in range(0, len(tiles), per_row):
        for col, tile in zip(st.columns(per_row), tiles[start : start + per_row]):
            col.metric(
                tile["label"],
                tile["value"],
                tile["delta"],
                delta_color=tile["delta_color"],
                help=tile["help"],
            )


def figures_html(figures: dict, title: str) -> str:
    """One standalone HTML page with every plotly figure (plotly.js embedded once: works offline)."""
    parts = [
        f"<h2>{html.escape(name)}</h2>" + fig.to_html(full_html=False, include_plotlyjs=(k == 0))
        for k, (name, fig) in enumerate(figures.items())
    ]
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{''.join(parts)}</body></html>"
    )


def label_colors(agent_ids) -> dict[str, str]:
    """Highlight colour of the gold answer and of each agent."""
    return {"gold": GOLD_COLOR, **{a: AGENT_COLORS[j % len(AGENT_COLORS)] for j, a in enumerate(agent_ids)}}


# Characters that markdown (or its math extension) would interpret, as HTML entities.
_MARKDOWN_SAFE = str.maketrans({c: f"&#{ord(c)};" for c in "$*_`~[]\\#|"})


def md_plain(text: str) -> str:
    """Escape ``text`` (HTML entities) so that st.markdown shows it verbatim: no tags, no
    emphasis, no math from a ``$`` in a question or context."""
    return html.escape(text, quote=False).translate(_MARKDOWN_SAFE)


def context_html(context: str, labelled, colors: dict[str, str]) -> tuple[str, list[str]]:
    """The context as HTML with each labelled answer ``(label, text)`` in a ``<mark>`` of its
    colour (overlaps drawn as stacked bands), and the labels whose answer was not found."""
    spans = answer_spans(context, labelled)
    found = {lab for _, _, lab in spans}
    missing = list(dict.fromkeys(lab for lab, text in labelled if (text or "").strip() and lab not in found))
    out = []
    for text, labels in highlight_segments(context, spans):
        if not labels:
            out.append(md_plain(text))
            continue
        cols = [colors.get(lab, "#e0e0e0") for lab in labels]
        bands = ", ".join(
            f"{c} {100 * k / len(cols):.0f}% {100 * (k + 1) / len(cols):.0f}%" for k, c in enumerate(cols)
        )
        title = html.escape(" + ".join(labels), quote=True)
        out.append(
            f'<mark title="{title}" style="background: linear-gradient(to bottom, {bands}); '
            f'padding: 0 1px; border-radius: 2px">{md_plain(text)}</mark>'
        )
    return "".join(out), missing


def legend_html(colors: dict[str, str]) -> str:
    """Colour chips naming each highlighted label."""
    chip = '<mark style="background: {}; padding: 0 4px; border-radius: 2px">{}</mark>'
    return " ".join(chip.format(c, html.escape(lab)) for lab, c in colors.items())


__all__ += [
    "MODES",
    "context_html",
    "figures_html",
    "label_colors",
    "legend_html",
    "metric_row",
    "policy_view",
    "previous_metrics",
    "retrain",
    "sweep",
    "train_sweep",
]


# --- single query and router comparison pages --------------------------------------------------


@st.cache_resource(show_spinner="Loading the plug-in error estimator (once per pool)…")
def plugin_rejector(dataset: str, pool: str):
    """The fitted plug-in estimator (p̂ for any new query, not only the test questions)."""
    return fit_plugin(benchmark(dataset, pool))


@st.cache_resource(show_spinner=False, max_entries=32)
def _sdl_rejector(dataset: str, pool: str, alpha: tuple[float, ...], beta: tuple[float, ...]):
    from l2d_core.experiment import fit_sdl

    return fit_sdl(benchmark(dataset, pool), CostConfig(alpha, beta))


def sdl_rejector(dataset: str, pool: str, costs: CostConfig):
    """The SDL rejector trained for ``costs`` (cached on disk; trains once per setting)."""
    bench = benchmark(dataset, pool)
    text = (
        "Loading the SDL rejector trained for this setting…"
        if sdl_is_cached(bench, costs)
        else "Training the SDL rejector for this setting (a few seconds; cached on disk)…"
    )
    with st.spinner(text):
        return _sdl_rejector(dataset, pool, costs.alpha, costs.beta)


def route_live(
    dataset: str, pool: str, question: str, context: str, costs: CostConfig, with_sdl: bool = False
) -> dict:
    """Route one query (dataset question or new text); not memoized, so the latency shown is
    the latency of this call (embeddings come from the disk cache after the first time)."""
    from l2d_core.live import route_query

    bench, plugin = benchmark(dataset, pool), plugin_rejector(dataset, pool)
    sdl = sdl_rejector(dataset, pool, costs) if with_sdl else None
    return route_query(bench, question, context, costs, plugin, sdl)


@st.cache_data(show_spinner="Asking the agents…", max_entries=64)
def pool_answers(pool: str, question: str, context: str, qid: str | None, expected: str | None) -> list[dict]:
    """Every agent of the pool on one query: cached answers for a dataset question, live runs of
    runnable agents, and an explicit 'cannot answer' for the rest (latency is the first call's)."""
    from l2d_core.live import answer_with

    return [
        answer_with(get_agent(a), question, context, qid, agent_cache(), expected or None)
        for a in get_pool(pool).agent_ids
    ]


def comparison_files() -> list:
    """``reports/*/results.json`` (set ``L2D_REPORTS_DIR`` to look elsewhere), newest first."""
    from l2d_core.comparison import list_results

    return list_results()


@st.cache_data(show_spinner=False, max_entries=16)
def comparison_results(path: str, mtime: float) -> dict:
    """A saved results file (``mtime`` in the key: a rewritten file is read again)."""
    from l2d_core.comparison import load_results

    return load_results(path)


def run_pool_comparison(dataset: str, pool: str, progress=None):
    """Compute every router on the pool (one seed: interactive; the benchmark script runs five)
    and save ``reports/<dataset>-<pool>/results.json``."""
    from l2d_core.comparison import reports_dir, run_comparison, save_results

    results = run_comparison(benchmark(dataset, pool), seeds=(0,), progress=progress)
    return save_results(results, reports_dir() / f"{dataset}-{pool}")


__all__ += [
    "comparison_files",
    "comparison_results",
    "plugin_rejector",
    "pool_answers",
    "route_live",
    "run_pool_comparison",
    "sdl_rejector",
]


# --- cost explorer figures ---------------------------------------------------------------------


def allocation_figure(frame):
    """Grouped bars of the allocation ratios (l2d_core.explorer.allocation_frame)."""
    fig = px.bar(
        frame,
        x="agent",
        y="share",
        color="policy",
        barmode="group",
        text_auto=".1%",
        title="Allocation ratios",
    )
    return fig.update_yaxes(tickformat=".0%")


def cost_em_figure(points, log_x: bool = False):
    """The cost–EM plane (l2d_core.explorer.cost_em_points): agents, the zero-router hull as a
    line, oracle and random, and the current operating point(s) as stars."""
    fig = go.Figure()
    hull = points[points["kind"] == "hull"]
    fig.add_scatter(
        x=hull["gflops"],
        y=hull["em"],
        mode="lines",
        name="zero router (agent hull)",
        line={"dash": "dot", "color": "gray"},
    )
    for kind, symbol, size in (("agent", "circle", 10), ("baseline", "diamond", 11), ("policy", "star", 18)):
        for _, p in points[points["kind"] == kind].iterrows():
            fig.add_scatter(
                x=[p["gflops"]],
                y=[p["em"]],
                mode="markers+text",
                name=p["name"],
                text=[p["name"]],
                textposition="top center",
                cliponaxis=False,
                marker={"symbol": symbol, "size": size},
            )
    return fig.update_layout(
        title="Cost–EM plane",
        xaxis_title="GFLOPs/query" + (" (log)" if log_x else ""),
        yaxis_title="EM %",
        xaxis_type="log" if log_x else "linear",
    )


def sweep_figures(frame, beta1: float | None = None) -> dict:
    """EM, GFLOPs/EM, allocation and TDL-vs-random charts over β₁ from sweep frames (one or more
    policies, column ``policy``); a dashed line marks the current β₁ when given. The charts are
    built once per sweep; a slider move only copies them and moves the marker."""
    figs = {name: go.Figure(fig) for name, fig in _sweep_base_figures(frame).items()}
    if beta1 is not None:
        for fig in figs.values():
            fig.add_vline(x=beta1, line_dash="dash", line_color="gray")
    return figs


@st.cache_resource(show_spinner=False, max_entries=32)
def _sweep_base_figures(frame) -> dict:
    share_cols = [c for c in frame.columns if c.startswith("share ")]
    shares = frame.melt(["beta1", "policy"], share_cols, "agent", "share")
    shares["agent"] = shares["agent"].str.removeprefix("share ")
    losses = frame.melt(["beta1", "policy"], ["tdl", "tdl_random", "tdl_random_matched"], "loss", "TDL")
    figs = {
        "EM vs β₁": px.line(frame, x="beta1", y="em", color="policy", markers=True, labels={"em": "EM %"}),
        "GFLOPs/EM vs β₁": px.line(
            frame,
            x="beta1",
            y="gflops_per_em",
            color="policy",
            markers=True,
            labels={"gflops_per_em": "GFLOPs/EM"},
        ),
        "Allocation vs β₁": px.line(
            shares, x="beta1", y="share", color="agent", line_dash="policy", markers=True
        ),
        "TDL vs random over β₁": px.line(
            losses, x="beta1", y="TDL", color="loss", line_dash="policy", markers=True
        ),
    }
    for name, fig in figs.items():
        fig.update_layout(title=name, xaxis_title="β₁")
    figs["Allocation vs β₁"].update_yaxes(tickformat=".0%")
    return figs


__all__ += ["allocation_figure", "cost_em_figure", "md_plain", "sweep_figures"]
