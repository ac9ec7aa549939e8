"""Case studies: the seed's RMSNorm comparison and a Llama decoder block, profiled on trn.

    python -m trnscope.studies.rmsnorm [--shape 4096x4096] [--dtype float32] [--iters N] [--out DIR]
    python -m trnscope.studies.decoder [--batch B] [--seq T] [--dim D] ... [--out DIR]

Each study runs its variants on identical inputs, profiles each with CPU + PrivateUse1
activities through trnscope.profiling (one trace folder per variant), checks that the
outputs agree, prints PyTorch's key-averages tables and a comparison table, and writes
DIR/report.html with the `trnscope` analyzer. `models` holds the model definitions (shared
with the tests), `common` the profiling harness both studies use.
"""
