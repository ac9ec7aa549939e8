"""Settings of the trn compile backend (module attributes, set them directly).

trnscope.compile.config.max_signatures_before_warning = 8
"""

# More input signatures than this for one graph warns once (with a bucket list).
max_signatures_before_warning: int = 4

# Fuse elementwise ops and reductions into row kernels; False compiles one
# kernel per node (for comparisons).
fuse: bool = True

# Where compiled programs are written as JSON (None: the TRNSCOPE_DUMP_DIR
# environment variable, if set). A compile option `dump_dir` overrides both.
dump_dir: str | None = None
