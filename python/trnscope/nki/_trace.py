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

Note [NKI views]
Every operand is a `View`: a base (a Tile, or an HBM Tensor), an element offset into
the base's flat storage, a shape and a stride per axis, so slicing, nl.arange /
nl.mgrid indexing, par_dim block dims, transposing access patterns (`t[i_p, i_f2 * F1 +
i_f1]`) and free-dim broadcasts (stride 0) are all one thing, and a view's numpy values
are `as_strided` over the base's storage. A tile's storage is [partitions, free]: the
axis whose stride is `free` is the partition dim of core/isa's descriptor, which must
come first once leading block dims are indexed away. Bounds are not checked when a view
is made but when an instruction uses it, after its mask cut it (`checks` holds the
base's index bounds as affine functions of the view's index).

Note [NKI index expressions]
`nl.arange(n)[:, None]` and `nl.mgrid[0:P, 0:F]` are `IndexExpr`s: affine functions of
a grid index, combined with ints (`i * 128 + ix`) and with each other by numpy
broadcasting. Indexing with them gives a view whose axes are the grid's (so
`in_tile[i0, 2 * i1 + i2]` on avgpool's mgrid is a 5-D strided view). Comparing one
makes a `Predicate`, NKI's mask: a conjunction of `e >= 0` conditions, each along one
grid axis, so a mask is a box; an instruction with mask= runs on that box only.

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
INT8 = DType("int8", np.int8, 1)
UINT8 = DType("uint8", np.uint8, 1)
INT16 = DType("int16", np.int16, 2)
UINT16 = DType("uint16", np.uint16, 2)
UINT32 = DType("uint32", np.uint32, 4)
DTYPES = {d.name: d for d in (FLOAT32, BFLOAT16, FLOAT16, INT32, INT8, UINT8, INT16, UINT16, UINT32)}
for _d in DTYPES.values():  # nl.float32.min and friends (NKI kernels use them as fill values)
    _info = np.finfo(_d.np) if _d.np.kind == "f" else np.iinfo(_d.np)
    _d.min, _d.max = _d.np.type(_info.min), _d.np.type(_info.max)
    if _d is BFLOAT16:
        _d.min, _d.max = np.float32(-3.3895314e38), np.float32(3.3895314e38)


def dtype_of(x) -> DType:
    if isinstance(x, DType):
        return x
    name = getattr(x, "name", None) or getattr(x, "__name__", None) or str(x)
    name = {"float": "float32", "half": "float16"}.get(name, name).replace("torch.", "")
    if name not in DTYPES:
        raise UnsupportedError(f"nki: dtype {x!r} is not supported ({', '.join(DTYPES)})")
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
                                           (tile.shape_p, tile.free), tile.dtype, numerics=False)
                self._spill_tensors += 1
            whole = tile.whole_storage
            self.emit("dma_copy", "dma", dst=tile.spill_tensor.view, src0=whole, op="spill store")
            self.spill_bytes["store"] += tile.nbytes
            tile.home = (tile.spill_tensor.view, _geometry(whole))
        index = tile.alloc
        tile._finalizer.detach()
        tile._allocator.live.pop(index, None)
        tile.alloc, tile.spilled = None, True
        return index

    def reload(self, tile) -> None:
        tile.alloc, _ = tile._allocator.take(tile.free * tile.dtype.itemsize)
        tile._allocator.hold(tile.alloc, tile)
        tile._finalizer = weakref.finalize(tile, tile._allocator.give_back, tile.alloc)
        tile.spilled = False
        src, (offset, shape, strides, _) = tile.home
        self.emit("dma_copy", "dma", dst=View(tile, offset, shape, strides, ()), src0=src,
                  op="spill reload")
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
        from_hbm = opcode == "dma_copy" and isinstance(src0, View) and isinstance(src0.base, Tensor)
        # The tile's geometry, not the view: a view holds its tile (no reference cycles).
        r.home = (src0, _geometry(dst)) if from_hbm and dst.whole else None

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
             func="copy", accumulate=False, imm0=0.0, imm1=0.0, op="", value=0) -> int:
        self.tick += 1
        outer = not self.pinned
        try:
            self._touch((dst, src0, src1))
            self._wrote(opcode, dst, src0)
            return self._append(opcode, engine, dst, src0, src1, op0, op1, func, accumulate, imm0,
                                imm1, op, value)
        finally:
            if outer:
                self.pinned.clear()

    def _append(self, opcode, engine, dst, src0, src1, op0, op1, func, accumulate, imm0, imm1,
                op, value) -> int:
        queue = 0
        if engine == "dma":
            queue, self.dma_queue = self.dma_queue, (self.dma_queue + 1) % 16
        self.instructions.append(
            [opcode, engine, op0, op1, func, accumulate, queue, 0, value, float(imm0), float(imm1),
             dst.desc() if dst is not None else None, src0.desc() if src0 is not None else None,
             src1.desc() if src1 is not None else None, self.source(op or opcode)]
        )
        return len(self.instructions) - 1


