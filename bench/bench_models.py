"""Real models on trn vs CPU PyTorch (issue 9). Every ratio is against a peer
measured in this run, on the same weights and inputs.

  python bench/bench_models.py [--models llama,gpt2,...] [--repeat N] [--no-inductor]
                               [--markdown]
  python bench/bench_models.py --host [--models llama,gpt2,qwen2] [--rounds N]
  python bench/bench_models.py --kernels [--models ...]
  python bench/bench_models.py --dtype bfloat16 [--models ...]

Per model (trnscope.studies.zoo, size "bench": e.g. Llama with 2 layers,
dim 256, seq 64, batch 2):
  eager       trn eager wall / CPU PyTorch eager wall, torch.set_num_threads(1)
              (one trn core is one host thread)                    target <= 1.0x
  compiled    torch.compile(backend="trn") wall / trn eager wall   target <= 0.8x (decoders)
  inductor    compiled trn wall / torch.compile (inductor) on CPU, 1 thread (report)
  err         max |trn - CPU| of the compared output, eager and compiled
  generate    greedy tokens/s (KV cache): trn eager / CPU eager, and trn with the
              forward compiled and cache_implementation="static" / CPU eager
  decode      per-token time of one decode step inside generate() (median over the
              steps after prefill): compiled-static / trn eager, the median of
              --rounds pairs of calls, eager and compiled-static alternating
              (Note [Decode-step pairs]); the range of the pairs' ratios too
                                                                     target <= 0.8x
Wall times are medians over --rounds interleaved rounds of --repeat synchronized calls
(CPU, trn eager, trn compiled, inductor in turn); a ratio is the median over rounds of the
ratio within each round (Note [Per-round ratios]); tokens/s the best of 3 generate() calls.

--host splits the host time of one compiled forward call (Note [Host breakdown]).
--kernels lists device time per kernel kind, eager and compiled side by side, the eager
trn ops slower than CPU PyTorch's (Note [Kernel kinds]) and the forward's GEMM floor
(Note [GEMM floor]).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import types
import warnings

import torch

import trnscope  # registers the trn device
import trnscope.profiling
from benchlib import cpu_model
from trnscope.studies import zoo


# Note [Per-round ratios]: this host's speed flips between two modes (up to
# 2.5x apart) for seconds at a time. Per-side medians over a whole run then
# compare one side measured mostly in one mode with another measured mostly in
# the other (wav2vec2's eager-vs-CPU read 0.76x to 1.52x between runs). A
# round runs every side back to back, so the ratio of two sides' medians
# within a round compares like with like; the median over rounds drops the
# rounds a flip cut through.
def interleaved_medians(fns: dict, repeat: int, rounds: int) -> dict:
    """{name: median wall seconds}, and {"rounds": {name: [each round's median]}}:
    the callables (each synchronizing itself) run in turn, `rounds` times `repeat`
    calls each, so drift on a shared host hits all alike (Note [Per-round ratios])."""
    for fn in fns.values():  # warm-up (compiles, packs weights)
        fn()
        fn()
    times: dict = {k: [] for k in fns}
    per_round: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            mine = []
            for _ in range(repeat):
                start = time.perf_counter()
                fn()
                mine.append(time.perf_counter() - start)
            times[k] += mine
            per_round[k].append(statistics.median(mine))
    res = {k: statistics.median(v) for k, v in times.items()}
    res["rounds"] = per_round
    return res


def ratio(r: dict, a: str, b: str) -> float:
    """Median over rounds of a's time / b's time (Note [Per-round ratios])."""
    return statistics.median(x / y for x, y in zip(r["rounds"][a], r["rounds"][b]))


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().float().cpu() - b.detach().float().cpu()).abs().max().item()


def build(spec, dtype: torch.dtype):
    """The bench-size model and inputs, floating weights and inputs in `dtype` (both
    sides run the same dtype: --dtype bfloat16 compares trn with CPU's bfloat16 path)."""
    model, inputs = spec.build("bench")
    if dtype != torch.float32:
        model = model.to(dtype)
        inputs = {k: v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v
                  for k, v in inputs.items()}
    return model, inputs


def bench_forward(name: str, repeat: int, rounds: int, inductor: bool,
                  dtype: torch.dtype = torch.float32) -> dict:
    spec = zoo.get(name)
    cpu_model_, inputs = build(spec, dtype)
    trn_model, _ = build(spec, dtype)
    trn_model.to("trn")
    tin = zoo.to_device(inputs, "trn")
    res: dict = {"model": name}

    def synced(f, x):
        def run():
            f(**x)
            torch.trn.synchronize()
        return run

    with torch.no_grad():
        want = zoo.output_of(spec, cpu_model_(**inputs))
        fns = {"cpu": lambda: cpu_model_(**inputs), "eager": synced(trn_model, tin)}
        res["eager_err"] = max_err(zoo.output_of(spec, trn_model(**tin)), want)
        torch._dynamo.reset()
        compiled = torch.compile(trn_model, backend="trn")
        res["compiled_err"] = max_err(zoo.output_of(spec, compiled(**tin)), want)
        fns["compiled"] = synced(compiled, tin)
        if inductor:
            try:
                ind = torch.compile(cpu_model_, backend="inductor")
                ind(**inputs)
                fns["inductor"] = lambda: ind(**inputs)
            except Exception as e:  # noqa: BLE001 - a report column, never fatal
                res["inductor_error"] = f"{type(e).__name__}: {e}"[:120]
        res.update(interleaved_medians(fns, repeat, rounds))
    torch._dynamo.reset()
    return res


class TokenClock:
    """A generate() streamer that timestamps each token it is handed: the prompt,
    then each new token once it is on the host (put() gets `tokens.cpu()`)."""

    def __init__(self):
        self.times: list[float] = []

    def put(self, value) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass

    def decode_step(self) -> float:
        """Median seconds between consecutive new tokens (prefill excluded)."""
        steps = [b - a for a, b in zip(self.times[1:], self.times[2:])]
        return statistics.median(steps)


def bench_generate(name: str, new_tokens: int, rounds: int,
                   dtype: torch.dtype = torch.float32) -> dict:
    spec = zoo.get(name)
    model, inputs = build(spec, dtype)
    ids = inputs["input_ids"][:, :16].contiguous()
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    res: dict = {}

    def tokens_per_s(gen, x) -> tuple[float, torch.Tensor]:
        gen(x, **kw)  # warm-up (and compiles)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            out = gen(x, **kw)
            if out.device.type == "trn":
                torch.trn.synchronize()
            best = min(best, time.perf_counter() - start)
        return ids.shape[0] * new_tokens / best, out.cpu()

    def decode_step(gen, x) -> float:
        clock = TokenClock()
        gen(x, streamer=clock, **kw)
        return clock.decode_step()

    with torch.no_grad():
        res["cpu_tps"], want = tokens_per_s(model.generate, ids)
        model.to("trn")
        tids = ids.to("trn")
        res["eager_tps"], got = tokens_per_s(model.generate, tids)
        res["eager_same"] = torch.equal(got, want)
        torch._dynamo.reset()
        eager_forward = model.forward
        compiled_forward = torch.compile(eager_forward, backend="trn")

        def static(x, **k):
            model.forward = compiled_forward
            try:
                return model.generate(x, cache_implementation="static", **k)
            finally:
                model.forward = eager_forward

        res["static_tps"], got = tokens_per_s(static, tids)
        res["static_same"] = torch.equal(got, want)
        # Note [Decode-step pairs]: a decode step is ~0.5-2 ms of host-bound work,
        # and on this shared host whole generate() calls run 1.5x slower than
        # their neighbours (other agents' bursts). Eager and compiled-static
        # calls alternate, one pair per round, and the ratio is the median of
        # the per-pair ratios: measuring one mode's calls after the other's
        # compared different machine states (GPT-2 once read 1.30x that way).
        pairs = [(decode_step(model.generate, tids), decode_step(static, tids))
                 for _ in range(rounds)]
        res["eager_step"] = statistics.median(e for e, _ in pairs)
        res["static_step"] = statistics.median(s for _, s in pairs)
        ratios = sorted(s / e for e, s in pairs)
        res["step_ratio"] = statistics.median(ratios)
        res["step_ratio_range"] = (ratios[0], ratios[-1])
    torch._dynamo.reset()
    return res


# Note [Host breakdown]
# Where the host time of one compiled call goes, measured by calling each layer
# of the compiled call directly: each a median over interleaved rounds, each
# sample taken right after a whole synchronized call, as a loop over forwards
# finds the host (Python's objects out of the caches the forward's GEMMs
# streamed through: the guards check 3-8x slower than when repeated):
#   full            compiled(**x): OptimizedModule -> Dynamo's frame entry -> guards
#                   -> the frame's rewritten bytecode -> the graph callable
#   c.forward       without OptimizedModule.__call__ and its nn.Module wrapper
#   guards          the frame's guard tree checked on the frame's locals
#   bytecode        Dynamo's rewritten code of the compiled frame, called as a plain
#                   function: transformers' wrapper around the graph (the output
#                   objects and the KV cache are rebuilt in Python) + the graph callable
#   graph fn        Dynamo's graph callable: AOTAutograd's runtime wrappers + backend
#   backend         trnscope's _GraphRunner: its Python + _C run
#   _C run          the program's launches (RunProgram)
# and when the first kernel was launched (trnscope's _program_first_launch_ns)
# after a full call, and a backend call, began: the device idles until then.
# Differences of medians are estimates; a layer is timed the same way eager is.
def _compiled_frame(model):
    """(code, cache entry, the function owning the code) of the frame Dynamo compiled."""
    import torch._dynamo.eval_frame as ef

    fn = type(model).forward
    while fn is not None:
        entries = ef._debug_get_cache_entry_list(fn.__code__)
        if entries:
            return fn.__code__, entries[0], fn
        fn = getattr(fn, "__wrapped__", None)
    raise RuntimeError(f"no compiled frame found under {type(model).__name__}.forward")


def _frame_locals(code, call) -> dict:
    """The locals of `code`'s first frame when `call()` runs (what its guards read)."""
    got: dict = {}

    def hook(frame, event, arg):
        if event == "call" and frame.f_code is code and not got:
            got.update(frame.f_locals)

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return got


def host_breakdown(name: str, rounds: int, calls: int = 20) -> dict:
    from trnscope import _C
    from trnscope.compile import backend

    spec = zoo.get(name)
    model, inputs = spec.build("bench")
    model.to("trn")
    x = zoo.to_device(inputs, "trn")
    ns = time.perf_counter_ns
    sync = torch.trn.synchronize
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="trn")
        for _ in range(3):
            compiled(**x)
        sync()
        code, entry, owner = _compiled_frame(model)
        guard_locals = _frame_locals(code, lambda: model(**x))
        rewritten = types.FunctionType(
            entry.code, owner.__globals__, code.co_name, owner.__defaults__, owner.__closure__
        )
        # The graph callable's arguments, and the backend's, from one call.
        g = owner.__globals__
        graph_fns = [k for k in g if k.startswith("__compiled_fn")]
        if len(graph_fns) != 1:
            raise RuntimeError(f"{name}: expected one compiled graph, found {graph_fns}")
        graph_fn = g[graph_fns[0]]
        seen: dict = {}

        def grab(*a):
            seen["graph"] = a
            return graph_fn(*a)

        runner_call = backend._GraphRunner.__call__

        def grab_runner(self, a):
            seen["runner"] = (self, list(a))
            return runner_call(self, a)

        g[graph_fns[0]], backend._GraphRunner.__call__ = grab, grab_runner
        try:
            rewritten(model, **x)
        finally:
            g[graph_fns[0]], backend._GraphRunner.__call__ = graph_fn, runner_call
        sync()
        runner, runner_args = seen["runner"]
        program = runner.single
        bound = program.bind_inputs(runner_args)

        run_to_launch: list = []

        def program_call():
            start = ns()
            program.program.run(bound, program._eager)
            run_to_launch.append(_C._program_first_launch_ns() - start)
        first: list = []

        def full():
            start = ns()
            compiled(**x)
            first.append(_C._program_first_launch_ns() - start)

        to_launch: list = []

        def backend_call():
            start = ns()
            runner(list(runner_args))
            to_launch.append(_C._program_first_launch_ns() - start)

        pieces = {
            "eager": lambda: model(**x),
            "full": full,
            "c.forward": lambda: compiled.forward(**x),
            "guards": lambda: entry.guard_manager.check(guard_locals),
            "bytecode": lambda: rewritten(model, **x),
            "graph fn": lambda: graph_fn(*seen["graph"]),
            "backend": backend_call,
            "_C run": program_call,
        }
        host = {k: [] for k in pieces}
        wall = {"eager": [], "full": []}
        for _ in range(rounds):
            for k, fn in pieces.items():
                for _ in range(calls):
                    # The state a call of a loop over forwards finds: the previous
                    # call done, its weights and activations through the caches.
                    compiled(**x) if k != "eager" else model(**x)
                    sync()
                    start = ns()
                    fn()
                    end = ns()
                    host[k].append(end - start)
                    if k in wall:
                        sync()
                        wall[k].append(ns() - start)
        sync()
    torch._dynamo.reset()
    med = {k: statistics.median(v) / 1e3 for k, v in host.items()}
    med["first launch"] = statistics.median(first) / 1e3
    med["backend to launch"] = statistics.median(to_launch) / 1e3
    med["run to launch"] = statistics.median(run_to_launch) / 1e3
    med["eager wall"] = statistics.median(wall["eager"]) / 1e3
    med["full wall"] = statistics.median(wall["full"]) / 1e3
    return med


def print_host_breakdown(name: str, m: dict) -> None:
    split = [
        ("OptimizedModule.__call__ + nn.Module wrapper", m["full"] - m["c.forward"]),
        ("Dynamo frame entry/exit (without guards)", m["c.forward"] - m["guards"] - m["bytecode"]),
        ("Dynamo guards", m["guards"]),
        ("rewritten bytecode around the graph (transformers' wrapper, outputs, cache)",
         m["bytecode"] - m["graph fn"]),
        ("AOTAutograd runtime wrappers", m["graph fn"] - m["backend"]),
        ("trnscope backend, Python", m["backend"] - m["_C run"]),
        ("trnscope _C run (checks, allocation, launches)", m["_C run"]),
    ]
    print(f"{name}: compiled call {m['full']:.0f} us host ({m['full wall']:.0f} us wall), first "
          f"kernel launched {m['first launch']:.0f} us after the call began; eager call "
          f"{m['eager']:.0f} us host ({m['eager wall']:.0f} us wall)")
    for what, us in split:
        print(f"  {us:7.1f} us  {what}")
    print(f"  ({m['backend to launch']:.1f} us from the backend's entry to its first launch, "
          f"{m['run to launch']:.1f} us of them in _C run)")


# Note [Kernel kinds]: eager and compiled run the same library kernels for
# GEMMs, attention and convolutions, so their device time per kind should be
# equal, and a fused kernel should take no longer than the eager kernels it
# replaces; eager trn ops should take no longer than CPU PyTorch's. Session 16
# found eight places where one of these did not hold (docs/compile.md
# "Compiled against eager, kernel by kernel"). Kernel names differ between the
# modes (matmul_f32 vs mm, addmm), so the two lists are printed side by side.
# An eager trn op's device time is compared with the same CPU op's total time,
# its children included: CPU's composite ops (clone, constant_pad_nd,
# embedding) do their work in the ops they call, which self time leaves out.
#
# Note [GEMM floor]: the forward's matrix-multiply FLOPs (torch.profiler's
# with_flops on the eager ops; a compiled program does the same GEMMs) at
# trn:0's measured GEMM peak (trnscope.profiling.host_peaks: a 512^3 mm) is
# the least device time any compiled program of it can take while it computes
# every GEMM on one core. Set against eager's device time it bounds what
# fusion can save: a forward whose GEMMs are 85 % of eager's time cannot run
# in 0.8x eager.
# The ops torch.profiler's with_flops counts that are GEMMs (linear and matmul
# reach it as these; convolutions are not counted).
_GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}


def _device_kinds(prof, calls: int) -> dict:
    """Device time per kernel name (us per call) of a profile of `calls` forwards."""
    kinds = {}
    for e in prof.key_averages():
        if e.self_device_time_total > 0 and "Memcpy" not in e.key and "::" not in e.key:
            kinds[e.key] = kinds.get(e.key, 0.0) + e.self_device_time_total / calls
    return kinds


def kernel_kinds(name: str, calls: int = 4, top: int = 12) -> None:
    from torch.profiler import ProfilerActivity, profile

    model, inputs = zoo.get(name).build("bench")
    trn_model = copy.deepcopy(model).to("trn")  # the CPU model stays for the CPU column
    trn_inputs = zoo.to_device(inputs, "trn")
    compiled = torch.compile(trn_model, backend="trn")
    kinds = {"eager": {}, "compiled": {}}
    cpu_ops, trn_ops = {}, {}
    gemm_flops = 0.0  # per forward (Note [GEMM floor])
    with torch.no_grad():
        for _ in range(2):
            trn_model(**trn_inputs)
            compiled(**trn_inputs)
            model(**inputs)
        for _ in range(2):  # two alternations: both modes see the same host phases
            for mode, fn in (("eager", trn_model), ("compiled", compiled)):
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                             with_flops=mode == "eager") as p:
                    for _ in range(calls):
                        fn(**trn_inputs)
                    torch.trn.synchronize()
                for k, v in _device_kinds(p, 2 * calls).items():
                    kinds[mode][k] = kinds[mode].get(k, 0.0) + v
                if mode == "eager":
                    gemm_flops += sum(e.flops for e in p.key_averages()
                                      if e.key in _GEMM_OPS) / (2 * calls)
                    for e in p.key_averages():
                        if e.key.startswith("aten::") and e.self_device_time_total > 0:
                            per_call = e.self_device_time_total / (2 * calls)
                            trn_ops[e.key] = trn_ops.get(e.key, 0.0) + per_call
            with profile(activities=[ProfilerActivity.CPU]) as p:
                for _ in range(calls):
                    model(**inputs)
            for e in p.key_averages():
                if e.key.startswith("aten::"):
                    cpu_ops[e.key] = cpu_ops.get(e.key, 0.0) + e.cpu_time_total / (2 * calls)
    te, tc = sum(kinds["eager"].values()), sum(kinds["compiled"].values())
    print(f"{name}: device time per forward, eager {te / 1e3:.3f} ms, compiled {tc / 1e3:.3f} ms")
    eager = sorted(kinds["eager"].items(), key=lambda kv: -kv[1])[:top]
    comp = sorted(kinds["compiled"].items(), key=lambda kv: -kv[1])[:top]
    for i in range(max(len(eager), len(comp))):
        left = f"{eager[i][1]:9.1f} us  {eager[i][0]:28.28s}" if i < len(eager) else " " * 42
        right = f"{comp[i][1]:9.1f} us  {comp[i][0]}" if i < len(comp) else ""
        print(f"  {left} | {right}")
    peak = trnscope.profiling.host_peaks()["gemm_gflop_s"]
    floor_us = gemm_flops / (peak * 1e3)
    gemm_us = sum(v for k, v in kinds["eager"].items() if k.startswith("matmul_"))
    print(f"  GEMM floor (Note [GEMM floor]): {gemm_flops / 1e6:.0f} MFLOP per forward at trn:0's "
          f"measured {peak:.0f} GFLOP/s = {floor_us / 1e3:.3f} ms = {floor_us / te:.2f}x eager's "
          f"device time (eager's GEMM kernels: {gemm_us / 1e3:.3f} ms, "
          f"{gemm_flops / 1e3 / max(gemm_us, 1e-9):.0f} GFLOP/s)")
    slow = [(k, v, cpu_ops.get(k, 0.0)) for k, v in trn_ops.items()
            if v > 20 and v > 1.25 * cpu_ops.get(k, 0.0)]
    if slow:
        print("  eager trn ops above 1.25x CPU's time (us per forward):")
        for k, v, c in sorted(slow, key=lambda t: -t[1]):
            print(f"    {k:48.48s} trn {v:9.1f}  cpu {c:9.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default=",".join(zoo.NAMES))
    p.add_argument("--repeat", type=int, default=5, help="calls per round (default 5)")
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    p.add_argument("--tokens", type=int, default=16, help="new tokens per generate() call")
    p.add_argument("--no-inductor", action="store_true", help="skip the inductor column")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="weights and inputs of both sides (default float32)")
    p.add_argument("--markdown", action="store_true", help="also print the README table")
    p.add_argument("--host", action="store_true",
                   help="split the host time of a compiled call (Note [Host breakdown])")
    p.add_argument("--kernels", action="store_true",
                   help="device time per kernel kind, eager vs compiled, and eager trn ops\n"
                        "slower than CPU's (Note [Kernel kinds])")
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    for n in names:
        zoo.get(n)  # unknown names fail before any work
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    amx = torch.ops.trnscope._set_amx(True)
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, CPU PyTorch with 1 thread; "
          f"trn: {torch.trn.device_count()} cores (one host thread each); {args.dtype}"
          + (f", trn bfloat16 GEMMs on AMX: {amx}" if dtype == torch.bfloat16 else ""))
    if args.host:
        for n in names:
            print_host_breakdown(n, host_breakdown(n, args.rounds))
        return
    if args.kernels:
        for n in names:
            kernel_kinds(n)
        return
    rows = []
    for n in names:
        r = bench_forward(n, args.repeat, args.rounds, not args.no_inductor, dtype)
        if zoo.get(n).causal_lm:
            r.update(bench_generate(n, args.tokens, args.rounds, dtype))
        rows.append(r)
        ind = f"{ratio(r, 'compiled', 'inductor'):5.2f}x" if "inductor" in r else "  n/a"
        line = (
            f"{n:7s} cpu {r['cpu'] * 1e3:8.2f} ms | trn eager {r['eager'] * 1e3:8.2f} ms "
            f"= {ratio(r, 'eager', 'cpu'):5.2f}x cpu | compiled {r['compiled'] * 1e3:8.2f} ms "
            f"= {ratio(r, 'compiled', 'eager'):5.2f}x eager, {ind} inductor | "
            f"err {r['eager_err']:.1e}/{r['compiled_err']:.1e}"
        )
        if "cpu_tps" in r:
            line += (
                f" | generate tok/s cpu {r['cpu_tps']:6.1f}, trn eager "
                f"{r['eager_tps'] / r['cpu_tps']:5.2f}x, compiled-static "
                f"{r['static_tps'] / r['cpu_tps']:5.2f}x (same tokens: "
                f"{r['eager_same']}/{r['static_same']}) | decode step eager "
                f"{r['eager_step'] * 1e3:.2f} ms, compiled-static "
                f"{r['step_ratio']:5.2f}x eager (pairs {r['step_ratio_range'][0]:.2f}-"
                f"{r['step_ratio_range'][1]:.2f}x)"
            )
        print(line, flush=True)
    if args.markdown:
        print("\n| model | eager vs CPU (1 thread) | compiled vs eager | compiled vs inductor "
              "(CPU, 1 thread) | max err eager / compiled | generate tok/s vs CPU: eager / "
              "compiled-static | decode step compiled-static vs eager |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            ind = f"{ratio(r, 'compiled', 'inductor'):.2f}x" if "inductor" in r else "n/a"
            gen = (
                f"{r['eager_tps'] / r['cpu_tps']:.2f}x / {r['static_tps'] / r['cpu_tps']:.2f}x"
                if "cpu_tps" in r
                else "—"
            )
            step = f"{r['step_ratio']:.2f}x" if "step_ratio" in r else "—"
            print(f"| {r['model']} | {ratio(r, 'eager', 'cpu'):.2f}x | "
                  f"{ratio(r, 'compiled', 'eager'):.2f}x | {ind} | "
                  f"{r['eager_err']:.1e} / {r['compiled_err']:.1e} | {gen} | {step} |")


if __name__ == "__main__":
    main()
