"""A post-hoc rejector: it decides after the main agent has answered.

The paper's rejector sees only ``(question, context)``. On real systems that is close to
random (the main agent's mistakes are hard to foresee from the query alone). A post-hoc
rejector also sees the main agent's answer and cheap signals about it: its length, how often
it occurs in the context, the question type, and whether cheap helper agents agree with it.
Its cost always includes running the main agent and the helpers; a deferred query then pays
the expert on top. Its error estimates plug into the same reweight policy (SPEC §5).

- :func:`posthoc_features` builds the features of one split of a benchmark from the cached
  answers of the main agent and the helpers (aligned by qid);
- :class:`PosthocRejector` learns p̂_j^i(x) on them (the plug-in head of ``rejector.py``);
- :func:`posthoc_points` gives the router's operating points for the router comparison,
  paying the main agent and the helpers on every query (:func:`posthoc_gflops`).

Chosen on validation only (5-fold CV grouped by article over the 34 training articles):
``answer+extra`` features, the six BENCHMARK.md agents ≤ 5 GFLOPs as helpers (16.05 GFLOPs per
query with the main agent), one plug-in head for every endpoint × agent, Platt maps fitted on
held-out training articles. Rejected on validation: the question/context embeddings (they
overfit: P2 APGR 0.71 vs 0.79), MiniLM similarities of question and answer (+0.003 APGR for
+9.5 GFLOPs), class balancing (0.73), isotonic maps, per-output logistic or boosted trees,
the SDL with ν ∈ {0.5, 1, 2} (trained per β, no better), fewer helpers (≤ 2 GFLOPs: 0.77;
none: 0.58). On the test articles (5 seeds) it reaches APGR 0.77 on P2 (ex-ante rejector:
0.50) and a TDL below random allocation, uniform and matched, at every β₁ on P2, P3 and P10
(paired bootstrap, 95%); its AIQ gain over the zero router is only ~5% of the oracle's on P3
and its best GFLOPs/EM within 1 EM of bert-ens is 1.6–2× lower, not 4×.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .agents import get_agent, list_agents
from .agents.registry import BUILTIN
from .costs import CostConfig
from .data.records import QUESTION_TYPES, QARecord, question_type
from .experiment import HEAD_FORMAT, Benchmark
from .paths import cache_dir
from .policies import plugin_policy
from .rejector import PluginRejector
from .routing_data import RoutingData, load_routing_data
from .squad_eval import normalize_answer
from .training import FAST_CONFIG, TrainConfig

__all__ = [
    "FEATURE_SETS",
    "DEFAULT_FEATURES",
    "GFLOPS_SWEEP",
    "DEFAULT_MAX_HELPER_GFLOPS",
    "DEFAULT_CALIBRATION",
    "default_helpers",
    "posthoc_helpers",
    "answer_features",
    "extra_features",
    "posthoc_answers",
    "posthoc_features",
    "posthoc_gflops",
    "gflops_costs",
    "PosthocRejector",
    "fit_posthoc",
    "posthoc_points",
]

# ``answer``: answer_features; ``answer+extra``: also extra_features; ``…+emb``: also the
# rejector's question/context embeddings (bench.X_*; the encoder's GFLOPs are then paid too).
FEATURE_SETS = ("answer", "answer+extra", "answer+emb", "answer+extra+emb")
DEFAULT_FEATURES = "answer+extra"
DEFAULT_MAX_HELPER_GFLOPS = 5.0
DEFAULT_CALIBRATION = "platt"
# Part of the trained-head cache key: bump when the features change.
FEATURE_FORMAT = 2
# Second dense sweep of posthoc_points: β of the dearest expert, every other expert's β in
# proportion to its *marginal* GFLOPs (0 for an agent that already ran), so the policy trades
# error against compute itself; the GFLOPs rule of SPEC §3 (β_j ∝ GFLOPs_j / 20 for j ≥ 2)
# makes a dear expert cheaper than a mid-priced one and never reaches P3's rnet-plus.
GFLOPS_SWEEP: tuple[float, ...] = (0.0, *(float(b) for b in np.geomspace(1e-3, 50.0, 48)))


def default_helpers(dataset: str, main: str, exclude: Sequence[str], max_gflops: float) -> tuple[str, ...]:
    """Cheap agents of the dataset (≤ ``max_gflops`` each), other than the pool's agents."""
    return tuple(
        a.id for a in list_agents(dataset) if a.id != main and a.id not in exclude and a.gflops <= max_gflops
    )