class Tensor:
    """An HBM tensor: a kernel argument, or an `nl.ndarray(buffer=nl.shared_hbm)`."""

    memory = "hbm"

    def __init__(self, trace: Trace, name: str, kind: str, shape, dtype: DType, data=None,
                 numerics=True):
        self.trace, self.name, self.shape, self.dtype = trace, name, tuple(int(s) for s in shape), dtype
        self.index = len(trace.tensors)
        trace.tensors.append((name, kind, dtype.name, list(self.shape)))
        if trace.numerics and numerics:
            self.data = dtype.cast(data) if data is not None else np.zeros(self.shape, dtype.np)
            self.data = np.ascontiguousarray(self.data)
            self.storage = self.data.reshape(-1)
        else:
            self.data = self.storage = None
        self.kind = kind

    @property
    def view(self) -> View:
        return View.contiguous(self, self.shape, f"tensor '{self.name}'")

    def __getitem__(self, key) -> View:
        return self.view[key]

    def reshape(self, shape) -> View:
        """The same HBM tensor seen as `shape` (row-major, like numpy)."""
        shape = tuple(int(s) for s in shape)
        if int(np.prod(shape)) != int(np.prod(self.shape)):
            raise NkiError(f"nki: cannot reshape tensor '{self.name}' of shape {list(self.shape)} "
                           f"to {list(shape)}")
        return View.contiguous(self, shape, f"tensor '{self.name}'")

    def ap(self, pattern, offset=None, **kwargs):
        return access_pattern(self, pattern, offset, 0, kwargs)

    def __repr__(self):
        return f"nki tensor '{self.name}' {list(self.shape)} {self.dtype.name} (hbm)"


# ---- index expressions (Note [NKI index expressions]) ----

