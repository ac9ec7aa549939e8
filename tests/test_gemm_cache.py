"""The packed-weight cache of the trn GEMM (Note [Packed weight cache]): a weight used
by mm / addmm / F.linear is packed once and reused, and every way its bytes can change
(an in-place write, copy_, a write under no_grad, a free and a new tensor at the same
address) gives the result CPU PyTorch gives, never a stale pack."""

import pytest
import torch
import torch.nn.functional as F

import trnscope

ops = torch.ops.trnscope
FIELDS = ("hits", "packs", "evictions", "forgotten", "entries", "bytes", "capacity")
K, N, M = 96, 80, 24  # k * n above the cache's minimum; M above the GEMV rows


def stats() -> dict:
    torch.trn.synchronize()
    return dict(zip(FIELDS, ops._gemm_pack_cache_stats()))


@pytest.fixture(autouse=True)
def clean_cache():
    ops._gemm_pack_cache_clear()
    before = trnscope.fallback_ops()
    yield
    torch.trn.synchronize()
    assert trnscope.fallback_ops() == before, "a native op went through the CPU fallback"
    ops._gemm_pack_cache_clear()


def assert_linear_matches(x, w, bias=None):
    got = F.linear(x, w, bias)
    want = F.linear(x.cpu(), w.cpu(), None if bias is None else bias.cpu())
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_weight_is_packed_once_and_reused():
    x = torch.randn(M, K, device="trn")
    w = torch.randn(N, K, device="trn")
    for _ in range(5):
        assert_linear_matches(x, w)
    s = stats()
    assert s["packs"] == 1, s  # admitted on the second call, packed there
    assert s["hits"] == 3, s
    assert s["bytes"] >= K * N * 4, s


def test_cached_result_equals_the_uncached_result():
    x = torch.randn(M, K, device="trn")
    w = torch.randn(K, N, device="trn")  # plain mm, b row-major
    first = torch.mm(x, w).cpu()
    for _ in range(3):
        assert torch.equal(torch.mm(x, w).cpu(), first)
    assert stats()["hits"] == 2  # call 2 packs, calls 3 and 4 reuse


