"""The GPU retrieval benchmark (benchmarks/gpu_retrieval.py) at toy scale on the CPU: both searches agree, and
the peak bandwidth it divides by is the named GPU's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.paths import ROOT

pytest.importorskip("faiss")
pytest.importorskip("torch")

BENCH = ROOT / "benchmarks" / "gpu_retrieval.py"


def test_torch_search_matches_faiss_and_ratios_use_the_scaled_baseline(tmp_path):
    out = tmp_path / "r.json"
    subprocess.run([sys.executable, str(BENCH), "--n", "3000", "--faiss-n", "1500", "--device", "cpu",
                    "--batches", "1,64", "--min-seconds", "0.05", "--threads", "1", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    r = json.loads(out.read_text())
    assert r["gpu"] is None and r["peak_hbm_bytes_per_s"] is None
    assert r["torch"]["float32"]["recall_at_10_vs_faiss"] == 1.0  # the same rows, the same exact search
    assert r["torch"]["float16"]["recall_at_10_vs_faiss"] >= 0.95  # fp16 scores reorder near-ties only
    faiss64 = r["faiss_cpu"]["64"]
    assert faiss64["qps_scaled_to_n"] == pytest.approx(faiss64["qps"] * 1500 / 3000, rel=0.01)
    row = r["torch"]["float32"]["batches"]["64"]
    assert row["vs_faiss_cpu"] == pytest.approx(row["qps"] / faiss64["qps_scaled_to_n"], rel=0.05)
    assert "hbm_fraction" not in row  # no GPU, no peak to divide by


def test_peak_bandwidth_by_gpu_name():
    sys.path.insert(0, str(BENCH.parent))
    from gpu_retrieval import peak_bandwidth

    assert peak_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert peak_bandwidth("NVIDIA H100 PCIe") == 2.0e12
    assert peak_bandwidth("NVIDIA H200") == 4.8e12
    assert peak_bandwidth("NVIDIA GeForce RTX 4090") is None
