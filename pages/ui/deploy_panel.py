"""The cost explorer's "Deploy this router" panel: which of the routers shown can be saved for the
routing API (and why the others cannot), saving one at the cost setting or budget in force, and
how to serve it."""

import streamlit as st

from l2d_core.app_logic.live import new_text_advice
from l2d_core.deploy import (
    deploy,
    export_folder,
    export_problem,
    new_text_problem,
    serve_commands,
    zip_folder,
)
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import exportable, router_label
from l2d_core.routers.registry import routers as registered
from pages.ui.widgets import shown_errors


def deploy_panel(bench, routers: dict, costs: CostConfig, budget: tuple[str, float] | None) -> None:
    """The panel for ``routers`` (id → fitted router) on ``bench`` at ``costs`` (or ``budget``)."""
    st.subheader("Deploy this router")
    problems = {rid: export_problem(router) for rid, router in routers.items()}
    deployable = [rid for rid, problem in problems.items() if problem is None]
    for problem in filter(None, problems.values()):
        st.caption(f"Not offered: {problem}.")
    if not deployable:
        can = ", ".join(router_label(r) for r, cls in registered().items() if exportable(cls))
        st.caption(f"None of the routers shown can route a new query on its own; these can: {can}.")
    else:
        d1, d2 = st.columns([1, 2])
        rid = d1.selectbox("Router to save", deployable, format_func=router_label, key="deploy_router")
        folder = export_folder(bench.pool.name, rid, costs, budget)
        only_dataset = new_text_problem(routers[rid])  # said before saving, not after a failed curl
        if only_dataset:
            d1.info(f"{router_label(rid)}: {only_dataset}. {new_text_advice(bench.dataset.name)}")
        if d1.button("Save for the routing API", key="deploy_save", icon=":material/save:"):
            with shown_errors(), st.spinner("Saving the router…"):
                deploy(routers[rid], costs, budget).save(folder)
        if (folder / "router.json").is_file():
            what = "a question of the dataset, by its id" if only_dataset else "your own text"
            d2.markdown(f"Saved to `{folder}`. Serve it with the routing API, then send it {what}:")
            qid = bench.test_records[0].qid if only_dataset else None
            d2.code(serve_commands(folder, qid=qid), language="bash")
            d2.download_button(
                "Router folder (zip)",
                zip_folder(folder),
                f"{folder.name}.zip",
                "application/zip",
                key="deploy_zip",
                on_click="ignore",
                icon=":material/download:",
            )
