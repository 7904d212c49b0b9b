"""Post-hoc rejector: features (l2d_core.routers.features), qid alignment
(l2d_core.routers.posthoc_inputs), estimator (l2d_core.routers.posthoc) and cost accounting,
operating points (the registry's ``l2d-posthoc`` router)."""

import dataclasses

import numpy as np
import pytest

from l2d_core.data.records import QUESTION_TYPES, QARecord
from l2d_core.evaluation.benchmark import BETA_POINTS
from l2d_core.method.costs import CostConfig
from l2d_core.method.policies import plugin_policy
from l2d_core.routers.calibration import crossfit_splits
from l2d_core.routers.estimator import NotFittedError
from l2d_core.routers.features import answer_features, extra_features, question_overlap, reads_answer_context
from l2d_core.routers.posthoc import PosthocRejector
from l2d_core.routers.posthoc_inputs import (
    CALIBRATION_FOLDS,
    default_helpers,
    posthoc_answers,
    posthoc_features,
    posthoc_gflops,
    posthoc_helpers,
)

CHEAP = ("logreg", "dcr", "span-clf", "rasor", "rnet", "coattn")  # BENCHMARK.md agents ≤ 5 GFLOPs


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


def test_extra_features_columns():
    recs = [_rec("How many cats sat?", "Three cats sat on the mat."), _rec("Who sat?", "Ann sat.")]
    main = np.array(["Three cats", "Ann"], dtype=object)
    helpers = np.array([["three", "Three"], ["Bob", None]], dtype=object)
    f = extra_features(main, helpers, recs)
    h = 2
    assert f.shape == (2, h + 14)
    np.testing.assert_allclose(f[0, :h], [2 / 3, 2 / 3])  # token F1 of "three cats" vs "three"
    assert f[1, :h].tolist() == [0.0, 0.0]
    assert f[0, h + 1] == pytest.approx(2 / 3)  # distinct answers: {"three cats", "three"} of 3
    assert f[0, h + 3] == 1.0 and f[0, h + 5] == 1.0  # helpers agree; main's answer contains theirs
    assert f[0, h + 7] == 1.0 and f[1, h + 7] == 0.0  # "how many" asks for a number
    assert f[0, h + 8] == pytest.approx(0.5)  # "cats" is a question word, "three" is not
    assert f[1, h + 9] == 1.0  # capitalised
    # question_overlap: of "How many cats sat?"'s words not in the answer ("many", "sat"), "sat"
    # follows "Three cats"; "Ann" answers "Who sat?" beside "sat"
    np.testing.assert_array_equal(f[:, h + 12 :], [[0.5, 0.5], [1.0, 1.0]])
    f = extra_features(np.array(["mat", None], dtype=object), helpers, recs)
    np.testing.assert_allclose(f[:, h + 12 :], [[2 / 3, 2 / 3], [0.0, 0.0]])  # "cats sat" near "mat"


def test_question_overlap_reads_the_answers_neighbourhood():
    q = "Which river flows through the old capital?"  # content words: river flows through old capital
    filler = "Filler words here. " * 10
    ctx = f"The Vltava flows through Prague, the old capital. {filler}Brno lies east."
    assert question_overlap("Vltava", q, ctx) == (0.8, 0.8)  # all but "river", near and in its sentence
    assert question_overlap("Brno", q, ctx) == (0.0, 0.0)  # far from them, in another sentence
    assert question_overlap("the old capital", q, ctx) == pytest.approx((2 / 3, 2 / 3))  # not its own words
    assert question_overlap("Danube", q, ctx) == question_overlap("", q, ctx) == (0.0, 0.0)  # not there
    # the best of its occurrences: the second "Brno" sits in the sentence about the river
    assert question_overlap("Brno", q, f"{ctx} The river flows through Brno.")[1] == 0.6


