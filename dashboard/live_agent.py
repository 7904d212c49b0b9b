"""The offer to train a model that answers your own text, shown where no pool can: its expected
time on this machine, a button, then its progress (the run goes on in the background)."""

from __future__ import annotations

import streamlit as st

from l2d_core.app_logic.quick_agent import (
    PROFILES,
    QUICK,
    QUICK_POOL,
    expected_seconds,
    start_training,
    training_status,
)

__all__ = ["offer_quick_agent", "switch_pool_button"]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


@st.cache_data(show_spinner="Timing one training step of the model on this machine…")
def _expected(dataset: str, profile: str) -> dict:
    return expected_seconds(dataset, PROFILES[profile])


@st.fragment(run_every=2.0)
def _progress(dataset: str) -> None:
    s = training_status(dataset)
    if s.state != "running":
        st.rerun()  # the whole page: the pool is ready, or the run stopped
    if not s.total:
        st.progress(0.0, text="Starting: loading the questions and the base model…")
        return
    left = s.left_s
    if left is not None and s.stage == "fine-tuning":
        left += _expected(dataset, "quick")["answer_s"]  # the answering still to come
    eta = f"; about {_minutes(left)} left in all" if left is not None else ""
    unit = "steps" if s.stage == "fine-tuning" else "questions"
    st.progress(s.done / s.total, text=f"{s.stage.capitalize()}: {s.done:,} of {s.total:,} {unit}{eta}")


def switch_pool_button(pool: str) -> None:
    """A button that picks ``pool`` in the sidebar (set in its callback: before the picker is drawn)."""
    st.button(f"Switch to {pool}", type="primary", on_click=lambda: st.session_state.update(pool=pool))


def offer_quick_agent(dataset: str) -> None:
    """No pool of ``dataset`` answers new text: offer the quick model (or show its run)."""
    status = training_status(dataset)
    if status.state == "done":
        st.success(f"The quick model is trained: the pool {QUICK_POOL} answers your own text.")
        switch_pool_button(QUICK_POOL)
        return
    if status.state == "running":
        st.info(f"Training the quick model for the pool {QUICK_POOL}; you can leave this page meanwhile.")
        _progress(dataset)
        return
    quick, full = _expected(dataset, "quick"), _expected(dataset, "full")
    st.info(
        "No pool here can answer your own text yet: that needs a question-answering model that runs "
        f"on this machine. The quick model is fine-tuned for {QUICK.epochs} pass over "
        f"{quick['trained']:,} training questions, then answers {quick['answered']:,} questions so "
        f"that a router can learn when to trust it: **about {_minutes(quick['total_s'])} here** "
        "(measured from timed training steps). It is much less accurate than the full model, "
        f"`python scripts/train_agent.py`, which trains three models (about {_minutes(full['total_s'])} "
        f"here). The new pool {QUICK_POOL} routes between it, rnet-plus and bert-ens."
    )
    if status.state == "failed":
        st.error(f"The last training run stopped: {status.message}. Training again resumes it.")
    if st.button("Train the quick model", type="primary"):
        start_training(dataset)
        st.rerun()
