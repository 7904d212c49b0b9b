"""Background jobs' progress in words (pure): a time span, the time left, a job's stage and count."""

from __future__ import annotations

from ..background import JobStatus

__all__ = ["duration", "left_words", "describe", "timed"]


def duration(seconds: float) -> str:
    """A time span in words (pure).
    >>> duration(42.4), duration(200), duration(3 * 3600 + 7 * 60)
    ('42 s', '3 min 20 s', '3 h 7 min')
    """
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s < 600 else f"{round(s / 60)} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def left_words(elapsed_s: float, done: int, total: int) -> str:
    """Time left once ``done`` of ``total`` items took ``elapsed_s`` (pure); items of under a
    second each were read back, not computed, and say nothing of the next.
    >>> left_words(30.0, 3, 4), left_words(0.2, 1, 2)
    ('about 10 s left', 'timing the next')
    """
    slow = done > 0 and elapsed_s >= done  # a second or more each
    return f"about {duration(elapsed_s / done * (total - done))} left" if slow else "timing the next"


def describe(s: JobStatus) -> str:
    """A running job's progress in words: stage, items done of all, the item just done, time left.

    >>> describe(JobStatus("k", "running", stage="Comparing routers", done=3, total=21,
    ...          unit="routers", current="l2d-sdl", left_s=250.0))
    'Comparing routers: l2d-sdl done (3 of 21 routers); about 4 min 10 s left'
    """
    if not s.total:
        return f"{s.stage or 'Starting'}… ({duration(s.elapsed_s)} so far)"
    counted = f"{s.done:,} of {s.total:,} {s.unit}"
    counted = f"{s.current} done ({counted})" if s.current else counted
    left = f"about {duration(s.left_s)} left" if s.left_s is not None else "timing the first items"
    return f"{s.stage}: {counted}; {left}"


def timed(took_s: float, expected_s: float | None) -> tuple[float, str]:
    """A bar's share and time left for work that counts nothing, from its expected duration.

    >>> timed(3.0, 12.0), timed(3.0, None)
    ((0.25, 'about 9 s left (timed here before)'), (0.0, '3 s so far (not timed on this machine yet)'))
    """
    if not expected_s:
        return 0.0, f"{duration(took_s)} so far (not timed on this machine yet)"
    left = duration(max(expected_s - took_s, 0.0))
    return min(took_s / expected_s, 0.99), f"about {left} left (timed here before)"
