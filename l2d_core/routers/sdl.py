"""The paper's rejector (SPEC §4, §6): the router ``l2d-sdl``, its estimators, and the artifact it
freezes into.

The rejector scores every agent for both ends of the answer from the question and context and
sends the query to the highest summed score (Algorithm 2); it is trained with the surrogate
deferral loss for one cost setting, so a new setting trains a new head. Two modes, one loss:

- *fast* (:class:`SDLRejector`): frozen encoder, cached embeddings, a linear head fitted full
  batch (a fraction of a second on a CPU);
- *full* (:class:`FullSDLRejector`): the encoder fine-tuned end to end (CUDA when present).

Estimators follow scikit-learn's contract: ``fit(X, y)`` with ``y`` every agent's mistakes
(N, 2, A), ``decision_function(X)`` the scores (N, 2, A); learned state ends in ``_``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..data.records import QARecord
from ..method.costs import CostConfig, cost_matrix
from ..method.policies import learned_policy
from ..method.training import FAST_CONFIG, PAPER_CONFIG, SDL_FAST_CONFIG, TrainConfig, train_loop
from ..runtime import set_seed
from . import trained
from .base import Needs, NotExportable, Router
from .decision import Decision, Stage
from .encoder import encoder_spec, load_encoder
from .estimator import Estimator
from .head import AgentHead, load_head_state, save_head
from .registry import register
from .saved import Costs, SavedConfig
from .saved import Encoder as EncoderSpec
from .scaling import Projection

__all__ = [
    "SDL_STAGES",
    "SDLRejector",
    "FullSDLRejector",
    "RejectorRouter",
    "SDLRouter",
    "FullSDLRouter",
    "SDLConfig",
]

SDL_STAGES = (
    Stage(
        "",
        "minus the rejector's score",
        "the rejector scores every agent for both ends of the answer; the highest summed score wins "
        "(shown negated: the least wins, as for the other routers)",
    ),
)


class SDLRejector(AgentHead):
    """The paper's rejector in fast mode: a head trained with the SDL for one cost setting."""

    def __init__(self, config: TrainConfig = FAST_CONFIG, costs: CostConfig | None = None, progress=False):
        super().__init__(config, progress)
        self.costs = costs

    def _targets(self, y: np.ndarray) -> np.ndarray:
        if self.costs is None:
            raise ValueError("SDLRejector needs costs")
        return cost_matrix(np.asarray(y, bool), self.costs).astype(np.float32)

    def _loss(self, out, target):
        from ..method.losses import sdl

        return sdl(out, target, self.config.nu)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """r̂^i(x, j), (N, 2, A)."""
        return self.raw_scores(X)

    def checkpoint_config(self) -> dict:
        return {**super().checkpoint_config(), "costs": asdict(self.costs) if self.costs else None}

    @classmethod
    def _params_from(cls, config: dict) -> dict:
        return {"costs": CostConfig(**config["costs"])} if config.get("costs") else {}


