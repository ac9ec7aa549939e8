"""Real models on trn vs CPU PyTorch (issue 9). Every ratio is against a peer
measured in this run, on the same weights and inputs.

  python bench/bench_models.py [--models llama,gpt2,...] [--repeat N] [--no-inductor]
                               [--markdown]

Per model (trnscope.studies.zoo, size "bench": e.g. Llama with 2 layers,
dim 256, seq 64, batch 2):
  eager       trn eager wall / CPU PyTorch eager wall, torch.set_num_threads(1)
              (one trn core is one host thread)                    target <= 1.0x
  compiled    torch.compile(backend="trn") wall / trn eager wall   target <= 0.8x (decoders)
  inductor    compiled trn wall / torch.compile (inductor) on CPU, 1 thread (report)
  err         max |trn - CPU| of the compared output, eager and compiled
  generate    greedy tokens/s (KV cache): trn eager / CPU eager, and trn with the
              forward compiled and cache_implementation="static" / CPU eager
Wall times are medians over --repeat synchronized calls after warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import cpu_model
from trnscope.studies import zoo


def median_wall(fn, repeat: int, sync=None) -> float:
    for _ in range(2):  # warm-up (compiles, caches)
        fn()
    if sync:
        sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().float().cpu() - b.detach().float().cpu()).abs().max().item()


def bench_forward(name: str, repeat: int, inductor: bool) -> dict:
    spec = zoo.get(name)
    model, inputs = spec.build("bench")
    sync = torch.trn.synchronize
    res: dict = {"model": name}
    with torch.no_grad():
        want = zoo.output_of(spec, model(**inputs))
        res["cpu"] = median_wall(lambda: model(**inputs), repeat)
        if inductor:
            torch._dynamo.reset()
            try:
                ind = torch.compile(model, backend="inductor")
                res["inductor"] = median_wall(lambda: ind(**inputs), repeat)
            except Exception as e:  # noqa: BLE001 - a report column, never fatal
                res["inductor_error"] = f"{type(e).__name__}: {e}"[:120]
        model.to("trn")
        tin = zoo.to_device(inputs, "trn")
        res["eager_err"] = max_err(zoo.output_of(spec, model(**tin)), want)
        res["eager"] = median_wall(lambda: model(**tin), repeat, sync)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="trn")
        res["compiled_err"] = max_err(zoo.output_of(spec, compiled(**tin)), want)
        res["compiled"] = median_wall(lambda: compiled(**tin), repeat, sync)
    torch._dynamo.reset()
    return res


def bench_generate(name: str, new_tokens: int) -> dict:
    spec = zoo.get(name)
    model, inputs = spec.build("bench")
    ids = inputs["input_ids"][:, :16].contiguous()
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    res: dict = {}

    def tokens_per_s(gen, x) -> tuple[float, torch.Tensor]:
        gen(x, **kw)  # warm-up (and compiles)
        start = time.perf_counter()
        out = gen(x, **kw)
        if out.device.type == "trn":
            torch.trn.synchronize()
        return ids.shape[0] * new_tokens / (time.perf_counter() - start), out.cpu()

    with torch.no_grad():
        res["cpu_tps"], want = tokens_per_s(model.generate, ids)
        model.to("trn")
        res["eager_tps"], got = tokens_per_s(model.generate, ids.to("trn"))
        res["eager_same"] = torch.equal(got, want)
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend="trn")
        static = lambda x, **k: model.generate(x, cache_implementation="static", **k)  # noqa: E731
        res["static_tps"], got = tokens_per_s(static, ids.to("trn"))
        res["static_same"] = torch.equal(got, want)
    torch._dynamo.reset()
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default=",".join(zoo.NAMES))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--tokens", type=int, default=16, help="new tokens per generate() call")
    p.add_argument("--no-inductor", action="store_true", help="skip the inductor column")
    p.add_argument("--markdown", action="store_true", help="also print the README table")
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    for n in names:
        zoo.get(n)  # unknown names fail before any work
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, CPU PyTorch with 1 thread; "
          f"trn: {torch.trn.device_count()} cores (one host thread each)")
    rows = []
    for n in names:
        r = bench_forward(n, args.repeat, not args.no_inductor)
        if zoo.get(n).causal_lm:
            r.update(bench_generate(n, args.tokens))
        rows.append(r)
        ind = f"{r['compiled'] / r['inductor']:5.2f}x" if "inductor" in r else "  n/a"
        line = (
            f"{n:7s} cpu {r['cpu'] * 1e3:8.2f} ms | trn eager {r['eager'] * 1e3:8.2f} ms "
            f"= {r['eager'] / r['cpu']:5.2f}x cpu | compiled {r['compiled'] * 1e3:8.2f} ms "
            f"= {r['compiled'] / r['eager']:5.2f}x eager, {ind} inductor | "
            f"err {r['eager_err']:.1e}/{r['compiled_err']:.1e}"
        )
        if "cpu_tps" in r:
            line += (
                f" | generate tok/s cpu {r['cpu_tps']:6.1f}, trn eager "
                f"{r['eager_tps'] / r['cpu_tps']:5.2f}x, compiled-static "
                f"{r['static_tps'] / r['cpu_tps']:5.2f}x (same tokens: "
                f"{r['eager_same']}/{r['static_same']})"
            )
        print(line, flush=True)
    if args.markdown:
        print("\n| model | eager vs CPU (1 thread) | compiled vs eager | compiled vs inductor "
              "(CPU, 1 thread) | max err eager / compiled | generate tok/s vs CPU: eager / "
              "compiled-static |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            ind = f"{r['compiled'] / r['inductor']:.2f}x" if "inductor" in r else "n/a"
            gen = (
                f"{r['eager_tps'] / r['cpu_tps']:.2f}x / {r['static_tps'] / r['cpu_tps']:.2f}x"
                if "cpu_tps" in r
                else "—"
            )
            print(f"| {r['model']} | {r['eager'] / r['cpu']:.2f}x | "
                  f"{r['compiled'] / r['eager']:.2f}x | {ind} | "
                  f"{r['eager_err']:.1e} / {r['compiled_err']:.1e} | {gen} |")


if __name__ == "__main__":
    main()