def posthoc_helpers(
    dataset: str, main: str, max_gflops: float = DEFAULT_MAX_HELPER_GFLOPS
) -> tuple[str, ...]:
    """The default helpers of a post-hoc router: the BENCHMARK.md agents of ``dataset``
    (``builtin.json``, so user imports never change the benchmark figures) other than the main
    agent, at most ``max_gflops`` each. Cheap experts of the pool count (P10's dcr … match-lstm)."""
    builtin = {a["id"] for a in json.loads(BUILTIN.read_text(encoding="utf-8"))["agents"]}
    return tuple(h for h in default_helpers(dataset, main, (), max_gflops) if h in builtin)


def _norm(answers: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda a: normalize_answer(a) if isinstance(a, str) else "\x00none", otypes=[object])(
        answers
    )


def answer_features(
    main_answers: np.ndarray, helper_answers: np.ndarray, records: Sequence[QARecord]
) -> np.ndarray:
    """Features of the main agent's answer, (N, d).

    ``main_answers`` (N,) and ``helper_answers`` (N, H) hold answer texts (None = none).
    Columns: agreement with each helper, share of helpers agreeing, share of the most common
    answer among main + helpers, log answer length in words, no-answer flag, log number of
    occurrences in the context, answer position in the context, question-type one-hot.
    """
    n = len(records)
    main = _norm(np.asarray(main_answers, dtype=object))
    helpers = _norm(np.asarray(helper_answers, dtype=object).reshape(n, -1))
    agree = (helpers == main[:, None]).astype(np.float32)  # (N, H)
    all_ans = np.concatenate([main[:, None], helpers], axis=1)
    majority = np.array([max((row == x).sum() for x in row) / len(row) for row in all_ans], np.float32)
    words = np.array([len(m.split()) if m != "\x00none" else 0 for m in main], np.float32)
    occ, pos = np.zeros(n, np.float32), np.ones(n, np.float32)
    for i, (r, a) in enumerate(zip(records, main_answers)):
        if isinstance(a, str) and a.strip():
            ctx = r.context.lower()
            occ[i] = ctx.count(a.lower())
            at = ctx.find(a.lower())
            pos[i] = at / max(1, len(ctx)) if at >= 0 else 1.0
    qt = np.array(
        [[question_type(r.question) == t for t in (*QUESTION_TYPES, "other")] for r in records], np.float32
    )
    cols = [
        agree,
        agree.mean(1, keepdims=True) if agree.shape[1] else np.zeros((n, 1), np.float32),
        majority[:, None],
        np.log1p(words)[:, None],
        (words == 0)[:, None].astype(np.float32),
        np.log1p(occ)[:, None],
        pos[:, None],
        qt,
    ]
    return np.concatenate(cols, axis=1).astype(np.float32)


def posthoc_gflops(data: RoutingData, helpers: Sequence[str]) -> tuple[RoutingData, float]:
    """Cost accounting of a post-hoc policy: the main agent and the helpers always run, so their
    GFLOPs move into the per-query overhead and their own columns become 0 (a helper may also
    be an expert of the pool, as in P10: routing to it then costs nothing more)."""
    own = dict(zip(data.agent_ids, data.agent_gflops.tolist()))
    overhead = float(data.agent_gflops[0]) + sum(own[h] if h in own else get_agent(h).gflops for h in helpers)
    zero = {data.agent_ids[0]: 0.0, **{h: 0.0 for h in helpers if h in own}}
    return data.with_gflops(zero), overhead


