"""Memos shipped with the package (``l2d_core/routers/shipped``): read under their content key
instead of computing, copied into the cache, and never read for another key."""

from __future__ import annotations

import io

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
    monkeypatch.setattr(trained, "shipped_file", lambda key: shipped / f"{key}.npz")
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
