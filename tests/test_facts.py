"""Python reads limits, defaults and parsers from trnscope._C; it copies none of them.

Each check makes Python and C++ agree by construction: the value or the error
message Python shows is the one the C++ runtime or tracer produced.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import run_python

from trnscope import _C
from trnscope.profiling import ProfileConfig, ProfileMode


def test_limits_and_defaults_are_the_runtimes():
    assert _C.max_streams == 64  # core/trace/trace.h kMaxStreams
    assert _C.max_devices == 64  # core/runtime/runtime.h kMaxVisibleCores
    assert _C.default_visible_cores == "0-1"
    assert _C.profile_mode_bits == {"device": 1, "runtime": 2, "memory": 4}


def test_profile_mode_bits_reach_the_plugin_as_the_tracer_reads_them():
    for mode in ProfileMode:
        cfg = ProfileConfig(modes=[mode])
        parsed = _C._profiler_parse_config(cfg.custom_profiler_config())
        assert parsed["modes"] == _C.profile_mode_bits[mode.value]


def test_stream_limit_is_the_tracers():
    assert ProfileConfig(streams=[_C.max_streams - 1]).streams == (_C.max_streams - 1,)
    with pytest.raises(ValueError, match=rf"0\.\.{_C.max_streams - 1}"):
        ProfileConfig(streams=[_C.max_streams])


@pytest.mark.parametrize("spec", ["zero", "3-1", "0,0", "1,", ""])
def test_an_invalid_index_spec_is_rejected_by_the_cpp_parser(spec):
    with pytest.raises(ValueError) as cpp:
        _C.parse_index_list(spec, "ProfileConfig: streams", _C.max_devices)
    with pytest.raises(ValueError) as py:
        ProfileConfig(streams=spec)
    assert str(py.value) == str(cpp.value)
    assert f"ProfileConfig: streams='{spec}' is invalid" in str(py.value)


def test_index_specs_parse_as_trn_visible_cores_does():
    for spec in ["0-1", "1,0", " 0 - 1 "]:
        expected = tuple(sorted(_C.parse_visible_cores(spec)))
        assert ProfileConfig(cores=spec).cores == expected


def test_an_invalid_trn_visible_cores_fails_with_the_cpp_message():
    with pytest.raises(ValueError) as cpp:
        _C.parse_visible_cores("0-x")
    r = run_python("import torch, trnscope; torch.trn.device_count()",
                   env={"TRN_VISIBLE_CORES": "0-x"})
    assert r.returncode != 0
    assert str(cpp.value) in r.stderr


@pytest.mark.parametrize("env", [None, "1"])
def test_meta_json_reports_the_spec_the_runtime_used(env):
    code = (
        "import json, torch, trnscope; from trnscope import _C; "
        "from trnscope.profiling import _device_info; "
        "print(json.dumps([_device_info(), _C.default_visible_cores]))"
    )
    full = {k: v for k, v in os.environ.items() if k != "TRN_VISIBLE_CORES"}
    if env is not None:
        full["TRN_VISIBLE_CORES"] = env
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    info, default = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["visible_cores_spec"] == (env if env is not None else default)
    assert info["count"] == len(info["visible_cores"])


def test_a_core_invalid_argument_is_a_value_error(tmp_path):
    # WriteChromeTrace throws trn::InvalidArgument for metadata that is not an object.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(2) + 1
    path = str(tmp_path / "trace.json")
    with pytest.raises(ValueError, match="metadata_json must be a JSON object"):
        _C._export_chrome_trace(prof.profiler.kineto_results, path, "[1]", with_device=False)
    assert not os.path.exists(path)