def gflops_costs(data: RoutingData, beta_max: float) -> CostConfig:
    """α = 1 and β_j = ``beta_max`` · G_j / max_k G_k, with G the experts' mean GFLOPs in
    ``data`` (after :func:`posthoc_gflops`: their marginal cost; all 0 → every β is 0).

    >>> from l2d_core.routing_data import RoutingData
    >>> z = np.zeros((1, 3), bool)
    >>> d = RoutingData("d", ("a", "b", "c"), ("q",), np.array(["t"]), z, z, z * 1.0, z * 1.0,
    ...                 np.array([[0.0, 100.0, 1000.0]]), np.empty((1, 3), object))
    >>> gflops_costs(d, 0.5).beta
    (0.05, 0.5)
    """
    g = data.agent_gflops[1:]
    top = float(g.max()) if len(g) else 0.0
    beta = g / top * beta_max if top > 0 else np.zeros_like(g)
    return CostConfig(tuple([1.0] * len(g)), tuple(float(b) for b in beta))


_NUMERIC_Q = re.compile(
    r"\bhow (many|much|long|old|far|large|big|high|tall|often)\b"
    r"|\bwhat (year|percentage|percent|number|amount)\b|\bwhen\b|\bwhich year\b"
)


def _token_f1(a: list[str], b: list[str]) -> float:
    if not a or not b:
        return float(not a and not b)
    common = sum((Counter(a) & Counter(b)).values())
    if common == 0:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)


def extra_features(
    main_answers: np.ndarray, helper_answers: np.ndarray, records: Sequence[QARecord]
) -> np.ndarray:
    """Softer signals about the main agent's answer, (N, H + 12).

    Columns: token F1 with each helper's answer, mean of those, share of distinct answers
    among main + helpers, F1 with the helpers' most common answer and that answer's share,
    main answer inside / around that answer, answer has a digit, question asks for a number
    or date, share of the answer's words that are question words, capitalised share of the
    answer's words, log question length, log context length (words).
    """
    n = len(records)
    main = _norm(np.asarray(main_answers, dtype=object))
    helpers = _norm(np.asarray(helper_answers, dtype=object).reshape(n, -1))
    h = helpers.shape[1]
    out = np.zeros((n, h + 12), np.float32)
    for k, r in enumerate(records):
        m = main[k]
        mw = m.split() if m != "\x00none" else []
        hw = [x.split() if x != "\x00none" else [] for x in helpers[k]]
        f1s = [_token_f1(mw, w) for w in hw]
        out[k, :h] = f1s
        out[k, h] = np.mean(f1s) if h else 0.0
        everyone = [m, *helpers[k]]
        out[k, h + 1] = len(set(everyone)) / len(everyone)
        if h:
            top, cnt = Counter(helpers[k]).most_common(1)[0]
            tw = top.split() if top != "\x00none" else []
            out[k, h + 2] = _token_f1(mw, tw)
            out[k, h + 3] = cnt / h
            out[k, h + 4] = float(bool(mw) and bool(tw) and m != top and m in top)
            out[k, h + 5] = float(bool(mw) and bool(tw) and m != top and top in m)
        raw = main_answers[k] if isinstance(main_answers[k], str) else ""
        out[k, h + 6] = float(any(c.isdigit() for c in raw))
        out[k, h + 7] = float(bool(_NUMERIC_Q.search(r.question.lower())))
        qw = set(normalize_answer(r.question).split())
        out[k, h + 8] = np.mean([w in qw for w in mw]) if mw else 0.0
        toks = raw.split()
        out[k, h + 9] = np.mean([t[:1].isupper() for t in toks]) if toks else 0.0
        out[k, h + 10] = np.log1p(len(r.question.split()))
        out[k, h + 11] = np.log1p(len(r.context.split()))
    return out


