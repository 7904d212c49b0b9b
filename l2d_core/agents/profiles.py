"""What ``scripts/train_agent.py --profile NAME`` trains where its command line is silent: the
project's live agents (the benchmark's ``minilm-qa`` and the quick ``minilm-qa-quick``), one per
dataset, and the pools each run registers with its agent as main."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..paths import default_encoder_path

__all__ = ["HOME_DATASET", "QATrainConfig", "TrainingProfile", "PROFILES", "parse_pool", "train_command"]


@dataclass(frozen=True)
class QATrainConfig:
    """How a live QA agent is fine-tuned (``agents/qa_training.py`` trains with it)."""

    base: str = ""  # HF encoder path or id; "" = the packaged all-MiniLM-L6-v2
    max_length: int = 384  # tokens per window (question + context piece)
    stride: int = 128  # overlap between consecutive windows of a long context
    epochs: int = 2
    batch_size: int = 32
    lr: float = 1e-4  # AdamW learning rate (small encoder, little data: larger than BERT's 3e-5)
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    bf16: bool | None = None  # autocast to bf16; None: on CUDA and on CPUs that compute it natively
    seed: int = 0

    def but(self, **changes) -> QATrainConfig:
        return replace(self, **changes)

    def base_path(self) -> str:
        return self.base or str(default_encoder_path())


def parse_pool(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=EXPERT,EXPERT`` (the command line's ``--pools``) → (name, experts)."""
    name, _, experts = text.partition("=")
    ids = tuple(e for e in experts.split(",") if e)
    if not name or not ids:
        raise ValueError(f"--pools takes NAME=EXPERT[,EXPERT…], got {text!r}")
    return name, ids


# the dataset whose live agents keep the profile's own id (the benchmark's minilm-qa)
HOME_DATASET = "squad11"


@dataclass(frozen=True)
class TrainingProfile:
    """What ``scripts/train_agent.py --profile NAME`` trains when the command line leaves it out."""

    agent_id: str  # on HOME_DATASET; elsewhere suffixed with the dataset (see agent_for)
    epochs: int
    batch_size: int
    lr: float
    limit: int | None  # questions per training / held-out answering step (None: all)
    # per dataset: the pools (NAME=EXPERT,EXPERT…) registered with the agent as main; their
    # experts are that dataset's agents (a dataset left out gets the agent and no pool)
    pools: tuple[tuple[str, tuple[str, ...]], ...]
    crossfit: bool  # k fold models + a full model (else one fold model answers the test too)

    def datasets(self) -> list[str]:
        """The datasets where a run of this profile makes a pool."""
        return [dataset for dataset, pools in self.pools if pools]

    def agent_for(self, dataset: str) -> str:
        """The agent a run on ``dataset`` trains and registers (agent ids are global: one per
        dataset, so that training on one dataset never replaces another's agent)."""
        return self.agent_id if dataset == HOME_DATASET else f"{self.agent_id}-{dataset}"

    def pools_for(self, dataset: str) -> tuple[str, ...]:
        """The pools a run on ``dataset`` registers, as the command line's ``--pools`` takes them."""
        return dict(self.pools).get(dataset, ())

    def pool_specs(self, dataset: str) -> list[tuple[str, tuple[str, ...]]]:
        """(pool name, experts) of each pool a run on ``dataset`` registers."""
        return [parse_pool(text) for text in self.pools_for(dataset)]

    def first_pool(self, dataset: str) -> tuple[str, tuple[str, ...]] | None:
        """(name, experts) of the first pool a run on ``dataset`` registers (None: it makes none)."""
        specs = self.pool_specs(dataset)
        return specs[0] if specs else None


PROFILES = {
    "full": TrainingProfile(
        "minilm-qa",
        QATrainConfig.epochs,
        QATrainConfig.batch_size,
        QATrainConfig.lr,
        None,
        (
            # BENCHMARK.md's live pools, and the trained model as the cheapest main in front of Plocal's LLMs
            (
                "squad11",
                ("P3-live=rnet-plus,bert-ens", "P2-live=bert-ens", "Plocal-live=smollm2-135m,gemma3-270m"),
            ),
            ("squad20", ("P3v2-live=nlnet,bert-single", "P2v2-live=bert-single")),  # P3v2 / P2v2's experts
        ),
        crossfit=True,
    ),
    # minutes on 2 CPU cores: one model, one epoch on 1,200 questions. Batches of 4 at 2e-4 make
    # the most of so few questions: test EM 28.4, 21.9, 27.9 over three seeds (800 test questions,
    # fp32 on a GPU), where batches of 16 (the first setting tried) reached 9.9 and batches of 8 or
    # 2 swung between 5 and 24.
    "quick": TrainingProfile(
        "minilm-qa-quick",
        1,
        4,
        2e-4,
        1200,
        (
            ("squad11", ("P3-quick=rnet-plus,bert-ens", "Plocal-quick=smollm2-135m,gemma3-270m")),
            ("squad20", ("P3v2-quick=nlnet,bert-single",)),
        ),
        False,
    ),
}


def train_command(profile: str, dataset: str) -> str:
    """The command line that trains ``profile`` on ``dataset`` (what makes its pools)."""
    on = "" if dataset == HOME_DATASET else f" --dataset {dataset}"
    return "python scripts/train_agent.py" + on + ("" if profile == "full" else f" --profile {profile}")
