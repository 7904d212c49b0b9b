"""Router comparison: cost–EM curves, AIQ / APGR and TDL of every router on a pool."""

from pages.ui.app import within_app

within_app(__file__)  # before this page's own imports (pages/ui/app.py says why)

from pathlib import Path

import streamlit as st

from l2d_core import report
from l2d_core.app_logic.comparison_jobs import comparison_status, start_comparison
from l2d_core.app_logic.job_words import duration
from l2d_core.evaluation.results import list_results
from l2d_core.routers.registry import router_label, routers
from pages.ui.cache import comparison_results
from pages.ui.progress import job_bar
from pages.ui.widgets import select_pool, shown_errors


@st.fragment(run_every=2.0)
def _running(dataset: str, pool: str) -> None:
    """The comparison job's bar, read from its progress file every 2 s; the whole page is drawn
    again when it ends (its results, or why it stopped)."""
    job = comparison_status(dataset, pool)
    if not job.running:
        st.rerun()
    job_bar(job)
    st.caption(
        f"Running for {duration(job.elapsed_s)} in a process of its own: closing this tab does not "
        "stop it, and it saves its results when done (this page, reloaded or in another tab, "
        "shows it again)."
    )


st.title("Router comparison")
named = {}  # the registry's routers by family, as the comparison runs them
for rid, cls in routers().items():
    named.setdefault(cls.family, []).append(router_label(rid))
st.caption(
    "Each router that can run on the pool, on the test articles (questions none of them trained on), at "
    "each cost setting of a sweep. "
    + " ".join(
        f"**{title}:** {' · '.join(named[family])}."
        for family, title in (("l2d", "Learned"), ("baseline", "Baselines"), ("reference", "For reference"))
        if named.get(family)
    )
    + " And each agent alone. **AIQ**: a router's mean EM (%) across the pool's range of GFLOPs per "
    "question, on the upper envelope of its (GFLOPs, EM) points (0 below its cheapest point; higher is "
    "better). **APGR**: the share of the EM gap between the main agent and the best agent that a router "
    "closes, averaged over the share of questions sent to experts (1: all of it)."
)
dataset, pool = select_pool()

job = comparison_status(dataset, pool)
if not job.running and st.button(f"Run comparison for this pool ({dataset} {pool})", key="cmp_run"):
    with shown_errors():
        job = start_comparison(dataset, pool)
if job.running:
    st.session_state["cmp_job"] = (dataset, pool)  # its results are shown when it is done
    _running(dataset, pool)
elif job.state == "failed":
    st.error(f"The last comparison run on {dataset} {pool} stopped: {job.error}.")
elif job.state == "done" and st.session_state.get("cmp_job") == (dataset, pool):
    st.session_state.pop("cmp_job")
    st.success(f"Saved {job.result} ({duration(job.elapsed_s)}).")
    st.session_state["cmp_file"] = job.result  # the run's results are the ones shown

files = [str(p) for p in list_results()]
if not files:
    st.info(
        "No results yet: press **Run comparison for this pool** (one seed, a few minutes the first "
        "time; trained routers are cached on disk), or run `python scripts/benchmark_routers.py` "
        "(five seeds, report and plots) into `reports/<name>/`."
    )
    st.stop()
mine = next((f for f in files if Path(f).parent.name == f"{dataset}-{pool}"), None)
if st.session_state.get("cmp_file") not in files or st.session_state.get("cmp_for") != (dataset, pool):
    st.session_state["cmp_file"] = mine  # a pool change shows that pool's results, or none
st.session_state["cmp_for"] = (dataset, pool)
path = st.selectbox(
    "Results file",
    files,
    key="cmp_file",
    format_func=lambda f: Path(f).parent.name,
    placeholder="another pool's results",
)
if path is None:  # never another pool's results unasked: they would read as this pool's
    st.info(
        f"No results for {dataset} {pool} yet: press **Run comparison for this pool** above, or pick "
        "another pool's results in the menu."
    )
    st.stop()
with shown_errors():
    res = comparison_results(path, Path(path).stat().st_mtime)
st.caption(
    f"**{Path(path).parent.name}** — {res.get('dataset')} {res.get('pool')}"
    f"{' (answerable questions only)' if res.get('questions') == 'answerable' else ''}: "
    f"{' → '.join(res.get('agents', []))}; "
    f"{res.get('n_test')} test questions; seeds {res.get('seeds')}; created {res.get('created')}"
)

log_x = st.toggle("Log GFLOPs axis", key="cmp_log")
figures = {"Cost–EM": report.cost_em_figure(res, log_x=log_x)}  # (fit_width: legends below, uncut)
st.altair_chart(report.fit_width(figures["Cost–EM"]), key="cmp_plane", width="stretch")

st.subheader("AIQ and APGR")
summary = report.summary_frame(res)
st.dataframe(
    summary,
    hide_index=True,
    column_config={
        c: st.column_config.NumberColumn(format="%.3f")
        for c in summary.columns
        if c not in ("router", "points")
    },
)
if "AIQ over latency" in summary.columns:
    st.caption(
        "**AIQ over latency**: the same mean EM, across the range of seconds a question waits (the main "
        "model always, an expert on top): this pool logs every model's latency, and its GFLOPs may not "
        "order its models as their waits do."
    )
fig_pgr = report.pgr_figure(res)
if fig_pgr is not None:
    st.altair_chart(report.fit_width(fig_pgr), key="cmp_pgr", width="stretch")
    figures["PGR"] = fig_pgr

st.subheader("TDL vs β₁")
figures["TDL vs β₁"] = report.tdl_figure(res)
st.altair_chart(report.fit_width(figures["TDL vs β₁"]), key="cmp_tdl", width="stretch")
st.download_button(
    "Download plots (HTML, works offline)",
    report.figures_html(figures, f"Router comparison {Path(path).parent.name}"),
    file_name=f"router-comparison-{Path(path).parent.name}.html",
    mime="text/html",
    key="cmp_html",
)
