"""The package outside the checkout: a light console command and the wheel round trip.

The round trip builds a wheel with pip (scikit-build-core runs CMake against the
installed torch), installs it into a fresh venv that sees the system torch, and
runs the CLI, `import trnscope` and a profile from an empty folder, so nothing
resolves from the checkout or its editable install.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "core", "analysis", "testdata")


def clean_env(**extra):
    """The environment without anything that points Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def test_cli_import_leaves_torch_unloaded():
    code = "import sys, trnscope.cli; assert 'torch' not in sys.modules, sorted(sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_import_trnscope_first_registers_without_autoload():
    # The import hook of Note [Lazy package init], with torch's autoload off.
    code = textwrap.dedent(
        """
        import sys, trnscope
        assert "torch" not in sys.modules
        import torch
        x = torch.arange(4.0, device="trn") * 2
        assert x.device.type == "trn" and x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0], x
        assert torch.trn.device_count() >= 1
        """
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module", params=["wheel", "pip install ."])
def venv(request, tmp_path_factory):
    """A fresh venv (system torch visible) with trnscope installed from the checkout
    either as a wheel pip built or by `pip install .` (not editable)."""
    tmp = tmp_path_factory.mktemp("package")
    env_dir = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", env_dir], check=True
    )
    py = env_dir / "bin" / "python"
    pip = [py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation"]
    if request.param == "wheel":
        dist = tmp / "dist"
        res = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", dist, ROOT],
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
        wheels = list(dist.glob("trnscope-*.whl"))
        assert len(wheels) == 1, wheels
        target = wheels[0]
    else:
        target = ROOT
    res = subprocess.run([*pip, target], capture_output=True, text=True, env=clean_env())
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    empty = tmp / "empty"
    empty.mkdir()
    return env_dir, empty


def run_in(venv, args, **kwargs):
    env_dir, empty = venv
    return subprocess.run(
        args, cwd=empty, capture_output=True, text=True, env=clean_env(), timeout=600, **kwargs
    )


@pytest.mark.slow
def test_wheel_resolves_from_the_venv(venv):
    env_dir, _ = venv
    res = run_in(venv, [env_dir / "bin" / "python", "-c", "import trnscope; print(trnscope.__file__)"])
    assert res.returncode == 0, res.stderr
    where = res.stdout.strip()
    assert where.startswith(str(env_dir)), f"trnscope resolved to {where}, not the venv {env_dir}"
    assert not where.startswith(ROOT), where


@pytest.mark.slow
def test_wheel_cli(venv):
    env_dir, empty = venv
    exe = env_dir / "bin" / "trnscope"
    res = run_in(venv, [exe, "--version"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "trnscope 0.1.0", res.stdout
    trace = shutil.copy(os.path.join(TESTDATA, "cuda_style.json"), empty / "trace.json")
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    kernels = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    res = run_in(venv, [exe, "summary", "trace.json"])
    assert res.returncode == 0, res.stderr
    assert f"ops {ops} |" in res.stdout and f"kernels {kernels} |" in res.stdout, res.stdout


@pytest.mark.slow
def test_wheel_report(venv):
    env_dir, empty = venv
    shutil.copy(os.path.join(TESTDATA, "cuda_style.json"), empty / "report_trace.json")
    res = run_in(venv, [env_dir / "bin" / "trnscope", "report", "report_trace.json", "-o", "r.html"])
    assert res.returncode == 0, res.stderr
    html = (empty / "r.html").read_text()
    assert "<html" in html.lower() and "reduce_kernel<mean>" in html, html[:300]


@pytest.mark.slow
def test_wheel_profile(venv):
    env_dir, empty = venv
    code = textwrap.dedent(
        """
        import json, os, torch, trnscope
        from torch.profiler import ProfilerActivity, profile
        from trnscope.profiling import ProfileConfig, Profiler
        cfg = ProfileConfig(output_dir="prof")
        profiler = Profiler(cfg)
        folders = []
        x = torch.randn(64, 64, device="trn")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                     experimental_config=cfg.experimental_config(),
                     on_trace_ready=lambda p: folders.append(profiler.export_trace(p))):
            y = (x @ x).relu()
            torch.trn.synchronize()
        ref = (x.cpu() @ x.cpu()).relu()
        assert torch.allclose(y.cpu(), ref, atol=1e-4), "trn mm+relu differs from CPU"
        print(json.dumps({"folder": os.path.abspath(folders[0]), "file": trnscope.__file__}))
        """
    )
    res = run_in(venv, [env_dir / "bin" / "python", "-c", code])
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(str(env_dir)), out
    folder = out["folder"]
    assert folder.startswith(str(empty)), folder
    assert sorted(os.listdir(folder)) == ["meta.json", "summary.txt", "trace.json"]
    with open(os.path.join(folder, "trace.json")) as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    assert {"matmul_f32", "relu_f32"} <= names, names
    with open(os.path.join(folder, "summary.txt")) as f:
        assert "aten::mm" in f.read()
