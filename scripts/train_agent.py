"""Train the project's own live agent and cache its answers, cross-fitted: a thin wrapper around
:mod:`l2d_core.agents.train_cli` (``python -m l2d_core.agents.train_cli`` is the same command;
``--help`` gives the whole story)."""

from __future__ import annotations

import sys

import _bootstrap  # noqa: F401

from l2d_core.agents.train_cli import main, parse_args

__all__ = ["main", "parse_args"]

if __name__ == "__main__":
    sys.exit(main())
