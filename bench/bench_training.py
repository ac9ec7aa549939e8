"""Training steps on trn against CPU PyTorch with one thread (one core = one thread).

Per model, one SGD step (zero_grad, forward, loss, backward, step) on the same
weights and batch: the best of --repeat steps after a warm-up, CPU and trn
timed alternately over --rounds rounds. Prints trn time / CPU time (below 1.0
is faster), the range over rounds, and the CPU model. The models: the
ResNet-style CNN of tests/test_conv_training.py and tiny transformers GPT-2 and
BERT (as tests/test_training.py builds them), at a batch where the kernels, not
the per-op host cost alone, decide.

    python bench/bench_training.py [--models resnetish,gpt2,bert] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

import benchlib
import trnscope  # noqa: F401  (registers the trn device)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def _resnetish():
    from test_conv_training import ResNetish

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 3, 64, 64, generator=g), torch.randint(0, 5, (16,), generator=g)
    return ResNetish, lambda m, x, y: F.cross_entropy(m(x), y), (x, y)


def _transformer(name):
    import transformers as T

    small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=512)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1000, (8, 64), generator=g)
    if name == "gpt2":
        cfg = T.GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=64,
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                           eos_token_id=0)
        return (lambda: T.GPT2LMHeadModel(cfg),
                lambda m, x, y: m(input_ids=x, labels=y).loss, (ids, ids))
    cfg = T.BertConfig(vocab_size=1000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       **small)
    labels = torch.randint(0, 2, (8,), generator=g)
    return (lambda: T.BertForSequenceClassification(cfg),
            lambda m, x, y: m(input_ids=x, labels=y).loss, (ids, labels))


MODELS = {"resnetish": _resnetish, "gpt2": lambda: _transformer("gpt2"),
          "bert": lambda: _transformer("bert")}


def _stepper(build, loss_fn, batch, dev):
    torch.manual_seed(0)
    model = build().train().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = (t.to(dev) for t in batch)

    def step():
        opt.zero_grad()
        loss_fn(model, x, y).backward()
        opt.step()

    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--repeat", type=int, default=5, help="steps per round (default 5)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"CPU: {benchlib.cpu_model()}; torch {torch.__version__}, CPU PyTorch with 1 thread; "
          f"trn: {torch.trn.device_count()} device(s), float32")
    sync = torch.trn.synchronize
    for name in args.models.split(","):
        build, loss_fn, batch = MODELS[name]()
        cpu = _stepper(build, loss_fn, batch, "cpu")
        trn = _stepper(build, loss_fn, batch, "trn")
        ratios, cpu_ms = [], []
        for _ in range(args.rounds):
            c = benchlib.best_of(cpu, args.repeat)
            t = benchlib.best_of(trn, args.repeat, sync)
            ratios.append(t / c)
            cpu_ms.append(c * 1e3)
        print(f"{name:10s} step: cpu {statistics.median(cpu_ms):7.2f} ms | trn "
              f"{statistics.median(ratios):.2f}x cpu ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
