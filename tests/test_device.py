"""The trn device infrastructure: registration, copies, streams/events, memory,
RNG, errors, the CPU fallback and the float64 policy. References are CPU PyTorch."""

import importlib.metadata
import re
import threading
import warnings

import pytest
import torch

import trnscope
from conftest import run_python

ALL_DTYPES = [
    torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.complex64,
]


def _sample(shape, dtype):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g).to(dtype) * 3
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape, generator=g).to(dtype)


# ---- Registration -------------------------------------------------------------------------
def test_registration():
    assert torch._C._get_privateuse1_backend_name() == "trn"
    x = torch.ones(2, device="trn")
    assert x.device.type == "trn" and x.is_trn
    assert torch.trn.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("trn")
    assert torch.accelerator.device_count() == torch.trn.device_count() == 2
    torch.accelerator.synchronize()


def test_import_twice_and_autoload_idempotent():
    r = run_python("""
        import importlib, torch, trnscope
        trnscope._autoload(); trnscope._register(); importlib.reload(trnscope)
        print(torch.randn(2, device='trn').cpu().shape)
    """)
    assert r.returncode == 0, r.stderr
    assert "torch.Size([2])" in r.stdout


def test_autoload_entry_point_without_import():
    try:
        importlib.metadata.distribution("trnscope")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("trnscope is not pip-installed: the torch.backends entry point is absent")
    r = run_python("import torch; print(torch.randn(2, device='trn').cpu().shape)")
    assert r.returncode == 0, r.stderr


# ---- Copies -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    x = _sample((5, 7), dtype)
    d = x.to("trn")
    assert d.dtype == dtype and d.device.type == "trn"
    assert torch.equal(d.cpu(), x)
    # Non-contiguous source to device, and non-contiguous device tensor back.
    xt = x.t()
    assert torch.equal(xt.to("trn").cpu(), xt)
    assert torch.equal(d.t().cpu(), xt)
    assert torch.equal(d[:, ::2].cpu(), x[:, ::2])
    # Into a non-contiguous destination on the device.
    dst = torch.zeros(7, 5, dtype=dtype).to("trn")
    dst.t().copy_(x)
    assert torch.equal(dst.cpu(), xt)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16), (torch.int64, torch.float32),
                                     (torch.float16, torch.float64), (torch.bool, torch.int32)])
def test_copy_with_dtype_change(src, dst):
    x = _sample((4, 6), src)
    ref = x.to(dst)
    assert torch.equal(x.to("trn").to(dst).cpu(), ref)        # D2D cast on the device
    assert torch.equal(x.to("trn", dtype=dst).cpu(), ref)     # H2D with cast
    assert torch.equal(x.to("trn").to("cpu", dtype=dst), ref)  # D2H with cast
    out = torch.empty(6, 4, dtype=dst)
    out.t().copy_(x.to("trn"))                                 # D2H into a strided host view
    assert torch.equal(out.t(), ref)


def test_broadcasting_copy():
    row = torch.arange(5, dtype=torch.float32)
    d = torch.empty(3, 5, device="trn")
    d.copy_(row)
    assert torch.equal(d.cpu(), row.expand(3, 5))
    d.copy_(row.to("trn"))
    assert torch.equal(d.cpu(), row.expand(3, 5))


def test_non_blocking_h2d_source_modified_and_freed():
    x = torch.arange(1 << 20, dtype=torch.float32)
    expected = x.clone()
    d = x.to("trn", non_blocking=True)
    x.fill_(-1)
    del x
    assert torch.equal(d.cpu(), expected)


def test_pinned_host_memory_and_data_loader():
    """Note [Pinned memory]: pin_memory() (it raised) and DataLoader(pin_memory=True);
    a non_blocking copy from pinned memory reads it in place, kept alive by the command."""
    x = torch.arange(1 << 16, dtype=torch.float32)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and torch.equal(p, x)
    d = p.to("trn", non_blocking=True)
    del p  # the command holds the block
    assert torch.equal(d.cpu(), x)
    assert not torch.empty(16).is_pinned()
    ds = torch.utils.data.TensorDataset(torch.randn(10, 3), torch.arange(10))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True))
    assert all(a.is_pinned() and b.is_pinned() for a, b in batches)
    got = torch.cat([a.to("trn", non_blocking=True) for a, _ in batches])
    assert torch.equal(got.cpu(), ds.tensors[0])


