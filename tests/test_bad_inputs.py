"""Bad inputs and failure paths: prediction files, the agent cache, the registry, routing data,
splits and cost settings. Every failure must be a clear, typed error and must not lose what is
already cached."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

import pandas as pd
import pytest

from l2d_core.agents import (
    AgentSpec,
    PoolSpec,
    get_agent,
    get_pool,
    import_predictions,
    list_agents,
    read_prediction_file,
    register_agent,
    register_pool,
    user_registry_path,
)
from l2d_core.agents import prediction_file as pf_module
from l2d_core.agents.cache import RECORD_FIELDS, AgentCache
from l2d_core.agents.read_in import AgentNotCachedError
from l2d_core.agents.routing_data import load_routing_data
from l2d_core.data import (
    BENCHMARK_TEST_ARTICLES,
    DataFormatError,
    EmptySplitError,
    QADataset,
    QARecord,
    benchmark_split,
    load_dataset,
    random_article_split,
    validation_split,
)
from l2d_core.method.costs import CostConfig, InvalidCostError

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def squad11(real_data) -> QADataset:
    return load_dataset("squad11")


@pytest.fixture(scope="module")
def small(squad11) -> QADataset:
    """60 real questions (two articles' worth at most) under the dataset name ``squad11``."""
    return squad11.subset(squad11.qids[:60], name="squad11")


@pytest.fixture
def cache(tmp_path):
    c = AgentCache(tmp_path / "agents")
    yield c
    c.close()


def _write(path, obj) -> str:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return str(path)


def _good_predictions(ds: QADataset) -> dict[str, str]:
    """The first gold answer of every question: EM 100 on ``ds``."""
    return {r.qid: r.answers[0] for r in ds}


def _snapshot(cache: AgentCache, dataset: str, agent: str):
    return cache.table(dataset, agent).copy(), cache.meta(dataset, agent), cache.done_ids(dataset, agent)


# ----------------------------------------------------------------------------- prediction files

BAD_FILES = {
    "malformed": '{"a": "b",, }',
    "list": '["an answer", "another"]',
    "non_string": None,  # built from real ids below
    "empty": "{}",
    "all_unknown": {"no-such-id-1": "x", "no-such-id-2": "y"},
    "not_utf8": b'{"a": "\xff\xfe"}',
}


def _bad_file(kind: str, tmp_path, ds: QADataset, real_data) -> str:
    path = tmp_path / f"{kind}.json"
    if kind == "truncated":
        raw = (real_data / "predictions/squad-v1.1/bert-ensemble-google-ai-language.json").read_bytes()
        path.write_bytes(raw[: len(raw) // 2])
    elif kind == "non_string":
        q = ds.qids
        _write(path, {q[0]: "fine", q[1]: 3, q[2]: None, q[3]: ["a list"]})
    elif kind == "not_utf8":
        path.write_bytes(BAD_FILES[kind])
    else:
        _write(path, BAD_FILES[kind])
    return str(path)


BAD_KINDS = ["malformed", "truncated", "list", "non_string", "empty", "all_unknown", "not_utf8"]
MESSAGE = {
    "malformed": "not valid JSON",
    "truncated": "not valid JSON",
    "list": "expected a JSON object",
    "non_string": "not strings",
    "empty": "empty",
    "all_unknown": "none of its 2 ids",
    "not_utf8": "UTF-8",
}


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_prediction_file_raises_data_format_error_naming_the_file(
    kind, tmp_path, small, real_data, cache
):
    path = _bad_file(kind, tmp_path, small, real_data)
    spec = AgentSpec("x", "squad11", gflops=1.0, path=path)
    with pytest.raises(DataFormatError) as exc:
        import_predictions(spec, small, cache)
    assert path in str(exc.value)
    assert MESSAGE[kind] in str(exc.value)
    assert not cache.has("squad11", "x")


def test_non_string_answers_count_reported(tmp_path, small, real_data):
    path = _bad_file("non_string", tmp_path, small, real_data)
    with pytest.raises(DataFormatError, match=r"3 answers are not strings"):
        read_prediction_file(path)


def test_missing_file_raises_file_not_found(tmp_path, small, cache):
    path = tmp_path / "nowhere" / "preds.json"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        import_predictions(AgentSpec("x", "squad11", path=str(path)), small, cache)
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        read_prediction_file(path)


@pytest.mark.parametrize("kind", [*BAD_KINDS, "missing", "oversized"])
def test_failed_import_keeps_what_is_cached(kind, tmp_path, small, real_data, cache, monkeypatch):
    good = _write(tmp_path / "good.json", _good_predictions(small))
    spec = AgentSpec("x", "squad11", gflops=2.0, path=good)
    report = import_predictions(spec, small, cache)
    assert report.em == 100.0 and report.missing == 0
    before_table, before_meta, before_ids = _snapshot(cache, "squad11", "x")

    if kind == "missing":
        bad, error = str(tmp_path / "gone.json"), FileNotFoundError
    elif kind == "oversized":
        bad, error = good, DataFormatError
        monkeypatch.setattr(pf_module, "MAX_PREDICTION_BYTES", 100)
    else:
        bad, error = _bad_file(kind, tmp_path, small, real_data), DataFormatError
    with pytest.raises(error):
        import_predictions(spec, small, cache, path=bad)

    after_table, after_meta, after_ids = _snapshot(cache, "squad11", "x")
    pd.testing.assert_frame_equal(after_table, before_table)
    assert after_meta == before_meta and after_meta["source"] == good
    assert after_ids == before_ids == set(small.qids)
    # and a second AgentCache on the same directory sees the same
    other = AgentCache(cache.directory)
    pd.testing.assert_frame_equal(other.table("squad11", "x"), before_table)
    other.close()


def test_oversized_file_is_refused_clearly(tmp_path, small, monkeypatch):
    path = _write(tmp_path / "big.json", _good_predictions(small))
    monkeypatch.setattr(pf_module, "MAX_PREDICTION_BYTES", 1024)
    with pytest.raises(DataFormatError, match="limit") as exc:
        read_prediction_file(path)
    assert path in str(exc.value)


def test_oversized_message_distinguishes_size_and_limit(tmp_path, small, monkeypatch):
    path = _write(tmp_path / "big.json", _good_predictions(small))
    monkeypatch.setattr(pf_module, "MAX_PREDICTION_BYTES", 1024)
    with pytest.raises(DataFormatError) as exc:
        read_prediction_file(path)
    m = re.search(r"is (.+?); the limit is (.+)$", str(exc.value))
    assert m and m.group(1) != m.group(2), str(exc.value)


def test_missing_ids_are_counted_wrong_and_unknown_ids_reported(tmp_path, small, cache):
    preds = _good_predictions(small)
    dropped = small.qids[-10:]
    for q in dropped:
        del preds[q]
    preds["not-a-squad-id-1"] = "x"
    preds["not-a-squad-id-2"] = "y"
    path = _write(tmp_path / "partial.json", preds)
    report = import_predictions(AgentSpec("x", "squad11", path=path), small, cache)

    assert report.questions == 60 and report.answered == 50 and report.missing == 10
    assert report.unknown_ids == 2
    assert sorted(report.unknown_examples) == ["not-a-squad-id-1", "not-a-squad-id-2"]
    assert report.em == pytest.approx(100 * 50 / 60)
    for q in dropped:
        rec = cache.get("squad11", "x", q)
        assert rec["status"] == "missing" and rec["em"] == 0 and rec["f1"] == 0
        assert rec["start_ok"] is False and rec["end_ok"] is False and rec["answer"] is None
    assert cache.get("squad11", "x", "not-a-squad-id-1") is None
    assert cache.meta("squad11", "x")["missing"] == 10
    assert cache.summary("squad11", ["x"]).iloc[0]["missing"] == 10


# ----------------------------------------------------------------------------- agent cache


def _rec(i: int, **kw) -> dict:
    rec = {
        "answer": f"a{i}",
        "start": i,
        "end": i + 1,
        "status": "exact",
        "start_ok": True,
        "end_ok": i % 2 == 0,
        "em": float(i % 2 == 0),
        "f1": 0.5 + 0.1 * (i % 2 == 0),
        "gflops": 3.0,
        "latency_ms": None,
        "usd": 0.001 * i,
        "tokens": [300 + i, 5] if i % 2 else None,  # an LLM endpoint's prompt and reply tokens
        "source": "test",
        "confidence": {"span_prob": 0.1 * (i % 10)} if i % 3 else None,
    }
    rec.update(kw)
    return rec


def test_cache_roundtrip(cache):
    records = {f"q{i}": _rec(i) for i in range(4)}
    records["q3"]["extra_field"] = "dropped"
    assert cache.put_many("d", "a", records, meta={"gflops": 3.0, "gflops_source": "declared"}) == 4
    cache.set_meta("d", "a", note="hi")

    assert cache.get("d", "a", "q0") == _rec(0)
    assert cache.get("d", "a", "q3") == _rec(3)  # only RECORD_FIELDS are stored
    assert cache.get("d", "a", "q9") is None
    assert cache.done_ids("d", "a") == {"q0", "q1", "q2", "q3"}
    assert cache.meta("d", "a") == {"gflops": 3.0, "gflops_source": "declared", "note": "hi"}
    assert cache.has("d", "a") and not cache.has("d", "b")
    assert cache.agents("d") == ["a"] and cache.agents("nothing") == []

    t = cache.table("d", "a")
    assert list(t.index) == ["q0", "q1", "q2", "q3"] and t.index.name == "qid"
    assert tuple(t.columns) == RECORD_FIELDS
    assert list(t["em"]) == [1.0, 0.0, 1.0, 0.0]
    assert list(t["end_ok"]) == [True, False, True, False]

    s = cache.summary("d").set_index("agent").loc["a"]
    assert s["questions"] == 4 and s["em"] == 50.0 and s["f1"] == pytest.approx(55.0)
    assert s["gflops"] == 3.0 and s["gflops_source"] == "declared" and s["missing"] == 0


BUG_INCR = (
    "BUG agents.cache.put_many: c.incr(_GEN) on a JSONDisk cache — the generation is stored as "
    "zlib'd JSON bytes, so the 2nd put_many to the same (dataset, agent) raises TypeError "
    "(can't concat int to bytes); re-imports and batched writes fail"
)


def test_second_write_to_the_same_agent(cache):
    cache.put_many("d", "a", {"q0": _rec(0)})
    cache.put_many("d", "a", {"q1": _rec(1)})
    assert cache.done_ids("d", "a") == {"q0", "q1"}


def test_reimport_replaces_records(tmp_path, small, cache):
    spec = AgentSpec("x", "squad11", gflops=1.0)
    first = _write(tmp_path / "first.json", _good_predictions(small))
    import_predictions(spec, small, cache, path=first)
    second = _write(tmp_path / "second.json", {q: "zzz not an answer" for q in small.qids})
    report = import_predictions(spec, small, cache, path=second)
    assert report.em == 0.0
    assert cache.table("squad11", "x")["em"].sum() == 0
    assert cache.meta("squad11", "x")["source"] == second


def test_table_regenerates_after_writes(cache):
    cache.put_many("d", "a", {"q0": _rec(0)})
    assert list(cache.table("d", "a").index) == ["q0"]
    cache.put_many("d", "a", {"q1": _rec(1), "q0": _rec(0, answer="changed", em=0.0)})
    t = cache.table("d", "a")
    assert list(t.index) == ["q0", "q1"]
    assert t.loc["q0", "answer"] == "changed" and t.loc["q0", "em"] == 0.0
    # meta alone does not touch the records
    cache.set_meta("d", "a", x=1)
    pd.testing.assert_frame_equal(cache.table("d", "a"), t)


def test_two_instances_see_each_others_first_writes(tmp_path):
    a, b = AgentCache(tmp_path / "agents"), AgentCache(tmp_path / "agents")
    try:
        assert not b.has("d", "x")
        a.put_many("d", "x", {"q0": _rec(0)}, meta={"k": 1})
        assert b.has("d", "x") and b.agents("d") == ["x"]
        assert b.get("d", "x", "q0") == _rec(0)
        assert b.done_ids("d", "x") == {"q0"} and b.meta("d", "x") == {"k": 1}
        pd.testing.assert_frame_equal(b.table("d", "x"), a.table("d", "x"))
        b.put_many("d", "y", {"q1": _rec(1)})
        assert a.get("d", "y", "q1") == _rec(1) and a.agents("d") == ["x", "y"]
        a.set_meta("d", "x", k=2)
        assert b.meta("d", "x") == {"k": 2}
    finally:
        a.close()
        b.close()


def test_two_instances_see_each_others_writes(tmp_path):
    a, b = AgentCache(tmp_path / "agents"), AgentCache(tmp_path / "agents")
    try:
        a.put_many("d", "x", {"q0": _rec(0)}, meta={"k": 1})
        assert b.get("d", "x", "q0") == _rec(0)
        assert b.done_ids("d", "x") == {"q0"} and b.meta("d", "x") == {"k": 1}
        assert list(b.table("d", "x").index) == ["q0"]  # b packs generation 1
        a.put_many("d", "x", {"q1": _rec(1)})
        assert list(b.table("d", "x").index) == ["q0", "q1"]  # b sees a's new generation
        b.put_many("d", "x", {"q2": _rec(2)})
        assert list(a.table("d", "x").index) == ["q0", "q1", "q2"]
        assert a.agents("d") == b.agents("d") == ["x"]
    finally:
        a.close()
        b.close()


def test_unserialisable_record_rolls_back_the_whole_batch(cache):
    cache.put_many("d", "a", {"q0": _rec(0)}, meta={"v": 1})
    before_table, before_meta, _ = _snapshot(cache, "d", "a")
    batch = {"q1": _rec(1), "q2": _rec(2), "q3": _rec(3, answer=object())}  # q3 is not JSON
    with pytest.raises(TypeError):
        cache.put_many("d", "a", batch, meta={"v": 2})
    assert cache.done_ids("d", "a") == {"q0"}
    assert cache.get("d", "a", "q1") is None
    assert cache.meta("d", "a") == before_meta
    pd.testing.assert_frame_equal(cache.table("d", "a"), before_table)


def test_failure_mid_transaction_leaves_no_partial_batch(cache, monkeypatch):
    cache.put_many("d", "a", {"q0": _rec(0)})
    before_table, before_meta, _ = _snapshot(cache, "d", "a")
    dc = cache._cache("d", "a")  # the diskcache.Cache behind (d, a)
    real_set, calls = dc.set, []

    def flaky_set(key, value, *args, **kwargs):
        calls.append(key)
        if len(calls) == 3:
            raise OSError("disk full (simulated)")
        return real_set(key, value, *args, **kwargs)

    monkeypatch.setattr(dc, "set", flaky_set)
    with pytest.raises(OSError, match="simulated"):
        cache.put_many("d", "a", {f"q{i}": _rec(i) for i in range(1, 6)}, meta={"v": 2})
    monkeypatch.undo()
    assert len(calls) == 3  # the batch's segment and the metadata were set inside the transaction
    assert cache.done_ids("d", "a") == {"q0"}
    assert cache.meta("d", "a") == before_meta
    pd.testing.assert_frame_equal(cache.table("d", "a"), before_table)
    other = AgentCache(cache.directory)
    assert other.done_ids("d", "a") == {"q0"}
    other.close()


def test_failure_while_iterating_records_keeps_earlier_data(cache):
    class Exploding(Mapping):
        def __getitem__(self, k):
            return _rec(1)

        def __len__(self):
            return 5

        def __iter__(self):
            yield "q1"
            yield "q2"
            raise RuntimeError("producer died")

    cache.put_many("d", "a", {"q0": _rec(0)})
    with pytest.raises(RuntimeError):
        cache.put_many("d", "a", Exploding())
    assert cache.done_ids("d", "a") == {"q0"}


BAD_NAMES = ["../x", "", ".", "..", "a/b", "a\\b", ".hidden"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_invalid_dataset_or_agent_names(name, cache):
    for call in (
        lambda: cache.put_many(name, "a", {"q0": _rec(0)}),
        lambda: cache.put_many("d", name, {"q0": _rec(0)}),
        lambda: cache.get(name, "a", "q0"),
        lambda: cache.get("d", name, "q0"),
        lambda: cache.table("d", name),
        lambda: cache.done_ids(name, "a"),
        lambda: cache.meta("d", name),
        lambda: cache.set_meta(name, "a", x=1),
    ):
        with pytest.raises(ValueError, match="invalid"):
            call()
    assert not any(cache.directory.parent.glob("x*")) and not (cache.directory.parent / "x").exists()


def test_delete_refuses_invalid_names(cache):
    cache.put_many("d", "a", {"q0": _rec(0)})
    cache.put_many("e", "b", {"q0": _rec(0)})
    try:
        with pytest.raises(ValueError):
            cache.delete("d", "..")
    finally:
        assert cache.agents("e") == ["b"], "another dataset's agent was deleted"


def test_delete_removes_one_agent_only(cache):
    cache.put_many("d", "a", {"q0": _rec(0)})
    cache.put_many("d", "b", {"q0": _rec(0)})
    cache.delete("d", "a")
    assert cache.agents("d") == ["b"] and not cache.has("d", "a")


# ----------------------------------------------------------------------------- registry


def test_unknown_agent_or_pool_lists_known_names(fresh_cache):
    with pytest.raises(KeyError, match="unknown agent 'nope'.*bert-ens.*match-lstm"):
        get_agent("nope")
    with pytest.raises(KeyError, match="unknown pool 'nope'.*P10.*P3"):
        get_pool("nope")


@pytest.mark.parametrize("gflops", [math.nan, -1.0, math.inf, -math.inf, "5"])
def test_agent_spec_rejects_bad_gflops(gflops):
    with pytest.raises(ValueError, match="GFLOPs"):
        AgentSpec("x", "squad11", gflops=gflops)


def test_agent_spec_rejects_bad_id_and_kind():
    with pytest.raises(ValueError):
        AgentSpec("", "squad11")
    with pytest.raises(ValueError):
        AgentSpec("a|b", "squad11")
    with pytest.raises(ValueError, match="kind"):
        AgentSpec("x", "squad11", kind="oracle")
    assert AgentSpec("x", "squad11", gflops=0).gflops == 0


@pytest.mark.parametrize(
    "main, experts",
    [("a", ()), ("a", []), ("a", ("b", "b")), ("a", ("b", "a"))],
    ids=["no-experts", "empty-list", "dup-expert", "main-is-expert"],
)
def test_pool_spec_rejects_bad_members(main, experts):
    with pytest.raises(ValueError, match="pool p"):
        PoolSpec("p", "squad11", main, experts)


def test_pool_spec_with_a_string_of_experts():
    try:
        p = PoolSpec("p", "squad11", "match-lstm", "bert-ens")
    except TypeError:
        return  # refusing it is fine
    assert p.experts == ("bert-ens",)


def test_register_agent_and_pool_roundtrip(fresh_cache):
    spec = AgentSpec(
        "my-agent", "squad11", gflops=7.5, path="/somewhere/preds.json", name="Mine", options={"batch": 8}
    )
    register_agent(spec)
    assert user_registry_path() == fresh_cache / "registry.json"
    assert user_registry_path().is_file()
    assert get_agent("my-agent") == spec
    assert "my-agent" in [a.id for a in list_agents("squad11")]
    assert "my-agent" not in [a.id for a in list_agents("squad20")]

    pool = PoolSpec("mine", "squad11", "my-agent", ["match-lstm", "bert-ens"], "test pool")
    register_pool(pool)
    got = get_pool("mine")
    assert got == pool and got.experts == ("match-lstm", "bert-ens")
    assert got.agent_ids == ("my-agent", "match-lstm", "bert-ens")
    # builtins still there, and replacing an entry keeps one copy
    assert get_pool("P3").agent_ids == ("match-lstm", "rnet-plus", "bert-ens")
    with pytest.raises(ValueError, match="you already have an? agent 'my-agent'"):
        register_agent(AgentSpec("my-agent", "squad11", gflops=9.0))
    register_agent(AgentSpec("my-agent", "squad11", gflops=9.0), replace=True)
    assert get_agent("my-agent").gflops == 9.0
    doc = json.loads(user_registry_path().read_text())
    assert [a["id"] for a in doc["agents"]] == ["my-agent"]


def test_register_pool_refuses_other_dataset_and_unknown_agents(fresh_cache):
    with pytest.raises(ValueError, match="bidaf-elmo.*squad20"):
        register_pool(PoolSpec("mixed", "squad11", "match-lstm", ("bidaf-elmo",)))
    with pytest.raises(KeyError, match="nope"):
        register_pool(PoolSpec("ghost", "squad11", "match-lstm", ("nope",)))
    with pytest.raises(KeyError):
        get_pool("mixed")
    with pytest.raises(KeyError):
        get_pool("ghost")


def test_corrupt_user_registry_is_set_aside_never_lost(fresh_cache):
    """Issue 26: a damaged registry stops nothing; it is set aside (kept) with a warning naming it."""
    from l2d_core.stores import CorruptStoreWarning

    path = user_registry_path()
    text = '{"agents": [{"id": "x", "dataset": "squad'
    path.write_text(text, encoding="utf-8")
    with pytest.warns(CorruptStoreWarning, match=re.escape(str(path))):
        assert get_agent("bert-ens").dataset == "squad11"
    assert [p.read_text(encoding="utf-8") for p in (fresh_cache / "corrupt").iterdir()] == [text]
    register_agent(AgentSpec("y", "squad11"))
    assert get_agent("y").dataset == "squad11"


@pytest.mark.parametrize("text", ["[]", '"text"', '{"agents": [{"idx": 1}]}', '{"pools": [{"name": "p"}]}'])
def test_wrong_shape_user_registry_is_set_aside(text, fresh_cache):
    from l2d_core.stores import CorruptStoreWarning

    user_registry_path().write_text(text, encoding="utf-8")
    with pytest.warns(CorruptStoreWarning, match=re.escape(str(user_registry_path()))):
        assert get_agent("bert-ens").dataset == "squad11"
    assert len(list((fresh_cache / "corrupt").iterdir())) == 1


# ----------------------------------------------------------------------------- routing data


def test_load_routing_data_unknown_agent(small, cache):
    with pytest.raises(KeyError, match="unknown agent 'no-such-agent'"):
        load_routing_data(small, ("match-lstm", "no-such-agent"), cache)


def test_load_routing_data_refuses_bad_pools(small, cache):
    with pytest.raises(ValueError, match="at least one expert"):
        load_routing_data(small, ("match-lstm",), cache)
    with pytest.raises(ValueError, match="bert-single answers squad20"):
        load_routing_data(small, ("match-lstm", "bert-single"), cache)


def test_live_agent_not_cached(fresh_cache, small, cache):
    register_agent(AgentSpec("live-x", "squad11", kind="extractive", gflops=10.0, path="some/model"))
    with pytest.raises(AgentNotCachedError, match="scripts/precompute_cache.py") as exc:
        load_routing_data(small, ("match-lstm", "live-x"), cache)
    assert "live-x" in str(exc.value) and "squad11" in str(exc.value)
    assert isinstance(exc.value, LookupError)


# ----------------------------------------------------------------------------- splits


def _toy(titles_counts: dict[str, int], name: str = "toy") -> QADataset:
    recs = [
        QARecord(qid=f"{t}-{i}", title=t, context=f"context of {t}", question=f"q{i}?", answers=("x",))
        for t, n in titles_counts.items()
        for i in range(n)
    ]
    return QADataset(name, tuple(recs))


def test_benchmark_split_without_test_articles():
    with pytest.raises(EmptySplitError, match="empty"):
        benchmark_split(_toy({"Alpha": 3, "Beta": 2}))
    with pytest.raises(EmptySplitError):  # only test articles: nothing to train on
        benchmark_split(_toy({"Kenya": 3}))
    train, test = benchmark_split(_toy({"Alpha": 3, "Kenya": 2}))
    assert (len(train), len(test)) == (3, 2)


def test_random_article_split_deterministic_and_disjoint(squad11):
    tr1, te1 = random_article_split(squad11, 0.25, seed=7)
    tr2, te2 = random_article_split(squad11, 0.25, seed=7)
    assert te1.qids == te2.qids and tr1.qids == tr2.qids
    assert len(te1.titles) == 12
    assert not set(tr1.titles) & set(te1.titles)
    assert set(tr1.titles) | set(te1.titles) == set(squad11.titles)
    assert len(tr1) + len(te1) == len(squad11)
    other = {tuple(sorted(random_article_split(squad11, 0.25, seed=s)[1].titles)) for s in range(5)}
    assert len(other) > 1, "the seed has no effect"
    with pytest.raises(ValueError):
        random_article_split(squad11, 0.0, seed=0)
    with pytest.raises(ValueError):
        random_article_split(squad11, 1.0, seed=0)
    with pytest.raises(EmptySplitError):
        random_article_split(_toy({"Only": 4}), 0.5, seed=0)


def test_validation_split_carves_from_train_only(squad11):
    train, test = benchmark_split(squad11)
    fit, val = validation_split(train, 0.2, seed=3)
    assert set(fit.titles) | set(val.titles) == set(train.titles)
    assert not set(fit.titles) & set(val.titles)
    assert not set(val.titles) & set(BENCHMARK_TEST_ARTICLES)
    assert not set(fit.titles) & set(test.titles)
    assert len(fit) + len(val) == len(train) == 7_975
    assert validation_split(train, 0.2, seed=3)[1].qids == val.qids


# ----------------------------------------------------------------------------- costs


@pytest.mark.parametrize("bad", [math.nan, -0.1, math.inf, -math.inf, "1", None, True])
@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_cost_config_rejects_bad_values(which, bad):
    kw = {"alpha": [1.0, 1.0], "beta": [0.1, 0.2]}
    kw[which] = [1.0, bad]
    with pytest.raises(InvalidCostError, match=f"{which}_2"):
        CostConfig(**kw)


def test_cost_config_rejects_wrong_lengths():
    with pytest.raises(InvalidCostError):
        CostConfig(alpha=[1.0], beta=[0.1, 0.2])
    with pytest.raises(InvalidCostError):
        CostConfig(alpha=[], beta=[])
    assert CostConfig(alpha=[0, 1], beta=[0, 0.5]).n_experts == 2