def posthoc_answers(bench: Benchmark, helpers: Sequence[str], split: str = "train"):
    """The main agent's and the helpers' answers on one split of ``bench``, aligned by qid.

    ``split`` is ``train``, ``val`` or ``test`` (the :class:`~l2d_core.experiment.Benchmark`'s
    RoutingData of that name). Returns ``(main (N,), helpers (N, H), records)`` in the split's
    order; raises when the helpers' cached answers for the main agent disagree with the
    split's (a misalignment).
    """
    data: RoutingData | None = getattr(bench, split, None)
    if data is None:
        raise ValueError(f"benchmark has no {split!r} split")
    records = tuple(bench.dataset[q] for q in data.qids)
    main = np.asarray(data.answers[:, 0], dtype=object)
    if not helpers:
        return main, np.empty((len(data), 0), dtype=object), records
    hd = _helper_data(bench.dataset, (data.agent_ids[0], *helpers))
    row = {q: i for i, q in enumerate(hd.qids)}
    idx = np.array([row[q] for q in data.qids], dtype=np.intp)
    if tuple(hd.qids[i] for i in idx) != tuple(data.qids) or not np.array_equal(
        _norm(hd.answers[idx, 0]), _norm(main)
    ):
        raise RuntimeError("post-hoc features: helper answers are not aligned with the split by qid")
    return main, np.asarray(hd.answers[idx, 1:], dtype=object), records


_HELPER_DATA: dict = {}


def _helper_data(dataset, agent_ids: tuple[str, ...]) -> RoutingData:
    """``load_routing_data`` memoized per process (dataset, agents as registered, cache)."""
    key = (id(dataset), tuple(repr(get_agent(a)) for a in agent_ids), str(cache_dir()))
    if key not in _HELPER_DATA or _HELPER_DATA[key][0] is not dataset:
        if len(_HELPER_DATA) > 8:
            _HELPER_DATA.clear()
        _HELPER_DATA[key] = (dataset, load_routing_data(dataset, agent_ids))
    return _HELPER_DATA[key][1]


def posthoc_features(
    bench: Benchmark, helpers: Sequence[str], split: str = "train", features: str = DEFAULT_FEATURES
) -> np.ndarray:
    """Features of the post-hoc rejector on one split (``train``, ``val`` or ``test``), (N, d),
    in the order of ``bench.<split>`` (aligned by qid; see :func:`posthoc_answers`)."""
    if features not in FEATURE_SETS:
        raise ValueError(f"unknown post-hoc features {features!r}; known: {FEATURE_SETS}")
    main, helper_answers, records = posthoc_answers(bench, helpers, split)
    parts = [answer_features(main, helper_answers, records)]
    if "extra" in features:
        parts.append(extra_features(main, helper_answers, records))
    if features.endswith("+emb"):
        X = getattr(bench, f"X_{split}")
        if X is None or X.shape[1] == 0:
            raise ValueError(f"features {features!r} need the benchmark's embeddings (features_needed=True)")
        parts.append(X)
    return np.concatenate(parts, axis=1).astype(np.float32)


