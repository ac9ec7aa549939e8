"""The tracer behind trnscope.nki: runs a kernel's Python body once, computing its
result with numpy and recording the engine program it stands for.

Note [NKI tracing]
A kernel body runs eagerly. HBM arguments become `Tensor`s; `nl.ndarray(buffer=
nl.sbuf | nl.psum)`, `nl.load` and the `nisa` instructions make `Tile`s, each with
a block of SBUF/PSUM from `Allocator` and, when numerics are on, a numpy array.
Every instruction is appended to the current `Trace` with its operands as tile
descriptors (core/isa's Tile) and its source line. Loops are Python loops, so
the program holds every iteration, as the hardware runs it. Two rewrites keep
the program what NKI's compiler would emit: `tile[...] = producer(...)` retargets
the producer's instruction to write `tile` (no extra copy), and `psum += nc_matmul
(...)` turns the matmul into an accumulating one into `psum`. A block whose tile
is gone (Python dropped the last reference) is reused once four blocks of its
size exist, oldest first, so a loop's tiles rotate through four buffers and
loads run ahead of compute. The program goes to C++ (`_C._device_model_run`) to
be validated, simulated, saved and traced.

Note [SBUF spill]
NKI's compiler spills when a kernel's live tiles exceed SBUF (the matmul tutorial's
"blocked free dims" step holds ~320 KiB per partition against 224 KiB). So does the
tracer: when a new SBUF block does not fit and no freed block of its size is left,
the least-recently-used live tile of the same size is stored by DMA to an HBM
tensor of kind "internal" (named spillN) and its block goes to the new tile; the
next instruction that touches the spilled tile first reloads it by DMA into a
block of its own. These DMAs carry the source ops "spill store" / "spill reload",
and the trace counts their bytes (`DeviceProfile.spill_bytes`). Only a single tile
larger than SBUF, or a block no live tile of its size can free, is an error.
"""

from __future__ import annotations

import collections
import os
import sys
import weakref

import numpy as np

PMAX = 128  # partitions (nl.tile_size.pmax)
_REUSE_AFTER = 4  # blocks of one size before freed ones are reused
_PSUM_BANK = 2048
_SBUF_BYTES = {"trn1": 192 << 10, "trn2": 224 << 10}
_PSUM_BYTES = 16 << 10
_SPILL_POLICY = os.environ.get("TRNSCOPE_NKI_SPILL", "mru")  # or "lru" (Note [SBUF spill])

_current: Trace | None = None


class NkiError(ValueError):
    """A kernel uses the language wrongly (names the call, the operand and the limit)."""


class UnsupportedError(NotImplementedError):
    """An NKI feature trnscope.nki does not implement (named in the message)."""


def current() -> Trace:
    if _current is None:
        raise NkiError("nki: this call is only valid inside an @nki.jit kernel")
    return _current


class DType:
    """An NKI dtype: its name (core's DType names) and numpy storage."""

    def __init__(self, name: str, np_dtype, itemsize: int):
        self.name, self.np, self.itemsize = name, np.dtype(np_dtype), itemsize

    def __repr__(self):
        return f"nl.{self.name}"

    def cast(self, a: np.ndarray) -> np.ndarray:
        if self.name == "bfloat16":  # round to nearest even on bf16's 8 mantissa bits
            u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
            u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
            return u.astype(np.uint32).view(np.float32)
        return np.asarray(a).astype(self.np)


FLOAT32 = DType("float32", np.float32, 4)
BFLOAT16 = DType("bfloat16", np.float32, 2)  # stored as float32, rounded to bf16
FLOAT16 = DType("float16", np.float16, 2)
INT32 = DType("int32", np.int32, 4)
DTYPES = {d.name: d for d in (FLOAT32, BFLOAT16, FLOAT16, INT32)}


def dtype_of(x) -> DType:
    if isinstance(x, DType):
        return x
    name = getattr(x, "name", None) or str(x)
    name = {"float": "float32", "half": "float16"}.get(name, name).replace("torch.", "")
    if name not in DTYPES:
        raise UnsupportedError(f"nki: dtype {x!r} is not supported (float32, bfloat16, float16, int32)")
    return DTYPES[name]


