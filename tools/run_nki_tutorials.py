"""Runs the NKI docs' own tutorial kernels on trnscope.nki with only their import lines changed.

The kernels are read from a checkout of aws-neuron/aws-neuron-sdk at run time (they are
never copied into this repository): the OLD dialect (NKI 0.1) from tag v2.26.0's
general/nki/examples, the NEW one (NKI 0.2+) from HEAD's nki/examples. Each file's lines
that import `neuronxcc.nki` / `nki` are rewritten to import `trnscope.nki`, nothing else
changes; its kernels run on numpy inputs (our own drivers below, at small shapes that
satisfy the kernels' asserts), are checked against a numpy reference, and profiled.

    python tools/run_nki_tutorials.py --sdk /path/to/aws-neuron-sdk [--target trn2] [-k rmsnorm]

--sdk is a git directory (bare or with a work tree). Exit status 1 if any kernel fails.
The tests (tests/test_nki_*.py) hold our own kernels written with the same API calls, so
CI needs no SDK checkout; this tool checks the claim on the published files themselves.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile
import traceback

import numpy as np

OLD, NEW = ("v2.26.0", "general/nki/examples"), ("HEAD", "nki/examples")

# import neuronxcc.nki[.x] [as y] / from neuronxcc[.nki[.x]] import y / import nki[.x] [as y] / from nki[.x] import y
_IMPORT = [
    (re.compile(r"^(\s*)import neuronxcc\.nki(\.\w+)* as (\w+)\s*$"), r"\1import trnscope.nki\2 as \3"),
    (re.compile(r"^(\s*)from neuronxcc import nki\s*$"), r"\1from trnscope import nki"),
    (re.compile(r"^(\s*)from neuronxcc(\.nki(?:\.\w+)*)? import (.+)$"), r"\1from trnscope\2 import \3"),
    (re.compile(r"^(\s*)import nki(\.\w+)* as (\w+)\s*$"), r"\1import trnscope.nki\2 as \3"),
    (re.compile(r"^(\s*)import nki\s*$"), r"\1import trnscope.nki as nki"),
    (re.compile(r"^(\s*)from nki((?:\.\w+)*) import (.+)$"), r"\1from trnscope.nki\2 import \3"),
]


def rewrite_imports(source: str) -> tuple[str, int]:
    """The source with its NKI import lines pointed at trnscope.nki, and how many changed."""
    out, changed = [], 0
    for line in source.splitlines():
        for pattern, repl in _IMPORT:
            if pattern.match(line):
                line, changed = pattern.sub(repl, line), changed + 1
                break
        out.append(line)
    return "\n".join(out) + "\n", changed


def _git(sdk: str, *args) -> str:
    git_dir = os.path.join(sdk, ".git") if os.path.isdir(os.path.join(sdk, ".git")) else sdk
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True,
                          text=True).stdout


def load(sdk: str, dialect, path: str, workdir: str):
    """Imports one tutorial file (imports rewritten) as a module; also returns the count."""
    rev, root = dialect
    source, changed = rewrite_imports(_git(sdk, "show", f"{rev}:{root}/{path}"))
    name = f"tutorial_{rev.replace('.', '_')}_{path.replace('/', '_')[:-3]}"
    file = os.path.join(workdir, name + ".py")  # a real file, so source lines resolve
    with open(file, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, changed


# ---- references (numpy) and drivers: (file, kernel, inputs, reference, tolerance) ----

RNG = np.random.default_rng(5)


def _rand(*shape, dtype=np.float32):
    return RNG.random(shape, dtype=np.float32).astype(dtype)


def _rmsnorm(a, g):
    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g


def _layernorm(x, eps, g, b):
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps) * g + b


def _transpose2d(a, shape2d):
    x, y = shape2d
    return a.reshape(a.shape[0], x, y).transpose(0, 2, 1).reshape(a.shape[0], x * y)


def _avgpool(a, p):
    c, h, w = a.shape
    return a.astype(np.float32).reshape(c, h // p, p, w // p, p).mean(axis=(2, 4)).astype(a.dtype)


def _sd_attention(q, k, v):
    s = (q * 0.125) @ k.T
    e = np.exp(s - s.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)) @ v


def _attn_t(q, k, v):  # attention_kernels.py: q, k, v are [d_head, seqlen]
    s = q.T @ k
    e = np.exp(s - s.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)) @ v.T


def _mm(a, b):
    return a.T @ b


def cases():
    mm = "matrix_multiplication/matrix_multiplication_nki_kernels.py"
    f32 = dict(rtol=1e-3, atol=1e-3)
    ln_in = lambda: (_rand(300, 1000), 1e-5, _rand(1000), _rand(1000))  # noqa: E731
    out = []
    for dialect in (OLD, NEW):
        d = "old" if dialect is OLD else "new"
        out += [
            (d, dialect, mm, "nki_matmul_basic_", lambda: (_rand(128, 64), _rand(128, 512)), _mm, f32),
            (d, dialect, mm, "nki_matmul_tiled_", lambda: (_rand(256, 256), _rand(256, 1024)), _mm, f32),
            (d, dialect, mm, "nki_matmul_hoist_load_", lambda: (_rand(256, 256), _rand(256, 1024)), _mm,
             f32),
            (d, dialect, mm, "nki_matmul_block_free_dimension_",
             lambda: (_rand(256, 512), _rand(256, 2048)), _mm, f32),
            (d, dialect, mm, "nki_matmul_fully_optimized_",
             lambda: (_rand(1024, 2048), _rand(1024, 1024)), _mm, f32),
            (d, dialect, "transpose2d/transpose2d_nki_kernels.py", "tensor_transpose2D_kernel_",
             lambda: (np.arange(60, dtype=np.int8).reshape(5, 12), (3, 4)), _transpose2d,
             dict(rtol=0, atol=0)),
            (d, dialect, "average_pool2d/average_pool2d_nki_kernels.py", "tensor_avgpool_kernel",
             lambda: (np.arange(72, dtype=np.float16).reshape(2, 6, 6), 2), _avgpool,
             dict(rtol=0, atol=0)),
        ]
    out += [
        ("old", OLD, "rmsnorm/rmsnorm_nki_kernels.py", "nki_rmsnorm_kernel",
         lambda: (_rand(250, 512), _rand(512)), _rmsnorm, dict(rtol=1e-3, atol=1e-5)),
        ("old", OLD, "layernorm/layernorm_nki_kernel.py", "nki_layernorm_kernel_v1", ln_in, _layernorm,
         dict(rtol=1e-3, atol=1e-4)),
        ("old", OLD, "layernorm/layernorm_nki_kernel.py", "nki_layernorm_kernel_v2", ln_in, _layernorm,
         dict(rtol=1e-3, atol=1e-4)),
        ("old", OLD, "sd_attention/sd_attention_nki_kernels.py", "fused_self_attn_for_SD_small_head_size",
         lambda: (_rand(512, 64), _rand(512, 64), _rand(512, 64)), _sd_attention,
         dict(rtol=2e-2, atol=2e-2)),  # mixed_precision: bf16 operands on the Tensor engine
        ("old", OLD, "attention/attention_kernels.py", "attn_fwd_v1",
         lambda: (_rand(128, 128), _rand(128, 128), _rand(128, 128)), _attn_t, f32),
        ("old", OLD, "attention/attention_kernels.py", "attn_fwd_v2",
         lambda: (_rand(128, 128), _rand(128, 128), _rand(128, 128)), _attn_t, f32),
        ("new", NEW, "tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add",
         lambda: (_rand(256, 1024), _rand(256, 1024)), np.add, dict(rtol=0, atol=0)),
    ]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdk", required=True, help="a git checkout of aws-neuron/aws-neuron-sdk")
    parser.add_argument("--target", default="trn2", choices=["trn1", "trn2"])
    parser.add_argument("-k", default="", help="run only kernels whose name contains this")
    parser.add_argument("-v", action="store_true", help="print tracebacks of failures")
    args = parser.parse_args(argv)
    import trnscope.nki as nki

    modules, failed = {}, 0
    print(f"{'dialect':7} {'kernel':40} {'imports':>7}  {'result':34} {'modelled':>12}")
    with tempfile.TemporaryDirectory() as workdir:
        for d, dialect, path, kernel, inputs, ref, tol in cases():
            if args.k not in kernel:
                continue
            key = (dialect, path)
            try:
                if key not in modules:
                    modules[key] = load(args.sdk, dialect, path, workdir)
                module, changed = modules[key]
                fn = getattr(module, kernel)
                xs = inputs()
                got = np.asarray(fn(*xs), dtype=np.float64)
                want = np.asarray(ref(*xs), dtype=np.float64)
                if got.shape != want.shape:
                    raise AssertionError(f"shape {got.shape}, expected {want.shape}")
                err = float(np.max(np.abs(got - want))) if got.size else 0.0
                ok = np.allclose(got, want, **tol)
                p = nki.profile(fn, *xs, target=args.target)
                result = f"{'ok' if ok else 'WRONG'} (max err {err:.2g})"
                timing = f"{p.total_ns / 1e3:9.1f} us"
                failed += not ok
            except Exception as e:  # report every kernel, whatever fails
                changed = modules.get(key, (None, "?"))[1]
                result, timing, failed = f"{type(e).__name__}: {e}"[:200], "", failed + 1
                if args.v:
                    traceback.print_exc()
            print(f"{d:7} {kernel:40} {changed!s:>7}  {result:34} {timing:>12}")
    print(f"{failed} failed" if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
