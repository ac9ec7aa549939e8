"""The NKI matmul tutorial's optimisation steps written in trnscope.nki and profiled on
the modelled NeuronCore, against AWS's published measurements
(../shared/reference/neuroncore.md, "Calibration data"; /work/notes/nki_research.md 5.1-5.2;
docs/device_model.md's calibration table). Profiles run without numerics (np.empty
arguments): the 8192-cube kernels trace in seconds; small shapes check the numerics."""

import numpy as np
import pytest

import trnscope.nki as nki
import trnscope.nki.isa as nisa
import trnscope.nki.language as nl
from test_nki import matmul_basic

RNG = np.random.default_rng(11)
TILE_M, TILE_K, TILE_N = 128, 128, 512


# Optimisation 1 of the tutorial: the lhsT column block is loaded once per m, the rhs
# row block once per (m, n); the k loop only multiplies.
@nki.jit
def matmul_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = []  # rebinding drops the previous m's tiles: their blocks are reused
        for k in nl.affine_range(K // TILE_K):
            t = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
            lhsT_tiles.append(t)
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = []
            for k in nl.affine_range(K // TILE_K):
                t = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t,
                              src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                rhs_tiles.append(t)
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                acc += nisa.nc_matmul(lhsT_tiles[k], rhs_tiles[k])
            out = nisa.tensor_copy(acc, dtype=nl.float32)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                          src=out)
    return result


# Optimisation 3 (kernel-optimization.rst's fully blocked version): blocks of 16 x 2 x 8
# tiles; the k-blocks accumulate in SBUF (memset, then tensor_tensor adds each PSUM
# tile in), the two n-tiles of an m-tile are packed with tensor_copy and stored once.
# The kernel holds all 224 KiB of a trn2 partition (accumulators 128, lhsT 64, rhs 32),
# so the next block cannot load into spare SBUF. With whole-row block loads
# (piecewise=False, the source's one DMA per k-tile) every block boundary waits for
# its 8 MiB; with piecewise loads (one DMA per 128 x 128 lhsT / 128 x 512 rhs piece,
# issued in the order the multiplies use them) each piece loads as soon as the
# previous block's last reader of it is done, so the loads hide under the
# multiplies, as the published profile shows (Tensor idle 0.14 ms of 28.30).
BLOCK_TILES_M, BLOCK_TILES_N, BLOCK_TILES_K = 16, 2, 8


def fully_blocked(piecewise: bool):
    @nki.jit
    def matmul_fully_blocked(lhsT, rhs):
        K, M = lhsT.shape
        _, N = rhs.shape
        block_m, block_n = TILE_M * BLOCK_TILES_M, TILE_N * BLOCK_TILES_N
        block_k = TILE_K * BLOCK_TILES_K
        result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)

        def load_block(src, row0, col0, width, piece):
            """BLOCK_TILES_K tiles [TILE_K, width] of src from (row0, col0)."""
            tiles = [nl.ndarray((TILE_K, width), dtype=src.dtype, buffer=nl.sbuf)
                     for _ in range(BLOCK_TILES_K)]
            step = piece if piecewise else width
            for c in range(0, width, step):  # piece-major: the multiplies' order
                for bk, t in enumerate(tiles):
                    r = row0 + bk * TILE_K
                    nisa.dma_copy(dst=t[:, c:c + step],
                                  src=src[r:r + TILE_K, col0 + c:col0 + c + step])
            return tiles

        for n in nl.affine_range(N // block_n):
            acc = packed = None  # free the previous n-block's tiles before making these
            acc = [[[nisa.memset((TILE_M, TILE_N), 0.0, lhsT.dtype)
                     for _ in range(BLOCK_TILES_N)] for _ in range(BLOCK_TILES_M)]
                   for _ in range(M // block_m)]
            for k in nl.sequential_range(K // block_k):
                rhs_tiles = None
                rhs_tiles = load_block(rhs, k * block_k, n * block_n, block_n, TILE_N)
                for m in nl.affine_range(M // block_m):
                    lhsT_tiles = None
                    lhsT_tiles = load_block(lhsT, k * block_k, m * block_m, block_m, TILE_M)
                    for bn in nl.affine_range(BLOCK_TILES_N):
                        for bm in nl.affine_range(BLOCK_TILES_M):
                            part = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                            for bk in nl.affine_range(BLOCK_TILES_K):
                                part += nisa.nc_matmul(
                                    lhsT_tiles[bk][:, bm * TILE_M:(bm + 1) * TILE_M],
                                    rhs_tiles[bk][:, bn * TILE_N:(bn + 1) * TILE_N])
                            nisa.tensor_tensor(acc[m][bm][bn], part, nl.add, dst=acc[m][bm][bn])
            rhs_tiles = lhsT_tiles = None  # free their blocks for the packing tiles
            for m in nl.affine_range(M // block_m):
                for bm in nl.affine_range(BLOCK_TILES_M):
                    packed = nl.ndarray((TILE_M, block_n), dtype=nl.float32, buffer=nl.sbuf)
                    for bn in nl.affine_range(BLOCK_TILES_N):
                        nisa.tensor_copy(acc[m][bm][bn],
                                         dst=packed[:, bn * TILE_N:(bn + 1) * TILE_N])
                    row = (m * BLOCK_TILES_M + bm) * TILE_M
                    nisa.dma_copy(dst=result[row:row + TILE_M, n * block_n:(n + 1) * block_n],
                                  src=packed)
        return result

    return matmul_fully_blocked


matmul_fully_blocked = fully_blocked(piecewise=True)
matmul_fully_blocked_whole_rows = fully_blocked(piecewise=False)


def _profile(kernel, k, m, n, dtype=np.float32, target="trn2"):
    return nki.profile(kernel, np.empty((k, m), dtype), np.empty((k, n), dtype), target=target)


@pytest.mark.parametrize("kernel, shape", [(matmul_hoisted, (256, 256, 1024)),
                                           (matmul_fully_blocked, (2048, 2048, 1024)),
                                           (matmul_fully_blocked_whole_rows, (2048, 2048, 1024))])
def test_optimised_matmuls_compute_lhsT_transposed_times_rhs(kernel, shape):
    k, m, n = shape
    a = RNG.standard_normal((k, m), dtype=np.float32)
    b = RNG.standard_normal((k, n), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a.T @ b, rtol=1e-3, atol=1e-3)


def _active(p, engine):
    return p.engine_active_ns[engine] / p.total_ns


def test_fully_blocked_matmul_calibration_trn2():
    # Published (kernel-optimization.rst v5): 28.30 ms, Tensor active 28.16 ms (99.50 %),
    # HFU 24.70 %, DMA active 6.10 ms (21.54 %), Vector 2.99 ms, 5,403 Vector instructions.
    p = _profile(matmul_fully_blocked, 8192, 4096, 8192)
    assert p.total_ns / 1e6 == pytest.approx(28.30, rel=0.10)
    assert _active(p, "tensor") >= 0.95
    assert p.hfu == pytest.approx(0.2470, abs=0.01)
    assert p.bound == "compute"
    assert p.engine_active_ns["dma"] / 1e6 == pytest.approx(6.10, rel=0.15)
    assert p.engine_active_ns["vector"] / 1e6 == pytest.approx(2.99, rel=0.15)
    # 4,096 tensor_tensor + 512 memset + 512 tensor_copy (5,403 measured).
    assert p.instruction_counts["vector"] == 5120
    assert p.instruction_counts["tensor"] == 32768 * 3  # a load and two fp32 passes each


def test_whole_row_block_loads_stall_at_every_block():
    # The same kernel with one DMA per k-tile row: the next block's 8 MiB of lhsT waits
    # for the last multiply of the previous one (SBUF is full): Tensor idles ~22 us at
    # each of the 128 blocks.
    whole = _profile(matmul_fully_blocked_whole_rows, 8192, 4096, 8192)
    assert whole.total_ns / 1e6 == pytest.approx(31.0, rel=0.02)
    assert 0.85 < _active(whole, "tensor") < 0.92
    assert whole.engine_active_ns["tensor"] / 1e6 == pytest.approx(28.16, rel=0.02)


def test_hoisted_matmul_calibration_trn2():
    # Published (v3): 28.20 ms, Tensor active 28.16 ms (99.85 %), HFU 24.79 %, DMA 99.73 %.
    # DMA-bound in the model: a DMA engine serves the next rhs loads while the next m's
    # lhsT loads wait for their blocks (Note [DMA queues] in core/model/simulator.cc).
    p = _profile(matmul_hoisted, 8192, 4096, 8192)
    assert p.total_ns / 1e6 == pytest.approx(28.20, rel=0.10)
    assert p.engine_active_ns["tensor"] / 1e6 == pytest.approx(28.16, rel=0.05)
    assert p.hfu == pytest.approx(0.2479, abs=0.02)
    assert _active(p, "dma") >= 0.95


def test_fully_blocked_matmul_trn1_bf16():
    # matrix_multiplication.rst (trn1, bf16, same shape): Optimisation 3 6.97 ms, HFU 85.24 %.
    # The tiled (51.80 ms) and hoisted (42.96 ms) rows model 38-46 % fast: trn1's DMA on
    # 256 B / 1 KiB rows is slower than the trn2-fitted run overhead (docs/device_model.md).
    torch = pytest.importorskip("torch")
    a, b = torch.empty((8192, 4096), dtype=torch.bfloat16), torch.empty((8192, 8192), dtype=torch.bfloat16)
    p = nki.profile(matmul_fully_blocked, a, b, target="trn1")
    assert p.total_ns / 1e6 == pytest.approx(6.97, rel=0.15)
    assert p.bound == "compute"
    assert p.hfu == pytest.approx(0.8524, abs=0.10)
