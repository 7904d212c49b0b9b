"""SPEC §6: the rejector — encoder → pooled vector → start head and end head, J+1 scores each.

Two modes, one loss (the SDL of :mod:`l2d_core.method.losses`):

- *fast*: frozen encoder; query features come from cached embeddings
  (:func:`l2d_core.routers.features.featurize`) and only the head is trained (seconds on a CPU);
- *full*: the encoder is fine-tuned end to end on ``(question, context)`` pairs.

:class:`PluginRejector` learns cost-free error probabilities instead, for the plug-in
("reweight") policy of SPEC §5. Estimators follow scikit-learn's contract (``__init__``
stores arguments, ``fit`` returns ``self``, learned state ends in ``_``); checkpoints are
safetensors + a JSON config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from scipy.special import expit
from sklearn.base import BaseEstimator
from torch import nn

from ..agents.routing_data import RoutingData
from ..data.records import QARecord
from ..method.costs import CostConfig, cost_matrix
from ..method.losses import sdl
from ..method.policies import learned_policy, plugin_policy
from ..method.training import FAST_CONFIG, PAPER_CONFIG, TrainConfig, train_loop
from ..runtime import set_seed
from .encoder import Encoder, load_encoder, pool
from .head import HeadEstimator, MLPHead, load_head_state, save_head

__all__ = ["SDLRejector", "PluginRejector", "FullSDLRejector"]


class _AgentHead(HeadEstimator):
    """A head with one output per endpoint × agent, (N, 2, A), fitted on a pool's outcomes."""

    def _targets(self, data: RoutingData) -> np.ndarray:  # (N, 2, A)
        raise NotImplementedError

    def fit(
        self,
        X: np.ndarray,
        data: RoutingData,
        X_val: np.ndarray | None = None,
        data_val: RoutingData | None = None,
        init: dict | None = None,
        projection=None,
    ):
        """Fit on features ``X`` and the pool's outcomes ``data``; ``init``: a head's weights to
        start from (a warm start; the full-batch solver converges to the same head); ``projection``:
        the :class:`~.head.Projection` of ``X`` at the config's rank, when already fitted."""
        if len(X) != len(data):
            raise ValueError(f"{len(X)} feature rows for {len(data)} queries")
        self.agent_ids_ = data.agent_ids
        val = (X_val, self._targets(data_val)) if X_val is not None and data_val is not None else (None, None)
        self._fit_head(X, self._targets(data), *val, init=init, projection=projection)
        return self

    def checkpoint_config(self) -> dict:
        return {**super().checkpoint_config(), "agent_ids": list(self.agent_ids_)}

    def _restore(self, config: dict) -> None:
        self.agent_ids_ = tuple(config["agent_ids"])


class SDLRejector(_AgentHead):
    """The paper's rejector in fast mode: a head trained with the SDL for one cost setting."""

    def __init__(self, config: TrainConfig = FAST_CONFIG, costs: CostConfig | None = None, progress=False):
        super().__init__(config, progress)
        self.costs = costs

    def _targets(self, data: RoutingData) -> np.ndarray:
        if self.costs is None:
            raise ValueError("SDLRejector needs costs")
        return cost_matrix(data.errors, self.costs).astype(np.float32)

    def _loss(self, out, target):
        return sdl(out, target, self.config.nu)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """r̂^i(x, j), (N, 2, A)."""
        return self.raw_scores(X)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return learned_policy(self.scores(X))

    def checkpoint_config(self) -> dict:
        return {**super().checkpoint_config(), "costs": asdict(self.costs) if self.costs else None}

    @classmethod
    def _params_from(cls, config: dict) -> dict:
        return {"costs": CostConfig(**config["costs"])} if config.get("costs") else {}


class PluginRejector(_AgentHead):
    """Learns cost-free error probabilities p̂_j^i(x) once; any α, β then applies instantly."""

    def _targets(self, data: RoutingData) -> np.ndarray:
        return data.errors.astype(np.float32)

    def _loss(self, out, target):
        return nn.functional.binary_cross_entropy_with_logits(out, target)

    def error_proba(self, X: np.ndarray) -> np.ndarray:
        """p̂_j^i(x) = P[agent j wrong on endpoint i], (N, 2, A)."""
        return expit(self.raw_scores(X).astype(np.float64))

    def predict(self, X: np.ndarray, costs: CostConfig) -> np.ndarray:
        return plugin_policy(self.error_proba(X), costs)


class _PairModel(nn.Module):
    def __init__(self, encoder: Encoder, n_agents: int, hidden: int, dropout: float):
        super().__init__()
        self.encoder = encoder.model
        self.pooling = encoder.pooling
        self.head = MLPHead(encoder.dim, (2, n_agents), hidden, dropout)

    def forward(self, **enc) -> torch.Tensor:
        h = self.encoder(**enc).last_hidden_state
        return self.head(pool(h, enc["attention_mask"], self.pooling))


class FullSDLRejector(BaseEstimator):
    """Full mode: fine-tune the encoder and head end to end with the SDL (CUDA when present).

    ``X`` is a sequence of QARecords (the encoder reads the text).
    """

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
            "out_shape": list(self.model_.head.out_shape),
            "agent_ids": list(self.agent_ids_),
            "train": self.config.to_dict(),
        }
        return save_head(directory, self.model_.head, config)

    @classmethod
    def load(cls, directory: str | Path, device: str | None = None) -> FullSDLRejector:
        """Reload a saved full-mode rejector (fine-tuned encoder + head)."""
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
        est.model_ = _PairModel(est.encoder_, len(config["agent_ids"]), est.config.hidden, est.config.dropout)
        est.model_.head.load_state_dict(state)
        est.model_.to(est.encoder_.device).eval()
        est.agent_ids_ = tuple(config["agent_ids"])
        return est
