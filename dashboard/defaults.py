"""The dashboard's first choices, in a module that imports nothing heavy: ``app.py`` reads them
before any page imports torch."""

DATASET_CHOICES = ("squad11", "squad20")  # the first is the default
DEFAULT_POOL = "P3"  # on the default dataset: the main benchmark pool
