"""Artifacts shipped with the package (``l2d_core/routers/shipped``): memos and fitted routers, read
under their content key instead of computing, and never read for another key."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from l2d_core.routers import trained


class _Bench:
    def __init__(self, key: str):
        self.key = key

    def cache_key(self, embeddings: bool = True) -> str:
        return self.key


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_a_shipped_memo_is_read_instead_of_computed_and_only_under_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("L2D_CACHE_DIR", str(tmp_path / "cache"))
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(trained, "shipped_file", lambda key, suffix=".npz": shipped / f"{key}{suffix}")
    bench, params = _Bench("data-a"), {"router": "r"}
    key = trained.artifact_key("ranking", bench, params)
    (shipped / f"{key}.npz").write_bytes(_npz(scores=np.array([1.5, 2.5])))

    def computed():
        raise AssertionError("computed although the package ships it")

    got = trained.memo_arrays("ranking", bench, params, computed)
    assert got["scores"].tolist() == [1.5, 2.5]
    (shipped / f"{key}.npz").unlink()  # kept in the cache once read
    assert trained.memo_arrays("ranking", bench, params, None)["scores"].tolist() == [1.5, 2.5]
    other = _Bench("data-b")  # other data: another key, so the shipped memo is not read
    assert trained.memo_arrays("ranking", other, params, None) is None
    assert trained.memo_arrays("ranking", other, params, lambda: {"scores": np.zeros(1)})[
        "scores"
    ].tolist() == [0]


class _Est:
    """An estimator as :func:`trained.fitted` stores one: its parameters, ``save`` and ``load``."""

    def __init__(self, w: float = 0.5):
        self.w = w

    def get_params(self, deep: bool = False) -> dict:
        return {"w": self.w}

    def save(self, directory) -> None:
        (Path(directory) / "config.json").write_text(json.dumps({"fitted_on": self.fitted_on_}))

    @classmethod
    def load(cls, directory):
        est = cls()
        est.fitted_on_ = json.loads((Path(directory) / "config.json").read_text())["fitted_on"]
        return est


def test_a_shipped_fit_is_loaded_instead_of_trained_and_only_under_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("L2D_CACHE_DIR", str(tmp_path / "cache"))
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(trained, "shipped_file", lambda key, suffix=".npz": shipped / f"{key}{suffix}")
    bench = _Bench("data-a")
    key = trained.artifact_key("head", bench, {"w": 0.5, "features": "f1"})
    (shipped / key).mkdir(parents=True)
    (shipped / key / "config.json").write_text(json.dumps({"fitted_on": "the package"}))

    def fit(est):
        est.fitted_on_ = "this machine"

    def never(est):
        raise AssertionError("trained although the package ships the fit")

    assert trained.is_stored("head", bench, _Est(), features="f1")
    with trained.recording() as keys:
        assert trained.fitted("head", bench, _Est(), never, features="f1").fitted_on_ == "the package"
    assert keys == [key]
    assert not (tmp_path / "cache" / "routers" / key).exists()  # read where it ships, not copied
    # other data, or other settings: other keys, so the shipped fit is not read
    assert trained.fitted("head", _Bench("data-b"), _Est(), fit, features="f1").fitted_on_ == "this machine"
    assert trained.fitted("head", bench, _Est(0.25), fit, features="f1").fitted_on_ == "this machine"
    assert not trained.is_stored("head", bench, _Est(), features="f2")
    # fresh: trained now whatever is stored, and stored in the cache (what --ship copies)
    with trained.recording(fresh=True) as keys:
        assert trained.fitted("head", bench, _Est(), fit, features="f1").fitted_on_ == "this machine"
    assert keys == [key]
    assert _Est.load(tmp_path / "cache" / "routers" / key).fitted_on_ == "this machine"