class IndexExpr:
    """An affine index over a grid: value = off + sum(coefs[a] * i_a) for the grid index
    (i_0, ...) of `shape` (numpy broadcasting: a size-1 axis has coefficient 0)."""

    __slots__ = ("shape", "off", "coefs")
    __array_priority__ = 100  # int64 scalars defer to our operators

    def __init__(self, shape, off, coefs):
        self.shape, self.off = tuple(shape), int(off)
        self.coefs = tuple(0 if n == 1 else int(c) for n, c in zip(self.shape, coefs))

    def __repr__(self):
        return f"IndexExpr(shape={list(self.shape)}, off={self.off}, coefs={list(self.coefs)})"

    def __getitem__(self, key):
        """`[:, None]`-style reshaping: None inserts an axis, `:` keeps one."""
        key = key if isinstance(key, tuple) else (key,)
        shape, coefs, axis = [], [], 0
        for k in key:
            if k is None:
                shape.append(1), coefs.append(0)
            elif k == slice(None):
                if axis >= len(self.shape):
                    raise NkiError(f"nki: too many ':' indexing an index of shape {list(self.shape)}")
                shape.append(self.shape[axis]), coefs.append(self.coefs[axis])
                axis += 1
            else:
                raise UnsupportedError(f"nki: indexing an index expression with {k!r} (only None "
                                       "and ':')")
        if axis != len(self.shape):
            shape += self.shape[axis:]
            coefs += self.coefs[axis:]
        return IndexExpr(shape, self.off, coefs)

    def aligned(self, ndim: int):
        """(shape, coefs) padded on the left to ndim axes."""
        pad = ndim - len(self.shape)
        return (1,) * pad + self.shape, (0,) * pad + self.coefs

    def _combine(self, other, sign: int):
        if isinstance(other, (int, np.integer)):
            return IndexExpr(self.shape, self.off + sign * int(other), self.coefs)
        if not isinstance(other, IndexExpr):
            return NotImplemented
        n = max(len(self.shape), len(other.shape))
        (sa, ca), (sb, cb) = self.aligned(n), other.aligned(n)
        shape = []
        for x, y in zip(sa, sb):
            if x != y and 1 not in (x, y):
                raise NkiError(f"nki: index expressions of shapes {list(self.shape)} and "
                               f"{list(other.shape)} do not broadcast")
            shape.append(max(x, y))
        return IndexExpr(shape, self.off + sign * other.off,
                         [a + sign * b for a, b in zip(ca, cb)])

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return (-self)._combine(other, 1)

    def __neg__(self):
        return IndexExpr(self.shape, -self.off, [-c for c in self.coefs])

    def __mul__(self, k):
        if not isinstance(k, (int, np.integer)):
            if isinstance(k, IndexExpr):
                raise UnsupportedError("nki: the product of two index expressions (indices are "
                                       "affine)")
            return NotImplemented
        return IndexExpr(self.shape, self.off * int(k), [c * int(k) for c in self.coefs])

    __rmul__ = __mul__

    def _nonaffine(self, *args):
        raise UnsupportedError("nki: //, % and / of an index expression (indices are affine; "
                               "use several index axes, as nl.mgrid gives)")

    __floordiv__ = __mod__ = __truediv__ = __rfloordiv__ = __rmod__ = _nonaffine

    # Comparisons make predicates (masks): each condition is an expression meaning "e >= 0".
    def __lt__(self, other):
        return Predicate(((other - self) - 1,))

    def __le__(self, other):
        return Predicate((other - self,))

    def __gt__(self, other):
        return Predicate(((self - other) - 1,))

    def __ge__(self, other):
        return Predicate((self - other,))

    def values(self) -> np.ndarray:
        """The expression's values over its grid (numpy)."""
        v = np.full(self.shape, self.off, np.int64)
        for a, (n, c) in enumerate(zip(self.shape, self.coefs)):
            if c:
                v = v + c * np.arange(n).reshape([n if b == a else 1 for b in range(len(self.shape))])
        return v


def _as_expr(x):
    return x if isinstance(x, IndexExpr) else IndexExpr((), int(x), ())


