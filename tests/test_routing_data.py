"""Routing data for the BENCHMARK pool P3 on the real SQuAD v1.1 dev set (SPEC §2, §3, §7)."""

from __future__ import annotations

import numpy as np
import pytest

from l2d_core.agents import get_agent, get_pool, import_predictions
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.routing_data import RoutingData, load_routing_data
from l2d_core.data import BENCHMARK_TEST_ARTICLES, load_dataset

P3 = ("match-lstm", "rnet-plus", "bert-ens")
N = 10_570


@pytest.fixture(scope="module")
def squad11(real_data):
    return load_dataset("squad11")


@pytest.fixture(scope="module")
def p3(squad11, tmp_path_factory):
    """Import P3's files explicitly (to keep the reports), then load the routing data."""
    cache = AgentCache(tmp_path_factory.mktemp("routing") / "agents")
    reports = {a: import_predictions(get_agent(a), squad11, cache) for a in P3}
    rd = load_routing_data(squad11, get_pool("P3"), cache)
    yield rd, reports, cache
    cache.close()


def test_pool_p3_is_the_benchmark_one(fresh_cache):
    pool = get_pool("P3")
    assert pool.agent_ids == P3 and pool.main == "match-lstm" and pool.dataset == "squad11"


def test_shapes_and_order(p3, squad11):
    rd, _, _ = p3
    assert isinstance(rd, RoutingData)
    assert rd.dataset == "squad11"
    assert rd.agent_ids == P3 and rd.n_agents == 3  # main first
    assert len(rd) == N and rd.qids == squad11.qids
    for name in ("start_ok", "end_ok", "em", "f1", "gflops", "answers"):
        assert getattr(rd, name).shape == (N, 3), name
    assert rd.start_ok.dtype == bool and rd.end_ok.dtype == bool
    assert rd.titles.shape == (N,)
    assert list(rd.titles[:3]) == [squad11[q].title for q in squad11.qids[:3]]
    assert set(np.unique(rd.em)) <= {0.0, 1.0}
    assert rd.f1.min() >= 0 and rd.f1.max() <= 1
    assert (rd.f1 >= rd.em).all()  # an exact match has F1 = 1


def test_errors_and_correct(p3):
    rd, _, _ = p3
    err = rd.errors
    assert err.shape == (N, 2, 3) and err.dtype == bool
    np.testing.assert_array_equal(err[:, 0, :], ~rd.start_ok)
    np.testing.assert_array_equal(err[:, 1, :], ~rd.end_ok)
    np.testing.assert_array_equal(rd.correct, rd.start_ok & rd.end_ok)
    # SPEC §2 positions agree with EM for every agent of the pool
    em = rd.em == 1
    assert ((em & ~rd.correct).mean(axis=0) < 0.005).all()
    assert ((rd.correct & ~em).mean(axis=0) < 0.02).all()
    # stronger experts are right more often
    acc = rd.correct.mean(axis=0)
    assert acc[0] < acc[1] < acc[2]


def test_agent_gflops_are_the_declared_ones(p3):
    rd, _, _ = p3
    np.testing.assert_array_equal(rd.agent_gflops, [5.0, 100.0, 1730.0])
    assert (rd.gflops == np.array([5.0, 100.0, 1730.0])).all()


def test_with_gflops_override(p3):
    rd, _, _ = p3
    cheap = rd.with_gflops({"bert-ens": 247, "match-lstm": 1.5})
    np.testing.assert_array_equal(cheap.agent_gflops, [1.5, 100.0, 247.0])
    np.testing.assert_array_equal(rd.agent_gflops, [5.0, 100.0, 1730.0])  # original untouched
    assert cheap.qids == rd.qids
    np.testing.assert_array_equal(cheap.em, rd.em)
    with pytest.raises(KeyError, match="not in this pool"):
        rd.with_gflops({"not-in-pool": 1.0})


def test_benchmark_split(p3, squad11):
    rd, _, _ = p3
    train, test = rd.split(BENCHMARK_TEST_ARTICLES)
    assert (len(train), len(test)) == (7_975, 2_595)
    assert set(test.titles) == set(BENCHMARK_TEST_ARTICLES)
    assert not set(train.titles) & set(BENCHMARK_TEST_ARTICLES)
    assert set(train.qids) | set(test.qids) == set(rd.qids)
    assert train.gflops.shape == (7_975, 3) and test.errors.shape == (2_595, 2, 3)
    # rows travel with their question
    i = rd.qids.index(test.qids[0])
    np.testing.assert_array_equal(test.em[0], rd.em[i])
    assert test.answers[0, 2] == rd.answers[i, 2]