class Allocator:
    """SBUF or PSUM blocks per partition range (Note [NKI tracing])."""

    def __init__(self, trace: Trace, memory: str, capacity: int):
        self.trace, self.memory, self.capacity = trace, memory, capacity
        self.top = 0
        self.count = collections.Counter()  # blocks per size
        self.free = collections.defaultdict(collections.deque)
        self.live = {}  # allocation index -> weakref of the tile holding it (SBUF)

    def take(self, nbytes: int) -> tuple[int, bool]:
        """(allocation index, whether it is a fresh block)."""
        if self.memory == "psum":
            if nbytes > _PSUM_BANK:
                raise NkiError(
                    f"nki: a PSUM tile of {nbytes} bytes per partition does not fit a {_PSUM_BANK}-byte "
                    "bank (512 float32); tile the free dim"
                )
            nbytes = _PSUM_BANK  # one bank per tile, bank-aligned
        elif nbytes > self.capacity:
            raise NkiError(
                f"nki: SBUF overflow: a single tile of {nbytes} bytes per partition is larger "
                f"than SBUF ({self.capacity} bytes per partition on {self.trace.target})"
            )
        free = self.free[nbytes]
        if free and self.count[nbytes] >= _REUSE_AFTER:
            return free.popleft(), False
        if self.top + nbytes > self.capacity:
            if free:
                return free.popleft(), False
            victim = self._victim(nbytes) if self.memory == "sbuf" else None
            if victim is not None:  # Note [SBUF spill]
                return self.trace.spill(victim), False
            kind = "SBUF" if self.memory == "sbuf" else "PSUM"
            raise NkiError(
                f"nki: {kind} overflow: a tile of {nbytes} bytes per partition does not fit; "
                f"{self.top} of {self.capacity} bytes per partition are held by live tiles"
            )
        index = len(self.trace.allocations)
        self.trace.allocations.append(
            (f"{self.memory}{index}", self.memory, 0, PMAX, self.top, nbytes)
        )
        self.top += nbytes
        self.count[nbytes] += 1
        return index, True

    def _victim(self, nbytes: int):
        """The live tile to spill for a block of `nbytes` (Note [SBUF spill]): not in use
        by the instruction being emitted; a clean one before a dirty one, then the
        policy's pick by last use."""
        best, mru = None, _SPILL_POLICY == "mru"
        for index, ref in self.live.items():
            t = ref()
            if t is None or self.trace.allocations[index][5] != nbytes or t in self.trace.pinned:
                continue
            key = (t.home is None, -t.last_use if mru else t.last_use)
            if best is None or key < best[0]:
                best = (key, t)
        return best[1] if best else None

    def hold(self, index: int, tile) -> None:
        if self.memory == "sbuf":
            self.live[index] = weakref.ref(tile)

    def give_back(self, index: int) -> None:
        self.live.pop(index, None)
        self.free[self.trace.allocations[index][5]].append(index)

    def cancel(self, index: int, fresh: bool) -> None:
        """Undoes take() for a tile no instruction uses (a retargeted temporary)."""
        nbytes = self.trace.allocations[index][5]
        self.live.pop(index, None)
        if fresh and index == len(self.trace.allocations) - 1:
            self.trace.allocations.pop()
            self.top -= nbytes
            self.count[nbytes] -= 1
        else:
            self.free[nbytes].appendleft(index)


