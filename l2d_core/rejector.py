"""SPEC §6: the rejector — encoder → pooled vector → start head and end head, J+1 scores each.

Two modes, one loss (the SDL of ``losses.py``):

- *fast*: frozen encoder; query features come from cached embeddings and only the head is
  trained (seconds on a CPU). Features ``separate`` (default) encode question and context
  apart — ``[q, c, q·c, |q−c|]``, each context encoded once however many questions it
  has — and ``pair`` encodes ``(question, context)`` jointly as in the paper.
- *full*: the encoder is fine-tuned end to end on ``(question, context)`` pairs.

Estimators follow scikit-learn's contract: ``__init__`` stores arguments, ``fit`` returns
``self``, learned state ends in ``_``. Checkpoints are safetensors + a JSON config.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from .costs import CostConfig, cost_matrix
from .data.records import QARecord
from .encoder import Encoder, load_encoder
from .losses import sdl
from .policies import learned_policy, plugin_policy
from .routing_data import RoutingData
from .runtime import set_seed
from .training import FAST_CONFIG, PAPER_CONFIG, TrainConfig, train_loop

__all__ = [
    "FEATURE_KINDS",
    "RejectorHead",
    "featurize",
    "SDLRejector",
    "PluginRejector",
    "FullSDLRejector",
    "save_head",
    "load_head",
]

FEATURE_KINDS = ("separate", "pair")


def featurize(
    encoder: Encoder, records: Sequence[QARecord], kind: str = "separate", progress: bool = False
) -> np.ndarray:
    """Fast-mode features of each query, (N, d); embeddings come from the on-disk cache."""
    if kind == "pair":
        return encoder.embed(
            [f"{r.question}{encoder.tokenizer.sep_token}{r.context}" for r in records], progress=progress
        )
    if kind != "separate":
        raise ValueError(f"unknown feature kind {kind!r}; known: {FEATURE_KINDS}")
    contexts = list(dict.fromkeys(r.context for r in records))
    c_vec = encoder.embed(contexts, progress=progress)
    c_of = {c: i for i, c in enumerate(contexts)}
    q = encoder.embed([r.question for r in records], progress=progress)  # (N, H)
    c = c_vec[[c_of[r.context] for r in records]]  # (N, H)
    return np.concatenate([q, c, q * c, np.abs(q - c)], axis=1)


class RejectorHead(nn.Module):
    """(B, d) → (B, 2, A): a hidden layer shared by both endpoints, one output per endpoint × agent."""

    def __init__(self, in_dim: int, n_agents: int, hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.n_agents = n_agents
        self.net = nn.Sequential(
            nn.Dropout(dropout),
            nn.Linear(in_dim, hidden),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, 2 * n_agents),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).view(-1, 2, self.n_agents)  # (B, 2, A)


def save_head(directory: str | Path, head: nn.Module, config: dict) -> Path:
    """Write ``model.safetensors`` and ``config.json`` (never pickle)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()},
        str(directory / "model.safetensors"),
    )
    (directory / "config.json").write_text(json.dumps(config, indent=1))
    return directory


def load_head(directory: str | Path) -> tuple[RejectorHead, dict]:
    directory = Path(directory)
    config = json.loads((directory / "config.json").read_text())
    head = RejectorHead(
        config["in_dim"], len(config["agent_ids"]), config["train"]["hidden"], config["train"]["dropout"]
    )
    head.load_state_dict(load_file(str(directory / "model.safetensors")))
    return head.eval(), config