class FullSDLRejector(Estimator):
    """Full mode: fine-tune the encoder and head end to end with the SDL (CUDA when present).
    ``X`` is a sequence of QARecords (the encoder reads the text)."""

    def __init__(
        self,
        costs: CostConfig,
        encoder: str = "minilm",
        config: TrainConfig = PAPER_CONFIG,
        max_length: int = 384,
        device: str | None = None,
        progress: bool = False,
    ):
        self.costs = costs
        self.encoder = encoder
        self.config = config
        self.max_length = max_length
        self.device = device
        self.progress = progress

    def _batches(self, records: Sequence[QARecord]):
        return self.encoder_.tokenize([r.question for r in records], [r.context for r in records])

    def fit(self, X: Sequence[QARecord], y: np.ndarray):
        import torch

        from ..method.losses import sdl
        from .network import PairModel

        y = np.asarray(y, bool)
        if len(X) != len(y):
            raise ValueError(f"{len(X)} records for {len(y)} queries")
        self.encoder_ = load_encoder(self.encoder, max_length=self.max_length, device=self.device)
        dev = self.encoder_.device
        set_seed(self.config.seed)
        self.model_ = PairModel(self.encoder_, y.shape[2], self.config.hidden, self.config.dropout).to(dev)
        cost = torch.from_numpy(cost_matrix(y, self.costs).astype(np.float32))
        use_amp = dev.type == "cuda"

        def batch_loss(idx):
            enc = {k: v.to(dev) for k, v in self._batches([X[i] for i in idx.tolist()]).items()}
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_amp):
                out = self.model_(**enc).float()
            return sdl(out, cost[idx].to(dev), self.config.nu)

        self.history_ = train_loop(self.model_, len(X), batch_loss, self.config, progress=self.progress)
        return self

    def decision_function(self, X: Sequence[QARecord], batch_size: int = 64) -> np.ndarray:
        import torch

        out = []
        dev = self.encoder_.device
        with torch.no_grad():
            for i in range(0, len(X), batch_size):
                enc = {k: v.to(dev) for k, v in self._batches(X[i : i + batch_size]).items()}
                out.append(self.model_.eval()(**enc).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 2, 0), dtype=np.float32)

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        self.encoder_.model.save_pretrained(directory / "encoder", safe_serialization=True)
        self.encoder_.tokenizer.save_pretrained(directory / "encoder")
        config = {
            "estimator": "FullSDLRejector",
            "costs": asdict(self.costs),
            "encoder": self.encoder,
            "max_length": self.max_length,
            "in_dim": self.encoder_.dim,
            "out_shape": list(self.model_.head.out_shape),
            "train": self.config.to_dict(),
        }
        return save_head(directory, self.model_.head, config)

    @classmethod
    def load(cls, directory: str | Path, device: str | None = None) -> FullSDLRejector:
        """Reload a saved full-mode rejector (fine-tuned encoder + head)."""
        from .network import PairModel

        directory = Path(directory)
        state, config = load_head_state(directory)
        est = cls(
            CostConfig(**config["costs"]),
            config["encoder"],
            TrainConfig(**config["train"]),
            config["max_length"],
            device,
        )
        est.encoder_ = load_encoder(str(directory / "encoder"), max_length=est.max_length, device=device)
        n_agents = config["out_shape"][1]
        est.model_ = PairModel(est.encoder_, n_agents, est.config.hidden, est.config.dropout)
        est.model_.head.load_state_dict(state)
        est.model_.to(est.encoder_.device).eval()
        return est


def sdl_decision(scores: np.ndarray, overhead: float) -> Decision:
    """Algorithm 2 on scores (N, 2, A): the highest summed score, explained as its negation."""
    return Decision(
        learned_policy(scores),
        overhead,
        expected=-scores.sum(axis=1),
        scores=scores,
        score_label="score",
        stages=SDL_STAGES,
    )


class SDLConfig(SavedConfig):
    """What a frozen ``l2d-sdl`` saves besides its head: the cost setting it was trained for and
    the encoder whose embeddings it reads."""

    costs: Costs
    encoder: EncoderSpec