def test_pending_copies_from_pinned_memory_at_exit():
    """A command holds its pinned source's storage, not the Python-owned tensor: dropping
    that on the worker needed the GIL and aborted the interpreter at exit (review)."""
    r = run_python("""
        import torch, trnscope
        for i in range(8):
            b = torch.full((1 << 22,), 1.0).pin_memory().to("trn", non_blocking=True)
    """)
    assert r.returncode == 0, r.stderr[-2000:]


def test_d2d_across_devices():
    x = _sample((64, 33), torch.float32)
    a = x.to("trn:0")
    b = a.to("trn:1")
    assert b.device == torch.device("trn:1")
    assert torch.equal(b.cpu(), x)
    c = torch.empty(33, 64, device="trn:0")
    c.copy_(b.t())
    assert torch.equal(c.cpu(), x.t())


# ---- Views ----------------------------------------------------------------------------------
def test_views_never_fall_back():
    x = _sample((4, 6, 8), torch.float32)
    d = x.to("trn")
    trnscope.reset_counters()
    views = {
        "view": (d.view(24, 8), x.view(24, 8)),
        "reshape": (d.reshape(4, 48), x.reshape(4, 48)),
        "transpose": (d.transpose(0, 2), x.transpose(0, 2)),
        "permute": (d.permute(2, 0, 1), x.permute(2, 0, 1)),
        "expand": (d[:, :1].expand(4, 5, 8), x[:, :1].expand(4, 5, 8)),
        "squeeze": (d[:1].squeeze(0), x[:1].squeeze(0)),
        "unsqueeze": (d.unsqueeze(1), x.unsqueeze(1)),
        "select": (d.select(1, 2), x.select(1, 2)),
        "slice": (d[1:3, ::2], x[1:3, ::2]),
        "narrow": (d.narrow(2, 1, 4), x.narrow(2, 1, 4)),
        "t": (d[0].t(), x[0].t()),
        "contiguous": (d.contiguous(), x.contiguous()),
        "unfold": (d.unfold(2, 3, 2), x.unfold(2, 3, 2)),
        "flatten": (d.flatten(), x.flatten()),
        "as_strided": (d.as_strided((3, 3), (1, 2), 5), x.as_strided((3, 3), (1, 2), 5)),
    }
    for name, (got, want) in views.items():
        assert got.device.type == "trn", name
        assert got.untyped_storage().data_ptr() == d.untyped_storage().data_ptr(), name
        assert got.shape == want.shape and got.stride() == want.stride(), name
    assert trnscope.fallback_ops() == {}
    for name, (got, want) in views.items():
        assert torch.equal(got.cpu(), want), name
    d.resize_(2, 3)
    assert d.shape == (2, 3)
    e = torch.empty(0, device="trn")
    e.set_(d)
    assert e.data_ptr() == d.data_ptr()
    e.set_()
    assert e.shape == (0,) and e.device == d.device
    e.resize_(4)
    e.fill_(1.5)
    assert torch.equal(e.cpu(), torch.full((4,), 1.5))
    assert d.is_pinned() is False
    assert trnscope.fallback_ops() == {}


def test_resize_grow_keeps_data():
    d = torch.arange(6, dtype=torch.float32).to("trn")
    d.resize_(100)
    assert torch.equal(d[:6].cpu(), torch.arange(6, dtype=torch.float32))


def test_item_waits_for_the_stream():
    d = torch.full((1000, 1000), 2.0).to("trn")
    s = (d * 3).sum()
    assert s.item() == pytest.approx(6.0e6)


# ---- torch.trn API ------------------------------------------------------------------------
def test_device_api():
    assert torch.trn.device_count() == 2
    assert torch.trn.current_device() == 0
    with torch.trn.device(1):
        assert torch.trn.current_device() == 1
        assert torch.empty(1, device="trn").device == torch.device("trn:1")
    assert torch.trn.current_device() == 0
    torch.trn.set_device("trn:1")
    assert torch.trn.current_device() == 1
    torch.trn.set_device(0)


