"""The trainer's AdamW and learning-rate schedule, written out: the same steps as
``torch.optim.AdamW`` with transformers' linear schedule, without importing either."""

from __future__ import annotations

import copy

import pytest
import torch

from l2d_core.method.training import AdamW, TrainConfig, train_loop
from l2d_core.routers.network import Dropout, MLPHead
from l2d_core.runtime import linear_schedule


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_adamw_takes_torchs_steps_bit_for_bit(device):
    """On a CPU its own single-tensor steps; on a GPU torch's optimizer's (multi-tensor) steps at
    its schedule's rate."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    torch.manual_seed(0)
    x, y = torch.randn(64, 12, device=device), torch.randn(64, 2, 3, device=device)
    ours = MLPHead(12, (2, 3), hidden=8, dropout=0.0).to(device)
    theirs, start = copy.deepcopy(ours), copy.deepcopy(ours)
    split = lambda m: (  # noqa: E731 - weights decay, biases do not (as train_loop groups them)
        [p for p in m.parameters() if p.ndim > 1],
        [p for p in m.parameters() if p.ndim <= 1],
    )
    steps, lr, decay = 40, 3e-2, 1e-2
    mine = AdamW([(split(ours)[0], decay), (split(ours)[1], 0.0)], lr, steps, 0.1)
    ref = torch.optim.AdamW(
        [
            {"params": split(theirs)[0], "weight_decay": decay},
            {"params": split(theirs)[1], "weight_decay": 0.0},
        ],
        lr=lr,
    )
    sched = linear_schedule(ref, steps, 0.1)
    for k in range(steps):
        assert mine.lr() == ref.param_groups[0]["lr"], k  # the schedule, step by step
        for model, opt in ((ours, mine), (theirs, ref)):
            opt.zero_grad()
            loss = ((model(x[k % 4 :: 4]) - y[k % 4 :: 4]) ** 2).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        sched.step()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b), k
    assert mine.lr() == ref.param_groups[0]["lr"] == 0.0  # decayed to 0 at the last step
    assert all(not torch.equal(a, b) for a, b in zip(ours.parameters(), start.parameters()))  # it moved


def test_train_loop_is_deterministic_per_seed():
    def fit(seed):
        torch.manual_seed(1)
        m = MLPHead(6, (2, 2), hidden=4, dropout=0.1)
        x, y = torch.randn(40, 6), torch.randn(40, 2, 2)
        train_loop(
            m, 40, lambda i: ((m(x[i]) - y[i]) ** 2).mean(), TrainConfig(epochs=3, batch_size=16, seed=seed)
        )
        return torch.cat([p.detach().reshape(-1) for p in m.parameters()])

    assert torch.equal(fit(0), fit(0)) and not torch.equal(fit(0), fit(1))


def test_head_fits_in_threads_draw_what_each_draws_alone():
    """A dashboard fits routers in threads of one process; each fit seeds torch's global generator
    and draws its head's first weights and dropout masks from it, so concurrent fits would draw
    from each other's streams. They run one at a time (runtime.seeded) and give the heads of
    fits made one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from l2d_core.routers.plugin import PluginRejector

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 10)).astype(np.float32), rng.random((300, 2, 2)) < 0.3
    configs = [TrainConfig(epochs=3, hidden=8, dropout=0.2, seed=s) for s in range(6)]
    fit = lambda c: PluginRejector(config=c).fit(X, y).arrays().layers  # noqa: E731
    alone = [fit(c) for c in configs]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(fit, configs))
    for a, b in zip(alone, together):
        assert all(np.array_equal(wa, wb) and np.array_equal(ba, bb) for (wa, ba), (wb, bb) in zip(a, b))


def test_dropout_keeps_torchs_contract_with_numpys_bits():
    """Each input zeroed with chance p in training, the others scaled by 1/(1 − p); the identity in
    eval mode and at p = 0; the gradient passes through the kept inputs only; one torch seed, one
    mask."""
    x = torch.ones(200_000, requires_grad=True)
    torch.manual_seed(0)
    d = Dropout(0.1).train()
    y = d(x)
    assert sorted(set(y.tolist())) == [0.0, pytest.approx(1 / 0.9)]
    assert abs(float((y == 0).float().mean()) - 0.1) < 0.003  # 200k draws: sd 0.0007
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # d y / d x: the mask, scaled
    torch.manual_seed(0)
    assert torch.equal(Dropout(0.1).train()(x), y)
    assert not torch.equal(d(x), y)  # the next batch: another mask
    assert d.eval()(x) is x and Dropout(0.0).train()(x) is x
    assert Dropout(0.1).train()(torch.ones(8, dtype=torch.bfloat16)).dtype == torch.bfloat16  # dtype kept
    with pytest.raises(ValueError, match="dropout"):
        Dropout(1.0)
