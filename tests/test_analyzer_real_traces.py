"""The analyzer on real third-party traces (../shared/traces/real, MANIFEST.md there).

Every expected value is computed here from the raw JSON with Python's json module,
never from trnscope's output: kernel and copy counts and total device time, CPU op
counts, and per-lane busy time (the union of a lane's kernel and copy intervals).
The analyzer's numbers come from `trnscope export --sqlite` (ops, kernels, lanes). The
golden summaries in core/analysis/testdata are checked against the same reader (their
kernel/copy counts and device totals).
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
from collections import defaultdict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "..", "shared", "traces", "real")
BINARY = os.path.join(ROOT, "python", "trnscope", "bin", "trnscope")

# Small and medium traces covering CUDA (old and new Kineto), ROCm, legacy
# categories with a string tid, a plain .json and a CPU-only trace.
TRACES = [
    "HolisticTraceAnalysis__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "HolisticTraceAnalysis__benchmark_result_2869224_1695835535_trace.json",
    "HolisticTraceAnalysis__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "TraceLens__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "HolisticTraceAnalysis__nccl_data.json.gz",
    "kineto__worker0.1623143089861.pt.trace.json.gz",
]

# Categories as docs/analyzer.md defines them (case-insensitive).
OP_CATS = {"cpu_op", "user_annotation", "operator"}
KERNEL_CATS = {"kernel"}
COPY_CATS = {"gpu_memcpy", "gpu_memset", "memcpy", "memset"}


def load_events(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def ns(us) -> int:
    return round(float(us) * 1000)


def union_ns(spans: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals."""
    total, cur_s, cur_e = 0, None, None
    for s, t in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, t
        else:
            cur_e = max(cur_e, t)
    return total if cur_e is None else total + cur_e - cur_s


def expected(events: list[dict]) -> dict:
    out = {"ops": 0, "kernels": 0, "copies": 0, "device_ns": 0}
    intervals = defaultdict(list)  # (pid, tid) -> [(start, end)] of kernels and copies
    for e in events:
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        dur = ns(e.get("dur", 0))
        if cat in OP_CATS:
            out["ops"] += 1
        elif cat in KERNEL_CATS or cat in COPY_CATS:
            out["kernels" if cat in KERNEL_CATS else "copies"] += 1
            out["device_ns"] += dur
            start = ns(e["ts"])
            intervals[(str(e.get("pid")), str(e.get("tid")))].append((start, start + dur))
    out["busy"] = {lane: union_ns(spans) for lane, spans in intervals.items()}
    return out


def analyzed(path: str, tmp_path) -> dict:
    db = str(tmp_path / "trace.db")
    r = subprocess.run([BINARY, "export", path, "--sqlite", db], capture_output=True, text=True)
    assert r.returncode in (0, 3), r.stderr  # 3: partial input, recovered
    c = sqlite3.connect(db)
    out = {
        "ops": c.execute("select count(*) from ops where kind = 'op'").fetchone()[0],
        "kernels": c.execute("select count(*) from kernels where kind = 'kernel'").fetchone()[0],
        "copies": c.execute("select count(*) from kernels where kind = 'copy'").fetchone()[0],
        "device_ns": c.execute("select coalesce(sum(dur_ns), 0) from kernels").fetchone()[0],
    }
    busy = {}
    for pid, tid, lane_id in c.execute("select pid, tid, id from lanes where kind = 'device'"):
        spans = c.execute(
            "select start_ns, start_ns + dur_ns from kernels where lane_id = ? order by 1",
            (lane_id,),
        ).fetchall()
        busy[(pid, tid)] = union_ns(spans)
    out["busy"] = busy
    c.close()
    return out


@pytest.mark.parametrize("name", TRACES)
def test_counts_totals_and_lane_busy_match_an_independent_reader(name, tmp_path):
    path = os.path.join(REAL, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    assert os.path.exists(BINARY), f"the analyzer binary is missing: {BINARY} (make build)"
    want = expected(load_events(path))
    got = analyzed(path, tmp_path)
    n_device = want["kernels"] + want["copies"]
    assert got["ops"] == want["ops"]
    assert got["kernels"] == want["kernels"]
    assert got["copies"] == want["copies"]
    # Each event's µs -> ns conversion may round differently by 1 ns.
    assert abs(got["device_ns"] - want["device_ns"]) <= n_device
    assert set(got["busy"]) == set(want["busy"])
    for lane, ns_busy in want["busy"].items():
        assert abs(got["busy"][lane] - ns_busy) <= 2 * n_device, lane
    if name.startswith("HolisticTraceAnalysis__rank-34"):
        assert n_device == 0  # the CPU-only trace: nothing on a device
    else:
        assert n_device > 0


def test_cuda_and_rocm_advice_never_names_the_trn_backend():
    for name in (
        "TraceLens__eager_trace.json.gz",  # vLLM on B200 (CUDA)
        "HolisticTraceAnalysis__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    ):
        path = os.path.join(REAL, name)
        if not os.path.exists(path):
            pytest.skip(f"{path} is not on this machine")
        r = subprocess.run([BINARY, "summary", path], capture_output=True, text=True)
        assert r.returncode in (0, 3), r.stderr
        recs = r.stdout[r.stdout.index("Recommendations") :]
        assert 'backend="trn"' not in recs, recs
        graph = "HIP graph" if "ROCm" in name else "CUDA graph"
        assert graph in recs, recs
        for line in recs.splitlines():
            if "projected saving" in line:
                share = float(line.split("(")[1].split("%")[0])
                assert 0 <= share <= 100, line


# ---- The goldens in core/analysis/testdata, verified once against this reader ----------
TESTDATA = os.path.join(ROOT, "core", "analysis", "testdata")
UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def golden_cases() -> list[str]:
    names = []
    for f in sorted(os.listdir(TESTDATA)):
        if f.endswith(".summary.txt") and os.path.exists(os.path.join(TESTDATA, f[:-12] + ".json")):
            try:
                load_events(os.path.join(TESTDATA, f[:-12] + ".json"))
            except (ValueError, KeyError, TypeError):
                continue  # malformed on purpose: Python's json cannot read it either
            names.append(f[:-12])
    return names


@pytest.mark.parametrize("name", golden_cases())
def test_golden_summary_header_matches_an_independent_reader(name):
    want = expected(load_events(os.path.join(TESTDATA, name + ".json")))
    with open(os.path.join(TESTDATA, name + ".summary.txt")) as f:
        lines = f.read().splitlines()
    counts = dict(part.rsplit(" ", 1) for part in lines[2].split(" | ")[1:])
    assert int(counts["kernels"]) == want["kernels"], lines[2]
    assert int(counts["copies"]) == want["copies"], lines[2]
    device = lines[3].split(" | ")[1].split()  # "device", value, unit
    assert device[0] == "device"
    assert abs(float(device[1]) * UNITS[device[2]] - want["device_ns"]) < 1, lines[3]