def test_posthoc_cost_moves_main_and_helpers_into_overhead(real_data):
    from l2d_core.agents import get_pool
    from l2d_core.agents.routing_data import load_routing_data
    from l2d_core.data import load_dataset

    assert posthoc_helpers("squad11", "match-lstm") == CHEAP  # BENCHMARK.md agents only
    assert set(CHEAP) <= set(default_helpers("squad11", "match-lstm", ("bert-ens",), 5.0))
    data = load_routing_data(load_dataset("squad11"), get_pool("P2"))
    moved, overhead = posthoc_gflops(data, CHEAP)
    assert overhead == pytest.approx(5.0 + 0.05 + 2 + 1.5 + 1.5 + 3 + 3)
    np.testing.assert_array_equal(moved.agent_gflops, [0.0, 1730.0])
    # P10: the cheap helpers are experts of the pool; they are paid once, up front
    assert posthoc_helpers("squad11", "logreg") == (*CHEAP[1:], "match-lstm")
    assert posthoc_helpers("squad11", "logreg", 3.0) == CHEAP[1:]
    assert posthoc_helpers("squad20", "bidaf-elmo") == ()
    p10 = load_routing_data(load_dataset("squad11"), get_pool("P10"))
    moved, overhead = posthoc_gflops(p10, posthoc_helpers("squad11", "logreg"))
    assert overhead == pytest.approx(0.05 + 2 + 1.5 + 1.5 + 3 + 3 + 5)
    np.testing.assert_array_equal(moved.agent_gflops, [0.0] * 7 + [100.0, 120.0, 1730.0])


@pytest.fixture(scope="module")
def p2(real_data):
    from l2d_core.evaluation.benchmark import prepare

    return prepare("squad11", "P2", features_needed=False)


def test_features_are_aligned_by_qid(p2):
    from l2d_core.agents.routing_data import load_routing_data

    main, helpers, recs = posthoc_answers(p2, CHEAP, "test")
    assert [r.qid for r in recs] == list(p2.test.qids)
    assert list(main) == list(p2.test.answers[:, 0])
    ref = load_routing_data(p2.dataset, ("match-lstm", *CHEAP))
    row = {q: i for i, q in enumerate(ref.qids)}
    for k in (0, 17, len(recs) - 1):
        assert list(helpers[k]) == list(ref.answers[row[recs[k].qid], 1:])
    # a split in another order gets its features in that order
    perm = np.random.default_rng(0).permutation(len(p2.test))
    shuffled = dataclasses.replace(  # a new (frozen) benchmark, consistent in every test field
        p2,
        test=p2.test.take(perm),
        X_test=p2.X_test[perm],
        test_records=tuple(p2.test_records[i] for i in perm),
    )
    np.testing.assert_array_equal(
        posthoc_features(shuffled, CHEAP, "test"), posthoc_features(p2, CHEAP, "test")[perm]
    )
    with pytest.raises(ValueError, match="no 'val' split"):
        posthoc_answers(p2, CHEAP, "val")


def test_estimator_fit_predict_on_a_small_slice(p2, tmp_path):
    first = np.isin(p2.train.titles, sorted(set(p2.train.titles))[:6])  # a few training articles
    data = p2.train.take(first)
    few = dataclasses.replace(  # a new (frozen) benchmark, consistent in every training field
        p2,
        train=data,
        X_train=p2.X_train[first],
        train_records=tuple(r for r, keep in zip(p2.train_records, first) if keep),
    )
    F = posthoc_features(few, CHEAP, "train")
    est = PosthocRejector()
    assert not hasattr(est, "head_")  # learned state exists only after fit
    with pytest.raises(NotFittedError, match="fit"):
        est.predict_proba(F)
    assert est.fit(F, data.errors, data.titles) is est  # scikit-learn's fit(X, y), groups: articles
    p = est.predict_proba(F)
    assert p.shape == (len(data), 2, 2) and np.all((p > 0) & (p < 1))
    for i in (0, 7, len(F) - 1):  # a query alone gets what it got in the batch, to the last bit
        np.testing.assert_array_equal(est.predict_proba(F[i : i + 1])[0], p[i])
    main_wrong = data.errors[:, :, 0].any(axis=1)
    assert p[main_wrong, :, 0].mean() > p[~main_wrong, :, 0].mean()  # it learned something
    choice = plugin_policy(p, p2.costs(0.05))
    assert choice.shape == (len(data),) and set(np.unique(choice)) <= {0, 1}
    assert (plugin_policy(p, CostConfig((1.0,), (5.0,))) == 0).all()  # the expert is never worth 5
    # default: CALIBRATION_FOLDS cross-fitted heads, each Platt-calibrated on its held-out articles
    assert len(est.heads_) == CALIBRATION_FOLDS and est.platt_.shape == (CALIBRATION_FOLDS, 2, 2, 2)
    raw = PosthocRejector(calibration="none").fit(F, data.errors, data.titles)
    assert raw.platt_ is None and len(raw.heads_) == 1 and not np.allclose(raw.predict_proba(F), p)
    one = PosthocRejector(calibration_folds=1).fit(F, data.errors, data.titles)  # one held-out split
    assert len(one.heads_) == 1 and one.platt_.shape == (1, 2, 2, 2)
    for k, fitted in enumerate((est, raw, one)):
        back = PosthocRejector.load(fitted.save(tmp_path / f"h{k}"))
        assert back.get_params() == fitted.get_params()
        np.testing.assert_allclose(back.predict_proba(F), fitted.predict_proba(F))
    with pytest.raises(ValueError, match="feature rows"):
        PosthocRejector().fit(F[:-1], data.errors, data.titles)


