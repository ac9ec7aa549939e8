"""Shared pytest setup: registers the trn device and offers a subprocess helper."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import trnscope  # noqa: F401  (registers torch.trn)


@pytest.fixture(autouse=True)
def _clean_device_state():
    """Each test starts on trn:0 with cleared counters and leaves no failed kernel behind."""
    torch.trn.set_device(0)
    trnscope.reset_counters()
    trnscope.reset_compile_stats()
    yield
    try:
        torch.trn.synchronize()
    except RuntimeError:
        pass


@pytest.fixture
def no_fallback(request):
    """Fails a test that sent an op through the CPU fallback; modules opt in with
    `pytestmark = pytest.mark.usefixtures("no_fallback")`. Tests that use the
    fallback on purpose, or check it themselves, are marked uses_fallback."""
    before = trnscope.fallback_ops()
    yield
    torch.trn.synchronize()
    if request.node.get_closest_marker("uses_fallback"):
        return
    after = trnscope.fallback_ops()
    new = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    assert not new, f"ops went through the CPU fallback: {new}"


def launch_counts(fn) -> dict[str, int]:
    """{kernel name: launches} of one synchronized call of fn."""
    torch.trn.synchronize()
    torch.ops.trnscope._count_launches(True)
    try:
        fn()
        torch.trn.synchronize()
        counts = torch.ops.trnscope._launch_counts()
    finally:
        torch.ops.trnscope._count_launches(False)
    return {k: int(v) for k, v in (kv.split("=") for kv in counts.split(";") if kv)}


def run_python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (for env variables read once per process)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def profiled_kernel(fn, name: str):
    """The profiler's entry for kernel `name` over one call of fn (after a warm-up
    call); fails unless exactly one such entry exists."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.trn.synchronize()
    with profile(activities=[ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.trn.synchronize()
    found = [e for e in prof.key_averages() if e.key == name]
    assert len(found) == 1, [e.key for e in prof.key_averages()]
    return found[0]
