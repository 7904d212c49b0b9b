"""Cost explorer: set what an expert's call costs (or a budget), watch the routers' decisions,
their metrics and the cost–EM plane."""

from pages.ui.app import within_app

within_app(__file__)  # before this page's own imports (pages/ui/app.py says why)

import streamlit as st

from l2d_core.app_logic.cost_settings import (
    beta_limits,
    cost_from_upload,
    money_words,
    on_price_scale,
    rule_beta1,
)
from l2d_core.app_logic.explorer import (
    budget_words,
    explore,
)
from l2d_core.app_logic.tiles import TILE_WORDS
from l2d_core.method.costs import PRICE_STEP, PRICE_TOP, CostConfig, InvalidCostError
from l2d_core.routers.registry import supports_budget
from pages.ui.cache import benchmark, fitted_router
from pages.ui.deploy_panel import deploy_panel
from pages.ui.ranking_panel import ranking_panel
from pages.ui.sweep_panel import BETA1_MAX, PRICE_MAX, sweep_panel
from pages.ui.widgets import (
    default_caption,
    default_choice,
    default_price,
    metric_row,
    page_sets,
    previous_metrics,
    remember_metrics,
    select_pool,
    select_routers,
    shown_errors,
    train_for,
)

SUB = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
ALPHA_MAX = 2.0
RULES = {
    "price": "a price per TFLOP of compute",
    "gflops": "the paper's GFLOPs rule",
    "latency": "a price per second of latency",  # offered where every agent's log has its latency
    "money": "a price per dollar",  # offered where every answer's price in dollars is known
    "hand": "hand, per expert",
}
DECIDE_BY = {"costs": "the cost setting", "share": "a share of expert calls", "gflops": "a GFLOPs budget"}

st.title("Cost explorer")
st.caption(
    "Each expert costs α × (its mistakes) + β per answer endpoint; the main model costs its mistakes. "
    "Raise β and fewer questions go to the experts; raise α and their mistakes weigh more. "
    "Instead of costs you can also set a budget: a share of questions the experts may take, or a "
    "mean compute per question."
)

dataset, pool = select_pool()
preparing = st.empty()  # filled at the end while the routers that read embeddings are ranked
with shown_errors():
    bench = benchmark(dataset, pool)
    choice = default_choice(dataset, pool)
    best = choice.router_id
experts, gflops = bench.pool.experts, bench.expert_gflops
main_gflops = float(bench.train.agent_gflops[0])
beta_max = beta_limits(gflops)
log_prices = bench.log_prices  # a remote LLM's prices change decisions over decades: a log slider
money_prices = bench.money_prices  # errors per dollar, on a log slider (None: no money rule here)
# the default price on the slider (a latency default is on the latency slider, 0 to PRICE_MAX)
price_end = max(log_prices[-1] if log_prices else PRICE_TOP, choice.price if choice.rule == "price" else 0.0)


def load_upload() -> None:
    """Uploader callback (runs before the widgets are drawn): the file's costs become slider values."""
    file = st.session_state.get("cost_upload")
    if file is None:
        return
    try:
        costs = cost_from_upload(file.getvalue(), len(experts), ALPHA_MAX, beta_max)
    except InvalidCostError as exc:
        st.session_state["cost_upload_error"] = f"{file.name}: {exc}"
        return
    b1 = rule_beta1(costs, gflops)
    st.session_state["cost_rule"] = "gflops" if b1 is not None else "hand"
    st.session_state["beta1"] = b1 if b1 is not None else st.session_state["beta1"]
    for j, (a, b) in enumerate(zip(costs.alpha, costs.beta), start=1):
        st.session_state[f"alpha_{j}"], st.session_state[f"beta_{j}"] = a, b


def seed_betas() -> None:
    """Rule callback: hand-set β sliders start from the rule in force before."""
    if st.session_state["cost_rule"] == "hand":
        for j, b in enumerate(bench.price_costs(st.session_state["price"]).beta, start=1):
            st.session_state[f"beta_{j}"] = min(b, beta_max[j - 1])


default_price(choice)
on_scale = on_price_scale(st.session_state.get("price", 0.0), log_prices, price_end)
if st.session_state.get("price") != on_scale:  # written only to change it, as every widget key here
    page_sets("price", on_scale)
