"""A fuzzer over the routing API: schemathesis generates requests from the app's own
``/openapi.json`` — bodies that fit the declared contract and bodies that break it — and sends
them to the FastAPI app of a small real artifact (a cascade over the tiny BERT). No answer may be
a 5xx, and every answer must fit the schema declared for its status code (an undeclared status
code fails too). Bounded and deterministic: a fixed number of cases per operation, derandomized."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from l2d_core.deploy import deploy, load_router
from l2d_core.deploy.api import create_app
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import make_router

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# (operation, generation mode, cases): the POST bodies get most of the budget
PLAN = [
    ("/v1/route", "POST", GenerationMode.POSITIVE, 60),
    ("/v1/route", "POST", GenerationMode.NEGATIVE, 50),
    ("/v1/answer", "POST", GenerationMode.POSITIVE, 40),
    ("/v1/answer", "POST", GenerationMode.NEGATIVE, 40),
    ("/v1/agents", "GET", GenerationMode.POSITIVE, 1),  # no parameter: one request to send
    ("/healthz", "GET", GenerationMode.POSITIVE, 1),
]


@pytest.fixture(scope="module")
def api(live_bench, tmp_path_factory):
    router = make_router("l2d-cascade").fit(live_bench)
    folder = deploy(router, CostConfig((1.0,), (0.3,))).save(tmp_path_factory.mktemp("fuzz") / "cascade")
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(load_router(folder).warm_up()))


@pytest.mark.parametrize("path, method, mode, cases", PLAN, ids=[f"{p[1]} {p[0]} {p[2]}" for p in PLAN])
def test_no_5xx_and_every_answer_fits_the_schema(api, path, method, mode, cases):
    seen = Counter()
    strategy = api[path][method].as_strategy(generation_mode=mode)

    @given(case=strategy)
    @settings(
        max_examples=cases,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case):
        seen[case.call_and_validate(checks=CHECKS).status_code] += 1

    t0 = time.monotonic()
    fuzz()
    took = time.monotonic() - t0
    print(f"{method} {path} {mode}: {sum(seen.values())} cases in {took:.1f} s, status codes {dict(seen)}")
    assert sum(seen.values()) >= cases // 2 + 1  # it did send requests
    if mode is GenerationMode.NEGATIVE:
        assert set(seen) <= {413, 422} and 422 in seen  # a body that breaks the contract is refused
    elif method == "POST":
        assert 200 in seen  # bodies that fit the contract are routed