def _standardize(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = X.mean(0), X.std(0) + 1e-6
    return mu.astype(np.float32), sd.astype(np.float32)


@dataclass
class _HeadEstimator:
    """Shared fit/score machinery of the fast-mode estimators (a head over features)."""

    config: TrainConfig = FAST_CONFIG
    progress: bool = False
    head_: RejectorHead | None = field(default=None, init=False, repr=False)
    history_: dict = field(default_factory=dict, init=False, repr=False)
    agent_ids_: tuple[str, ...] = field(default=(), init=False)
    mu_: np.ndarray | None = field(default=None, init=False, repr=False)
    sd_: np.ndarray | None = field(default=None, init=False, repr=False)

    def _targets(self, data: RoutingData) -> torch.Tensor:  # (N, 2, A)
        raise NotImplementedError

    def _loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _x(self, X: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(((np.asarray(X, dtype=np.float32) - self.mu_) / self.sd_).astype(np.float32))

    def fit(
        self,
        X: np.ndarray,
        data: RoutingData,
        X_val: np.ndarray | None = None,
        data_val: RoutingData | None = None,
    ):
        if len(X) != len(data):
            raise ValueError(f"{len(X)} feature rows for {len(data)} queries")
        self.agent_ids_ = data.agent_ids
        self.mu_, self.sd_ = _standardize(np.asarray(X, dtype=np.float32))
        x, y = self._x(X), self._targets(data)
        cfg = self.config
        set_seed(cfg.seed)
        self.head_ = RejectorHead(x.shape[1], data.n_agents, cfg.hidden, cfg.dropout)
        val = None
        if X_val is not None and data_val is not None and len(data_val):
            xv, yv = self._x(X_val), self._targets(data_val)
            val = lambda: self._loss(self.head_(xv), yv)  # noqa: E731
        self.history_ = train_loop(
            self.head_,
            len(x),
            lambda idx: self._loss(self.head_(x[idx]), y[idx]),
            cfg,
            val_loss=val,
            progress=self.progress,
        )
        return self

    def raw_scores(self, X: np.ndarray) -> np.ndarray:
        if self.head_ is None:
            raise RuntimeError("call fit() first")
        with torch.no_grad():
            return self.head_.eval()(self._x(X)).numpy()

    def save(self, directory: str | Path, extra: dict | None = None) -> Path:
        costs = getattr(self, "costs", None)
        config = {
            "estimator": type(self).__name__,
            "agent_ids": list(self.agent_ids_),
            "in_dim": int(self.mu_.shape[0]),
            "train": self.config.to_dict(),
            "costs": asdict(costs) if costs else None,
            **(extra or {}),
        }
        path = save_head(directory, self.head_, config)
        save_file(
            {"mu": torch.from_numpy(self.mu_), "sd": torch.from_numpy(self.sd_)},
            str(Path(directory) / "scaler.safetensors"),
        )
        return path

    @classmethod
    def load(cls, directory: str | Path, **kwargs):
        head, config = load_head(directory)
        if config.get("estimator") != cls.__name__:
            raise ValueError(f"{directory} holds a {config.get('estimator')}, not a {cls.__name__}")
        if "costs" not in kwargs and config.get("costs"):
            kwargs["costs"] = CostConfig(**config["costs"])
        est = cls(config=TrainConfig(**config["train"]), **kwargs)
        scaler = load_file(str(Path(directory) / "scaler.safetensors"))
        est.head_, est.agent_ids_ = head, tuple(config["agent_ids"])
        est.mu_, est.sd_ = scaler["mu"].numpy(), scaler["sd"].numpy()
        return est


@dataclass
class SDLRejector(_HeadEstimator):
    """The paper's rejector in fast mode: head trained with the SDL for one cost setting."""

    costs: CostConfig | None = None

    def _targets(self, data: RoutingData) -> torch.Tensor:
        if self.costs is None:
            raise ValueError("SDLRejector needs costs")
        return torch.from_numpy(cost_matrix(data.errors, self.costs).astype(np.float32))

    def _loss(self, out, target):
        return sdl(out, target, self.config.nu)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """r̂^i(x, j), (N, 2, A)."""
        return self.raw_scores(X)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return learned_policy(self.scores(X))


@dataclass
class PluginRejector(_HeadEstimator):
    """Learns cost-free error probabilities p̂_j^i(x) once; any α, β then applies instantly."""

    costs: CostConfig | None = None

    def _targets(self, data: RoutingData) -> torch.Tensor:
        return torch.from_numpy(data.errors.astype(np.float32))

    def _loss(self, out, target):
        return nn.functional.binary_cross_entropy_with_logits(out, target)

    def error_proba(self, X: np.ndarray) -> np.ndarray:
        """p̂_j^i(x) = P[agent j wrong on endpoint i], (N, 2, A)."""
        x = self.raw_scores(X).astype(np.float64)
        return np.exp(-np.logaddexp(0.0, -x))  # stable sigmoid

    def predict(self, X: np.ndarray, costs: CostConfig | None = None) -> np.ndarray:
        costs = costs or self.costs
        if costs is None:
            raise ValueError("PluginRejector.predict needs costs")
        return plugin_policy(self.error_proba(X), costs)


class _PairModel(nn.Module):
    def __init__(self, encoder: Encoder, n_agents: int, hidden: int, dropout: float):
        super().__init__()
        self.encoder = encoder.model
        self.pooling = encoder.pooling
        self.head = RejectorHead(encoder.dim, n_agents, hidden, dropout)

    def forward(self, **enc) -> torch.Tensor:
        from .encoder import pool

        h = self.encoder(**enc).last_hidden_state
        return self.head(pool(h, enc["attention_mask"], self.pooling))


@dataclass
class FullSDLRejector:
    """Full mode: fine-tune the encoder and head end to end with the SDL (CUDA when present).

    ``X`` is a sequence of QARecords (the encoder reads the text).
    """

    costs: CostConfig
    encoder: str = "minilm"
    config: TrainConfig = PAPER_CONFIG
    max_length: int = 384
    device: str | None = None
    progress: bool = False
    model_: _PairModel | None = field(default=None, init=False, repr=False)
    encoder_: Encoder | None = field(default=None, init=False, repr=False)
    agent_ids_: tuple[str, ...] = field(default=(), init=False)
    history_: dict = field(default_factory=dict, init=False, repr=False)

    def _batches(self, records: Sequence[QARecord]):
        return self.encoder_.tokenize([r.question for r in records], [r.context for r in records])

    def fit(self, X: Sequence[QARecord], data: RoutingData):
        if len(X) != len(data):
            raise ValueError(f"{len(X)} records for {len(data)} queries")
        self.agent_ids_ = data.agent_ids
        self.encoder_ = load_encoder(self.encoder, max_length=self.max_length, device=self.device)
        dev = self.encoder_.device
        set_seed(self.config.seed)
        self.model_ = _PairModel(self.encoder_, data.n_agents, self.config.hidden, self.config.dropout).to(
            dev
        )
        cost = torch.from_numpy(cost_matrix(data.errors, self.costs).astype(np.float32))
        use_amp = dev.type == "cuda"

        def batch_loss(idx):
            enc = {k: v.to(dev) for k, v in self._batches([X[i] for i in idx.tolist()]).items()}
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_amp):
                out = self.model_(**enc).float()
            return sdl(out, cost[idx].to(dev), self.config.nu)

        self.history_ = train_loop(self.model_, len(X), batch_loss, self.config, progress=self.progress)
        return self

    def scores(self, X: Sequence[QARecord], batch_size: int = 64) -> np.ndarray:
        out = []
        dev = self.encoder_.device
        with torch.no_grad():
            for i in range(0, len(X), batch_size):
                enc = {k: v.to(dev) for k, v in self._batches(X[i : i + batch_size]).items()}
                out.append(self.model_.eval()(**enc).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 2, 0), dtype=np.float32)

    def predict(self, X: Sequence[QARecord]) -> np.ndarray:
        return learned_policy(self.scores(X))

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
            "agent_ids": list(self.agent_ids_),
            "train": self.config.to_dict(),
        }
        return save_head(directory, self.model_.head, config)

    @classmethod
    def load(cls, directory: str | Path, device: str | None = None) -> FullSDLRejector:
        """Reload a saved full-mode rejector (fine-tuned encoder + head)."""
        directory = Path(directory)
        head, config = load_head(directory)
        est = cls(
            CostConfig(**config["costs"]),
            config["encoder"],
            TrainConfig(**config["train"]),
            config["max_length"],
            device,
        )
        est.encoder_ = load_encoder(str(directory / "encoder"), max_length=est.max_length, device=device)
        est.model_ = _PairModel(est.encoder_, len(config["agent_ids"]), est.config.hidden, est.config.dropout)
        est.model_.head = head
        est.model_.to(est.encoder_.device).eval()
        est.agent_ids_ = tuple(config["agent_ids"])
        return est
