"""Post-hoc rejector features and cost accounting."""

import numpy as np
import pytest

from l2d_core.data.records import QUESTION_TYPES, QARecord
from l2d_core.posthoc import answer_features, default_helpers, posthoc_gflops


def _rec(q, c):
    return QARecord(qid=q, title="t", context=c, question=q, answers=("x",))


def test_answer_features_columns():
    recs = [_rec("Who wrote it?", "Ann wrote it. Ann again."), _rec("When was it?", "In 1990.")]
    main = np.array(["Ann", None], dtype=object)
    helpers = np.array([["ann", "Bob"], ["1990", None]], dtype=object)
    f = answer_features(main, helpers, recs)
    assert f.shape == (2, 2 + 1 + 1 + 1 + 1 + 1 + 1 + 10)
    np.testing.assert_array_equal(f[0, :2], [1.0, 0.0])  # agrees with helper 1 only (normalized)
    assert f[0, 2] == 0.5 and f[1, 2] == 0.5  # share of helpers agreeing
    assert f[1, 5] == 1.0  # no-answer flag for the main agent's None
    assert f[0, 6] == pytest.approx(np.log1p(2))  # "ann" occurs twice in the context
    qt_cols = 8 + np.arange(len(QUESTION_TYPES) + 1)
    assert f[0, qt_cols].tolist().index(1.0) == QUESTION_TYPES.index("who")
    assert f[1, qt_cols].tolist().index(1.0) == QUESTION_TYPES.index("when")


def test_posthoc_cost_moves_main_and_helpers_into_overhead(real_data, fresh_cache):
    # fresh cache: only the builtin agents are registered (other tests add user agents)
    from l2d_core.agents import get_pool
    from l2d_core.data import load_dataset
    from l2d_core.routing_data import load_routing_data

    data = load_routing_data(load_dataset("squad11"), get_pool("P2"))
    helpers = default_helpers("squad11", "match-lstm", ("bert-ens",), 5.0)
    assert "bert-ens" not in helpers and "match-lstm" not in helpers and "logreg" in helpers
    moved, overhead = posthoc_gflops(data, helpers)
    assert overhead == pytest.approx(5.0 + 0.05 + 2 + 1.5 + 1.5 + 3 + 3)
    np.testing.assert_array_equal(moved.agent_gflops, [0.0, 1730.0])
