"""The offer to train a model that answers your own text, shown where no pool can: its expected
time on this machine (measured in the background when asked: the page draws at once and fills it
in), a button, then its progress (the run goes on in the background)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import streamlit as st

from l2d_core.app_logic.quick_agent import (
    PROFILES,
    QUICK,
    estimate,
    measurement,
    quick_pool,
    start_training,
    stored_measurement,
    train_command,
    training_status,
    workload,
)
from l2d_core.runtime import at_load_now

__all__ = ["offer_quick_agent", "switch_pool_button"]


def _minutes(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _ago(t: float) -> str:
    return _minutes(max(0.0, time.time() - t)) + " ago"


@st.fragment(run_every=2.0)
def _progress(dataset: str) -> None:
    s = training_status(dataset)
    if s.state != "running":
        st.rerun()  # the whole page: the pool is ready, or the run stopped
    if not s.total:
        st.progress(0.0, text=f"{s.stage.capitalize()}: loading the questions and the model…")
        return
    left, eta = s.left_s, ""
    if left is not None:
        eta = f"; about {_minutes(left)} left"
        record = stored_measurement(dataset)
        before = s.stage in ("fine-tuning", "calibrating")  # the answering is still to come
        if before and record and estimate(record):
            eta = f"; about {_minutes(left + at_load_now(estimate(record)['answer_s'], record))} left in all"
        elif before:
            eta += f" of {s.stage}, then the answering"
    unit = "steps" if s.stage == "fine-tuning" else "questions"
    st.progress(s.done / s.total, text=f"{s.stage.capitalize()}: {s.done:,} of {s.total:,} {unit}{eta}")


def _names(ids) -> str:
    ids = list(ids)
    return ", ".join(ids[:-1]) + f" and {ids[-1]}" if len(ids) > 1 else ids[0]


def _offer_text(dataset: str, m, others: Sequence[str] = ()) -> str:
    pool, experts = quick_pool(dataset)
    work, full_work = workload(dataset, QUICK), workload(dataset, PROFILES["full"])
    quick, full = m.expected(QUICK), m.expected(PROFILES["full"])
    measuring = m.state == "measuring"
    pending = "being measured now" if measuring else "not measured yet"
    when = f"its time on this machine is {pending}" + (" (in the background)" if measuring else "")
    if quick is not None:
        then, now, cores = m.record.get("load"), os.getloadavg()[0], os.cpu_count()
        load = f" at load {then:.1f} on {cores} cores" if then is not None else ""
        when = (
            f"**about {_minutes(at_load_now(quick['total_s'], m.record, now))} on this machine at its "
            f"load now ({now:.1f})** (the median of {quick['timed_steps']} timed training steps and of "
            f"{quick['timed_forwards']} forward passes here, measured {_ago(quick['measured_at'])}{load}, "
            f"times the run's {quick['steps']:,} steps over {quick['windows']:,} windows)"
        )
    full_when = (
        f"about {_minutes(at_load_now(full['total_s'], m.record))} on this machine now" if full else pending
    )
    lead = (
        f"{' and '.join(others)} answer{'s' if len(others) == 1 else ''} your own text already; a pool "
        "whose main agent is an extractive model needs one trained on this machine."
        if others
        else "No pool here can answer your own text yet: that needs a question-answering model that "
        "runs on this machine."
    )
    return (
        f"{lead} The quick model is fine-tuned for {QUICK.epochs} pass over "
        f"{work['trained']:,} training questions, then answers {work['answered']:,} questions so that "
        f"a router can learn when to trust it: {when}. It is much less accurate than the full model, "
        f"`{train_command('full', dataset)}`, which trains {full_work['models']} models for "
        f"{PROFILES['full'].epochs} passes each, on {full_work['trained']:,} questions in all "
        f"({full_when}). The new pool {pool} routes between it, {_names(experts)}"
        + "".join(f"; {name}, between it, {_names(ex)}" for name, ex in QUICK.pool_specs(dataset)[1:])
        + "."
    )


@st.fragment(run_every=2.0)
def _await_estimate(dataset: str, shown: int) -> None:
    """Polls the background measurement; once it has timed more than the ``shown`` profiles, the
    whole offer is drawn again (and this stops polling once every profile is timed)."""
    m = measurement(dataset)
    ready = sum(m.expected(p) is not None for p in PROFILES.values())
    if m.state == "ready" or ready > shown:
        st.rerun()
    if m.state == "failed":
        st.warning(f"This machine's time for it could not be measured: {m.message}")
    else:
        st.caption("Measuring the time of training steps and forward passes on this machine…")


def switch_pool_button(pool: str) -> None:
    """A button that picks ``pool`` in the sidebar (set in its callback: before the picker is drawn)."""
    st.button(f"Switch to {pool}", type="primary", on_click=lambda: st.session_state.update(pool=pool))


def offer_quick_agent(dataset: str, others: Sequence[str] = ()) -> None:
    """Offer the quick model (or show its run) for ``dataset``, whose pools ``others`` answer new
    text already (nothing where the quick model's pool is one of them)."""
    made = quick_pool(dataset)
    if others and (made is None or made[0] in others):
        return
    if made is None:
        st.info(
            f"No pool of {dataset} answers your own text, and the model this dashboard trains makes a "
            f"pool only where its experts are set: on {_names(QUICK.datasets())}. Pick one of those."
        )
        return
    pool = made[0]
    status = training_status(dataset)
    if status.state == "done":
        st.success(f"The quick model is trained: the pool {pool} answers your own text.")
        switch_pool_button(pool)
        return
    if status.state == "running":
        st.info(f"Training the quick model for the pool {pool}; you can leave this page meanwhile.")
        _progress(dataset)
        return
    m = measurement(dataset)
    st.info(_offer_text(dataset, m, others))
    if m.state == "failed":
        st.warning(f"This machine's time for it could not be measured: {m.message}")
    if m.state in ("none", "failed"):  # started in the callback: the rerun draws it as measuring
        st.button(
            "Measure this machine's time for it",
            on_click=lambda: measurement(dataset, start=True),
            help="times a few training steps and forward passes of the base model in the background; "
            "the page stays usable meanwhile",
        )
    if m.state == "measuring":
        _await_estimate(dataset, sum(m.expected(p) is not None for p in PROFILES.values()))
    if status.state == "failed":
        st.error(f"The last training run stopped: {status.message}. Training again resumes it.")
    if st.button("Train the quick model", type="primary"):
        start_training(dataset)
        st.rerun()