@dataclass
class PosthocRejector:
    """Post-hoc error estimator: the plug-in head (``rejector.PluginRejector``, one network
    with a p̂_j^i output per endpoint i and agent j, trained with BCE) over post-hoc features.

    ``calibration="platt"`` holds out ``calibration_fraction`` of the training *articles* and
    fits a per-output logistic map of the head's logits on them (the head is then trained on
    the rest). Follows scikit-learn's contract: ``fit`` returns ``self``, learned state ends in
    ``_``.
    """

    config: TrainConfig = FAST_CONFIG
    calibration: str = DEFAULT_CALIBRATION
    calibration_fraction: float = 0.25
    progress: bool = False
    head_: PluginRejector | None = field(default=None, init=False, repr=False)
    platt_: np.ndarray | None = field(default=None, init=False, repr=False)  # (2, A, 2): slope, bias
    keep_: np.ndarray | None = field(default=None, init=False, repr=False)  # (d,) non-constant columns
    agent_ids_: tuple[str, ...] = field(default=(), init=False)

    def fit(
        self,
        F: np.ndarray,
        data: RoutingData,
        F_val: np.ndarray | None = None,
        data_val: RoutingData | None = None,
    ) -> PosthocRejector:
        if self.calibration not in ("none", "platt"):
            raise ValueError(f"calibration must be 'none' or 'platt', got {self.calibration!r}")
        F = np.asarray(F, dtype=np.float32)
        if len(F) != len(data):
            raise ValueError(f"{len(F)} feature rows for {len(data)} queries")
        self.agent_ids_ = data.agent_ids
        fit_mask = np.ones(len(data), bool)
        if self.calibration == "platt":
            titles = np.array(sorted(set(data.titles)))
            np.random.default_rng(self.config.seed).shuffle(titles)
            held = titles[: max(1, round(self.calibration_fraction * len(titles)))]
            fit_mask = ~np.isin(data.titles, held)
            if fit_mask.all() or not fit_mask.any():
                raise ValueError("platt calibration needs at least two articles in the training data")
        # a column constant on the rows the head sees (a question type absent from a few
        # articles) would be standardised by ~0 and blow up elsewhere: leave it out
        self.keep_ = F[fit_mask].std(axis=0) > 1e-6
        F_val = None if F_val is None else np.asarray(F_val, dtype=np.float32)[:, self.keep_]
        self.head_ = PluginRejector(config=self.config, progress=self.progress)
        self.head_.fit(F[fit_mask][:, self.keep_], data.take(fit_mask), F_val, data_val)
        self.platt_ = None
        if self.calibration == "platt":
            z = self.head_.raw_scores(F[~fit_mask][:, self.keep_])
            self.platt_ = _fit_platt(z, data.errors[~fit_mask])
        return self

    def error_proba(self, F: np.ndarray) -> np.ndarray:
        """p̂_j^i(x) = P[agent j wrong on endpoint i], (N, 2, A)."""
        if self.head_ is None:
            raise RuntimeError("call fit() first")
        z = self.head_.raw_scores(np.asarray(F, dtype=np.float32)[:, self.keep_]).astype(np.float64)
        if self.platt_ is not None:
            z = z * self.platt_[None, :, :, 0] + self.platt_[None, :, :, 1]
        return np.exp(-np.logaddexp(0.0, -z))

    def predict(self, F: np.ndarray, costs: CostConfig) -> np.ndarray:
        """The reweight policy (SPEC §5) at ``costs`` on these estimates: the agent per query."""
        return plugin_policy(self.error_proba(F), costs)

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        self.head_.save(directory, {"posthoc_calibration": self.calibration})
        np.save(directory / "keep.npy", self.keep_)
        if self.platt_ is not None:
            np.save(directory / "platt.npy", self.platt_)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> PosthocRejector:
        directory = Path(directory)
        head = PluginRejector.load(directory)
        cal = json.loads((directory / "config.json").read_text()).get("posthoc_calibration", "none")
        est = cls(config=head.config, calibration=cal)
        est.head_, est.agent_ids_ = head, head.agent_ids_
        est.keep_ = np.load(directory / "keep.npy")
        est.platt_ = np.load(directory / "platt.npy") if cal == "platt" else None
        return est


def _fit_platt(z: np.ndarray, errors: np.ndarray, ridge: float = 1.0, steps: int = 50) -> np.ndarray:
    """Per output, (slope, bias) minimising the log loss of sigmoid(slope·z + bias) plus
    ``ridge``/2 · ‖(slope, bias) − (1, 0)‖² (identity when data are scarce); damped Newton."""
    n, e, a = z.shape
    out = np.zeros((e, a, 2))
    w0 = np.array([1.0, 0.0])

    def loss(w, X, y):
        m = X @ w
        return float(np.sum(np.logaddexp(0.0, m) - y * m) + 0.5 * ridge * np.sum((w - w0) ** 2))

    for i in range(e):
        for j in range(a):
            X = np.stack([z[:, i, j].astype(np.float64), np.ones(n)], 1)
            y = errors[:, i, j].astype(np.float64)
            w = w0.copy()
            for _ in range(steps):
                p = np.exp(-np.logaddexp(0.0, -(X @ w)))
                g = X.T @ (p - y) + ridge * (w - w0)
                H = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(2)
                step, t, f0 = np.linalg.solve(H, g), 1.0, loss(w, X, y)
                while t > 1e-4 and loss(w - t * step, X, y) > f0:
                    t /= 2
                w = w - t * step
                if np.abs(t * step).max() < 1e-9:
                    break
            out[i, j] = w
    return out


