"""One name per thing: torch.profiler, trace.json and summary.txt name a device event alike.

The workload runs eager kernels, an H2D and a D2H copy, an event record and
synchronize, a stream and a device synchronize. torch.profiler's names come from
the Kineto activities PyTorch built; trace.json's from the C++ exporter, read
here with json; the expected names are spelled out (Note [One name per thing]).
"""

import json
import os

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from trnscope.profiling import ProfileConfig, Profiler

COPIES = {"Memcpy HtoD", "Memcpy DtoH"}
KERNELS = {"mul_f32", "add_f32", "relu_f32"}
RUNTIME_CALLS = {
    "trnLaunchKernel",
    "trnMemcpyAsync",
    "trnEventRecord",
    "trnEventSynchronize",
    "trnStreamSynchronize",
    "trnDeviceSynchronize",
}


def workload():
    x = torch.randn(64, 64).to("trn")
    y = (x * 2 + 1).relu()
    event = torch.trn.Event()
    event.record()
    event.synchronize()
    torch.trn.current_stream().synchronize()
    y.cpu()
    torch.trn.synchronize()


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    cfg = ProfileConfig(output_dir=str(tmp_path_factory.mktemp("names")))
    profiler = Profiler(cfg)
    folders = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        experimental_config=cfg.experimental_config(),
        on_trace_ready=lambda p: folders.append(profiler.export_trace(p)),
    ) as prof:
        workload()
    assert len(folders) == 1
    with open(os.path.join(folders[0], "trace.json")) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    return prof, events, folders[0]


def names(events, *cats):
    return {e["name"] for e in events if e.get("cat") in cats}


def test_device_event_names_agree(profiled):
    prof, events, _ = profiled
    in_torch = {e.name for e in prof.events() if e.device_type == DeviceType.PrivateUse1}
    in_trace = names(events, "kernel", "gpu_memcpy")
    assert in_torch == in_trace
    assert COPIES | KERNELS <= in_trace
    assert names(events, "gpu_memcpy") == COPIES


def test_runtime_call_names_agree(profiled):
    prof, events, _ = profiled
    # torch.profiler lists runtime calls among the CPU events; trace.json keeps the ops
    # (cpu_op) apart from the runtime calls (trn_runtime).
    cpu = {e.name for e in prof.events() if e.device_type == DeviceType.CPU}
    assert cpu - names(events, "cpu_op") == names(events, "trn_runtime")
    assert names(events, "trn_runtime") == RUNTIME_CALLS


def test_the_analyzer_uses_the_same_names(profiled):
    _, _, folder = profiled
    with open(os.path.join(folder, "summary.txt")) as f:
        summary = f.read()
    for name in COPIES | KERNELS | {"trnLaunchKernel", "trnMemcpyAsync"}:
        assert name in summary