class Trace:
    """One kernel call: the program being recorded and whether numerics run."""

    def __init__(self, name: str, target: str, numerics: bool):
        if target not in _SBUF_BYTES:
            raise NkiError(f"nki: target {target!r} is not a target; expected 'trn1' or 'trn2'")
        self.name, self.target, self.numerics = name, target, numerics
        self.tensors, self.allocations, self.sources, self.instructions = [], [], [], []
        self._source_ids = {}
        self.sbuf = Allocator(self, "sbuf", _SBUF_BYTES[target])
        self.psum = Allocator(self, "psum", _PSUM_BYTES)
        self.dma_queue = 0
        self.tick = 0  # instructions emitted: a tile's last use, for spilling
        self.pinned = set()  # tiles the instruction being emitted uses (never spilled for it)
        self.spill_bytes = {"store": 0, "reload": 0}
        self._spill_tensors = 0

    def spill(self, tile) -> int:
        """Frees `tile`'s block, which it returns, storing the tile to its HBM spill tensor
        unless HBM already holds its values (`tile.home`)."""
        if tile.home is None:
            if tile.spill_tensor is None:
                tile.spill_tensor = Tensor(self, f"spill{self._spill_tensors}", "internal",
                                           tile.shape, tile.dtype, numerics=False)
                self._spill_tensors += 1
            self.emit("dma_copy", "dma", dst=tile.spill_tensor.view, src0=tile.full,
                      op="spill store")
            self.spill_bytes["store"] += tile.nbytes
            tile.home = tile.spill_tensor.view
        index = tile.alloc
        tile._finalizer.detach()
        tile._allocator.live.pop(index, None)
        tile.alloc, tile.spilled = None, True
        return index

    def reload(self, tile) -> None:
        tile.alloc, _ = tile._allocator.take(tile.nbytes // tile.shape[0])
        tile._allocator.hold(tile.alloc, tile)
        tile._finalizer = weakref.finalize(tile, tile._allocator.give_back, tile.alloc)
        tile.spilled = False
        self.emit("dma_copy", "dma", dst=tile.full, src0=tile.home, op="spill reload")
        self.spill_bytes["reload"] += tile.nbytes

    def _touch(self, operands) -> None:
        """Marks the operands' tiles used now, reloading any that were spilled."""
        roots = [r for r in (_root(x) for x in operands) if r is not None]
        self.pinned.update(roots)
        for r in roots:
            r.last_use = self.tick
        for r in roots:
            if r.spilled:
                self.reload(r)

    def _wrote(self, opcode, dst, src0) -> None:
        """Tracks whether HBM holds dst's tile (a whole-tile DMA from HBM) or not."""
        r = _root(dst)
        if r is None:
            return
        whole = isinstance(dst, Tile) or (isinstance(dst, TileView) and dst.tile is r and
                                          dst.shape == r.shape)
        r.home = src0 if opcode == "dma_copy" and isinstance(src0, HbmView) and whole else None

    def program(self) -> dict:
        return {
            "name": self.name,
            "target": self.target,
            "tensors": self.tensors,
            "allocations": self.allocations,
            "sources": self.sources,
            "instructions": self.instructions,
        }

    def source(self, op: str) -> int:
        """The kernel line that called the language (the first frame outside trnscope.nki)."""
        here = os.path.dirname(__file__)
        f = sys._getframe(1)
        while f is not None and os.path.dirname(f.f_code.co_filename) == here:
            f = f.f_back
        key = (f.f_code.co_filename if f else "", f.f_lineno if f else 0, op)
        if key not in self._source_ids:
            self._source_ids[key] = len(self.sources)
            self.sources.append((os.path.basename(key[0]), key[1], op, -1))
        return self._source_ids[key]

    def emit(self, opcode, engine, dst=None, src0=None, src1=None, op0="bypass", op1="bypass",
             func="copy", accumulate=False, imm0=0.0, imm1=0.0, op="") -> int:
        self.tick += 1
        outer = not self.pinned
        try:
            self._touch((dst, src0, src1))
            self._wrote(opcode, dst, src0)
            return self._append(opcode, engine, dst, src0, src1, op0, op1, func, accumulate, imm0,
                                imm1, op)
        finally:
            if outer:
                self.pinned.clear()

    def _append(self, opcode, engine, dst, src0, src1, op0, op1, func, accumulate, imm0, imm1,
                op) -> int:
        queue = 0
        if engine == "dma":
            queue, self.dma_queue = self.dma_queue, (self.dma_queue + 1) % 16
        self.instructions.append(
            [opcode, engine, op0, op1, func, accumulate, queue, 0, 0, float(imm0), float(imm1),
             dst.desc() if dst is not None else None, src0.desc() if src0 is not None else None,
             src1.desc() if src1 is not None else None, self.source(op or opcode)]
        )
        return len(self.instructions) - 1


class Tensor:
    """An HBM tensor: a kernel argument, or an `nl.ndarray(buffer=nl.shared_hbm)`."""

    def __init__(self, trace: Trace, name: str, kind: str, shape, dtype: DType, data=None,
                 numerics=True):
        self.trace, self.name, self.shape, self.dtype = trace, name, tuple(int(s) for s in shape), dtype
        self.index = len(trace.tensors)
        trace.tensors.append((name, kind, dtype.name, list(self.shape)))
        if trace.numerics and numerics:
            self.data = dtype.cast(data) if data is not None else np.zeros(self.shape, dtype.np)
        else:
            self.data = None
        self.kind = kind

    def __getitem__(self, key) -> HbmView:
        return HbmView(self, _region(self.shape, key, "an HBM tensor"))

    @property
    def view(self) -> HbmView:
        return HbmView(self, tuple((0, s) for s in self.shape))


def _region(shape, key, what, ints=None) -> tuple:
    """((start, size) per dim) of a basic index (ints, slices with step 1, Ellipsis); the
    dims indexed by an int are appended to `ints`."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
    if len(key) > len(shape):
        raise NkiError(f"nki: {len(key)} indices into {what} of shape {list(shape)}")
    key = key + (slice(None),) * (len(shape) - len(key))
    region = []
    for d, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1:
                raise UnsupportedError(f"nki: slice steps other than 1 (dim {d}: {k})")
            region.append((start, max(0, stop - start)))
        elif isinstance(k, (int, np.integer)):
            if not -n <= k < n:
                raise NkiError(f"nki: index {k} is out of range for dim {d} of size {n}")
            region.append((int(k) % n, 1))
            if ints is not None:
                ints.append(d)
        else:
            raise UnsupportedError(f"nki: index {k!r} (only ints, slices and ... are supported)")
    return tuple(region)


class HbmView:
    """A rectangular part of an HBM tensor: dim 0 maps to partitions."""

    def __init__(self, tensor: Tensor, region):
        self.tensor, self.region = tensor, region
        self.shape = tuple(s for _, s in region)

    def desc(self):
        t = self.tensor
        strides = [int(np.prod(t.shape[d + 1:])) for d in range(len(t.shape))]
        offset = sum(o * s for (o, _), s in zip(self.region, strides))
        if len(self.shape) == 1:
            return ("hbm", t.dtype.name, t.index, 0, 1, 0, offset, [self.shape[0]], [1])
        return ("hbm", t.dtype.name, t.index, 0, self.shape[0], strides[0], offset,
                list(self.shape[1:]), strides[1:])

    def slices(self):
        return tuple(slice(o, o + s) for o, s in self.region)

    def read(self):
        return self.tensor.data[self.slices()]

    def write(self, value):
        self.tensor.data[self.slices()] = self.tensor.dtype.cast(value).reshape(self.shape)


class Tile:
    """An SBUF or PSUM tile [partitions, free...]; owns its block until Python drops it."""

    def __init__(self, trace: Trace, shape, dtype: DType, memory: str, what: str):
        shape = tuple(int(s) for s in shape)
        if len(shape) < 2:
            shape = (shape[0], 1) if shape else (1, 1)
        if shape[0] > PMAX:
            raise NkiError(
                f"nki: {what}: a tile's partition dim is at most {PMAX} (nl.tile_size.pmax), "
                f"got shape {list(shape)}"
            )
        self.trace, self.shape, self.dtype, self.memory = trace, shape, dtype, memory
        free = int(np.prod(shape[1:]))
        self._allocator = trace.sbuf if memory == "sbuf" else trace.psum
        self.nbytes = shape[0] * free * dtype.itemsize
        self.spilled, self.spill_tensor, self.last_use = False, None, trace.tick
        self.home = None  # an HBM view holding this tile's values, while it is not written
        self.alloc, self._fresh = self._allocator.take(free * dtype.itemsize)
        self._allocator.hold(self.alloc, self)
        self._finalizer = weakref.finalize(self, self._allocator.give_back, self.alloc)
        self.data = np.zeros(shape, dtype.np) if trace.numerics else None
        self.producer = None  # the instruction that wrote this tile, while it may be retargeted
        self.pending_zero = False  # nl.zeros on PSUM: the first matmul overwrites instead
        self.matmul_written = False  # nc_matmul(dst=) overwrites until the first write

    def discard(self, moved_to: TileView) -> None:
        """This temporary's only writer now writes `moved_to` (same shape): free its
        block, and read it from there if the kernel uses it again."""
        self._finalizer.detach()
        self._allocator.cancel(self.alloc, self._fresh)
        self.alloc, self._moved_to, self.producer = None, moved_to, None
        if self.data is not None:
            self.data = moved_to.tile.data[moved_to.slices()].reshape(self.shape)  # a view

    def desc(self, region=None):
        region = region or tuple((0, s) for s in self.shape)
        if self.alloc is None:  # moved: the same region of where it went
            base = self._moved_to
            return base.tile.desc(tuple((o + b, n) for (o, n), (b, _) in zip(region, base.region)))
        free = list(self.shape[1:])
        strides = [int(np.prod(free[d + 1:])) for d in range(len(free))]
        offset = sum(o * s for (o, _), s in zip(region[1:], strides))
        return (self.memory, self.dtype.name, self.alloc, region[0][0], region[0][1], 0, offset,
                [s for _, s in region[1:]], strides)

    def __getitem__(self, key) -> TileView:
        ints = []
        region = _region(self.shape, key, "a tile", ints)
        return TileView(self, region, tuple(d for d in ints if d > 0))

    def reshape(self, shape) -> Tile:
        """The same storage seen as `shape` (the partition dim stays)."""
        shape = tuple(int(s) for s in shape)
        if shape[0] != self.shape[0] or int(np.prod(shape)) != int(np.prod(self.shape)):
            raise NkiError(f"nki: cannot reshape a tile of shape {list(self.shape)} to "
                           f"{list(shape)} (the partition dim and the size must stay)")
        return _Alias(self, shape)

    def __setitem__(self, key, value) -> None:
        view = self[key]
        view.assign(value)

    def __iadd__(self, other):
        from trnscope.nki import isa as nisa

        if isinstance(other, Tile) and other.producer is not None and other.memory == "psum":
            ins = self.trace.instructions[other.producer]
            if ins[0] == "multiply_moving" and other.producer == len(self.trace.instructions) - 1:
                ins[11] = self.desc()
                ins[5] = not self.pending_zero  # accumulate unless the tile was just zeroed
                if self.trace.numerics:
                    self.data = (0 if self.pending_zero else self.data) + other.data
                self.pending_zero = False
                other.discard(self.full)
                return self
        nisa.tensor_tensor(self, other, np.add, dst=self)
        return self

    @property
    def full(self) -> TileView:
        return TileView(self, tuple((0, s) for s in self.shape))


class _Alias(Tile):
    """A reshaped tile: another shape over its base's storage (no block of its own)."""

    def __init__(self, base: Tile, shape):  # noqa: super().__init__ would allocate
        self._base, self.trace, self.shape, self.dtype = base, base.trace, shape, base.dtype
        self.memory, self.nbytes, self.producer = base.memory, base.nbytes, None
        self.data = base.data.reshape(shape) if base.data is not None else None

    alloc = property(lambda self: self._base.alloc)
    spilled = property(lambda self: self._base.spilled)


class TileView:
    """A rectangular part of a tile (partition range x free ranges); dims indexed by an
    int (`dropped`) are left out of its shape, as in numpy."""

    def __init__(self, tile: Tile, region, dropped=()):
        self.tile, self.region = tile, region
        self.shape = tuple(s for d, (_, s) in enumerate(region) if d not in dropped)

    def desc(self):
        return self.tile.desc(self.region)

    def slices(self):
        return tuple(slice(o, o + s) for o, s in self.region)

    def read(self):
        return self.tile.data[self.slices()].reshape(self.shape)

    def write(self, values) -> None:
        part = self.tile.data[self.slices()]
        part[...] = self.tile.dtype.cast(values).reshape(part.shape)

    def assign(self, value) -> None:
        from trnscope.nki import isa as nisa

        t = self.tile
        if isinstance(value, Tile) and value.producer is not None:
            last = value.producer == len(t.trace.instructions) - 1
            same = value.shape == self.shape and len(self.region) == len(value.shape)
            if last and same and not _root(t).spilled:
                t.trace.instructions[value.producer][11] = self.desc()  # write here instead
                if t.trace.numerics:
                    self.write(value.data)
                value.discard(self)
                return
        nisa.tensor_copy(value, dst=self)


def _root(x):
    """The tile holding operand x's storage (following moved temporaries), or None."""
    t = x.tile if isinstance(x, TileView) else x if isinstance(x, Tile) else None
    while t is not None and (isinstance(t, _Alias) or (t.alloc is None and not t.spilled)):
        t = t._base if isinstance(t, _Alias) else t._moved_to.tile
    return t


def as_view(x, what: str):
    """A Tile or TileView as a view over its whole tile; HBM views pass through."""
    if isinstance(x, Tile):
        return x.full
    if isinstance(x, (TileView, HbmView)):
        return x
    if isinstance(x, Tensor):
        return x.view
    raise NkiError(f"nki: {what} must be a tile or a tensor view, got {type(x).__name__}")


def data_of(x):
    """The operand's numpy values, or None when the trace runs without numerics."""
    v = as_view(x, "an operand")
    trace = v.tensor.trace if isinstance(v, HbmView) else v.tile.trace
    return v.read() if trace.numerics else None