def _head_dir(bench: Benchmark, helpers, features: str, est: PosthocRejector, F_train: np.ndarray) -> Path:
    key = json.dumps(
        [
            HEAD_FORMAT,
            FEATURE_FORMAT,
            "posthoc",
            bench.fingerprint(),
            list(helpers),
            features,
            est.config.to_dict(),
            est.calibration,
            est.calibration_fraction,
            hashlib.sha256(np.ascontiguousarray(F_train).tobytes()).hexdigest()[:16],
        ],
        sort_keys=True,
    )
    return cache_dir() / "rejectors" / hashlib.sha256(key.encode()).hexdigest()[:20]


def fit_posthoc(
    bench: Benchmark,
    helpers: Sequence[str] | None = None,
    features: str = DEFAULT_FEATURES,
    config: TrainConfig = FAST_CONFIG,
    calibration: str = DEFAULT_CALIBRATION,
    F_train: np.ndarray | None = None,
) -> PosthocRejector:
    """A :class:`PosthocRejector` fitted on ``bench.train``; cached on disk like the other heads."""
    helpers = posthoc_helpers(bench.dataset.name, bench.pool.main) if helpers is None else tuple(helpers)
    if F_train is None:
        F_train = posthoc_features(bench, helpers, "train", features)
    est = PosthocRejector(config=config, calibration=calibration)
    path = _head_dir(bench, helpers, features, est, F_train)
    if all((path / f).is_file() for f in ("model.safetensors", "scaler.safetensors", "keep.npy")):
        return PosthocRejector.load(path)
    est.fit(F_train, bench.train)
    est.save(path)
    return est


def posthoc_points(
    bench: Benchmark,
    seed: int = 0,
    helpers: Sequence[str] | None = None,
    features: str = DEFAULT_FEATURES,
    calibration: str = DEFAULT_CALIBRATION,
) -> list[dict]:
    """Operating points of the post-hoc router on the test articles, built by the router
    comparison's own point builder (``comparison.make_point``): the reweight policy at each
    BENCHMARK.md β₁ and at the dense sweep (points flagged ``dense``). Every query pays the
    main agent and the helpers (and the rejector's encoder when the features use its
    embeddings) as overhead GFLOPs; the main agent's (and any helper expert's) own column is 0."""
    from . import comparison as C  # lazy: comparison imports this module lazily too

    helpers = posthoc_helpers(bench.dataset.name, bench.pool.main) if helpers is None else tuple(helpers)
    est = fit_posthoc(bench, helpers, features, FAST_CONFIG.but(seed=seed), calibration)
    p_err = est.error_proba(posthoc_features(bench, helpers, "test", features))
    test, overhead = posthoc_gflops(bench.test, helpers)
    if features.endswith("+emb"):
        overhead += bench.rejector_gflops
    pts = []
    for dense, betas in ((False, C.BETA_POINTS), (True, C.DENSE_BETAS)):  # the comparison's β₁ points
        pts += [
            C.make_point(bench, plugin_policy(p_err, bench.costs(b)), b, overhead, data=test, dense=dense)
            for b in betas
        ]
    for bm in GFLOPS_SWEEP:  # no β₁ of the benchmark: these points carry no TDL
        choice = plugin_policy(p_err, gflops_costs(test, bm))
        pts.append(C.make_point(bench, choice, None, overhead, data=test, dense=True, beta_max=bm))
    return pts
