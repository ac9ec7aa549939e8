"""The main job (`make demo`): the seed's case study on the trn device, then a decoder block.

1. The RMSNorm study (python -m trnscope.studies.rmsnorm): naive aten ops vs
   F.rms_norm vs torch.compile(backend="trn") on one 4096x4096 float32 input, each
   profiled; key-averages tables, a comparison table, traces and report.html.
2. The decoder study (python -m trnscope.studies.decoder): a small Llama block, eager vs
   compiled, the same outputs.

    python -m trnscope.demo [--out DIR]      # default trnscope_out/
"""

from __future__ import annotations

import argparse
import os
import sys

from trnscope.studies import common, decoder, rmsnorm


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m trnscope.demo", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="trnscope_out", help="output folder (default trnscope_out)")
    args = p.parse_args(argv)
    out = os.path.abspath(args.out)
    try:
        print("#" * 100 + "\n# 1/2  RMSNorm three ways (the seed's case study)\n" + "#" * 100)
        flags = ["--shape", "4096x4096", "--dtype", "float32", "--iters", "5", "--rounds", "5"]
        rms = rmsnorm.run([*flags, "--out", os.path.join(out, "rmsnorm")])
        print("\n" + "#" * 100 + "\n# 2/2  A Llama decoder block, eager vs compiled\n" + "#" * 100)
        dec = decoder.run(["--iters", "3", "--rounds", "5", "--out", os.path.join(out, "decoder")])
    except common.StudyError as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 1

    naive = rms.runs["naive"].device_us
    print("\n" + "=" * 100)
    print(
        "RMSNorm device time per call: "
        + ", ".join(
            f"{name} {run.device_us / 1e3:.2f} ms ({run.device_us / naive:.2f}x)"
            for name, run in rms.runs.items()
        )
    )
    eager, comp = dec.runs["eager"], dec.runs["compiled"]
    print(
        f"decoder block: eager {eager.launches:g} launches, {eager.device_us / 1e3:.2f} ms; "
        f"compiled {comp.launches:g} launches, {comp.device_us / 1e3:.2f} ms per call"
    )
    for name, study in (("RMSNorm", rms), ("decoder", dec)):
        if study.report:
            print(f"{name} explorer: {study.report}")
        else:
            print(f"{name} explorer: not written (build the trnscope analyzer: make build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