@pytest.mark.parametrize("write", ["add_", "copy_", "no_grad_mul_", "mul_out", "index_fill"])
def test_in_place_write_to_the_weight_is_seen(write):
    lin = torch.nn.Linear(K, N).to("trn")
    x = torch.randn(M, K, device="trn")
    for _ in range(3):  # packed and hit
        assert_linear_matches(x, lin.weight, lin.bias)
    assert stats()["hits"] >= 1
    w = lin.weight
    with torch.no_grad():
        if write == "add_":
            w.add_(1)
        elif write == "copy_":
            w.copy_(torch.randn(N, K))
        elif write == "no_grad_mul_":
            lin.weight.mul_(2)
        elif write == "mul_out":
            torch.mul(w, 3, out=w)
        else:  # a write through a view of the weight
            w[:, : K // 2].fill_(0.5)
    for _ in range(3):
        assert_linear_matches(x, lin.weight, lin.bias)
        y = lin(x)
        torch.testing.assert_close(y.detach().cpu(), F.linear(x.cpu(), w.detach().cpu(),
                                                               lin.bias.detach().cpu()),
                                   rtol=1e-5, atol=1e-5)


def test_freed_and_reallocated_weight_is_packed_again():
    torch.trn.synchronize()
    torch.trn.empty_cache()  # blocks earlier tests left would serve w2 instead of w's
    x = torch.randn(M, K, device="trn")
    w = torch.randn(N, K, device="trn")
    for _ in range(3):
        assert_linear_matches(x, w)
    address, version = w.data_ptr(), w._version
    del w  # the block goes back to the allocator's cache
    w2 = torch.randn(N, K, device="trn")  # same size, same stream: the same block
    assert w2.data_ptr() == address
    assert w2._version == version  # made like w: the same key but for the free
    for _ in range(3):
        assert_linear_matches(x, w2)
    assert stats()["forgotten"] >= 1


def test_weight_views_and_dtypes():
    x = torch.randn(M, K, device="trn")
    w = torch.randn(N, 2 * K, device="trn")
    for view in (w[:, :K], w[:, K:], w[:, ::2]):  # one storage, three views
        for _ in range(3):
            assert_linear_matches(x, view)
    for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
        xd = torch.randn(M, K).to(dtype)
        wd = torch.randn(N, K).to(dtype)
        xt, wt = xd.to("trn"), wd.to("trn")
        for _ in range(3):
            got = F.linear(xt, wt).cpu()
            want = F.linear(xd.float(), wd.float()).to(dtype)
            torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_activations_are_not_cached():
    w = torch.randn(N, K, device="trn")
    for _ in range(4):
        a = torch.randn(M, K, device="trn")
        b = torch.randn(K, N, device="trn")  # fresh each call, as an activation is
        got = torch.mm(a, b)
        torch.testing.assert_close(got.cpu(), a.cpu() @ b.cpu(), rtol=1e-5, atol=1e-5)
        del a, b, got
    torch.bmm(torch.randn(2, M, K, device="trn"), w.t().expand(2, K, N))
    s = stats()
    assert s["packs"] == 0, s


def test_byte_cap_evicts_and_results_stay_right():
    x = torch.randn(M, K, device="trn")
    ws = [torch.randn(N, K, device="trn") for _ in range(3)]
    for w in ws:
        for _ in range(2):
            assert_linear_matches(x, w)
    one = stats()["bytes"] // 3
    ops._gemm_pack_cache_capacity(one)
    try:
        for _ in range(2):
            for w in ws:
                assert_linear_matches(x, w)
        s = stats()
        assert s["evictions"] >= 2, s
        assert s["bytes"] <= one, s
    finally:
        ops._gemm_pack_cache_capacity(1 << 30)


def test_decoder_style_linear_on_3d_input():
    lin = torch.nn.Linear(K, N).to("trn")
    for s in (7, 1, 1, 1):  # prefill, then decode steps
        x = torch.randn(2, s, K, device="trn")
        y = lin(x)
        torch.testing.assert_close(
            y.detach().cpu(),
            F.linear(x.cpu(), lin.weight.detach().cpu(), lin.bias.detach().cpu()),
            rtol=1e-5, atol=1e-5)


def test_weights_on_two_cores_at_once():
    # Each core's worker packs and reuses its own weight while the other runs.
    if torch.trn.device_count() < 2:
        pytest.skip("needs two trn cores")
    w_cpu = torch.randn(N, K)
    xs_cpu = [torch.randn(M, K) for _ in range(4)]
    ws = [w_cpu.to(f"trn:{d}") for d in (0, 1)]
    outs = []
    for x in xs_cpu:  # launches are asynchronous: both cores busy together
        outs.append([F.linear(x.to(f"trn:{d}"), ws[d]) for d in (0, 1)])
    for x, pair in zip(xs_cpu, outs):
        for y in pair:
            torch.testing.assert_close(y.cpu(), F.linear(x, w_cpu), rtol=1e-5, atol=1e-5)
    assert stats()["packs"] == 2


def test_compiled_program_sees_in_place_weight_writes():
    """A compiled linear reads its weight through the packed-weight cache too;
    an in-place write between calls (version bump) must never meet a stale pack."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(96, 80).eval()
    x = torch.randn(16, 96)
    lin_trn = torch.nn.Linear(96, 80).eval().to("trn")
    lin_trn.load_state_dict(lin.state_dict())
    compiled = torch.compile(lin_trn, backend="trn", dynamic=False)
    stats = torch.ops.trnscope._gemm_pack_cache_stats
    with torch.no_grad():
        for _ in range(3):  # the pack is made on the second sighting, then hit
            torch.testing.assert_close(compiled(x.to("trn")).cpu(), lin(x), rtol=1e-5, atol=1e-5)
        torch.trn.synchronize()
        hits = stats()[0]
        compiled(x.to("trn"))
        torch.trn.synchronize()
        assert stats()[0] > hits, "the compiled GEMM did not use the pack cache"
        lin.weight.mul_(2)
        lin_trn.weight.mul_(2)
        torch.testing.assert_close(compiled(x.to("trn")).cpu(), lin(x), rtol=1e-5, atol=1e-5)


def test_grouped_mm_experts_are_packed_once_and_writes_are_seen():
    """transformers' MoE experts: F.grouped_mm(x, w.transpose(-2, -1), offs) packs the
    3-D expert weights once; an in-place write to one expert is seen."""
    torch.manual_seed(0)
    w = torch.randn(3, N, K, device="trn")
    x = torch.randn(2 * M, K, device="trn")
    offs = torch.tensor([10, 10, 2 * M], dtype=torch.int32, device="trn")

    def check():
        got = torch._grouped_mm(x, w.transpose(-2, -1), offs)
        want = torch._grouped_mm(x.cpu(), w.cpu().transpose(-2, -1), offs.cpu())
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)

    for _ in range(4):
        check()
    s = stats()
    assert s["packs"] == 1 and s["hits"] == 2, s
    w[2].mul_(-3)  # bumps the version: the next call packs again
    check()
    check()
    s = stats()
    assert s["packs"] == 2 and s["forgotten"] == 1, s


# ---- bfloat16 on AMX (Note [AMX bf16 GEMM]) ----------------------------------------------------
@pytest.mark.parametrize("amx", [True, False], ids=["amx", "float32-gemm"])
def test_bfloat16_products_match_cpu_on_both_gemms(amx):
    """Where the CPU has AMX, bfloat16 products run on its tiles (the weight's tiles
    cached like a float32 pack); TRN_AMX=0 / _set_amx(False) runs the float32 GEMM.
    Both equal CPU PyTorch's bfloat16 results to bfloat16's rounding."""
    if ops._set_amx(amx) != amx:
        ops._set_amx(True)
        pytest.skip("this CPU has no AMX-BF16 (or the OS refused the tile state)")
    try:
        g = torch.Generator().manual_seed(0)

        def r(*shape):
            return torch.randn(*shape, generator=g).bfloat16()

        x, w, b = r(37, 70), r(45, 70), r(45)
        x3, w3 = r(2, 5, 300), r(33, 300)  # 3-D input, k past a tile
        p, q = r(3, 17, 40), r(3, 40, 19)
        x4, w4 = r(2, 3, 9, 40), r(40, 18)  # batches share b
        c1, r1 = r(40, 1), r(1, 33)  # k = 1
        tall, w5 = r(300, 64), r(64, 40)  # past one chunk of A rows
        xg, wg = r(20, 64), r(3, 64, 96)  # grouped_mm's experts: cached slice by slice
        offs = torch.tensor([5, 12, 20], dtype=torch.int32)
        cases = [
            lambda t: F.linear(t(x), t(w), t(b)),
            lambda t: F.linear(t(x3), t(w3)),
            lambda t: torch.mm(t(x), t(w).t()),
            lambda t: torch.bmm(t(p), t(q)),
            lambda t: torch.matmul(t(x4), t(w4)),
            lambda t: torch.addmm(t(b), t(x), t(w).t(), beta=0.5, alpha=2.0),  # alpha: float32
            lambda t: torch.mm(t(c1), t(r1)),
            lambda t: torch.mm(t(tall), t(w5)),
            lambda t: torch._grouped_mm(t(xg), t(wg), offs=t(offs)),
        ]
        on_trn = {}

        def trn(v):  # one trn copy per tensor: the second call meets a cached pack
            if id(v) not in on_trn:
                on_trn[id(v)] = v.to("trn")
            return on_trn[id(v)]

        for i, case in enumerate(cases):
            for _ in range(2):
                got = case(trn)
            want = case(lambda v: v)
            assert got.dtype == torch.bfloat16 and got.shape == want.shape, i
            torch.testing.assert_close(got.cpu().float(), want.float(), rtol=2e-2, atol=2e-2,
                                       msg=f"case {i}")
        # The weight's cached layout: bfloat16 tiles (3 k-tiles x 4 column tiles of 1 KiB)
        # on AMX, float32 micro-panels (96 x 64 x 4 bytes) on the float32 GEMM.
        ops._gemm_pack_cache_clear()
        xt, wt = r(40, 96).to("trn"), r(64, 96).to("trn")
        for _ in range(2):
            F.linear(xt, wt)
        assert stats()["bytes"] == (3 * 4 * 1024 if amx else 96 * 64 * 4)
    finally:
        ops._set_amx(True)
