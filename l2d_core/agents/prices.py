"""What an answer costs in money: an agent's prices per million input and output tokens
(``options["usd_per_1m_input"]``, ``options["usd_per_1m_output"]``, dollars) times the tokens it
read and wrote, the price a log records for it, or one price for every answer
(``options["usd_per_question"]``: e.g. 0 for a model that runs on your own machine). The money cost rule
(:func:`~l2d_core.method.costs.beta_from_money`) reads these prices, and the pages show them as
dollars per 1,000 questions.

>>> TokenPrices.of({"usd_per_1m_input": 0.5, "usd_per_1m_output": 1.5}).usd(1200, 10)
0.000615
>>> TokenPrices.of({}) is None
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.records import DataFormatError

__all__ = ["PRICE_OPTIONS", "MAX_USD", "TokenPrices", "flat_usd", "answer_prices", "answer_price", "dollars"]

PRICE_OPTIONS = ("usd_per_1m_input", "usd_per_1m_output")
MAX_USD = 1_000.0  # dollars for one answer: beyond it a logged price is a unit or parsing mistake


@dataclass(frozen=True)
class TokenPrices:
    """Dollars per million input (prompt) tokens and per million output (generated) tokens."""

    usd_per_1m_input: float
    usd_per_1m_output: float

    @classmethod
    def of(cls, options: dict | None, agent: str = "agent") -> TokenPrices | None:
        """The prices an agent's options declare, or None where they declare neither; a price that
        is not a finite number >= 0, or one given without the other, is one DataFormatError."""
        opts = options if isinstance(options, dict) else {}
        given = [k for k in PRICE_OPTIONS if opts.get(k) is not None]
        if not given:
            return None
        if len(given) == 1:
            missing = next(k for k in PRICE_OPTIONS if k not in given)
            raise DataFormatError(f"{agent}: {given[0]} is given without {missing}; give both (0 is a price)")
        values = []
        for k in PRICE_OPTIONS:
            v = opts[k]
            f = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
            if not math.isfinite(f) or f < 0:
                raise DataFormatError(f"{agent}: {k} must be a finite number of dollars >= 0, got {v!r}")
            values.append(f)
        return cls(*values)

    def usd(self, tokens_in: float, tokens_out: float) -> float:
        """The price of one answer that read ``tokens_in`` tokens and wrote ``tokens_out``."""
        return round((tokens_in * self.usd_per_1m_input + tokens_out * self.usd_per_1m_output) / 1e6, 12)


def flat_usd(options: dict | None, agent: str = "agent") -> float | None:
    """The one price of every answer an agent's options declare (``usd_per_question``), or None.

    >>> flat_usd({"usd_per_question": 0}), flat_usd({})
    (0.0, None)
    """
    v = (options if isinstance(options, dict) else {}).get("usd_per_question")
    if v is None:
        return None
    f = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
    if not math.isfinite(f) or not 0 <= f <= MAX_USD:
        raise DataFormatError(f"{agent}: usd_per_question must be dollars from 0 to {MAX_USD:g}, got {v!r}")
    return f


def answer_prices(recorded, options: dict | None, agent: str = "agent"):
    """Each answer's price (a pandas Series by question, or an array): as recorded, else the
    agent's one price per answer (``usd_per_question``) where it declares one; NaN where neither
    is known."""
    flat = flat_usd(options, agent)
    if flat is None:
        return recorded
    if hasattr(recorded, "fillna"):
        return recorded.fillna(flat)
    return np.where(np.isnan(recorded), flat, recorded)


def answer_price(recorded: float | None, options: dict | None, agent: str = "agent") -> float | None:
    """One answer's price, as :func:`answer_prices` gives them: as recorded, else the agent's one
    price per answer, else None.

    >>> answer_price(0.002, {"usd_per_question": 0.5}), answer_price(None, {"usd_per_question": 0.5})
    (0.002, 0.5)
    """
    return recorded if recorded is not None else flat_usd(options, agent)


def dollars(amount: float) -> str:
    """An amount of dollars as the pages and reports write it: 4 significant digits, never in
    scientific notation (one answer of a small model costs a few millionths of a dollar).

    >>> dollars(0.615), dollars(3.6), dollars(0.0), dollars(0.0000258)
    ('$0.615', '$3.6', '$0', '$0.0000258')
    """
    return "$" + np.format_float_positional(float(amount), precision=4, fractional=False, trim="-")