def test_take_with_mask_and_index(p3):
    rd, _, _ = p3
    mask = rd.em[:, 0] == 0  # main model wrong
    sub = rd.take(mask)
    assert len(sub) == int(mask.sum()) and sub.em.shape == (int(mask.sum()), 3)
    assert (sub.em[:, 0] == 0).all()
    assert sub.qids == tuple(q for q, m in zip(rd.qids, mask) if m)

    idx = np.array([5, 0, 3, 5])  # order kept, repeats allowed
    sub = rd.take(idx)
    assert sub.qids == tuple(rd.qids[i] for i in idx)
    for name in ("titles", "start_ok", "end_ok", "em", "f1", "gflops", "answers"):
        np.testing.assert_array_equal(getattr(sub, name), getattr(rd, name)[idx], err_msg=name)
    assert sub.agent_ids == rd.agent_ids and sub.dataset == rd.dataset
    assert len(rd.take([True, False] * (N // 2))) == N // 2  # a plain list mask
    assert len(rd.take(np.array([], dtype=int))) == 0


def test_take_empty_list(p3):
    rd, _, _ = p3
    assert len(rd.take([])) == 0


def test_em_and_f1_match_the_import_reports(p3):
    rd, reports, _ = p3
    for k, a in enumerate(P3):
        assert 100 * rd.em[:, k].mean() == pytest.approx(reports[a].em, abs=1e-9), a
        assert 100 * rd.f1[:, k].mean() == pytest.approx(reports[a].f1, abs=1e-9), a
    assert round(reports["bert-ens"].em, 2) == 86.21
    assert round(reports["match-lstm"].em, 2) == 67.63  # summary: 67.635


def test_cached_agents_are_not_reimported(p3, squad11, monkeypatch):
    rd, _, cache = p3
    import l2d_core.agents.read_in as read_in_module

    def boom(*a, **k):
        raise AssertionError("re-imported an agent that is already cached")

    monkeypatch.setattr(read_in_module, "import_predictions", boom)
    again = load_routing_data(squad11, P3, cache)  # a plain tuple of agent ids works too
    np.testing.assert_array_equal(again.em, rd.em)
    np.testing.assert_array_equal(again.start_ok, rd.start_ok)


def test_missing_agents_are_imported_on_first_use(p3, squad11, tmp_path):
    """An empty cache: load_routing_data imports the files itself (here on a 300-question slice)."""
    rd, _, _ = p3
    part = squad11.subset(squad11.qids[1000:1300], name="squad11")
    cache = AgentCache(tmp_path / "agents")
    try:
        small = load_routing_data(part, get_pool("P3"), cache)
        assert sorted(cache.agents("squad11")) == sorted(P3)
        assert small.qids == part.qids
        np.testing.assert_array_equal(small.em, rd.em[1000:1300])
        np.testing.assert_array_equal(small.correct, rd.correct[1000:1300])
        np.testing.assert_array_equal(small.gflops, rd.gflops[1000:1300])
    finally:
        cache.close()


def test_questions_missing_from_the_cache_are_imported(squad11, tmp_path):
    first = squad11.subset(squad11.qids[:100], name="squad11")
    second = squad11.subset(squad11.qids[100:200], name="squad11")
    cache = AgentCache(tmp_path / "agents")
    try:
        load_routing_data(first, ("match-lstm", "bert-ens"), cache)
        rd = load_routing_data(second, ("match-lstm", "bert-ens"), cache)
        assert rd.em[:, 1].mean() > 0.7  # bert-ens: EM 86 % overall
        assert all(isinstance(a, str) for a in rd.answers[:, 1])
    finally:
        cache.close()


def test_done_ids_follow_every_write_and_a_rebuilt_store(tmp_path):
    """The remembered question ids move on with each write, from this process or another
    cache object, and a store deleted and written again is read afresh."""
    rec = {"answer": "x", "em": 1.0, "f1": 1.0}
    a, b = AgentCache(tmp_path / "agents"), AgentCache(tmp_path / "agents")
    assert a.done_ids("squad11", "x") == set()
    a.put_many("squad11", "x", {"q1": rec, "q2": rec})
    assert a.done_ids("squad11", "x") == {"q1", "q2"}
    b.put_many("squad11", "x", {"q3": rec})  # a second generation, written by another object
    assert a.done_ids("squad11", "x") == {"q1", "q2", "q3"}
    a.delete("squad11", "x")
    b.close()
    AgentCache(tmp_path / "agents").put_many("squad11", "x", {"q9": rec})  # generation 1 again
    assert a.done_ids("squad11", "x") == {"q9"}
