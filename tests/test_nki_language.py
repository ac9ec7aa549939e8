"""trnscope.nki's index expressions, masks, par_dim tiles, broadcasts and the Vector /
Scalar / GpSimd instructions beyond the matmul's, in kernels of our own written with
the API calls of the NKI tutorials (RMSNorm, layernorm v1/v2, transpose2d, average
pool, the old-dialect matmul), each against numpy."""

import numpy as np
import pytest

import trnscope.nki as nki
import trnscope.nki.isa as nisa
import trnscope.nki.language as nl

RNG = np.random.default_rng(23)


def rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


# ---- RMSNorm: nl.arange indices, a partition mask for the last partial tile ----


@nki.jit
def rmsnorm(a, g):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    ip, ifree = nl.arange(128)[:, None], nl.arange(cols)[None, :]
    g_row = nl.load(g.reshape((1, cols))[nl.arange(1)[:, None], ifree])
    g_all = g_row.broadcast_to((128, cols))
    for i in nl.affine_range((rows + 127) // 128):
        valid = i * 128 + ip < rows
        x = nl.load(a[i * 128 + ip, ifree], mask=valid)
        ms = nl.sum(nl.square(x), axis=[1]) / cols
        y = nl.multiply(x, nl.rsqrt(ms))
        y[...] = nl.multiply(y, g_all, mask=valid)
        nl.store(out[i * 128 + ip, ifree], value=y, mask=valid)
    return out


def rmsnorm_ref(a, g):
    return a / np.sqrt((a * a).mean(1, keepdims=True)) * g


@pytest.mark.parametrize("rows", [128, 250])
def test_rmsnorm_with_masks(rows):
    a, g = rand(rows, 192), rand(192)
    np.testing.assert_allclose(rmsnorm(a, g), rmsnorm_ref(a, g), rtol=2e-5, atol=2e-5)
    p = nki.profile(rmsnorm, a, g)
    tiles = (rows + 127) // 128
    # g: load + the partition broadcast load; per tile: load, store.
    assert p.instruction_counts["dma"] == 2 + 2 * tiles
    # per tile: square, rsqrt (Scalar); sum, /cols, x * rms ([P, 1] operand), * g (Vector)
    assert p.instruction_counts["scalar"] == 2 * tiles
    assert p.instruction_counts["vector"] == 4 * tiles


# ---- layernorm v1 (nl.mean) and v2 (bn_stats / bn_aggr, tensor_scalar of tiles) ----


def _layernorm_common(x, gamma, beta, v2, eps):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    ip, ifree, i1 = nl.arange(128)[:, None], nl.arange(cols)[None, :], nl.arange(1)[:, None]
    gam = nl.load(gamma.reshape((1, cols))[i1, ifree]).broadcast_to((128, cols))
    bet = nl.load(beta.reshape((1, cols))[i1, ifree]).broadcast_to((128, cols))
    for i in nl.affine_range((rows + 127) // 128):
        valid = i * 128 + ip < rows
        t = nl.load(x[i * 128 + ip, ifree], mask=valid)
        if not v2:
            mean = nl.mean(t, axis=1)
            var = nl.mean(nl.square(t), axis=1) - mean * mean
            norm = (t - mean) * nl.rsqrt(var + eps)
        else:
            fmax = nl.tile_size.bn_stats_fmax
            n = (cols + fmax - 1) // fmax
            stats = nl.ndarray((128, 6 * n), dtype=nl.float32)
            ib, i6 = nl.arange(fmax)[None, :], nl.arange(6)[None, :]
            for j in nl.affine_range(n):
                stats[ip, j * 6 + i6] = nisa.bn_stats(t[ip, j * fmax + ib],
                                                      mask=(j * fmax + ib < cols), dtype=nl.float32)
            mv = nisa.bn_aggr(stats[ip, nl.arange(6 * n)[None, :]])
            norm = nisa.tensor_scalar(data=t, op0=np.subtract, operand0=mv[ip, 0],
                                      op1=np.multiply, operand1=nl.rsqrt(mv[ip, 1] + eps))
        y = norm * gam + bet
        nl.store(out[i * 128 + ip, ifree], value=y, mask=valid)
    return out


@nki.jit
def layernorm_v1(x, eps, gamma, beta):
    return _layernorm_common(x, gamma, beta, False, eps)


@nki.jit
def layernorm_v2(x, eps, gamma, beta):
    return _layernorm_common(x, gamma, beta, True, eps)


@pytest.mark.parametrize("kernel", [layernorm_v1, layernorm_v2])
def test_layernorm_matches_numpy(kernel):
    x, g, b = rand(300, 1000) + 3.0, rand(1000), rand(1000)
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(kernel(x, 1e-5, g, b), ref, rtol=1e-4, atol=1e-4)
    p = nki.profile(kernel, x, 1e-5, g, b)
    assert p.total_ns > 0 and p.instruction_counts["dma"] == 4 + 2 * 3


def test_bn_stats_and_bn_aggr_give_mean_and_variance():
    x = rand(128, 700)

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 2), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nl.ndarray((128, 12), nl.float32)
        s[:, 0:6] = nisa.bn_stats(t[:, 0:512])
        s[:, 6:12] = nisa.bn_stats(t[:, 512:700])
        nl.store(out, value=nisa.bn_aggr(s))
        return out

    np.testing.assert_allclose(k(x), np.stack([x.mean(1), x.var(1)], 1), rtol=1e-5, atol=1e-6)

    @nki.jit
    def too_wide(a):
        nisa.bn_stats(nl.load(a))

    with pytest.raises(ValueError, match="bn_stats takes at most 512"):
        too_wide(x)


# ---- transpose2d: a copy whose source and destination access patterns differ (int8) ----


@nki.jit
def transpose2d(a, shape2d):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    f1, f2 = shape2d
    t = nl.load(a)
    ip = nl.arange(a.shape[0])[:, None, None]
    i1, i2 = nl.arange(f1)[None, :, None], nl.arange(f2)[None, None, :]
    o = nl.ndarray((a.shape[0], f1 * f2), dtype=a.dtype)
    o[ip, i2 * f1 + i1] = nl.copy(t[ip, i1 * f2 + i2])
    nl.store(out, value=o)
    return out


def test_transpose2d_int8_access_patterns():
    a = np.arange(5 * 12, dtype=np.int8).reshape(5, 12)
    ref = a.reshape(5, 3, 4).transpose(0, 2, 1).reshape(5, 12)
    np.testing.assert_array_equal(transpose2d(a, (3, 4)), ref)
    p = nki.profile(transpose2d, a, (3, 4))
    assert p.instruction_counts["vector"] == 1 and p.instruction_counts["dma"] == 2


# ---- average pool: a 5-D mgrid view reduced over two axes; an int argument ----


@nki.jit
def avgpool(x, pool):
    c, h, w = x.shape
    out = nl.ndarray((c, h // pool, w // pool), dtype=x.dtype, buffer=nl.shared_hbm)
    i0, i1, i2, i3, i4 = nl.mgrid[0:c, 0:h // pool, 0:pool, 0:w // pool, 0:pool]
    t = nl.load(x)
    s = nl.sum(t[i0, pool * i1 + i2, pool * i3 + i4], axis=[2, 4]) / (pool * pool)
    nl.store(out, value=s)
    return out


def test_avgpool_mgrid_reduces_two_axes():
    x = rand(16, 12, 8)
    ref = x.reshape(16, 6, 2, 4, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(avgpool(x, 2), ref, rtol=1e-5, atol=1e-6)
    p = nki.profile(avgpool, x, 2)
    assert p.instruction_counts["vector"] == 2  # one tensor_reduce, one scale


@nki.jit
def avgpool_ap(x, pool):  # the new dialect's version: one 5-D .ap() view of the tile
    c, h, w = x.shape
    out = nl.ndarray((c, h // pool, w // pool), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    v = t.ap([[h * w, c], [pool * w, h // pool], [pool, w // pool], [w, pool], [1, pool]])
    s = nl.sum(v, axis=[3, 4])
    o = nl.ndarray(s.shape, dtype=s.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=s, op0=nl.multiply, operand0=1.0 / (pool * pool))
    nisa.dma_copy(dst=out, src=o)
    return out


def test_access_patterns_view_the_flat_storage():
    x = rand(16, 12, 8)
    ref = x.reshape(16, 6, 2, 4, 2).mean(axis=(2, 4))
    np.testing.assert_allclose(avgpool_ap(x, 2), ref, rtol=1e-5, atol=1e-6)

    @nki.jit
    def odd_columns_and_offset(a):  # an HBM .ap() with an offset; a view's pattern
        out = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[64, 64], [2, 16]], offset=1))
        assert t[:, 0:8].get_pattern() == [[16, 64], [1, 8]]
        nisa.dma_copy(dst=out, src=t)
        return out

    a = rand(64, 64)
    np.testing.assert_array_equal(odd_columns_and_offset(a), a[:, 1:32:2])


def test_access_pattern_errors_name_the_pattern():
    @nki.jit
    def every_other_partition(a):
        t = nl.ndarray((16, 32), dtype=a.dtype, buffer=nl.sbuf)
        nl.exp(t.ap([[64, 8], [1, 32]]))

    with pytest.raises(nki.NkiError, match=r"partition step must be the tile's free size 32"):
        every_other_partition(X)

    @nki.jit
    def past_the_end(a):
        t = nl.ndarray((16, 32), dtype=a.dtype, buffer=nl.sbuf)
        nl.exp(t.ap([[32, 16], [1, 32]], offset=4))

    with pytest.raises(nki.NkiError, match=r"reaches 4..515 in the 512 elements"):
        past_the_end(X)

    @nki.jit
    def indirect(a):
        t = nl.ndarray((16, 32), dtype=a.dtype, buffer=nl.sbuf)
        nl.exp(t.ap([[32, 16], [1, 32]], scalar_offset=t))

    with pytest.raises(nki.UnsupportedError, match=r"scalar_offset"):
        indirect(X)

    @nki.jit
    def not_pairs(a):
        a.ap([64, 128])

    with pytest.raises(nki.NkiError, match=r"list of \[step, num\] pairs"):
        not_pairs(X)


# ---- the old dialect's matmul: mgrid indices, par_dim block tiles, += into PSUM ----


@nki.jit
def matmul_blocks(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    il, ir, io = nl.mgrid[0:128, 0:128], nl.mgrid[0:128, 0:512], nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // 128):
        a = nl.ndarray((K // 128, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // 128):
            a[k, il.p, il.x] = nl.load(lhsT[k * 128 + il.p, m * 128 + il.x])
        for n in nl.affine_range(N // 512):
            b = nl.ndarray((K // 128, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // 128):
                b[k, ir.p, ir.x] = nl.load(rhs[k * 128 + ir.p, n * 512 + ir.x])
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                acc[...] += nl.matmul(a[k, il.p, il.x], b[k, ir.p, ir.x], transpose_x=True)
            nl.store(out[m * 128 + io.p, n * 512 + io.x], value=nl.copy(acc))
    return out


def test_old_dialect_matmul_with_par_dim_blocks():
    a, b = rand(256, 256), rand(256, 1024)
    np.testing.assert_allclose(matmul_blocks(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    p = nki.profile(matmul_blocks, a, b)
    # lhsT loaded once per m (2 x 2), rhs per (m, n) (2 x 2 x 2), 4 stores; fp32 = 2 passes.
    assert p.instruction_counts["dma"] == 4 + 8 + 4
    assert p.instruction_counts["tensor"] == 2 * 2 * 2 * 3


# ---- single instructions ----


def _run(body, *arrays, out_shape=None, dtype=nl.float32):
    @nki.jit
    def k(*args):
        tiles = [nl.load(x) for x in args]
        y = body(*tiles)
        out = nl.ndarray(y.shape, dtype, buffer=nl.shared_hbm)
        nl.store(out, value=y)
        return out

    return k(*arrays)


X = rand(128, 64)
COL = rand(128, 1)


@pytest.mark.parametrize("body, reference", [
    (lambda x, c: nisa.activation(np.exp, x, bias=c, scale=0.5), np.exp(X * 0.5 + COL)),
    (lambda x, c: nisa.activation(np.tanh, x, scale=c), np.tanh(X * COL)),
    (lambda x, c: nisa.tensor_scalar(x, np.multiply, c, op1=np.add, operand1=2.0), X * COL + 2),
    (lambda x, c: nisa.tensor_scalar(x, np.subtract, c, reverse0=True), COL - X),
    (lambda x, c: x - c, X - COL),
    (lambda x, c: c - x, COL - X),
    (lambda x, c: 2.0 / (x * x + 1.0), 2.0 / (X * X + 1.0)),
    (lambda x, c: nisa.tensor_reduce(np.maximum, x, axis=1, negate=True, keepdims=True),
     -X.max(1, keepdims=True)),
    (lambda x, c: nl.max(x, axis=1), X.max(1, keepdims=True)),
    (lambda x, c: nisa.reciprocal(x), 1 / X),
    (lambda x, c: nl.sigmoid(x), 1 / (1 + np.exp(-X))),
    (lambda x, c: nl.silu(x), X / (1 + np.exp(-X))),
])
def test_instructions_with_tile_operands(body, reference):
    np.testing.assert_allclose(_run(body, X, COL), reference, rtol=2e-5, atol=2e-5)


def test_activation_reduce_writes_row_sums():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 65), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        sums = nl.ndarray((128, 1), nl.float32)
        y = nisa.activation_reduce(np.exp, t, reduce_op=np.add, reduce_res=sums, scale=0.5)
        both = nl.ndarray((128, 65), nl.float32)
        both[:, 0:64] = y
        both[:, 64:65] = sums
        nl.store(out, value=both)
        return out

    r = k(X)
    np.testing.assert_allclose(r[:, :64], np.exp(0.5 * X), rtol=1e-5)
    np.testing.assert_allclose(r[:, 64], np.exp(0.5 * X).sum(1), rtol=1e-5)
    assert nki.profile(k, X).instruction_counts["scalar"] == 1


def test_iota_and_affine_select():
    expr = nl.arange(128)[:, None] * 8 + nl.arange(8)[None, :]
    got = _run(lambda x: nisa.iota(expr, dtype=nl.int32), X, dtype=nl.int32)
    np.testing.assert_array_equal(got, np.arange(128 * 8).reshape(128, 8))
    ip, jf = nl.arange(128)[:, None], nl.arange(64)[None, :]
    got = _run(lambda x: nisa.affine_select(ip >= jf, x, -1e9), X)
    np.testing.assert_array_equal(got, np.where(np.tri(128, 64, dtype=bool), X, np.float32(-1e9)))


def test_matmul_without_transpose_x_transposes_first():
    a, b = rand(64, 128), rand(128, 256)

    @nki.jit
    def k(x, y):
        out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nl.matmul(nl.load(x), nl.load(y))))
        return out

    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_masks_and_indices_say_what_is_wrong():
    ip, jf = nl.arange(128)[:, None], nl.arange(64)[None, :]

    @nki.jit
    def triangle(a):
        nl.load(a[ip, jf], mask=(ip < jf))

    with pytest.raises(nki.UnsupportedError, match="couples index axes"):
        triangle(X)

    @nki.jit
    def strided_partitions(a):  # HBM rows may be strided; SBUF partitions may not
        t = nl.load(a)
        nl.exp(t[2 * nl.arange(64)[:, None], jf])

    with pytest.raises(nki.UnsupportedError, match="steps over partitions"):
        strided_partitions(X)


def test_benchmark_reports_the_modelled_latency(tmp_path):
    a, b = rand(256, 256), rand(256, 1024)
    bench = nki.benchmark(matmul_blocks, save_neff_name=str(tmp_path / "k.trnx"),
                          save_trace_name=str(tmp_path / "k.json"))
    np.testing.assert_allclose(bench(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    lat = bench.benchmark_result.nc_latency
    assert lat.get_latency_percentile(50) == pytest.approx(nki.profile(matmul_blocks, a, b).total_ns / 1e3)
    assert (tmp_path / "k.trnx").stat().st_size > 0 and (tmp_path / "k.json").stat().st_size > 0
    with pytest.raises(nki.NkiError, match="percentile 101"):
        lat.get_latency_percentile(101)


def test_compiler_directives_pass_and_placement_says_unsupported():
    from trnscope.nki import compiler as ncc

    @nki.jit
    @ncc.skip_middle_end_transformations
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        with ncc.no_reorder():
            nl.store(out, value=nl.exp(nl.load(a)))
        return out

    np.testing.assert_allclose(k(X), np.exp(X), rtol=1e-6)
    with pytest.raises(nki.UnsupportedError, match="nki.compiler.sbuf.mod_alloc"):
        ncc.sbuf.mod_alloc(base_addr=0)
