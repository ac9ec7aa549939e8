"""Convolution and vision-op benchmarks: trn (one core = one thread) vs CPU PyTorch
with torch.set_num_threads(1), measured side by side in this run.

  python bench/bench_conv.py [--quick] [--same-core CPU]

Each line prints both times and the ratio trn / cpu (lower is better; target <= 1.0x).
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

import trnscope  # noqa: F401  (registers the trn device)
from benchlib import add_same_core_flag, cpu_model, pin_to_core


def compare(name, fn, args, repeat):
    """Best of `repeat` runs each, trn and CPU interleaved so load changes on a
    shared machine hit both sides alike."""
    targs = [a.to("trn") if isinstance(a, torch.Tensor) else a for a in args]
    fn(*args)
    fn(*targs)
    torch.trn.synchronize()
    cpu = trn = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        cpu = min(cpu, time.perf_counter() - start)
        start = time.perf_counter()
        fn(*targs)
        torch.trn.synchronize()
        trn = min(trn, time.perf_counter() - start)
    print(f"{name:44s} trn {trn * 1e3:8.3f} ms  cpu {cpu * 1e3:8.3f} ms  ratio {trn / cpu:5.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    add_same_core_flag(ap)
    args = ap.parse_args()
    pinned = pin_to_core(args.same_core)
    repeat = 5 if args.quick else 20
    torch.set_num_threads(1)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"CPU: {cpu_model()} ({os.cpu_count()} cores, load {load}); torch {torch.__version__}, "
          "1 thread")
    if pinned:
        print(pinned)
    r = torch.randn
    cl = torch.channels_last
    cases = [
        ("conv3x3 1x64x56x56 -> 64", F.conv2d, (r(1, 64, 56, 56), r(64, 64, 3, 3), None, 1, 1)),
        ("conv3x3 1x64x56x56 -> 64 channels_last", F.conv2d,
         (r(1, 64, 56, 56).contiguous(memory_format=cl), r(64, 64, 3, 3), None, 1, 1)),
        ("conv1x1 1x256x28x28 -> 128", F.conv2d, (r(1, 256, 28, 28), r(128, 256, 1, 1))),
        ("conv7x7/2 stem 1x3x224x224 -> 64", F.conv2d,
         (r(1, 3, 224, 224), r(64, 3, 7, 7), r(64), 2, 3)),
        ("patch embed 16x16/16 1x3x224x224 -> 192", F.conv2d,
         (r(1, 3, 224, 224), r(192, 3, 16, 16), r(192), 16)),
        # The convs of bench_models' ResNet ("bench": width 32, image 96, batch 2) and ViT.
        ("resnet stem 7x7/2 2x3x96x96 -> 32", F.conv2d,
         (r(2, 3, 96, 96), r(32, 3, 7, 7), None, 2, 3)),
        ("resnet 3x3 2x32x24x24 -> 32", F.conv2d, (r(2, 32, 24, 24), r(32, 32, 3, 3), None, 1, 1)),
        ("resnet 3x3/2 2x32x24x24 -> 64", F.conv2d,
         (r(2, 32, 24, 24), r(64, 32, 3, 3), None, 2, 1)),
        ("resnet 3x3 2x64x12x12 -> 64", F.conv2d, (r(2, 64, 12, 12), r(64, 64, 3, 3), None, 1, 1)),
        ("resnet 1x1/2 2x32x24x24 -> 64", F.conv2d, (r(2, 32, 24, 24), r(64, 32, 1, 1), None, 2)),
        ("vit patch 8x8/8 2x3x32x32 -> 64", F.conv2d,
         (r(2, 3, 32, 32), r(64, 3, 8, 8), r(64), 8)),
        ("max_pool2d 3/2/1 2x32x48x48 (resnet)", F.max_pool2d, (r(2, 32, 48, 48), 3, 2, 1)),
        ("depthwise 3x3 1x128x56x56", F.conv2d,
         (r(1, 128, 56, 56), r(128, 1, 3, 3), None, 1, 1, 1, 128)),
        ("conv1d k3 4x256x512 -> 256", F.conv1d, (r(4, 256, 512), r(256, 256, 3), None, 1, 1)),
        ("max_pool2d 3/2 1x64x112x112", F.max_pool2d, (r(1, 64, 112, 112), 3, 2, 1)),
        ("avg_pool2d 2 1x64x112x112", F.avg_pool2d, (r(1, 64, 112, 112), 2)),
        ("adaptive_avg_pool2d 7 1x512x14x14", F.adaptive_avg_pool2d, (r(1, 512, 14, 14), 7)),
        ("batch_norm eval 8x64x56x56", lambda x, m, v: F.batch_norm(x, m, v),
         (r(8, 64, 56, 56), r(64), r(64).abs() + 1)),
        ("upsample bilinear x2 1x64x56x56", lambda x: F.interpolate(
            x, scale_factor=2, mode="bilinear"), (r(1, 64, 56, 56),)),
        ("upsample nearest x2 1x64x56x56", lambda x: F.interpolate(x, scale_factor=2),
         (r(1, 64, 56, 56),)),
    ]
    # bfloat16 on both sides (CPU PyTorch on oneDNN's AMX kernels where the CPU has
    # them; trn: Note [bf16 conv on AMX], Note [AMX implicit conv]): bench_models'
    # wav2vec2 at size "bench" and a ResNet conv.
    b = lambda *shape: torch.randn(*shape).bfloat16()  # noqa: E731
    cases += [
        ("bf16 wav2vec2 conv0 k10/5 2x1x16000 -> 128", F.conv1d,
         (b(2, 1, 16000), b(128, 1, 10), None, 5)),
        ("bf16 wav2vec2 conv1 k3/2 2x128x3199 -> 128", F.conv1d,
         (b(2, 128, 3199), b(128, 128, 3), None, 2)),
        ("bf16 wav2vec2 pos conv k16 g4 2x256x799", F.conv1d,
         (b(2, 256, 799), b(256, 64, 16), b(256), 1, 8, 1, 4)),
        ("bf16 resnet 3x3 2x64x12x12 -> 64", F.conv2d,
         (b(2, 64, 12, 12), b(64, 64, 3, 3), None, 1, 1)),
    ]
    with torch.no_grad():
        for name, fn, a in cases:
            compare(name, fn, a, repeat)


if __name__ == "__main__":
    main()
