"""The NKI tutorials' kernels, written in trnscope.nki with only the imports changed
(our own code following each published kernel's API calls and structure,
/work/notes/nki_research.md), checked against numpy at small shapes, and profiled
with instruction counts checked against a hand count."""

import math

import numpy as np
import pytest

import trnscope.nki as nki
import trnscope.nki.isa as nisa
import trnscope.nki.language as nl

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def counts(kernel, *args):
    p = nki.profile(kernel, *args)
    assert math.isfinite(p.total_ns) and p.total_ns > 0
    return p


# ---- matmul, NEW dialect (nki >= 0.2): dst-first nisa calls, uninitialised PSUM ----


@nki.jit
def mm_single_tile(lhsT, rhs):
    result = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray(result.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, a, b)  # positional dst, stationary, moving
    out = nl.ndarray(acc.shape, dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    nisa.dma_copy(dst=result, src=out)
    return result


def test_matmul_single_tile_new_dialect():
    a, b = rand(128, 64), rand(128, 512)
    np.testing.assert_allclose(mm_single_tile(a, b), a.T @ b, rtol=1e-4, atol=1e-4)
    p = counts(mm_single_tile, a, b)
    # fp32: LoadStationary + 2 MultiplyMoving passes; 2 loads + 1 store; 1 PSUM copy.
    assert p.instruction_counts["tensor"] == 3
    assert p.instruction_counts["dma"] == 3 and p.instruction_counts["vector"] == 1


TM, TK, TN = 128, 128, 512


@nki.jit
def mm_tiled(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                a = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=b, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)  # first overwrites
            sb = nl.ndarray(acc.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=acc)
            nisa.dma_copy(dst=result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=sb)
    return result


def test_matmul_tiled_new_dialect_overwrites_then_accumulates():
    a, b = rand(384, 256), rand(384, 1024)
    np.testing.assert_allclose(mm_tiled(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    p = counts(mm_tiled, a, b)
    tiles, mms = 2 * 2, 2 * 2 * 3
    assert p.instruction_counts["tensor"] == 3 * mms
    assert p.instruction_counts["dma"] == 2 * mms + tiles
    assert p.instruction_counts["vector"] == tiles


@nki.jit
def mm_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        lhs_col = []
        for k in nl.affine_range(K // TK):
            t = nl.ndarray(shape=(TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
            lhs_col.append(t)
        for n in nl.affine_range(N // TN):
            rhs_col = []
            for k in nl.affine_range(K // TK):
                t = nl.ndarray(shape=(TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                rhs_col.append(t)
            acc = nl.ndarray(shape=(TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                nisa.nc_matmul(dst=acc, stationary=lhs_col[k], moving=rhs_col[k])
            sb = nl.ndarray(shape=(TM, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=acc)
            nisa.dma_copy(dst=result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=sb)
    return result


def test_matmul_hoisted_loads():
    a, b = rand(256, 256), rand(256, 1024)
    np.testing.assert_allclose(mm_hoisted(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    p = counts(mm_hoisted, a, b)
    mt, nt, kt = 2, 2, 2
    assert p.instruction_counts["dma"] == mt * kt + mt * nt * kt + mt * nt
    assert p.instruction_counts["tensor"] == 3 * mt * nt * kt
    assert p.spill_bytes == {"store": 0, "reload": 0}


BM, BN = 2, 2  # tiles per block (the tutorial's TILES_IN_BLOCK_M / _N)


@nki.jit
def mm_block_free(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (TM * BM)):
        lhs_block = []
        for bm in nl.affine_range(BM):
            col = []
            for k in nl.affine_range(K // TK):
                t = nl.ndarray(shape=(TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                c = (m * BM + bm) * TM
                nisa.dma_copy(dst=t, src=lhsT[k * TK:(k + 1) * TK, c:c + TM])
                col.append(t)
            lhs_block.append(col)
        for n in nl.affine_range(N // (TN * BN)):
            rhs_block = []
            for bn in nl.affine_range(BN):
                col = []
                for k in nl.affine_range(K // TK):
                    t = nl.ndarray(shape=(TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                    c = (n * BN + bn) * TN
                    nisa.dma_copy(dst=t, src=rhs[k * TK:(k + 1) * TK, c:c + TN])
                    col.append(t)
                rhs_block.append(col)
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.ndarray(shape=(TM, TN), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TK):
                        nisa.nc_matmul(dst=acc, stationary=lhs_block[bm][k],
                                       moving=rhs_block[bn][k])
                    sb = nl.ndarray(shape=acc.shape, dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=sb, src=acc)
                    r, c = (m * BM + bm) * TM, (n * BN + bn) * TN
                    nisa.dma_copy(dst=result[r:r + TM, c:c + TN], src=sb)
    return result


def test_matmul_block_free_dims_fits():
    a, b = rand(256, 256), rand(256, 2048)
    np.testing.assert_allclose(mm_block_free(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    p = counts(mm_block_free, a, b)
    kt, mb, nb = 2, 1, 2
    loads = mb * BM * kt + mb * nb * BN * kt
    assert p.instruction_counts["dma"] == loads + mb * nb * BM * BN
    assert p.spill_bytes["store"] == 0


def test_matmul_block_free_dims_spills_past_sbuf():
    # K = 6144: per partition 2*48 lhsT tiles of 512 B + 2*48 rhs tiles of 2 KiB =
    # 240 KiB > 224 KiB of trn2 SBUF: the tracer spills instead of failing (as the compiler).
    a, b = rand(6144, 256), rand(6144, 1024)
    np.testing.assert_allclose(mm_block_free(a, b), a.T @ b, rtol=1e-3, atol=2e-2)
    p = counts(mm_block_free, a, b)
    spill = p.spill_bytes
    # The spilled tiles are unmodified copies of rhs: reloaded from rhs, never stored.
    assert spill["store"] == 0 and spill["reload"] > 0
    assert spill["reload"] % (128 * 2048) == 0  # whole rhs tiles
    loads = BM * 48 + BN * 48
    assert p.instruction_counts["dma"] == loads + BM * BN + spill["reload"] // (128 * 2048)
    assert p.hbm_bytes == a.nbytes + b.nbytes + 256 * 1024 * 4 + spill["reload"]
    # trn1's SBUF is 192 KiB: more reloads.
    assert nki.profile(mm_block_free, a, b, target="trn1").spill_bytes["reload"] > spill["reload"]


@nki.jit
def many_accumulators(x):
    out = nl.ndarray((120, 128, 512), nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for i in range(120):  # 120 tiles of 2 KiB per partition = 240 KiB > 224 KiB
        t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(i))
        tiles.append(t)
    for i in range(120):
        t = tiles.pop(0)  # each tile is dropped after its store, freeing its block
        nisa.dma_copy(dst=out[i], src=t)
    return out


def test_spilled_tiles_that_were_written_are_stored_and_reloaded():
    x = np.zeros((1, 1), np.float32)
    out = many_accumulators(x)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(120.0)[:, None, None], out.shape))
    p = counts(many_accumulators, x)
    # 112 tiles fit; each of the 8 more spills one (dirty) tile, reloaded when read.
    tile = 128 * 512 * 4
    assert p.spill_bytes == {"store": 8 * tile, "reload": 8 * tile}
    assert p.instruction_counts["dma"] == 120 + 8 + 8
    assert p.instruction_counts["vector"] == 120


def test_a_tile_larger_than_sbuf_is_an_error():
    @nki.jit
    def huge(x):
        nl.ndarray((128, 60000), nl.float32, buffer=nl.sbuf)

    with pytest.raises(nki.NkiError, match="single tile of 240000 bytes per partition is larger "
                       "than SBUF"):
        huge(np.zeros((1, 1), np.float32))


@nki.jit
def mm_fully_blocked(lhsT, rhs, TILES_M=2, TILES_N=2, TILES_K=2):
    K, M = lhsT.shape
    N = rhs.shape[1]
    block_m, block_n, block_k = TM * TILES_M, TN * TILES_N, TK * TILES_K
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // block_n):
        acc_tiles = []
        for m in nl.affine_range(M // block_m):
            for mt in nl.affine_range(TILES_M):
                acc = nl.ndarray(shape=(TM, TILES_N, TN), dtype=result.dtype, buffer=nl.sbuf)
                nisa.memset(dst=acc, value=0.0)
                acc_tiles.append(acc)
        for k in nl.sequential_range(K // block_k):
            rhs_tiles = nl.ndarray(shape=(TK, TILES_K, block_n), dtype=rhs.dtype, buffer=nl.sbuf)
            for kt in range(TILES_K):
                r = (k * TILES_K + kt) * TK
                nisa.dma_copy(dst=rhs_tiles[0:TK, kt, 0:block_n],
                              src=rhs[r:r + TK, n * block_n:(n + 1) * block_n])
            for m in nl.affine_range(M // block_m):
                lhs_tiles = nl.ndarray(shape=(TK, TILES_K, block_m), dtype=lhsT.dtype,
                                       buffer=nl.sbuf)
                for kt in nl.affine_range(TILES_K):
                    r = (k * TILES_K + kt) * TK
                    nisa.dma_copy(dst=lhs_tiles[0:TK, kt, 0:block_m],
                                  src=lhsT[r:r + TK, m * block_m:(m + 1) * block_m])
                for nt in nl.affine_range(TILES_N):
                    for mt in nl.affine_range(TILES_M):
                        part = nl.ndarray(shape=(TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for kt in nl.affine_range(TILES_K):
                            nisa.nc_matmul(dst=part,
                                           stationary=lhs_tiles[0:TK, kt, mt * TM:(mt + 1) * TM],
                                           moving=rhs_tiles[0:TK, kt, nt * TN:(nt + 1) * TN])
                        acc = acc_tiles[m * TILES_M + mt]
                        nisa.tensor_tensor(dst=acc[0:TM, nt, 0:TN], data1=acc[0:TM, nt, 0:TN],
                                           data2=part, op=nl.add)
        for i, acc in enumerate(acc_tiles):
            flat = acc.reshape((TM, block_n))
            nisa.dma_copy(dst=result[i * TM:(i + 1) * TM, n * block_n:(n + 1) * block_n],
                          src=flat[0:TM, 0:block_n])
    return result


def test_matmul_fully_blocked_sbuf_accumulation():
    a, b = rand(512, 256), rand(512, 2048)
    np.testing.assert_allclose(mm_fully_blocked(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    p = counts(mm_fully_blocked, a, b)
    nb, kb, mb = 2, 2, 1  # blocks of N, K, M
    mms = nb * kb * mb * 2 * 2 * 2
    assert p.instruction_counts["tensor"] == 3 * mms
    # per (n, k, m): one tensor_tensor per PSUM tile; per n: one memset per m-tile
    assert p.instruction_counts["vector"] == nb * kb * mb * 4 + nb * 2
    assert p.instruction_counts["dma"] == nb * kb * (2 + mb * 2) + nb * 2
