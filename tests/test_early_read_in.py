"""A fresh dashboard reads its default pool in on another core while it imports torch."""

from __future__ import annotations

import sys

import pytest

from l2d_core.agents import read_in
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import get_pool
from l2d_core.agents.read_in import read_in_early
from l2d_core.agents.routing_data import load_routing_data
from l2d_core.data import load_dataset


def _refuse_in_this_process(*args, **kwargs):
    raise AssertionError("this process read a prediction file in")


def test_the_pool_is_read_in_by_a_child_process_and_this_one_waits_for_it(fresh_cache, monkeypatch):
    pool = get_pool("P3")
    read_in_early("squad11", "P3")
    read_in_early("squad11", "P3")  # once per process, cache folder and dataset
    monkeypatch.setattr(read_in, "import_predictions", _refuse_in_this_process)
    data = load_routing_data(load_dataset("squad11"), pool)
    assert data.agent_ids == pool.agent_ids and len(data.qids) == len(load_dataset("squad11"))
    cache = AgentCache(fresh_cache / "agents")
    assert all(len(cache.done_ids("squad11", a)) == len(data.qids) for a in pool.agent_ids)
    assert 0 < data.em.mean() < 1


def test_a_read_in_that_cannot_start_leaves_the_work_to_the_page(fresh_cache, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(fresh_cache / "no-such-python"))
    read_in_early("squad11", "P2")
    data = load_routing_data(load_dataset("squad11"), get_pool("P2"))  # read in here instead
    assert data.agent_ids == get_pool("P2").agent_ids
    assert AgentCache(fresh_cache / "agents").has("squad11", data.agent_ids[0])


def test_an_unknown_pool_is_refused_before_any_process_starts(fresh_cache, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(fresh_cache / "no-such-python"))
    with pytest.raises(KeyError):
        read_in_early("squad11", "no-such-pool")


def test_on_an_empty_cache_the_child_starts_before_this_process_reads_the_dataset(fresh_cache, monkeypatch):
    # the dataset is read here only to check agents that have answers already: on an empty cache
    # the child starts at once (it reads the dataset itself), and nothing is read in here
    import l2d_core.data

    dataset = load_dataset("squad11")

    def refuse(name):
        raise AssertionError(f"this process read {name} before starting the child")

    monkeypatch.setattr(l2d_core.data, "load_dataset", refuse)
    read_in_early("squad11", "P2")
    monkeypatch.setattr(read_in, "import_predictions", _refuse_in_this_process)
    data = load_routing_data(dataset, get_pool("P2"))
    assert data.agent_ids == get_pool("P2").agent_ids and 0 < data.em.mean() < 1


def test_on_a_warm_cache_nothing_starts_and_the_dataset_is_not_read(fresh_cache, monkeypatch):
    import l2d_core.data

    dataset = load_dataset("squad11")
    load_routing_data(dataset, get_pool("P2"))  # read in: the cache is warm
    started = []
    monkeypatch.setattr(read_in, "_in_children", lambda *a, **k: started.append("child"))
    monkeypatch.setattr(l2d_core.data, "load_dataset", lambda name: started.append(f"read {name}"))
    read_in_early("squad11", "P2")
    read_in.ensure_cached(dataset, [], AgentCache())  # waits for the early read-in
    assert started == []
