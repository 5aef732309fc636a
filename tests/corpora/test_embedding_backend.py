"""The CPU embedding backends: OpenVINO (bf16, from an ONNX graph exported locally from the packaged
model) against torch, and how ``embedding.backend`` resolves."""

from __future__ import annotations

import numpy as np
import pytest

from rubricforge.corpora import embedding
from rubricforge.corpora.embedding import Embedder, resolve_backend
from rubricforge.errors import UserError

TEXTS = ["Moths are a group of winged insects of the order Lepidoptera.",
         "AT&T is an American multinational telecommunications company headquartered in Dallas.",
         "The refractive index is the ratio of the speed of light in vacuum to that in a medium."]


def test_backend_resolution():
    assert resolve_backend("torch", "cpu") == "torch"
    assert resolve_backend("auto", "cuda") == "torch"
    assert resolve_backend("auto", "cpu") in ("torch", "openvino")
    with pytest.raises(UserError, match="embedding.backend=openvino runs on the CPU"):
        resolve_backend("openvino", "cuda")
    assert "backend" not in Embedder(backend="torch", device="cpu").identity()  # torch vectors keep their identity


@pytest.mark.slow
def test_openvino_vectors_match_torch_and_are_kept_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding, "DEFAULT_CACHE_DIR", tmp_path)
    torch_vecs = Embedder(backend="torch", device="cpu").embed_passages(TEXTS)
    ov = Embedder(backend="openvino", device="cpu")
    ov_vecs = ov.embed_passages(TEXTS)
    assert ov_vecs.shape == torch_vecs.shape and np.allclose(np.linalg.norm(ov_vecs, axis=1), 1.0, atol=1e-3)
    assert (ov_vecs * torch_vecs).sum(axis=1).min() > 0.999
    assert ov.identity()["backend"] == "openvino"