def test_crossfit_splits_hold_out_each_article_once():
    titles = np.repeat(np.array(list("abcdefg")), 3)
    masks = crossfit_splits(titles, 4, seed=0)
    held = np.stack([~m for m in masks])
    assert (held.sum(axis=0) == 1).all()  # every question calibrates exactly one head
    for m in masks:  # whole articles: an article is either seen or held out
        assert all(len(set(m[titles == t])) == 1 for t in set(titles))
    few = crossfit_splits(np.array(["a"] * 9), 3, seed=0)  # a single article: folds of questions
    assert [int((~m).sum()) for m in few] == [3, 3, 3]
    assert len(crossfit_splits(np.array(["a", "b", "b"]), 4, seed=0)) == 2  # no more folds than articles
    with pytest.raises(ValueError, match="at least two"):
        crossfit_splits(np.array(["a"]), 3, seed=0)
    assert [m.tolist() for m in crossfit_splits(titles, 4, 1)] != [m.tolist() for m in masks]  # seeded


def test_posthoc_points_pay_the_overhead_and_beat_random(p2):
    from l2d_core.evaluation.comparison import run_router
    from l2d_core.evaluation.points import router_points
    from l2d_core.routers.base import DENSE_BETAS
    from l2d_core.routers.plugin import SHARE_LEVELS
    from l2d_core.routers.posthoc_inputs import GFLOPS_SWEEP
    from l2d_core.routers.registry import make_router

    router = make_router("l2d-posthoc").fit(p2, 0)
    assert router.helpers_ == CHEAP  # the default helpers of the pool's main agent
    assert router.p_err_.shape == (len(p2.test), 2, 2)
    pts = router_points(router)
    core = [p for p in pts if not p["dense"]]
    assert [p["beta1"] for p in core] == list(BETA_POINTS)
    shares = [p["target_share"] for p in pts if "target_share" in p]  # two margins' share sweeps
    assert shares == 2 * list(np.linspace(0.0, 1.0, SHARE_LEVELS))
    undated = [None] * (len(GFLOPS_SWEEP) + len(shares))
    assert [p["beta1"] for p in pts if p["dense"]] == [*DENSE_BETAS] + undated
    assert [p["beta_max"] for p in pts if "beta_max" in p] == list(GFLOPS_SWEEP)
    # built by the comparison's own point builder: the fields of every other router's points
    assert set(run_router(p2, "agent:bert-ens")[0]) <= set(pts[0]) <= {*run_router(p2, "oracle")[0]}
    _, overhead = posthoc_gflops(p2.test, CHEAP)
    for p in pts:
        assert p["gflops"] >= overhead - 1e-9
        assert p["gflops"] == pytest.approx(overhead + p["allocation"]["bert-ens"] * 1730.0)
    # the measured claim: at β₁ = 0.05 the post-hoc router's TDL on the test articles is below
    # random allocation, uniform and with the router's own shares
    at = next(p for p in core if p["beta1"] == 0.05)
    assert at["tdl"] < at["tdl_random_matched"] and at["tdl"] < at["tdl_random"]
    assert 0.0 < at["allocation"]["bert-ens"] < 1.0


def test_which_routers_read_where_the_answer_sits():
    from l2d_core.routers.registry import make_router

    assert all(reads_answer_context(make_router(r)) for r in ("l2d-posthoc", "l2d-cascade", "l2d-staged"))
    assert not reads_answer_context(make_router("l2d-sdl"))  # reads the question and context only
    assert reads_answer_context({"set": "answer+extra"}) and not reads_answer_context({"set": "answer"})
