"""trnscope.nki: kernels written in NKI's language run on numpy (checked against
numpy) and profile on the modelled NeuronCore (checked against AWS's published
measurements, ../shared/reference/neuroncore.md)."""

import json
import os
import subprocess

import numpy as np
import pytest

import trnscope.nki as nki
import trnscope.nki.isa as nisa
import trnscope.nki.language as nl
from trnscope.cli import binary_path

RNG = np.random.default_rng(7)


# The NKI matmul tutorial's basic kernel, written from its published structure.
@nki.jit
def matmul_basic(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    tm, tk, tn = nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    for m in nl.affine_range(M // tm):
        for n in nl.affine_range(N // tn):
            acc = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // tk):
                a = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                a[...] = nl.load(lhsT[k * tk:(k + 1) * tk, m * tm:(m + 1) * tm])
                b[...] = nl.load(rhs[k * tk:(k + 1) * tk, n * tn:(n + 1) * tn])
                acc += nisa.nc_matmul(a[...], b[...])
            out = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * tm:(m + 1) * tm, n * tn:(n + 1) * tn], value=out)
    return result


def test_basic_matmul_computes_lhsT_transposed_times_rhs():
    a = RNG.standard_normal((256, 128), dtype=np.float32)
    b = RNG.standard_normal((256, 1024), dtype=np.float32)
    np.testing.assert_allclose(matmul_basic(a, b), a.T @ b, rtol=1e-4, atol=1e-4)


def test_basic_matmul_calibration_trn2():
    # Published: 39.89 ms, DMA active 99.93 %, Tensor 34.82 ms, HFU 17.52 %, DMA-bound.
    p = nki.profile(matmul_basic, np.empty((8192, 4096), np.float32),
                    np.empty((8192, 8192), np.float32), target="trn2")
    assert p.total_ns / 1e6 == pytest.approx(39.89, rel=0.10)
    assert p.engine_active_ns["dma"] / p.total_ns >= 0.95
    assert p.engine_active_ns["tensor"] / 1e6 == pytest.approx(34.82, rel=0.10)
    assert p.hfu == pytest.approx(0.1752, abs=0.015)
    assert p.bound == "memory"
    assert p.instruction_counts["tensor"] == 32768 + 2 * 32768  # loads + two fp32 passes
    assert p.instruction_counts["dma"] == 2 * 32768 + 512
    assert p.arithmetic_intensity < p.ridge_point
    assert 1 <= len(p.recommendations) <= 4 and "fp32" in " ".join(p.recommendations)


def test_profile_labels_the_model_and_differs_per_target():
    a, b = np.empty((256, 128), np.float32), np.empty((256, 512), np.float32)
    p2, p1 = nki.profile(matmul_basic, a, b), nki.profile(matmul_basic, a, b, target="trn1")
    assert "modelled (trn2, NC-v3)" in p2.summary and "not a measurement" in p2.summary
    assert "modelled (trn1, NC-v2)" in p1.summary
    assert p1.target == "trn1" and p1.total_ns != p2.total_ns
    assert set(p2.engine_active_ns) == {"tensor", "vector", "scalar", "gpsimd", "sync", "dma"}
    assert set(p2.instruction_counts) == set(p2.engine_active_ns)
    assert 0 < p2.hfu <= 0.25 and p2.mfu == pytest.approx(p2.hfu) and 0 < p2.mbu < 1
    with pytest.raises(ValueError, match="target 'trn9' is not a target"):
        nki.profile(matmul_basic, a, b, target="trn9")


def test_save_and_export_trace_feed_the_cli(tmp_path):
    a, b = np.empty((256, 128), np.float32), np.empty((256, 512), np.float32)
    p = nki.profile(matmul_basic, a, b)
    artifact = p.save(tmp_path / "basic.trnx")
    trace = p.export_trace(tmp_path / "device.json")
    with open(trace) as f:
        doc = json.load(f)
    meta = doc["trnscope_device"]
    assert meta["modelled"] is True and meta["target"] == "trn2"
    assert meta["total_ns"] == pytest.approx(p.total_ns)
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    # 2 k-steps x 1 n-tile: 2 load_stationary + 2 multiply_moving + 1 tensor_copy.
    assert sorted(e["name"] for e in kernels) == sorted(
        ["load_stationary"] * 2 + ["multiply_moving"] * 2 + ["tensor_copy"])
    assert all(e["args"]["source"].startswith("test_nki.py:") for e in kernels)
    out = subprocess.run([binary_path(), "inspect", artifact], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "executable matmul_basic: format version 1, target trn2" in out.stdout
    assert "input    arg0" in out.stdout and "output   t2" in out.stdout
    out = subprocess.run([binary_path(), "device-profile", artifact], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == p.summary
    # The analyzer reads the modelled trace like any other; with no host ops it says so
    # rather than counting every kernel as unlinked or reporting a 0 ns host-bound window.
    out = subprocess.run([binary_path(), "summary", trace], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "kernels 5 | copies" in out.stdout
    assert "device-only trace: no host ops" in out.stdout and "could not be linked" not in out.stdout
    assert "Host-bound: not applicable (no host events)" in out.stdout


def onchip(kernel_body, *arrays):
    """Runs kernel_body(tiles...) on arrays loaded to SBUF; stores what it returns."""

    @nki.jit
    def kernel(*args):
        tiles = [nl.load(x) for x in args]
        y = kernel_body(*tiles)
        out = nl.ndarray(y.shape, y.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=y if y.memory == "sbuf" else nl.copy(y))
        return out

    return kernel(*arrays), nki.profile(kernel, *arrays)


X = RNG.standard_normal((128, 96), dtype=np.float32)
Y = RNG.standard_normal((128, 96), dtype=np.float32)


@pytest.mark.parametrize(
    "body, reference, engine",
    [
        (lambda x, y: nisa.tensor_tensor(x, y, np.add), X + Y, "vector"),
        (lambda x, y: nisa.tensor_tensor(x, y, nl.multiply), X * Y, "vector"),
        (lambda x, y: nl.maximum(x, y), np.maximum(X, Y), "vector"),
        (lambda x, y: nisa.tensor_scalar(x, np.multiply, 2.0, op1=np.add, operand1=1.0), X * 2 + 1,
         "vector"),
        (lambda x, y: nisa.activation(np.exp, x, scale=0.5, bias=1.0), np.exp(X * 0.5 + 1), "scalar"),
        (lambda x, y: nl.tanh(x), np.tanh(X), "scalar"),
        (lambda x, y: nisa.tensor_reduce(np.add, x, axis=1), X.sum(1, keepdims=True), "vector"),
        (lambda x, y: nisa.tensor_reduce(nl.maximum, x, axis=1), X.max(1, keepdims=True), "vector"),
        (lambda x, y: nisa.tensor_copy(x), X, "vector"),
        (lambda x, y: nisa.nc_transpose(x), X.T, "tensor"),
        (lambda x, y: nisa.memset((128, 96), 3.0, nl.float32), np.full((128, 96), 3.0), "vector"),
    ],
)
def test_instructions_match_numpy(body, reference, engine):
    out, p = onchip(body, X, Y)
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)
    assert p.instruction_counts[engine] >= 1


def test_bfloat16_rounds_like_bfloat16():
    x = np.array([[1.0 + 2**-9, 1.0 + 3 * 2**-9, 3.0, -0.1]], np.float32)
    out, _ = onchip(lambda t, _: nisa.tensor_copy(t, dtype=nl.bfloat16), x, x)
    np.testing.assert_array_equal(out, [[1.0, 1.0 + 2**-7, 3.0, -0.10009765625]])


def test_kernel_errors_name_the_call_and_the_limit():
    big = np.empty((256, 64), np.float32)

    @nki.jit
    def too_many_partitions(a):
        nl.load(a[0:256, :])

    with pytest.raises(nki.NkiError, match=r"partition dim is at most 128 .* got shape \[256, 64\]"):
        too_many_partitions(big)

    @nki.jit
    def wide_moving(a, b):
        nisa.nc_matmul(nl.load(a[0:128, 0:128]), nl.load(b[0:128, 0:1024]))

    with pytest.raises(nki.NkiError, match="moving free size is at most 512 .* got 1024"):
        wide_moving(np.empty((128, 128), np.float32), np.empty((128, 1024), np.float32))

    @nki.jit
    def psum_overflow(a):
        return [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(9)]

    with pytest.raises(nki.NkiError, match="PSUM overflow"):
        psum_overflow(big)

    @nki.jit
    def uses_where(a):
        nl.where(nl.load(a[0:128, :]), 1.0, 0.0)

    with pytest.raises(nki.UnsupportedError, match="nl.where"):
        uses_where(big)

    @nki.jit
    def out_of_bounds(a):
        nl.load(a[nl.arange(128)[:, None] + 200, nl.arange(64)[None, :]])

    with pytest.raises(nki.NkiError, match=r"reaches 200..327 in dim 0 of tensor 'arg0' of size 256"):
        out_of_bounds(big)
    with pytest.raises(nki.NkiError, match="only valid inside an @nki.jit kernel"):
        nl.zeros((128, 4), nl.float32)


def test_calling_a_kernel_checks_what_the_hardware_would_reject():
    @nki.jit
    def store_casts(a):
        out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))  # float32 tile into a bfloat16 tensor
        return out

    with pytest.raises(ValueError, match="dma_copy moves bytes"):
        store_casts(np.zeros((4, 4), np.float32))


def test_a_moved_temporary_reads_where_it_went():
    a = RNG.standard_normal((128, 64), dtype=np.float32)

    @nki.jit
    def kernel(src):
        out = nl.ndarray(src.shape, nl.float32, buffer=nl.shared_hbm)
        x = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        t = nl.load(src)
        x[...] = t  # the load now writes x
        nl.store(out, value=nl.exp(t))
        return out

    np.testing.assert_allclose(kernel(a), np.exp(a), rtol=1e-6)
    assert nki.profile(kernel, a).instruction_counts["dma"] == 2  # no extra copy


def test_cpu_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    a, b = torch.randn(128, 128), torch.randn(128, 512)
    np.testing.assert_allclose(matmul_basic(a, b), (a.T @ b).numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(nki.NkiError, match="argument 0 is a dict"):
        matmul_basic({"a": 1}, b)
