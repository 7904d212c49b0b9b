"""The dashboard's first choices, in a module that imports nothing heavy: ``app.py`` reads them
before any page imports torch."""

DATASET_CHOICES = ("squad11", "squad20")  # the first is the default
# on the default dataset: the pool where routing pays the most on validation articles (its best
# router's EM above random mixing of agents; `python scripts/rank_pools.py` ranks every pool, and
# tests/test_default_view.py checks that this one still leads and that it holds on test articles)
DEFAULT_POOL = "P2"