def test_memory_stats_follow_allocations():
    torch.trn.synchronize()
    torch.trn.empty_cache()
    base = torch.trn.memory_allocated(0)
    torch.trn.reset_peak_memory_stats(0)
    t = torch.empty(1 << 20, dtype=torch.float32, device="trn:0")  # 4 MiB
    assert torch.trn.memory_allocated(0) >= base + (4 << 20)
    assert torch.trn.memory_reserved(0) >= torch.trn.memory_allocated(0)
    peak = torch.trn.max_memory_allocated(0)
    assert peak >= base + (4 << 20)
    del t
    assert torch.trn.memory_allocated(0) == base
    assert torch.trn.max_memory_allocated(0) == peak
    torch.trn.reset_peak_memory_stats(0)
    assert torch.trn.max_memory_allocated(0) == base
    assert torch.trn.memory_allocated(1) == torch.trn.memory_allocated("trn:1")


def test_device_index_out_of_range():
    with pytest.raises((ValueError, RuntimeError), match=r"5[\s\S]*2|2[\s\S]*5"):
        torch.empty(2, device="trn:5")
    with pytest.raises((ValueError, RuntimeError), match="5"):
        torch.trn.set_device(5)


def test_visible_cores_env():
    r = run_python("import torch, trnscope; print(torch.trn.device_count())",
                   env={"TRN_VISIBLE_CORES": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"
    r = run_python("import torch, trnscope; torch.trn.device_count()",
                   env={"TRN_VISIBLE_CORES": "zero-one"})
    assert r.returncode != 0
    assert "zero-one" in r.stderr and "TRN_VISIBLE_CORES" in r.stderr


def test_out_of_memory():
    r = run_python("""
        import torch, trnscope
        try:
            torch.empty(1 << 30, dtype=torch.uint8, device='trn')
        except torch.OutOfMemoryError as e:
            print('OOM:', e)
        x = torch.ones(1000, device='trn')
        print('after', float(x.sum().item()) if hasattr(x, 'sum') else 0)
    """, env={"TRN_DEVICE_MEMORY": "64M"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "OOM:" in out, out
    msg = out.split("OOM:")[1].splitlines()[0]
    assert re.search(r"1(\.00)? GiB|1073741824", msg), msg  # the requested size
    assert re.search(r"64(\.00)? MiB free|67108864 bytes free", msg), msg  # the free bytes
    assert "trn:0" in msg, msg  # the core
    assert "after 1000.0" in out


# ---- Streams and events -------------------------------------------------------------------
def test_stream_event_ordering():
    s1 = torch.trn.Stream()
    s2 = torch.trn.Stream()
    assert s1.stream_id != s2.stream_id
    assert s1.device == s2.device == torch.device("trn:0")
    a = torch.randn(256, 256).to("trn")
    with torch.trn.stream(s1):
        assert torch.trn.current_stream().stream_id == s1.stream_id
        b = a
        for _ in range(20):  # a long-ish chain on s1
            b = b * 1.0001 + 0.5
        ev = torch.trn.Event(enable_timing=True)
        ev.record(s1)
    s2.wait_event(ev)
    with torch.trn.stream(s2):
        c = b * 2
    s2.synchronize()
    ref = a.cpu()
    for _ in range(20):
        ref = ref * 1.0001 + 0.5
    torch.testing.assert_close(c.cpu(), ref * 2)
    assert ev.query()
    ev.synchronize()
    assert torch.trn.current_stream().stream_id == 0


def test_event_elapsed_time_and_generic_api():
    start = torch.Event(device="trn", enable_timing=True)
    end = torch.Event(device="trn", enable_timing=True)
    never = torch.Event(device="trn")
    assert never.query()
    x = torch.randn(512, 512).to("trn")
    start.record()
    for _ in range(10):
        x = x + 1
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    s = torch.Stream(device="trn")
    assert s.device.type == "trn"
    with s:
        assert torch.accelerator.current_stream().stream_id == s.stream_id
        y = x * 2
    s.synchronize()
    assert s.query()
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)
    torch.accelerator.synchronize()


def test_two_cores_from_two_threads():
    inputs = [torch.randn(64, 64) for _ in range(2)]
    results, errors = {}, []

    def work(i):
        try:
            torch.trn.set_device(i)
            x = inputs[i].to(f"trn:{i}")
            w = (torch.eye(64) * 0.5 + 0.01).to(f"trn:{i}")
            for _ in range(10):
                x = torch.mm(x, w)
            results[i] = x.cpu()
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    w = torch.eye(64) * 0.5 + 0.01
    for i in range(2):
        ref = inputs[i]
        for _ in range(10):
            ref = ref @ w
        torch.testing.assert_close(results[i], ref, rtol=1e-4, atol=1e-5)


# ---- RNG ------------------------------------------------------------------------------------
def test_manual_seed_reproducible():
    torch.trn.manual_seed(123)
    a = torch.randn(100, device="trn").cpu()
    torch.trn.manual_seed(123)
    b = torch.randn(100, device="trn").cpu()
    c = torch.randn(100, device="trn").cpu()
    assert torch.equal(a, b) and not torch.equal(b, c)
    assert torch.trn.initial_seed() == 123
    torch.manual_seed(7)  # seeds every trn generator too
    u = torch.rand(50, device="trn").cpu()
    assert ((u >= 0) & (u < 1)).all()
    state = torch.trn.get_rng_state()
    r1 = torch.randint(0, 10, (20,), device="trn").cpu()
    torch.trn.set_rng_state(state)
    assert torch.equal(torch.randint(0, 10, (20,), device="trn").cpu(), r1)
    g = torch.Generator(device="trn").manual_seed(5)
    assert torch.equal(torch.randn(8, device="trn", generator=g).cpu(),
                       torch.randn(8, device="trn", generator=torch.Generator(device="trn").manual_seed(5)).cpu())
    assert trnscope.fallback_ops() == {}


def test_randperm_from_the_trn_generator():
    """randperm: a permutation of 0..n-1, reproducible from the seed, any dtype, out=."""
    torch.manual_seed(11)
    a = torch.randperm(50, device="trn").cpu()
    torch.manual_seed(11)
    assert torch.equal(torch.randperm(50, device="trn").cpu(), a)
    assert sorted(a.tolist()) == list(range(50)) and a.dtype == torch.int64
    g = torch.Generator(device="trn").manual_seed(2)
    f = torch.randperm(9, device="trn", dtype=torch.float32, generator=g).cpu()
    assert sorted(f.tolist()) == list(range(9))
    out = torch.empty(0, dtype=torch.int32).to("trn")
    torch.randperm(7, out=out)
    assert sorted(out.cpu().tolist()) == list(range(7)) and out.dtype == torch.int32
    with pytest.raises(RuntimeError, match="negative"):  # as CPU's
        torch.randperm(-1, device="trn")
    assert trnscope.fallback_ops() == {}


# ---- Errors ---------------------------------------------------------------------------------
def test_kernel_failure_surfaces_at_sync():
    w = torch.randn(10, 4).to("trn")
    bad = torch.tensor([1, 50]).to("trn")
    try:
        out = torch.index_select(w, 0, bad)  # asynchronous: queued, fails on the core
    except (IndexError, RuntimeError):
        pytest.skip("index_select checked the index eagerly on the host")
    with pytest.raises(RuntimeError) as info:
        torch.trn.synchronize()
    msg = str(info.value)
    assert "index_select" in msg and "stream" in msg and "50" in msg
    torch.trn.synchronize()  # the failure was reported once; the device works again
    good = torch.index_select(w, 0, torch.tensor([3, 1]).to("trn"))
    assert torch.equal(good.cpu(), w.cpu()[[3, 1]])
    del out


def test_fallback_warns_once_and_counts():
    # special.i0e has no native trn kernel (an op real models never hit).
    x = _sample((3, 5), torch.float32)
    d = x.to("trn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r1 = torch.special.i0e(d)
        r2 = torch.special.i0e(d)
    msgs = [str(w.message) for w in caught if "i0e" in str(w.message)]
    assert len(msgs) == 1 and "running on the CPU" in msgs[0]
    assert r1.device.type == "trn"
    torch.testing.assert_close(r1.cpu(), torch.special.i0e(x))
    torch.testing.assert_close(r2.cpu(), torch.special.i0e(x))
    # Structured ops reach the fallback as their out= overload (aten::special_i0e.out).
    counts = {k: v for k, v in trnscope.fallback_ops().items() if k.startswith("aten::special_i0e")}
    assert list(counts.values()) == [2], trnscope.fallback_ops()


def test_disable_fallback():
    r = run_python("""
        import torch, trnscope
        torch.special.i0e(torch.ones(4, device='trn'))
    """, env={"TRN_DISABLE_FALLBACK": "1"})
    assert r.returncode != 0
    assert "aten::special_i0e" in r.stderr and "TRN_DISABLE_FALLBACK" in r.stderr


def test_float64_warns_once_and_counts():
    r = run_python("""
        import warnings, torch, trnscope
        x = torch.ones(4, dtype=torch.float64).to('trn')
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            y = x + x
            z = y * x
            y = x + x
        print('warnings', sum('float64 as float32' in str(i.message) for i in w))
        print('dtype', z.dtype, z.cpu().tolist())
        print('counts', sorted(trnscope.float64_downcasts().items()))
    """)
    assert r.returncode == 0, r.stderr
    assert "warnings 1" in r.stdout
    assert "dtype torch.float64 [2.0, 2.0, 2.0, 2.0]" in r.stdout
    assert "('aten::add', 2)" in r.stdout.replace("aten::add.Tensor", "aten::add")


# ---- torch.cuda semantics: synchronize(None), fork, Event flags ----------------------------
def test_synchronize_none_is_the_current_device():
    if torch.trn.device_count() < 2:
        pytest.skip("needs two trn cores")
    # A failure queued on core 1 is raised by a synchronize of core 1, not by
    # synchronize() while core 0 is current (torch.cuda.synchronize(None)).
    w = torch.randn(10, 4, device="trn:1")
    bad = torch.tensor([1, 50], device="trn:1")
    try:
        torch.index_select(w, 0, bad)
    except (IndexError, RuntimeError):
        pytest.skip("index_select checked the index eagerly on the host")
    assert torch.trn.current_device() == 0
    torch.trn.synchronize()
    torch.trn.synchronize(None)
    with pytest.raises(RuntimeError, match="index_select"):
        torch.trn.synchronize(1)
    with torch.trn.device(1):
        torch.index_select(w, 0, bad)
        with pytest.raises(RuntimeError, match="index_select"):
            torch.trn.synchronize()  # now core 1 is current


def test_fork_after_init_is_a_bad_fork_with_a_clear_error():
    r = run_python(
        """
        import os, torch, trnscope
        x = torch.ones(4, device="trn") + 1  # the runtime and its core threads exist
        assert not torch.trn._is_in_bad_fork()
        pid = os.fork()
        if pid == 0:
            code = 0
            if not torch.trn._is_in_bad_fork():
                code = 3
            try:
                torch.ones(2, device="trn")
                code = 4
            except RuntimeError as e:
                if "forked" not in str(e) or "spawn" not in str(e):
                    code = 5
            del x  # freeing inherited memory in the child is safe
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent", (x + 1).cpu().tolist(), torch.trn._is_in_bad_fork())
        """
    )
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout and "parent [3.0, 3.0, 3.0, 3.0] False" in r.stdout, r.stdout


def test_fork_before_init_gets_a_fresh_runtime():
    r = run_python(
        """
        import os, torch, trnscope
        pid = os.fork()
        if pid == 0:
            ok = (torch.arange(4, device="trn") * 2).cpu().tolist() == [0, 2, 4, 6]
            os._exit(0 if ok and not torch.trn._is_in_bad_fork() else 6)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        """
    )
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout


def test_event_flags():
    torch.trn.Event(blocking=True).synchronize()  # waits sleep either way: honoured
    ev = torch.trn.Event(blocking=False)
    ev.record()
    ev.synchronize()
    assert ev.query()
    with pytest.raises(ValueError, match="interprocess=True"):
        torch.trn.Event(interprocess=True)


def test_simd_target_can_be_pinned_for_benchmarks():
    ops = torch.ops.trnscope
    with pytest.raises(RuntimeError, match="'NEON' is not a SIMD target this binary compiled"):
        ops._set_simd_target("NEON")
    x = torch.randn(1000, 37)
    want = torch.nn.functional.silu(x * 2 + 1)
    try:
        assert ops._set_simd_target("SCALAR") == "SCALAR"
        got = torch.nn.functional.silu(x.to("trn") * 2 + 1).cpu()
    finally:
        best = ops._set_simd_target("best")
    assert best != "SCALAR"
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