class RejectorRouter(Router):
    """The paper's rejector on a benchmark, in its subclass's ``mode``: ``l2d-sdl`` (fast: a head
    on frozen embeddings; it freezes into an artifact) or ``l2d-sdl-full`` (the encoder
    fine-tuned; benchmarked only when named)."""

    family = "l2d"
    reads_embeddings = True
    instant = False
    mode: ClassVar[str] = "fast"

    def __init__(self, config=None):
        config = config if config is not None else (SDL_FAST_CONFIG if self.mode == "fast" else PAPER_CONFIG)
        super().__init__(config=config, mode=self.mode)  # (the params stored results are keyed on)
        self.config = config

    def _fit(self) -> None:
        self.memo_, self.heads_, self.projection_ = {}, {}, None

    def _estimator(self, costs: CostConfig):
        cfg = self.config.but(seed=self.seed_)
        if self.mode == "full":
            return FullSDLRejector(costs, self.bench_.encoder_name, cfg)
        return SDLRejector(config=cfg, costs=costs)

    def needs_training(self, costs: CostConfig) -> bool:
        return costs not in self.memo_ and not trained.is_stored(
            f"sdl-{self.mode}", self.bench_, self._estimator(costs)
        )

    def estimator(self, costs: CostConfig):
        """The rejector trained for ``costs`` (stored on disk: a setting seen before loads); a fast
        full-batch head starts from the nearest setting trained in this session (its SDL is convex:
        the warm start changes the time, not the head)."""
        bench, est = self.bench_, self._estimator(costs)
        errors = bench.train.errors
        if self.mode == "full":
            return trained.fitted("sdl-full", bench, est, lambda e: e.fit(list(bench.train_records), errors))
        init = None
        if self.config.solver == "lbfgs" and self.heads_:
            gap = lambda c: float(np.abs(np.subtract((*c.alpha, *c.beta), (*costs.alpha, *costs.beta))).sum())  # noqa: E731
            init = self.heads_[min(self.heads_, key=gap)].head_.state_dict()
        self.heads_[costs] = trained.fitted("sdl-fast", bench, est, lambda e: self._fit_fast(e, init))
        return self.heads_[costs]

    def _fit_fast(self, est: SDLRejector, init: dict | None) -> SDLRejector:
        """Fit a fast head; a reduced-rank config fits the features' projection once per benchmark."""
        bench = self.bench_
        if self.projection_ is None and Projection.applies(self.config.rank, bench.X_train):
            self.projection_ = Projection.fit(bench.X_train, self.config.rank)
        val = (bench.X_val, bench.val.errors) if bench.val is not None else (None, None)
        return est.fit(bench.X_train, bench.train.errors, *val, init=init, projection=self.projection_)

    def decide(self, costs: CostConfig) -> Decision:
        if costs not in self.memo_:
            bench, est = self.bench_, self.estimator(costs)
            X = list(bench.test_records) if self.mode == "full" else bench.X_test
            self.memo_[costs] = est.decision_function(X)
        return sdl_decision(self.memo_[costs], self.bench_.rejector_gflops)


@register
class SDLRouter(RejectorRouter):
    id = "l2d-sdl"
    label = "L2D rejector (retrained per cost)"
    description = (
        "The paper's rejector: reads the question and context, trained with the surrogate deferral "
        "loss for each cost setting (a new setting trains a new head)."
    )
    role = "paper"
    config_model = SDLConfig

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> Router:
        if follower is not None:
            raise NotExportable("l2d-sdl has no error estimates to follow a budget with")
        bench = self.bench_
        config = {"costs": asdict(costs), "encoder": encoder_spec(bench.encoder_name, bench.features)}
        return self.deployed(
            config, Needs(embeddings=True), float(bench.rejector_gflops), {"": self.estimator(costs)}
        )

    def route(self, signals) -> Decision:
        """The fast rejector at one cost setting: its head, on the new queries' embeddings."""
        head = self.deployed_.heads[""]
        return sdl_decision(head.decision_function(signals.embeddings()), self.deployed_.overhead_gflops)

    def load_heads(self, directory: Path) -> dict:
        return {"": SDLRejector.load(directory)}


@register
class FullSDLRouter(RejectorRouter):
    id = "l2d-sdl-full"
    label = "L2D rejector, encoder fine-tuned (paper budget)"
    description = (
        "The paper's rejector with its encoder fine-tuned end to end at the paper's budget (6 epochs "
        "at 384 tokens) for each cost setting: hours on a CPU, run only when named. It does not "
        "freeze into an artifact (only the fast rejector's head is exported)."
    )
    mode = "full"
    on_request = True

    def export_problem(self) -> str | None:
        return f"{self.id} fine-tunes its own encoder: only l2d-sdl (a head on frozen embeddings) is exported"
