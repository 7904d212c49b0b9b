"""The router benchmark report and the figures the dashboard shares with it, built from a
router-comparison ``results.json`` (:func:`l2d_core.evaluation.comparison.run_comparison`) —
pure functions, no I/O but the targets' thresholds (``targets.json``), no UI.

It reproduces the paper's experiment structure on real systems: TDL against random allocation
over β₁ (paper Fig. 2), EM and GFLOPs/EM over β₁ (Fig. 3), allocation over β₁, the single-expert
table against r_prob / r_deter / r_trans at β₁ ∈ {0, 0.25, 0.5} (Tables 1–2; from the results'
``paper_table``), the agents table, and the issue's targets, each computed from the results.

Modules, imported one way (each only from those above it):

- :mod:`.frames`: the results as long pandas frames, and the shared helpers (``num``, ``fmt``…);
- :mod:`.charts`: Altair charts of the dashboard's pages (a lighter load in the browser than
  Plotly's), the one chart stack of the project;
- :mod:`.plots`: the report's figures, built on :mod:`.charts` (the same plane, sweeps and
  colours), and their HTML / PNG (vl-convert, no browser);
- :mod:`.tables`: markdown tables and :func:`summary_frame`;
- :mod:`.targets`: the issue's targets (thresholds in ``targets.json``);
- :mod:`.markdown`: the whole ``report.md``.

Every public name is re-exported here (``from l2d_core import report as R; R.figures(res)``).
"""

from .charts import (
    allocation_chart,
    charts_html,
    color_scale,
    compared_chart,
    fit_width,
    legend,
    mark_setting,
    plane_chart,
    sweep_charts,
)
from .frames import (
    AGENT_PREFIX,
    OURS_PREFIX,
    PAPER_BETAS,
    POINT_COLUMNS,
    REFERENCE_COLORS,
    TDL_CURVES,
    agent_colors,
    agent_em,
    agent_gflops,
    allocation_frame,
    beta_key,
    beta_points,
    beta_routers,
    fmt,
    fmt_ci,
    interval,
    is_agent,
    num,
    our_routers,
    paper_baselines,
    pgr_frame,
    pgr_refs,
    point_gflops_per_em,
    points_frame,
    points_of,
    router_colors,
    router_kind,
    router_label,
    routers_of,
    share_of,
    tdl_below,
    tdl_frame,
)
from .markdown import report_markdown
from .plots import (
    VEGA_SCRIPT,
    allocation_figure,
    cost_em_figure,
    em_beta_figure,
    figure_html,
    figure_png,
    figures,
    figures_html,
    pgr_figure,
    tdl_figure,
    vega_script,
)
from .requests import latency_tables, request_accuracy_figure, requests_frame
from .tables import (
    agents_table,
    beta_table,
    md_table,
    paper_table,
    pareto_table,
    price_table,
    summary_frame,
    summary_table,
    tdl_table,
)
from .targets import TARGETS, TARGETS_FILE, evaluate_targets, load_targets, targets_markdown

__all__ = [
    # frames
    "AGENT_PREFIX",
    "OURS_PREFIX",
    "paper_baselines",
    "PAPER_BETAS",
    "POINT_COLUMNS",
    "REFERENCE_COLORS",
    "TDL_CURVES",
    "agent_colors",
    "agent_em",
    "agent_gflops",
    "allocation_frame",
    "beta_key",
    "beta_points",
    "beta_routers",
    "share_of",
    "fmt",
    "fmt_ci",
    "interval",
    "is_agent",
    "num",
    "our_routers",
    "pgr_frame",
    "pgr_refs",
    "point_gflops_per_em",
    "points_frame",
    "points_of",
    "router_colors",
    "router_kind",
    "router_label",
    "routers_of",
    "tdl_below",
    "tdl_frame",
    # charts (the dashboard's, Altair)
    "allocation_chart",
    "charts_html",
    "color_scale",
    "compared_chart",
    "fit_width",
    "legend",
    "mark_setting",
    "plane_chart",
    "sweep_charts",
    # figures (the report's, Altair)
    "VEGA_SCRIPT",
    "allocation_figure",
    "cost_em_figure",
    "em_beta_figure",
    "figure_html",
    "figure_png",
    "figures",
    "figures_html",
    "pgr_figure",
    "request_accuracy_figure",
    "requests_frame",
    "tdl_figure",
    "vega_script",
    # tables
    "agents_table",
    "beta_table",
    "latency_tables",
    "md_table",
    "paper_table",
    "pareto_table",
    "price_table",
    "summary_frame",
    "summary_table",
    "tdl_table",
    # targets
    "TARGETS",
    "TARGETS_FILE",
    "evaluate_targets",
    "load_targets",
    "targets_markdown",
    # markdown
    "report_markdown",
]