# the latency price needs logged latency; the money price, every answer's price
rules = [r for r in RULES if (r != "latency" or bench.has_latency) and (r != "money" or money_prices)]
if money_prices:  # the middle of the pool's money prices, or the nearest to the one left from another pool
    money = st.session_state.get("money_price", money_prices[len(money_prices) // 2])
    if st.session_state.get("money_price") != (on := on_price_scale(money, money_prices, money_prices[-1])):
        page_sets("money_price", on)
for key, default in (("beta1", 0.05), ("decide_by", "costs"), ("latency_price", 0.1)):
    page_sets(key, default, if_absent=True)
if st.session_state["cost_rule"] not in rules:  # left over from a pool that logs latency
    page_sets("cost_rule", "price")
for j, b in enumerate(bench.costs(0.05).beta, start=1):
    st.session_state.setdefault(f"alpha_{j}", 1.0)
    st.session_state.setdefault(f"beta_{j}", b)
    if st.session_state[f"beta_{j}"] > beta_max[j - 1]:  # left over from another pool
        st.session_state[f"beta_{j}"] = beta_max[j - 1]

chosen = select_routers("routers", default=best, bench=bench)
st.sidebar.caption(default_caption(choice))
if not chosen:
    st.info("Pick at least one router in the sidebar.")
    st.stop()
with shown_errors():
    routers = {rid: fitted_router(dataset, pool, rid) for rid in chosen}


def follows_budget(decide_by: str) -> bool:
    """Whether every router shown follows a budget (then β applies to none of them)."""
    return decide_by != "costs" and all(supports_budget(type(r)) for r in routers.values())


def cost_controls() -> tuple[CostConfig, tuple[str, float] | None, str, tuple[float, ...]]:
    """The controls above the results: decide by costs or a budget, β's rule and value, α per
    expert. Returns the cost setting, the budget (or None), the rule and the α's."""
    decide_col, beta_col, alpha_col = st.container(border=True).columns([1, 1.3, 1.2])
    decide_by = decide_col.radio(
        "Decide by", list(DECIDE_BY), key="decide_by", format_func=DECIDE_BY.get, persist_state="session"
    )
    off = follows_budget(decide_by)  # β applies to none of the routers: greyed out
    budget = None
    if decide_by == "share":
        share = decide_col.slider(  # kept for the session, as "Decide by" is: a visit elsewhere reset it
            "Share of questions sent to an expert",
            0.0,
            1.0,
            0.2,
            0.01,
            key="budget_share",
            format="%.2f",
            persist_state="session",
        )
        budget = ("share", share)
    elif decide_by == "gflops":
        top = float(bench.train.agent_gflops.max())
        spend = decide_col.slider(
            "Mean GFLOPs per question",
            main_gflops,
            top,
            min(top, main_gflops + 0.2 * (top - main_gflops)),
            key=f"budget_gflops|{dataset}|{pool}",  # its range is the pool's: one per pool
            format="%.1f",
            persist_state="session",
        )
        budget = ("gflops", spend)
    alpha_col.markdown("**α** — weight of each expert's mistakes")
    alpha = tuple(
        alpha_col.slider(
            f"α{str(j).translate(SUB)} · {a}",
            0.0,
            ALPHA_MAX,
            step=0.05,
            key=f"alpha_{j}",
            persist_state="session",
        )
        for j, a in enumerate(experts, start=1)
    )
    rule = beta_col.radio(
        "β from",
        rules,
        key="cost_rule",
        format_func=RULES.get,
        on_change=seed_betas,
        persist_state="session",
        horizontal=True,
        disabled=off,
    )

    def log_slider(label: str, options, key: str, help_: str) -> float:  # prices a decade apart matter
        return beta_col.select_slider(
            label, options=options, format_func=lambda v: f"{v:g}", key=key, persist_state="session",
            disabled=off, help=help_,
        )  # fmt: skip

    with shown_errors():
        if rule == "price":
            price_help = (
                f"each expert costs λ × its extra compute over {bench.pool.main}, in TFLOPs per query"
            )
            if log_prices:
                steps = " (the prices step evenly in log: each decade matters)"
                lam = log_slider("λ · errors per TFLOP", log_prices, "price", price_help + steps)
            else:
                lam = beta_col.slider(
                    "λ · errors per TFLOP",
                    0.0,
                    price_end,
                    step=PRICE_STEP,
                    format="%.2f",
                    key="price",
                    persist_state="session",
                    disabled=off,
                    help=price_help,
                )
            costs = bench.price_costs(lam, alpha)
        elif rule == "gflops":
            beta1 = beta_col.slider(
                "β₁",
                0.0,
                BETA1_MAX,
                step=0.005,
                format="%.3f",
                key="beta1",
                persist_state="session",
                disabled=off,
                help=f"what asking {experts[0]} costs, in errors per answer endpoint; the others follow "
                "from their compute relative to it (the paper's rule)",
            )
            costs = CostConfig.from_beta1(beta1, gflops, alpha)
        elif rule == "latency":
            lam_s = beta_col.slider(
                "λₛ · errors per second",
                0.0,
                PRICE_MAX,
                step=0.01,
                key="latency_price",
                persist_state="session",
                disabled=off,
                help=f"each expert costs λₛ × its extra mean latency over {bench.pool.main} on the training "
                "articles, in seconds per query (as the agents' logs record them)",
            )
            costs = bench.latency_costs(lam_s, alpha)
        elif rule == "money":
            money_help = (
                f"each expert costs λ$ × its extra mean price per question over {bench.pool.main} on "
                f"the training articles, in dollars ({money_words(bench)}; the prices step evenly in log)"
            )
            lam_usd = log_slider("λ$ · errors per dollar", money_prices, "money_price", money_help)
            costs = bench.money_costs(lam_usd, alpha)
        else:
            hand = tuple(
                beta_col.slider(
                    f"β{str(j).translate(SUB)} · {a}",
                    0.0,
                    beta_max[j - 1],
                    step=0.001,
                    format="%.4f",
                    key=f"beta_{j}",
                    persist_state="session",
                    disabled=off,
                )
                for j, a in enumerate(experts, start=1)
            )
            costs = CostConfig(alpha, hand)
        if off:
            beta_col.caption(
                "Under the budget each router sets its own price, query by query: β does not apply here."
            )
        elif rule != "hand":
            beta_col.caption(" · ".join(f"β = {b:.4f} for {a}" for a, b in zip(experts, costs.beta)))
    return costs, budget, rule, alpha


@st.fragment  # a cost move re-runs only this: the controls and what depends on the cost setting
def results() -> None:
    costs, budget, rule, alpha = cost_controls()
    st.session_state["costs"], st.session_state["budget"] = costs, budget
    st.session_state["costs_pool"] = (dataset, pool)
    with shown_errors():
        train_for(routers.values(), costs)
        slots = {rid: f"{dataset}/{pool}/{rid}" for rid in chosen}
        setting = (costs, budget)
        previous = {rid: previous_metrics(s, setting) for rid, s in slots.items()}
        view = explore(bench, routers, costs, previous, budget)
    for col, v in zip(st.columns(len(view.views)), view.views):
        with col:
            st.subheader(v.label)
            metric_row(view.tiles[v.router_id], per_row=5 if len(view.views) == 1 else 3)
            lo, hi = v.metrics["gain_ci"]
            st.caption(
                f"EM vs random mixing: {v.metrics['gain']:+.2f} points (95% interval {lo:+.2f} to {hi:+.2f}) "
                "on the test articles."
            )
            if v.budget is not None:
                st.caption(budget_words(v.budget))
            elif budget is not None:
                st.caption("This router has no error estimates to follow a budget with: shown at the costs.")
        remember_metrics(slots[v.router_id], setting, v.metrics)
    st.caption(f"{len(bench.test):,} test questions. Changes: since the previous setting of each router.")
    st.caption(TILE_WORDS)

    from l2d_core.report import charts  # altair: imported after the tiles are drawn

    left, right = st.columns(2)
    chart_alloc = charts.allocation_chart(view.allocation)
    left.altair_chart(chart_alloc, width="stretch")
    chart_plane = charts.plane_chart(view.plane, log_x=st.session_state.get("plane_log", False))
    # as tall as the plot plus its legend: a legend below (many agents) squashed the plot
    right.altair_chart(charts.fit_width(chart_plane), width="stretch")
    right.checkbox("log cost axis", key="plane_log", help="the hull is straight in linear cost only")
    below = [v.label for v in view.views if v.router_id in view.below_zero]
    if below:
        right.warning(
            f"{', '.join(below)}: below the zero router's line — mixing single agents at random reaches a "
            "better EM for the same compute, so this router does not pay for itself here."
        )
    shown = {"Allocation ratios": chart_alloc, "Cost–EM plane": chart_plane}

    marked = rule != "hand" and not follows_budget(st.session_state["decide_by"])  # the setting is marked
    shown |= sweep_panel(dataset, pool, bench, routers, rule, alpha, price_end, marked)

    st.subheader("Export and import")
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Cost setting (JSON)",
        costs.to_json(),
        f"costs_{pool}.json",
        "application/json",
        key="download_costs",
        on_click="ignore",
        icon=":material/download:",
    )
    c1.json(costs.to_json(), expanded=2)  # st.json, not st.code: no 1.5 MB code highlighter to load
    c2.file_uploader("Load a cost setting (JSON)", type=["json"], key="cost_upload", on_change=load_upload)
    if err := st.session_state.pop("cost_upload_error", None):
        c2.error(err)
    c3.download_button(
        "Charts (HTML, works offline)",
        lambda: charts.charts_html(shown, f"Cost explorer — {dataset} {pool}"),
        f"cost_explorer_{dataset}_{pool}.html",
        "text/html",
        key="download_html",
        on_click="ignore",
        icon=":material/download:",
    )
    deploy_panel(bench, routers, costs, budget)


results()
ranking_panel(dataset, pool, choice, preparing)
