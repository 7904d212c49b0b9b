"""Progress bars of background jobs (``l2d_core.background``), drawn from the job's own
progress file: a reload or a new tab shows the same job, and closing the tab stops nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import streamlit as st

from l2d_core.app_logic.job_words import describe, timed
from l2d_core.background import JobStatus

__all__ = ["job_bar", "wait_for", "Background", "timed_bar"]

T = TypeVar("T")


def job_bar(status: JobStatus, where=None) -> None:
    """The job's bar: its stage, items done of all, the item just done and the time left."""
    (where or st).progress(status.fraction, text=describe(status))


def wait_for(status_of: Callable[[], JobStatus], note: str = "", every_s: float = 1.0) -> JobStatus:
    """Hold this page run while the job runs, its bar updated every ``every_s`` seconds (and
    ``note`` under it); returns the job's last status. The job is a process of its own: a page
    left or a tab closed meanwhile leaves it running, and the next visit finds it again."""
    slot = st.empty()
    while (status := status_of()).running:
        with slot.container():
            job_bar(status)
            if note:
                st.caption(note)
        time.sleep(every_s)
    slot.empty()
    return status


class Background:
    """``work()`` running in a thread of this server process: a page that stops waiting for it (a
    rerun, a closed tab) leaves it running, and the next page run waits for the same one."""

    def __init__(self, work: Callable[[], T]):
        self.start, self.value, self.error = time.perf_counter(), None, None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(work,), name="l2d background work", daemon=True).start()

    def _run(self, work) -> None:
        try:
            self.value = work()
        except BaseException as exc:  # raised again in the page that waits for it
            self.error = exc
        finally:
            self.done.set()


def timed_bar(task: Background, what: str, expected_s: float | None, after_s: float = 0.5):
    """Wait for ``task``, work that counts nothing (fitting one router), with a bar from
    ``after_s`` on (a quick load draws none): its time left is ``expected_s`` (measured on this
    machine before) less the time taken; without a measurement, the time so far. Returns what
    the work returned, or raises its error."""
    slot = None
    while not task.done.wait(after_s if slot is None else 0.5):
        took = time.perf_counter() - task.start
        share, left = timed(took, expected_s)
        if slot is None:
            slot = st.empty()
        slot.progress(share, text=f"{what}: {left}")
    if slot is not None:
        slot.empty()
    if task.error is not None:
        raise task.error
    return task.value