class Predicate:
    """A mask: the conditions (index expressions e, each meaning e >= 0) all hold."""

    def __init__(self, conditions):
        self.conditions = tuple(_as_expr(c) for c in conditions)

    def __and__(self, other):
        if not isinstance(other, Predicate):
            return NotImplemented
        return Predicate(self.conditions + other.conditions)

    def __or__(self, other):
        raise UnsupportedError("nki: '|' of masks (only '&': a mask is a box of index ranges)")

    __rand__ = __and__

    def __bool__(self):
        raise NkiError("nki: a mask is not a Python bool; pass it as mask=")

    def values(self, shape) -> np.ndarray:
        """Where the predicate holds over a grid of `shape` (numpy bool)."""
        ok = np.ones(shape, bool)
        for c in self.conditions:
            s, k = c.aligned(len(shape))
            ok &= IndexExpr(s, c.off, k).values() >= 0
        return ok

    def ranges(self, shape, what: str):
        """[start, stop) per axis of a grid of `shape` where the predicate holds, or None if
        it holds nowhere. Each condition may vary along one axis only (a box)."""
        lo, hi = [0] * len(shape), list(shape)
        for c in self.conditions:
            if len(c.shape) > len(shape):
                raise NkiError(f"nki: {what}: a mask of rank {len(c.shape)} on a tile of shape "
                               f"{list(shape)}")
            s, k = c.aligned(len(shape))
            axes = [a for a, x in enumerate(k) if x]
            if any(s[a] != shape[a] for a in axes):
                continue  # a condition on an axis this operand does not have
            if not axes:
                if c.off < 0:
                    return None
                continue
            if len(axes) > 1:
                raise UnsupportedError(f"nki: {what}: a mask that couples index axes {axes} (a "
                                       "mask is a box; use nisa.affine_select for triangles)")
            a, q = axes[0], k[axes[0]]
            if q > 0:  # q*i + off >= 0  <=>  i >= ceil(-off / q)
                lo[a] = max(lo[a], -(c.off // q))
            else:  # i <= off / -q
                hi[a] = min(hi[a], c.off // -q + 1)
        if any(l >= h for l, h in zip(lo, hi)):
            return None
        return list(zip(lo, hi))


class Grid(tuple):
    """nl.mgrid's result: one index expression per axis; `.p` and `.x` name the first two."""

    p = property(lambda self: self[0])
    x = property(lambda self: self[1])


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        ranges = []
        for k in key:
            if not isinstance(k, slice) or k.stop is None:
                raise NkiError(f"nki: nl.mgrid takes slices with a stop, got {k!r}")
            start, step = k.start or 0, k.step or 1
            if step <= 0:
                raise UnsupportedError(f"nki: nl.mgrid step {step} (positive steps only)")
            ranges.append((start, max(0, -(-(k.stop - start) // step)), step))
        shape = [n for _, n, _ in ranges]
        return Grid(IndexExpr(shape, start, [step if b == a else 0 for b in range(len(ranges))])
                    for a, (start, _, step) in enumerate(ranges))


def arange(*args) -> IndexExpr:
    """nl.arange(stop) / (start, stop[, step]): a 1-D index expression."""
    r = range(*(int(a) for a in args))
    if r.step <= 0:
        raise UnsupportedError(f"nki: nl.arange step {r.step} (positive steps only)")
    return IndexExpr((len(r),), r.start, (r.step,))


# ---- views (Note [NKI views]) ----

class View:
    """A strided part of a tile's or an HBM tensor's storage.

    `offset` and `strides` count elements of the base's flat storage (a tile's is
    [partitions, free] row-major, so partition p starts at p * free); `checks` are the
    base's index bounds as affine functions of the view's index, checked when an
    instruction uses the view (a mask may cut it first)."""

    __slots__ = ("base", "offset", "shape", "strides", "checks", "split")

    def __init__(self, base, offset, shape, strides, checks, split=None):
        self.base, self.offset = base, int(offset)
        self.shape, self.strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
        self.checks, self.split = checks, split

    @staticmethod
    def contiguous(base, shape, label: str, perm_strides=None) -> View:
        strides = perm_strides or [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
        checks = tuple((0, tuple(1 if b == a else 0 for b in range(len(shape))), n,
                        f"dim {a} of {label}") for a, n in enumerate(shape))
        return View(base, 0, shape, strides, checks)

    # what an operand is
    dtype = property(lambda self: self.base.dtype)
    memory = property(lambda self: self.base.memory)
    tile = property(lambda self: self.base)  # the root tile (or tensor) holding the data

    def __repr__(self):
        return f"nki view {list(self.shape)} of {self.base!r}"

    @property
    def trace(self):
        return self.base.trace

    def same(self, other) -> bool:
        return (isinstance(other, View) and other.base is self.base and other.offset == self.offset
                and other.shape == self.shape and other.strides == self.strides)

    # indexing (Note [NKI index expressions])
    def __getitem__(self, key) -> View:
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (len(self.shape) - len(key) + 1) + key[i + 1:]
        if len(key) > len(self.shape):
            raise NkiError(f"nki: {len(key)} indices into a {self.memory} view of shape "
                           f"{list(self.shape)}")
        key = key + (slice(None),) * (len(self.shape) - len(key))
        adv = [a for a, k in enumerate(key) if isinstance(k, IndexExpr)]
        # ints between index expressions join them (numpy: an int is an advanced index too)
        if adv and any(isinstance(key[a], slice) for a in range(adv[0], adv[-1] + 1)):
            raise UnsupportedError("nki: index expressions separated by slices or ints (keep "
                                   "them adjacent)")
        grid = ()
        if adv:
            n = max(len(key[a].shape) for a in adv)
            grid = tuple(max(key[a].aligned(n)[0][j] for a in adv) for j in range(n))
        # maps[a] = (constant, {result axis: coefficient}) of this view's index a
        shape, maps, out = [], [], 0
        first, at = adv[0] if adv else None, 0
        for a, (k, n) in enumerate(zip(key, self.shape)):
            if a == first:
                shape += grid
                at, out = out, out + len(grid)
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if step <= 0:
                    raise UnsupportedError(f"nki: slice step {step} (positive steps only)")
                shape.append(len(range(start, stop, step)))
                maps.append((start, {out: step}))
                out += 1
            elif isinstance(k, IndexExpr):
                s, c = k.aligned(len(grid))
                for j, (m, g) in enumerate(zip(s, grid)):
                    if m not in (1, g):
                        raise NkiError(f"nki: index expressions of shapes do not broadcast: "
                                       f"{list(s)} against {list(grid)}")
                if any(x < 0 for x in c):
                    raise UnsupportedError("nki: an index expression with a negative step")
                maps.append((k.off, {at + j: x for j, x in enumerate(c) if x}))
            elif isinstance(k, (int, np.integer)):
                if not -n <= k < n:
                    raise NkiError(f"nki: index {k} is out of range for dim {a} of size {n}")
                maps.append((int(k) % n, {}))
            else:
                raise UnsupportedError(f"nki: index {k!r} (ints, slices, ..., nl.arange / "
                                       "nl.mgrid expressions)")
        strides = [0] * len(shape)
        offset = self.offset
        for (const, coefs), s in zip(maps, self.strides):
            offset += s * const
            for j, x in coefs.items():
                strides[j] += s * x
        checks = []
        for off, coefs, limit, label in self.checks:
            new = [0] * len(shape)
            for (const, m), c in zip(maps, coefs):
                off += c * const
                for j, x in m.items():
                    new[j] += c * x
            checks.append((off, tuple(new), limit, label))
        return View(self.base, offset, shape, strides, tuple(checks))

    def clip(self, ranges) -> View:
        """The part [start, stop) per axis."""
        offset = self.offset + sum(s * a for s, (a, _) in zip(self.strides, ranges))
        checks = tuple((off + sum(c * a for c, (a, _) in zip(coefs, ranges)), coefs, limit, label)
                       for off, coefs, limit, label in self.checks)
        return View(self.base, offset, [b - a for a, b in ranges], self.strides, checks)

    def permute(self, axes, split=None) -> View:
        checks = tuple((off, tuple(coefs[a] for a in axes), limit, label)
                       for off, coefs, limit, label in self.checks)
        return View(self.base, self.offset, [self.shape[a] for a in axes],
                    [self.strides[a] for a in axes], checks, split)

    def check(self, what: str) -> None:
        """Raises if the view reaches outside its base (after masks)."""
        if 0 in self.shape:
            return
        for off, coefs, limit, label in self.checks:
            lo = off + sum(min(0, c * (n - 1)) for c, n in zip(coefs, self.shape))
            hi = off + sum(max(0, c * (n - 1)) for c, n in zip(coefs, self.shape))
            if lo < 0 or hi >= limit:
                raise NkiError(f"nki: {what}: the index reaches {lo}..{hi} in {label} of size "
                               f"{limit} (out of bounds; mask the access or fix the index)")

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    def desc(self):
        """core/isa's Tile descriptor of this view."""
        b = self.base
        if isinstance(b, Tensor):
            shape, strides = self.shape, self.strides
            if len(shape) < 2:
                return ("hbm", b.dtype.name, b.index, 0, 1, 0, self.offset,
                        list(shape) or [1], list(strides) or [1])
            sizes, st = _free_dims(list(zip(shape[1:], strides[1:])), None, self)
            return ("hbm", b.dtype.name, b.index, 0, shape[0], strides[0], self.offset, sizes, st)
        free = b.free
        axes = [(n, s) for n, s in zip(self.shape, self.strides)]
        split = self.split
        part = [i for i, (n, s) in enumerate(axes) if n > 1 and s >= free]
        if len(part) > 1 or (part and axes[part[0]][1] != free):
            raise UnsupportedError(f"nki: a view of shape {list(self.shape)} with element strides "
                                   f"{list(self.strides)} steps over partitions other than one by one")
        if part:
            p = part[0]
            if any(n > 1 for n, _ in axes[:p]):
                raise NkiError(f"nki: the partition dim of a view of shape {list(self.shape)} is "
                               f"dim {p}; index the dims before it (par_dim) with ints")
            partitions, rest = axes[p][0], axes[p + 1:]
            split = None if split is None else split - p
        else:
            partitions, rest = 1, axes[1:] if axes else []
            split = None if split is None else split - 1
        sizes, st = _free_dims(rest, split, self)
        return (b.memory, b.dtype.name, b.alloc, self.offset // free, partitions, 0,
                self.offset % free, sizes, st)

    # numerics
    def _array(self):
        b = self.base
        store = b.storage
        return np.lib.stride_tricks.as_strided(
            store[self.offset:], self.shape, [s * store.itemsize for s in self.strides])

    def read(self) -> np.ndarray:
        return np.array(self._array())

    def write(self, values) -> None:
        v = np.asarray(values)
        if v.shape != self.shape:
            v = v.reshape(self.shape) if v.size == self.numel else np.broadcast_to(v, self.shape)
        self._array()[...] = self.dtype.cast(v)

    @property
    def whole(self) -> bool:
        """Covers its base's whole storage."""
        b = self.base
        total = b.free * b.shape_p if isinstance(b, Tile) else int(np.prod(b.shape))
        return self.offset == 0 and self.numel == total and _dense(self.shape, self.strides)

    # the tile API on views
    def __setitem__(self, key, value) -> None:
        view = self[key]
        if isinstance(value, View) and view.same(value):
            return  # `t[k] += x` writes through the view already
        assign(view, value)

    def __iadd__(self, other):
        return iadd(self, other)

    def broadcast_to(self, shape):
        return broadcast_to(self, shape)

    def reshape(self, shape):
        return reshape(self, shape)

    def ap(self, pattern, offset=None, **kwargs):
        return access_pattern(self.base, pattern, offset, self.offset, kwargs)

    def get_pattern(self) -> list:
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    def __add__(self, o):
        return _binary("add", self, o)

    def __radd__(self, o):
        return _binary("add", o, self)

    def __sub__(self, o):
        return _binary("subtract", self, o)

    def __rsub__(self, o):
        return _binary("subtract", o, self)

    def __mul__(self, o):
        return _binary("multiply", self, o)

    def __rmul__(self, o):
        return _binary("multiply", o, self)

    def __truediv__(self, o):
        return _binary("divide", self, o)

    def __rtruediv__(self, o):
        return _binary("divide", o, self)

    def __neg__(self):
        return _binary("multiply", self, -1.0)


def _free_dims(axes, split, view):
    """(sizes, strides) of the free dims: size-1 dims dropped, neighbours that form one
    run merged, but not across `split` (a tensor_reduce's kept | reduced boundary)."""
    out = []
    for i, (n, s) in enumerate(axes):
        if n == 1:
            continue
        group = 0 if split is None or i < split else 1
        if out and out[-1][2] == group and out[-1][1] == n * s:
            out[-1] = (out[-1][0] * n, s, group)
        else:
            out.append((n, s, group))
    if not out:
        out = [(1, 1, 0)]
    if len(out) > 4:
        raise UnsupportedError(f"nki: a view of shape {list(view.shape)} needs {len(out)} free "
                               "dims; a tile has at most 4")
    return [n for n, _, _ in out], [s for _, s, _ in out]


def _dense(shape, strides) -> bool:
    """Whether the axes tile a contiguous block exactly once (in some order)."""
    axes = sorted((s, n) for n, s in zip(shape, strides) if n > 1)
    run = 1
    for s, n in axes:
        if s != run:
            return False
        run *= n
    return True


class Tile:
    """An SBUF or PSUM tile; owns its block until Python drops it. Its storage is
    [partitions, free] row-major; `nl.par_dim` may put the partition dim after leading
    block dims (`(blocks, par_dim(128), 512)`), which then live in the free bytes."""

    def __init__(self, trace: Trace, shape, dtype: DType, memory: str, what: str, pdim: int = 0):
        shape = tuple(int(s) for s in shape)
        if len(shape) < 2:
            shape = (shape[0], 1) if shape else (1, 1)
        if shape[pdim] > PMAX:
            raise NkiError(
                f"nki: {what}: a tile's partition dim is at most {PMAX} (nl.tile_size.pmax), "
                f"got shape {list(shape)}"
            )
        if 0 in shape:
            raise NkiError(f"nki: {what}: a tile of shape {list(shape)} is empty")
        self.trace, self.shape, self.dtype, self.memory, self.pdim = trace, shape, dtype, memory, pdim
        self.shape_p = shape[pdim]
        self.free = int(np.prod(shape)) // self.shape_p
        self._allocator = trace.sbuf if memory == "sbuf" else trace.psum
        self.nbytes = self.shape_p * self.free * dtype.itemsize
        self.spilled, self.spill_tensor, self.last_use = False, None, trace.tick
        self.home = None  # (HBM view, tile geometry) of the last whole-tile DMA, while unwritten
        self.alloc, self._fresh = self._allocator.take(self.free * dtype.itemsize)
        self._allocator.hold(self.alloc, self)
        self._finalizer = weakref.finalize(self, self._allocator.give_back, self.alloc)
        self.storage = np.zeros(self.shape_p * self.free, dtype.np) if trace.numerics else None
        self.producer = None  # the instruction that wrote this tile, while it may be retargeted
        self.producer_clip = None  # the part of the tile it wrote (a mask), None: all
        self.viewed = False  # the kernel indexed it (so it cannot move, Note [NKI tracing])
        self.moved_to = None
        self.pending_zero = False  # nl.zeros on PSUM: the first matmul overwrites instead
        self.matmul_written = False  # nc_matmul(dst=) overwrites until the first write

    def __repr__(self):
        return f"nki tile {list(self.shape)} {self.dtype.name} ({self.memory})"

    @property
    def full(self) -> View:
        """The whole tile as a view in its own shape."""
        if self.moved_to is not None:
            return self.moved_to
        shape, p = self.shape, self.pdim
        inner = int(np.prod(shape[p + 1:]))
        strides = [0] * len(shape)
        strides[p] = self.free
        for d in range(len(shape) - 1, p, -1):
            strides[d] = int(np.prod(shape[d + 1:]))
        for d in range(p - 1, -1, -1):
            strides[d] = inner * int(np.prod(shape[d + 1:p]))
        return View.contiguous(self, shape, f"a tile of shape {list(shape)}", strides)

    @property
    def whole_storage(self) -> View:
        """[partitions, free] in storage order (memset, spills)."""
        if self.moved_to is not None:
            return self.moved_to
        return View.contiguous(self, (self.shape_p, self.free), "a tile")

    @property
    def data(self):
        """The tile's values in its shape (numpy), None without numerics."""
        v = self.full
        return v.read() if self.trace.numerics else None

    def discard(self, moved_to: View) -> None:
        """This temporary's only writer now writes `moved_to` (same shape): free its
        block, and read it from there if the kernel uses it again."""
        self._finalizer.detach()
        self._allocator.cancel(self.alloc, self._fresh)
        self.alloc, self.moved_to, self.producer = None, moved_to, None

    def __getitem__(self, key) -> View:
        self.viewed = True
        return self.full[key]

    def __setitem__(self, key, value) -> None:
        self.full.__setitem__(key, value)

    def __iadd__(self, other):
        iadd(self.full, other)
        return self

    def reshape(self, shape):
        return reshape(self.full, shape)

    def broadcast_to(self, shape):
        return broadcast_to(self.full, shape)

    def ap(self, pattern, offset=None, **kwargs):
        self.viewed = True
        moved = self.moved_to
        if moved is None:
            return access_pattern(self, pattern, offset, 0, kwargs)
        if not (moved.whole and isinstance(moved.base, Tile) and moved.base.free == self.free):
            raise UnsupportedError(f"nki: .ap() on {self!r} after its result was written into "
                                   f"{moved!r}")
        return access_pattern(moved.base, pattern, offset, 0, kwargs)

    __add__, __radd__, __sub__, __rsub__ = View.__add__, View.__radd__, View.__sub__, View.__rsub__
    __mul__, __rmul__, __truediv__, __rtruediv__ = (View.__mul__, View.__rmul__, View.__truediv__,
                                                    View.__rtruediv__)
    __neg__ = View.__neg__


def access_pattern(base, pattern, offset, inherited: int, unsupported: dict) -> View:
    """`t.ap(pattern, offset)`: the view `[[step, num], ...]` of base's flat storage
    (Note [NKI views]); offset None keeps the view's own offset."""
    for name, value in unsupported.items():
        if value is not None and not (name == "dtype" and value is base.dtype) and not (
                name == "indirect_dim" and value == 0):
            raise UnsupportedError(f"nki: .ap({name}=...) (indirect and reinterpreting access "
                                   "patterns)")
    try:
        pairs = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        raise NkiError(f"nki: .ap(pattern) takes a list of [step, num] pairs, got {pattern!r}") from None
    if not pairs or any(num < 1 for _, num in pairs):
        raise NkiError(f"nki: .ap(pattern) needs at least one pair and every num >= 1, got {pattern!r}")
    start = inherited if offset is None else inherited + int(offset)
    steps, nums = [a for a, _ in pairs], [b for _, b in pairs]
    if isinstance(base, Tile):
        if base.pdim != 0:
            raise UnsupportedError("nki: .ap() on a tile whose partition dim is not its first "
                                   f"({list(base.shape)})")
        if nums[0] > 1 and steps[0] != base.free:
            raise NkiError(f"nki: .ap(pattern={pattern!r}) on {base!r}: the partition step must be "
                           f"the tile's free size {base.free} (partitions are read one by one)")
        total = base.shape_p * base.free
    else:
        total = int(np.prod(base.shape))
    checks = ((start, tuple(steps), total, f"the {total} elements of {base!r}"),)
    return View(base, start, nums, steps, checks)


def _geometry(v: View) -> tuple:
    return v.offset, v.shape, v.strides, v.whole


def _root(x):
    """The tile holding operand x's storage, or None (HBM)."""
    if isinstance(x, Tile):
        x = x.full
    if isinstance(x, View) and isinstance(x.base, Tile):
        return x.base
    return None


def as_view(x, what: str) -> View:
    """A Tile, HBM tensor or view as a View."""
    if isinstance(x, (Tile, Tensor)):
        return x.full if isinstance(x, Tile) else x.view
    if isinstance(x, View):
        return x
    raise NkiError(f"nki: {what} must be a tile or a tensor view, got {type(x).__name__}")


def data_of(x):
    """The operand's numpy values, or None when the trace runs without numerics."""
    v = as_view(x, "an operand")
    return v.read() if v.trace.numerics else None


# Set by isa.py (the instructions these tile methods stand for).
assign = iadd = broadcast_to = reshape = _binary = None
