"""The "trn" torch.compile backend: Dynamo FX -> AOTAutograd aten graph -> trn program.

Path: Dynamo hands an FX graph; aot_autograd functionalizes it and applies
decomposition_table() (so RMSNorm, LayerNorm and SwiGLU arrive as elementwise
ops and reductions the core fuses); the fw compiler walks the aten graph and
builds the core's graph IR through the bindings (trnscope._C._CompileGraph),
with every value's meta taken from its FakeTensor (node.meta["val"]). Views
become kView nodes with the FakeTensor's strides and storage offset; ops the
core does not know become eager nodes (Note [Eager nodes] in
core/compiler/program.h) run by _eager_step as aten ops on trn tensors.

Programs are specialized to input signatures (cache.py). A graph Dynamo made
dynamic (symbolic sizes) is specialized at run time per concrete signature.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import operator
import os
import re
import time
import types
import warnings
from typing import Any, Callable

import torch
import torch.fx as fx
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch.utils import _pytree as pytree

from trnscope import _C
from trnscope.compile import cache, config

aten = torch.ops.aten


# ---- Decompositions --------------------------------------------------------------------------
# Note [trn decompositions]: core ATen decompositions, except silu (a fused
# primitive of the core) and native_layer_norm / native_group_norm (the
# hand-written kernels, library ops), plus var/var_mean spelled as mean/sub/mul so that they fuse
# into one row kernel. rms_norm and
# _fused_rms_norm decompose (core ATen) into pow, mean, add, rsqrt, mul, mul:
# one fused kernel. softmax, log_softmax and gelu stay primitives.
def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    dims = list(range(x.dim())) if dim is None else [d % max(x.dim(), 1) for d in dim]
    n = 1
    for d in dims:
        n *= x.shape[d]
    mean = aten.mean.dim(x, dims, True)
    diff = aten.sub.Tensor(x, mean)
    var = aten.mean.dim(aten.mul.Tensor(diff, diff), dims, keepdim)
    c = 1 if correction is None else correction
    if c != 0:
        var = aten.mul.Tensor(var, n / max(n - c, 0) if n - c > 0 else math.inf)
    if not keepdim:
        mean = aten.squeeze.dims(mean, dims)
    return var, mean


def _var(x, dim=None, *, correction=None, keepdim=False):
    return _var_mean(x, dim, correction=correction, keepdim=keepdim)[0]


def _repeat(x, repeats):
    """aten.repeat as expand + a contiguous copy: a view of the result (WavLM's
    position bias) needs repeat's contiguous strides, which torch's own
    decomposition does not give. As the eager kernel (Repeat in
    torch_bridge/ops_nn.cc), each (repeat, size) pair keeps only its members
    that are not 1, and past 8 dims one dim repeats at a time in 3-D."""
    sizes = [1] * (len(repeats) - x.dim()) + list(x.shape)
    spread = [d for r, s in zip(repeats, sizes) for d, keep in ((1, r != 1), (s, s != 1)) if keep]
    tiled = [d for r, s in zip(repeats, sizes) for d, keep in ((r, r != 1), (s, s != 1)) if keep]
    target = [r * s for r, s in zip(repeats, sizes)]
    if len(tiled) <= 8:
        y = x.reshape(spread).expand(tiled).clone(memory_format=torch.contiguous_format)
        return y.view(target)
    y = x.reshape(sizes)
    for d, r in enumerate(repeats):
        if r != 1:
            a, b = math.prod(y.shape[:d]), math.prod(y.shape[d:])
            grown = list(y.shape)
            grown[d] *= r
            y = y.reshape(a, 1, b).expand(a, r, b).clone(memory_format=torch.contiguous_format)
            y = y.view(grown)
    return y


def _eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.eye as torch's reference spells it, with int64 ranges: the
    reference picks uint8 ones below 256 rows, a dtype trn has no kernels for,
    so every graph holding an eye (the gated delta rule's) ran eagerly."""
    rows = torch.arange(n, dtype=torch.int64, device=device).unsqueeze(-1)
    cond = rows == torch.arange(n if m is None else m, dtype=torch.int64, device=device)
    return cond.to(dtype or torch.get_default_dtype())


@functools.cache
def decomposition_table() -> dict:
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    # silu and native_layer_norm stay primitives: the core's fused silu, and the
    # hand-written layer_norm kernel (2.5-4.5x faster than the decomposition
    # through the row interpreter, bench/bench_compile.py).
    for op in (aten.silu.default, aten.silu.out, aten.native_layer_norm.default):
        table.pop(op, None)
    table[aten.var_mean.correction] = _var_mean
    table[aten.var.correction] = _var
    # Composites the core takes once decomposed, and eager steps otherwise:
    # vector norms (reductions and elementwise rows), clamp with tensor bounds
    # (maximum / minimum), repeat (expand + clone). native_group_norm stays the
    # core's group_norm kernel (its decomposition, one row kernel, took 760 us
    # per wav2vec2 forward against the kernel's 347 us).
    table.update(get_decompositions([aten.linalg_vector_norm.default, aten.clamp.Tensor]))
    # elu (EnCodec's, SELU's) and leaky_relu: where + expm1 / mul rows (eager steps before).
    table.update(get_decompositions([aten.elu.default, aten.leaky_relu.default]))
    # Batch statistics without running ones (instance_norm, BiT's weight
    # standardization): var_mean rows (above) and elementwise ones.
    table.update(get_decompositions([aten._native_batch_norm_legit.no_stats]))
    # F.unfold / F.fold stay one library kernel each (their decompositions index
    # and index_put with accumulate: an eager step).
    for op in (aten.im2col.default, aten.col2im.default):
        table.pop(op, None)
    table[aten.repeat.default] = _repeat
    table[aten.eye.default] = table[aten.eye.m] = _eye
    return table


# ---- FX aten graph -> core graph IR -----------------------------------------------------------
_BINARY = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub",
    aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul",
    aten.div.Tensor: "div",
    aten.div.Scalar: "div",
    aten.pow.Tensor_Scalar: "pow",
    aten.pow.Tensor_Tensor: "pow",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
    aten.eq.Tensor: "eq",
    aten.eq.Scalar: "eq",
    aten.ne.Tensor: "ne",
    aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt",
    aten.lt.Scalar: "lt",
    aten.le.Tensor: "le",
    aten.le.Scalar: "le",
    aten.gt.Tensor: "gt",
    aten.gt.Scalar: "gt",
    aten.ge.Tensor: "ge",
    aten.ge.Scalar: "ge",
}
_CLAMPS = (aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default, aten.hardtanh.default)

_UNARY = {
    aten.neg.default: "neg",
    aten.abs.default: "abs",
    aten.relu.default: "relu",
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.reciprocal.default: "reciprocal",
    aten.sigmoid.default: "sigmoid",
    aten.tanh.default: "tanh",
    aten.silu.default: "silu",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.log1p.default: "log1p",
    aten.expm1.default: "expm1",
    aten.erf.default: "erf",  # exact gelu spelled out (ESM, SEW-D)
    # Library kernels (DeBERTa's position buckets); round without decimals.
    aten.floor.default: "floor",
    aten.ceil.default: "ceil",
    aten.trunc.default: "trunc",
    aten.round.default: "round",
    aten.sign.default: "sign",
}
# Floating functions the fused rows do not compute: one library kernel each, libm in
# float32 as the eager kernel (YOSO's acos).
_MATH = {getattr(aten, name).default: name for name in _C._compile_math_names()}
# Note [Complex values]: Op::kComplex's arithmetic codes (graph.h's ComplexCode).
_COMPLEX_BINARY = {aten.add.Tensor: 0, aten.sub.Tensor: 1, aten.mul.Tensor: 2, aten.div.Tensor: 3}
_SDPA_OVERRIDEABLE = aten._scaled_dot_product_fused_attention_overrideable.default


def _sdpa_reference(
    query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False,
    return_debug_mask=False, *, scale=None,
):
    """The argument names of _scaled_dot_product_fused_attention_overrideable (binding only)."""


_LOGICAL = {
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
    aten.logical_not.default: "logical_not",
}
_BITWISE_ON_BOOL = {
    aten.bitwise_and.Tensor: "logical_and",
    aten.bitwise_or.Tensor: "logical_or",
    aten.bitwise_not.default: "logical_not",
}
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_REDUCE = {
    aten.sum.dim_IntList: "sum",
    aten.sum.default: "sum",
    aten.mean.dim: "mean",
    aten.mean.default: "mean",
    aten.amax.default: "amax",
    aten.amin.default: "amin",
    aten.max.default: "amax",  # over every element (Reformer's mask value)
    aten.min.default: "amin",
}
# any / all of a bool tensor are its amax / amin (one_hot's range check, LED's mask test);
# over no elements they are False / True, where amax / amin have no value: eager steps.
_BOOL_REDUCE = {
    aten.any.default: "amax",
    aten.any.dim: "amax",
    aten.any.dims: "amax",
    aten.all.default: "amin",
    aten.all.dim: "amin",
    aten.all.dims: "amin",
}
# max.dim / min.dim: (values, indices) -> the core ops of each output.
_EXTREMUM_DIM = {
    aten.max.dim: ("amax", "argmax"),
    aten.min.dim: ("amin", "argmin"),
}
# topk / sort / cummax / cummin: the indices a core node, the values gathered by them
# (_lower_order).
_ORDER = (aten.topk.default, aten.sort.default, aten.sort.stable, aten.cummax.default,
          aten.cummin.default)
# Tensors whose contents are unspecified (MoE's empty_permuted outputs): zeros will do.
_EMPTY = (aten.empty.memory_format, aten.empty_like.default, aten.empty_permuted.default,
          aten.empty_strided.default)
_FULL = _EMPTY + (
    aten.full.default,
    aten.scalar_tensor.default,
    aten.zeros.default,
    aten.ones.default,
    aten.full_like.default,
    aten.zeros_like.default,
    aten.ones_like.default,
)


class _Unsupported(Exception):
    """The graph cannot be compiled at all (the whole graph then runs eagerly)."""


def _is_view_op(target) -> bool:
    schema = getattr(target, "_schema", None)
    if schema is None or schema.is_mutable or not schema.arguments or not schema.returns:
        return False
    a = schema.arguments[0].alias_info
    return (
        a is not None
        and not a.is_write
        and all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
    )


def _legacy_empty(v) -> bool:
    return isinstance(v, torch.Tensor) and v.dim() == 1 and v.numel() == 0


@torch.library.register_fake("trnscope::gathered_bmm")
def _gathered_bmm_fake(w, ids, x, w_first):
    """Shapes of torch.ops.trnscope.gathered_bmm (Note [Gathered bmm]) under FakeTensors."""
    if w_first:
        return w.new_empty((x.shape[0], w.shape[1], x.shape[2]))
    return w.new_empty((x.shape[0], x.shape[1], w.shape[2]))


def _contiguous_strides(sizes: list[int]) -> list[int]:
    strides, step = [], 1
    for n in reversed(sizes):
        strides.insert(0, step)
        step *= max(n, 1)
    return strides


def _is_number(x) -> bool:
    return isinstance(x, (int, float, bool)) and not isinstance(x, torch.Tensor)


_INDEX_DTYPES = (torch.int32, torch.int64)


def _is_complex(v) -> bool:
    return isinstance(v, torch.Tensor) and v.dtype.is_complex
# Rounding divisions and remainders -> their library kernel (None: by rounding_mode).
_DIVISIONS = {
    aten.div.Tensor_mode: None, aten.div.Scalar_mode: None, aten.floor_divide.default: "div_floor",
    aten.remainder.Tensor: "remainder", aten.remainder.Scalar: "remainder",
    aten.fmod.Tensor: "fmod", aten.fmod.Scalar: "fmod",
}


class _Lowering:
    """Builds one _C._CompileGraph from an aten graph and concrete metas. One use."""

    def __init__(
        self, gm: fx.GraphModule, vals: dict[fx.Node, Any],
        refused: dict[tuple[fx.Node, int | None], str] | None = None,
    ):
        self.gm, self.vals = gm, vals
        # (fx node, output index) -> why: eager nodes the core compiler refused
        # in an earlier try (Note [Refused nodes]).
        self.refused = refused or {}
        self.g = _C._CompileGraph()
        self.ids: dict[fx.Node, int] = {}  # tensor values
        self.consts: dict[fx.Node, Any] = {}  # numbers (specialized sizes)
        self.tensor_inputs: list[int] = []  # placeholder positions that are tensors
        self.num_placeholders = 0
        # Positions in tensor_inputs of CPU tensors copied to the device when the
        # program runs: 0-dim ones, and host inputs (Note [Host inputs]).
        self.cpu_inputs: list[int] = []
        self.host_vals: set[int] = set()  # id() of the host inputs' values and their uses'
        self.device: torch.device | None = None  # of the first trn input
        self.attr_inputs: list[str] = []  # get_attr tensors, appended to the inputs
        # Every core node made from a call: how to run it as an aten op if the
        # compiler turns it into an eager step (Note [Eager nodes]): the fx
        # node, its tensor inputs in the order of the core node's inputs, and
        # the output index of a multi-output op.
        self.calls: dict[int, tuple[fx.Node, list[fx.Node], int | None]] = {}
        self.reasons: dict[int, str] = {}  # why the frontend made an eager node
        self.output_template: list = []
        # Note [Graph asserts]: _assert_async(cond, msg) (F.one_hot's range check)
        # has no output; each cond becomes an extra program output that the
        # call checks after the run, raising msg as CPU's check would. The check
        # comes after the whole program: a later kernel that fails on the same
        # bad data (an index out of range) reports its own error first.
        self.asserts: list[tuple[fx.Node, str]] = []
        self.order_ids: dict[fx.Node, int] = {}  # topk / sort call -> its indices node
        # Note [Complex values]: positions in tensor_inputs of complex64 inputs, and
        # eager steps' complex64 inputs (positions) and output, keyed by core node.
        self.complex_inputs: list[int] = []
        self.complex_steps: dict[int, tuple[list[int], bool]] = {}
        # Note [Host prelude]: CPU values computed per call before the program
        # (graph order), and those of them the program takes as inputs.
        self.prelude: list[fx.Node] = []
        self.prelude_inputs: list[fx.Node] = []
        self.prelude_args: dict[fx.Node, int] = {}  # an input the prelude reads -> its position

    # Meta of a FakeTensor as add_input/add_node take it.
    def _meta(self, v: torch.Tensor, cpu_scalar_ok: bool = False) -> dict:
        if (
            v.device.type != "trn"
            and id(v) not in self.host_vals
            and not (cpu_scalar_ok and v.dim() == 0 and v.device.type == "cpu")
        ):
            raise _Unsupported(f"a value lives on {v.device}, not on trn")
        if v.dtype == torch.complex64:  # Note [Complex values]: the (re, im) pairs
            return dict(
                dtype=torch.float32,
                sizes=[int(s) for s in v.shape] + [2],
                strides=[2 * int(s) for s in v.stride()] + [1],
                storage_offset=2 * int(v.storage_offset()),
            )
        return dict(
            dtype=v.dtype,
            sizes=[int(s) for s in v.shape],
            strides=[int(s) for s in v.stride()],
            storage_offset=int(v.storage_offset()),
        )

    def _add(
        self, node: fx.Node, op: str, inputs: list[fx.Node], target=None, call=None,
        input_ids: list[int] | None = None, **attrs
    ) -> int:
        """input_ids: the core inputs when they are not inputs' own nodes (casts)."""
        m = self._meta(self.vals[node])
        gid = self.g.add_node(
            op=op,
            target=str(node.target if target is None else target),
            inputs=[self.ids[i] for i in inputs] if input_ids is None else input_ids,
            **m,
            **attrs,
        )
        self.calls[gid] = call or (node, list(inputs), None)
        return gid

    def _add_cast(self, x: fx.Node, dtype: torch.dtype) -> int:
        """A contiguous cast of x, a core node no fx node stands for (its eager
        form, should the core leave it to one, is _to_copy)."""
        m = self._meta(self.vals[x])
        m.update(dtype=dtype, strides=_contiguous_strides(m["sizes"]), storage_offset=0)
        gid = self.g.add_node(op="cast", target="aten._to_copy.default", inputs=[self.ids[x]], **m)
        call = types.SimpleNamespace(target=aten._to_copy.default, args=(x,), kwargs={"dtype": dtype})
        self.calls[gid] = (call, [x], None)
        return gid

    def _tensor(self, a) -> bool:
        return isinstance(a, fx.Node) and a in self.ids

    def _value(self, a):
        if isinstance(a, fx.Node):
            if a in self.consts:
                return self.consts[a]
            raise KeyError(a)
        return a

    def _add_eager(self, node: fx.Node, index: int | None = None, reason: str = "") -> int:
        tensors = list(
            dict.fromkeys(a for a in pytree.tree_leaves((node.args, node.kwargs)) if self._tensor(a))
        )
        out = self.vals[node] if index is None else self.vals[node][index]
        m = self._meta(out)
        target = str(node.target) + ("" if index is None else f"[{index}]")
        gid = self.g.add_node(
            op="eager", target=target, inputs=[self.ids[t] for t in tensors], pure=_pure(node), **m
        )
        self.calls[gid] = (node, tensors, index)
        self.reasons[gid] = reason or f"no core op for {node.target}"
        complex_in = [i for i, t in enumerate(tensors) if _is_complex(self.vals[t])]
        if complex_in or _is_complex(out):
            self.complex_steps[gid] = (complex_in, _is_complex(out))
        return gid

    def _host_inputs(self) -> set[fx.Node]:
        """Note [Host inputs]: a model may keep a tensor on the CPU that it moves to
        the device on every call (VideoMAE's sinusoid position table, a plain
        attribute that .to("trn") leaves behind: `table.type_as(x).to(x.device)`).
        Such a CPU placeholder of any rank is copied to trn when the program runs,
        and the ops between it and the move run on trn, when that cannot change
        a result: no graph output is a CPU tensor, and every op on the CPU values
        is pure (no mutation, no RNG) with one tensor output. Returns those
        placeholders and CPU-valued nodes (empty when the rule does not hold:
        the graph then runs eagerly, as before)."""
        host: set[fx.Node] = set()
        for node in self.gm.graph.nodes:
            v = self.vals.get(node)
            on_cpu = isinstance(v, torch.Tensor) and v.device.type == "cpu"
            if node.op == "placeholder":
                if on_cpu and v.dim() > 0:
                    if not v.is_contiguous():  # .to(trn) would not keep its strides
                        return set()
                    host.add(node)
                continue
            if node.op == "output":
                if any(a in host for a in pytree.tree_leaves(node.args[0])):
                    return set()
                continue
            uses_host = any(a in host for a in pytree.tree_leaves((node.args, node.kwargs)))
            if not uses_host:
                continue
            if not isinstance(v, torch.Tensor):
                return set()  # a tuple or a number computed from host values
            if on_cpu:
                if not _pure(node):
                    return set()
                host.add(node)
        return host

    def _host_prelude(self, host: set[fx.Node]) -> list[fx.Node]:
        """Note [Host prelude]: CPU tensors a graph makes from constants alone
        where Note [Host constants] cannot fold them: a graph output (DeBERTa's
        torch.tensor span, which .item() reads after the graph) or an impure op
        (Informer's torch.randint key sample, without a device). They are
        computed on the CPU at every call, before the program, in graph order
        (so a random draw takes the CPU generator's next values, as eagerly);
        trn-side users take them as program inputs copied to the device, a graph
        output is returned as it is. Before, such a value ran the whole graph
        eagerly. Only get_attr constants, number and 0-dim CPU tensor inputs (a
        dynamic graph's sizes, Longformer's chunk count: torch.div(seq_len, w) - 1,
        and that count passed on after a graph break) and other prelude values may
        feed one."""
        prelude: list[fx.Node] = []
        known: set[fx.Node] = set()
        for node in self.gm.graph.nodes:
            v = self.vals.get(node)
            if node.op == "placeholder":
                if _is_number(v) or (isinstance(v, torch.Tensor) and v.device.type == "cpu"
                                     and v.dim() == 0):
                    known.add(node)  # read from the call's arguments (run_prelude)
                continue
            if node.op == "get_attr":
                v = getattr(self.gm, node.target, None)
            if not (isinstance(v, torch.Tensor) and v.device.type == "cpu") or node in host:
                continue
            if v.dtype == torch.complex64:
                continue
            ins = [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)]
            if node.op == "get_attr" or (node.op == "call_function" and all(a in known for a in ins)):
                known.add(node)
                prelude.append(node)
        # Constants only a folded user read, and values no one reads, stay out.
        out = next(n for n in self.gm.graph.nodes if n.op == "output")
        needed: set[fx.Node] = set()
        for node in reversed(prelude):
            if node in needed or any(u not in known for u in node.users):
                needed.add(node)
                needed.update(a for a in node.all_input_nodes if a in known)
        self.prelude_args = {
            n: i for i, n in enumerate(p for p in self.gm.graph.nodes if p.op == "placeholder")
            if n in needed
        }
        return [n for n in prelude if n in needed or n in out.all_input_nodes]

    def lower(self) -> None:
        host = self._host_inputs()
        self.host_vals = {id(self.vals[n]) for n in host}
        self.prelude = self._host_prelude(host)
        for i, node in enumerate(n for n in self.gm.graph.nodes if n.op == "placeholder"):
            self.num_placeholders = i + 1
            v = self.vals[node]
            if isinstance(v, torch.Tensor):
                # A 0-dim CPU tensor mixes with trn tensors as in eager mode;
                # it and the host inputs (Note [Host inputs]) are copied to the
                # device when the program runs.
                self.ids[node] = self.g.add_input(**self._meta(v, cpu_scalar_ok=True))
                if v.dtype == torch.complex64:
                    self.complex_inputs.append(len(self.tensor_inputs))
                if v.device.type != "trn":
                    self.cpu_inputs.append(len(self.tensor_inputs))
                elif self.device is None:
                    self.device = v.device
                self.tensor_inputs.append(i)
            elif _is_number(v):
                self.consts[node] = v
            else:
                raise _Unsupported(f"placeholder {node.name} is a {type(v).__name__}")
        in_prelude = set(self.prelude)
        for node in self.prelude:  # Note [Host prelude]: read by the program
            if any(u not in in_prelude and u.op != "output" for u in node.users):
                v = self.vals[node] if node.op != "get_attr" else getattr(self.gm, node.target)
                self.host_vals.add(id(v))
                m = self._meta(v)
                m.update(strides=_contiguous_strides(m["sizes"]), storage_offset=0)
                self.ids[node] = self.g.add_input(**m)
                self.prelude_inputs.append(node)
        for node in self.gm.graph.nodes:
            if node in in_prelude:
                continue
            if node.op == "get_attr":
                v = getattr(self.gm, node.target)
                if not isinstance(v, torch.Tensor):
                    raise _Unsupported(f"get_attr {node.target} is a {type(v).__name__}")
                self.vals[node] = v
                self.ids[node] = self.g.add_input(**self._meta(v))
                self.attr_inputs.append(node.target)
            elif node.op == "call_function":
                self._lower_call(node)
            elif node.op == "output":
                outs = []
                for a in pytree.tree_leaves(node.args[0]):
                    if a in in_prelude:  # Note [Host prelude]: the CPU value itself
                        self.output_template.append(("h", a))
                    elif self._tensor(a):
                        kind = "z" if _is_complex(self.vals[a]) else "t"  # Note [Complex values]
                        self.output_template.append((kind, len(outs)))
                        outs.append(self.ids[a])
                    else:
                        self.output_template.append(("c", self._value(a)))
                outs += [self.ids[cond] for cond, _ in self.asserts]
                self.g.set_outputs(outs)

    def _lower_call(self, node: fx.Node) -> None:
        t, args, kw = node.target, node.args, node.kwargs
        v = self.vals.get(node)
        if t is operator.getitem:
            src, idx = args
            if src in self.ids:  # not expected: tensors are not indexed by getitem
                raise _Unsupported(f"getitem on tensor {src.name}")
            sv = self.vals[src]
            if isinstance(sv, (tuple, list)) and isinstance(sv[idx], torch.Tensor):
                fused = {aten.native_layer_norm.default: self._lower_layer_norm,
                         aten.native_group_norm.default: self._lower_group_norm,
                         _SDPA_OVERRIDEABLE: self._lower_sdpa,
                         aten._native_batch_norm_legit_no_training.default: self._lower_batch_norm,
                         aten.native_batch_norm.default: self._lower_batch_norm,
                         aten.max_pool2d_with_indices.default: self._lower_max_pool}.get(src.target)
                if (src, idx) in self.refused:
                    self.ids[node] = self._add_eager(src, idx, reason=self.refused[(src, idx)])
                elif src.target in _EXTREMUM_DIM:
                    gid = self._lower_extremum_dim(node, src, idx)
                    self.ids[node] = gid if gid is not None else self._add_eager(src, idx)
                elif src.target in _ORDER:
                    gid = self._lower_order(src, idx)
                    self.ids[node] = gid if gid is not None else self._add_eager(src, idx)
                elif fused is not None and idx == 0:
                    try:
                        gid = fused(node, src)
                    except (KeyError, TypeError, ValueError):
                        gid = None  # an argument the core does not take: run it eagerly
                    self.ids[node] = gid if gid is not None else self._add_eager(src, idx)
                elif _is_view_op(src.target) and self._tensor(src.args[0]):
                    self.ids[node] = self._add(
                        node, "view", [src.args[0]], target=src.target, call=(src, [src.args[0]], idx)
                    )
                else:
                    self.ids[node] = self._add_eager(src, idx)
            else:
                self.consts[node] = sv[idx]
            return
        if t in _ASSERTS:  # Note [Graph asserts]
            if not self._tensor(args[0]):
                raise _Unsupported(f"{node.name} ({t}) asserts a value that is not a trn tensor")
            msg = args[1] if len(args) > 1 and args[1] else _ASSERT_DEFAULT_MSG[t]
            self.asserts.append((args[0], msg))
            return
        if not isinstance(v, torch.Tensor):
            if isinstance(v, (tuple, list)):
                return  # multi-output op: lowered at its getitems
            if _is_number(v):  # sizes of a specialized dynamic graph
                self.consts[node] = v
                return
            raise _Unsupported(f"{node.name} ({t}) produces a {type(v).__name__}")
        if (node, None) in self.refused:
            self.ids[node] = self._add_eager(node, reason=self.refused[(node, None)])
            return
        if _is_complex(v) or any(
            self._tensor(a) and _is_complex(self.vals[a]) for a in pytree.tree_leaves((args, kw))
        ):
            self.ids[node] = self._lower_complex(node, t, args)
            return
        self.ids[node] = self._lower_tensor(node, t, args, kw)

    def _lower_complex(self, node: fx.Node, t, args) -> int:
        """Note [Complex values]: the core has no complex dtype. A complex64 value is
        its (re, im) pairs, a float32 tensor with a trailing dim of 2 (view_as_real's
        layout), so views of it (and view_as_real / view_as_complex) are core views;
        the ops models hit are core library ops on the pairs (_lower_complex_op); any
        other op on a complex value is an eager step, run on complex views of its
        buffers (trn's complex kernels: ops_complex.cc)."""
        v = self.vals[node]
        src = args[0] if args else None
        if self._tensor(src) and t in (aten.view_as_real.default, aten.view_as_complex.default):
            return self._add(node, "view", [src])
        # _conj / _neg_view are views that flip a bit the pairs cannot carry: as
        # eager steps they write the resolved values.
        if (self._tensor(src) and _is_view_op(t) and v.dtype == self.vals[src].dtype
                and t not in (aten._conj.default, aten._neg_view.default)):
            return self._add(node, "view", [src])
        gid = self._lower_complex_op(node, t, args, node.kwargs)
        if gid is not None:
            return gid
        return self._add_eager(node, reason="complex values run as eager steps")

    def _complex_kind(self, a) -> str | None:
        """'z': a complex64 tensor (its pairs), 'r': a float32 one, else None."""
        if not self._tensor(a):
            return None
        d = self.vals[a].dtype
        return "z" if d == torch.complex64 else "r" if d == torch.float32 else None

    def _lower_complex_op(self, node: fx.Node, t, args, kw) -> int | None:
        """Note [Complex values]: the complex ops models hit in their hot paths as core
        library ops on the pairs (Op::kComplex, Op::kFft): arithmetic (Llama 4's and
        DeepSeek-V2's rotary x * freqs_cis), polar, conj, real -> complex casts and
        copies, and the FFTs (FNet, Autoformer); None: an eager step."""
        v = self.vals[node]
        kinds = [self._complex_kind(a) for a in args[:2]]
        out = "z" if v.dtype == torch.complex64 else "r" if v.dtype == torch.float32 else None
        if out is None:
            return None
        code = _COMPLEX_BINARY.get(t)
        if t in (aten.mul.Tensor, aten.div.Tensor) and kinds[0] == "z" and len(args) == 2 \
                and not kw and isinstance(args[1], (int, float)) and not isinstance(args[1], bool):
            # A complex times / over a real number scales both parts: a fused row op.
            return self._add(node, "mul" if t is aten.mul.Tensor else "div", [args[0]],
                             scalar=float(args[1]))
        if code is not None and out == "z" and len(args) == 2 and not kw \
                and None not in kinds and kinds != ["r", "r"]:
            real = int(kinds[0] == "r") | int(kinds[1] == "r") << 1
            return self._add(node, "complex", list(args[:2]), dims=[code, real])
        if t is aten.polar.default and kinds == ["r", "r"] and out == "z":
            return self._add(node, "complex", list(args[:2]), dims=[4, 3])
        if t is aten._conj.default and kinds[0] == "z":
            return self._add(node, "complex", [args[0]], dims=[5, 0])
        unary = {aten.abs.default: (7, "r"), aten.angle.default: (8, "r"), aten.exp.default: (9, "z"),
                 aten.log.default: (10, "z"), aten.sqrt.default: (11, "z")}
        if t in unary and kinds[0] == "z" and unary[t][1] == out and len(args) == 1:
            return self._add(node, "complex", [args[0]], dims=[unary[t][0], 0])  # |stft|
        dev = kw.get("device")  # a host input's move (Note [Host inputs]) copies on trn
        copies = t in (aten.clone.default, aten._to_copy.default) and out == "z" \
            and set(kw) <= {"dtype", "memory_format", "device", "layout"} \
            and (dev is None or torch.device(dev).type == "trn")
        if copies and kinds[0] == "z" and _C._is_non_overlapping(v.shape, v.stride()):
            return self._add(node, "clone", [args[0]])  # the buffer keeps its strides (fuse.cc)
        if copies and kinds[0] == "r" and is_non_overlapping_and_dense_or_false(v):  # kept (fuse.cc)
            return self._add(node, "complex", [args[0]], dims=[6, 1])
        if t in (aten._fft_c2c.default, aten._fft_r2c.default, aten._fft_c2r.default):
            return self._lower_fft(node, t, args, kinds[0], out)
        return None

    def _lower_fft(self, node: fx.Node, t, args, kind: str | None, out: str) -> int | None:
        """Note [FFT passes] (torch_bridge/ops_complex.cc): one core kFft node per
        transformed dim, as eager launches them: r2c along the last dim first, then
        c2c along the others; c2r the c2c passes first, then c2r along the last; the
        last pass scales. Each pass's eager form is the whole op (a refused pass
        runs it eagerly, Note [Refused nodes])."""
        x, xv = args[0], self.vals[args[0]]
        nd = xv.dim()
        dims = [int(self._value(d)) % nd for d in args[1]] if nd else []
        norm = int(self._value(args[2]))
        if not dims or len(set(dims)) != len(dims) or norm not in (0, 1, 2):
            return None
        v = self.vals[node]
        if t is aten._fft_c2c.default:
            if kind != "z" or out != "z":
                return None
            passes = [(0, d) for d in dims]
            forward = bool(self._value(args[3]))
            n = math.prod(xv.shape[d] for d in dims)
        elif t is aten._fft_r2c.default:
            if kind != "r" or out != "z":
                return None
            passes = [(1, dims[-1])] + [(0, d) for d in dims[:-1]]
            forward, n = True, math.prod(xv.shape[d] for d in dims)
        else:
            if kind != "z" or out != "r":
                return None
            passes = [(0, d) for d in dims[:-1]] + [(2, dims[-1])]
            forward, n = False, math.prod(v.shape[d] for d in dims)
        if n == 0 or v.numel() == 0:
            return None
        scale = {0: 1.0, 1: 1.0 / math.sqrt(n), 2: 1.0 / n}[norm]
        prev, sizes = self.ids[x], list(xv.shape)
        for i, (k, d) in enumerate(passes):
            last = i + 1 == len(passes)
            sizes[d] = v.shape[d] if k != 0 or last else sizes[d]
            if last:
                return self._add(node, "fft", [x], input_ids=[prev], dims=[k, d, int(forward)],
                                 scalar=scale)
            pairs = [int(s) for s in sizes] + [2]  # every pass before the last writes pairs
            prev = self.g.add_node(op="fft", target=str(t), inputs=[prev], dims=[k, d, int(forward)],
                                   scalar=1.0, dtype=torch.float32, sizes=pairs,
                                   strides=_contiguous_strides(pairs), storage_offset=0)
            self.calls[prev] = (node, [x], None)
        return None

    def _lower_extremum_dim(self, node: fx.Node, src: fx.Node, idx: int) -> int | None:
        """getitem idx of max.dim / min.dim(x, dim, keepdim) -> the values as amax /
        amin, the indices as argmax / argmin over dim (the same first index and
        NaN rule as torch's); None for bool or 0-dim x."""
        x = src.args[0]
        xv = self.vals[x]
        if not self._tensor(x) or xv.dim() == 0 or xv.dtype == torch.bool:
            return None
        dim = src.kwargs["dim"] if "dim" in src.kwargs else src.args[1]
        dim = int(self._value(dim)) % xv.dim()
        if xv.shape[dim] == 0:
            return None
        op = _EXTREMUM_DIM[src.target][idx]
        return self._add(node, op, [x], target=src.target, dims=[dim], call=(src, [x], idx))

    def _lower_order(self, src: fx.Node, idx: int) -> int | None:
        """getitem idx of topk / sort (MoE routing) / cummax / cummin -> the indices as
        the core's node of that name (one per call, shared by both outputs), the values
        as a gather of x by them; None for a 0-dim x or an argument the core does not
        take."""
        x, a, kw = src.args[0], src.args, src.kwargs
        if not self._tensor(x) or self.vals[x].dim() == 0:
            return None
        nd = self.vals[x].dim()
        if src.target is aten.topk.default:
            k = int(self._value(kw.get("k", a[1])))
            dim = int(self._value(kw.get("dim", a[2] if len(a) > 2 else -1))) % nd
            largest = bool(self._value(kw.get("largest", a[3] if len(a) > 3 else True)))
            op, dims = "topk", [dim, k, int(largest)]  # sorted or not: eager's order
        elif src.target in (aten.cummax.default, aten.cummin.default):
            dim = int(self._value(kw.get("dim", a[1]))) % nd
            op = "cummax" if src.target is aten.cummax.default else "cummin"
            dims = [dim]
        else:  # sort.default(x, dim, descending) / sort.stable(x, *, stable, dim, descending)
            pos = src.target is aten.sort.default
            dim = int(self._value(kw.get("dim", a[1] if pos and len(a) > 1 else -1))) % nd
            desc = bool(self._value(kw.get("descending", a[2] if pos and len(a) > 2 else False)))
            op, dims = "sort", [dim, int(desc)]  # stable: equal keys keep their order
        gid = self.order_ids.get(src)
        if gid is None:
            gid = self.g.add_node(op=op, target=str(src.target), inputs=[self.ids[x]], dims=dims,
                                  **self._meta(self.vals[src][1]))
            self.calls[gid] = (src, [x], 1)
            self.order_ids[src] = gid
        if idx == 1:
            return gid
        vid = self.g.add_node(op="gather", target=str(src.target), inputs=[self.ids[x], gid],
                              dims=[dim], **self._meta(self.vals[src][0]))
        self.calls[vid] = (src, [x], 0)  # its eager form: the call's values
        return vid

    def _lower_sdpa(self, node: fx.Node, src: fx.Node) -> int | None:
        """getitem 0 of _scaled_dot_product_fused_attention_overrideable -> the fused
        attention kernel (or None: an argument the core does not take)."""
        sig = inspect.signature(_sdpa_reference)
        try:
            b = sig.bind(*src.args, **src.kwargs)
        except TypeError:
            return None
        b.apply_defaults()
        a = b.arguments
        q, k, v, mask = a["query"], a["key"], a["value"], a["attn_bias"]
        if not all(self._tensor(x) for x in (q, k, v)) or (mask is not None and not self._tensor(mask)):
            return None
        if float(self._value(a["dropout_p"])) != 0.0:
            return None
        scale = self._value(a["scale"])
        d = self.vals[q].shape[-1]
        scale = float(scale) if scale is not None else 1.0 / math.sqrt(d)
        inputs = [q, k, v] + ([mask] if mask is not None else [])
        return self._add(
            node,
            "sdpa",
            inputs,
            target="aten.scaled_dot_product_attention",
            call=(src, inputs, 0),
            scalar=scale,
            causal=bool(self._value(a["is_causal"])),
        )

    def _lower_layer_norm(self, node: fx.Node, src: fx.Node) -> int | None:
        """getitem 0 of native_layer_norm(x, normalized_shape, weight, bias, eps), with
        weight and bias, weight alone (ModernBERT) or neither -> the layer_norm kernel
        (or None: run it eagerly)."""
        x, shape, w, b, eps = (list(src.args) + [None] * 5)[:5]
        params = [t for t in (w, b) if t is not None]
        if (w is None and b is not None) or not all(self._tensor(t) for t in [x, *params]):
            return None
        k = len(self._value(shape))
        return self._add(
            node, "layer_norm", [x, *params], target="aten.layer_norm",
            call=(src, [x, *params], 0), dims=[k], eps=float(self._value(eps)),
        )

    def _lower_group_norm(self, node: fx.Node, src: fx.Node) -> int | None:
        """getitem 0 of native_group_norm(x, weight, bias, N, C, HxW, group, eps) ->
        the group_norm kernel (or None: a bias without a weight runs eagerly)."""
        x, w, b, _n, _c, _hw, group, eps = src.args
        params = [t for t in (w, b) if t is not None]
        if (w is None and b is not None) or not all(self._tensor(t) for t in [x, *params]):
            return None
        return self._add(
            node, "group_norm", [x, *params], target="aten.group_norm",
            call=(src, [x, *params], 0), dims=[int(self._value(group))],
            eps=float(self._value(eps)),
        )

    def _lower_batch_norm(self, node: fx.Node, src: fx.Node) -> int | None:
        """getitem 0 of batch norm with running statistics in inference -> the batch_norm
        kernel (or None: training, or only one of weight and bias)."""
        if src.target is aten.native_batch_norm.default:
            x, w, b, mean, var, training, _, eps = (list(src.args) + [None] * 8)[:8]
            if self._value(training):
                return None
        else:
            x, w, b, mean, var, _, eps = (list(src.args) + [None] * 7)[:7]
        if not all(self._tensor(t) for t in (x, mean, var)) or (w is None) != (b is None):
            return None
        affine = [w, b] if w is not None else []
        if not all(self._tensor(t) for t in affine):
            return None
        inputs = [x, mean, var] + affine
        return self._add(
            node, "batch_norm", inputs, target="aten.batch_norm", call=(src, inputs, 0),
            eps=float(self._value(eps)),
        )

    def _pool_attrs(self, kernel, stride, padding, dilation) -> list[int] | None:
        """A pooling's kernel, stride, padding and dilation, two values each (H, W), as
        the core's pool attributes; an empty stride is the kernel, as in torch."""

        def pair(a, default):
            a = self._value(a) if a is not None else default
            a = [int(e) for e in (a if isinstance(a, (list, tuple)) else [a])] or default
            return a * 2 if len(a) == 1 else a

        k = pair(kernel, None)
        attrs = k + pair(stride, k) + pair(padding, [0]) + pair(dilation, [1])
        return attrs if len(attrs) == 8 else None

    def _lower_max_pool(self, node: fx.Node, src: fx.Node) -> int | None:
        """getitem 0 of max_pool2d_with_indices on a 4-D input -> the max_pool2d kernel
        (the indices, when used, come from the eager op)."""
        x, kernel, stride, padding, dilation = (list(src.args) + [None] * 5)[:5]
        if not self._tensor(x) or self.vals[x].dim() != 4:
            return None
        attrs = self._pool_attrs(kernel, stride, padding, dilation)
        if attrs is None:
            return None
        return self._add(
            node, "max_pool2d", [x], target="aten.max_pool2d", call=(src, [x], 0), pool=attrs
        )

    def _lower_division(self, node: fx.Node, t, args, kw) -> int | None:
        """div with rounding_mode "trunc" / "floor" and floor_divide (MoE routing's
        expert ids // top_k; DETR's float positions), remainder and fmod (roll's
        index) -> the div_trunc / div_floor / remainder / fmod library kernels,
        eager's kernels: integers and floats (bfloat16 / float16 rounding as CPU)."""
        a, b = args[0], args[1]
        op = _DIVISIONS[t]
        if op is None:
            mode = kw.get("rounding_mode", args[2] if len(args) > 2 else None)
            if mode not in ("trunc", "floor"):
                return None
            op = "div_" + mode
        out = self.vals[node]
        if out.dtype == torch.bool:
            return None
        if not self._tensor(a) or self.vals[a].dtype != out.dtype:
            return None
        if self._tensor(b):
            return self._add(node, op, [a, b]) if self.vals[b].dtype == out.dtype else None
        s = self._value(b)
        if isinstance(s, bool) or not _is_number(s):
            return None
        if out.dtype.is_floating_point:  # a 0 divides to inf / NaN, as in eager mode
            return self._add(node, op, [a], scalar=float(s))
        # An integer 0 stays eager, where it raises at the call as in eager mode.
        if not isinstance(s, int) or s == 0 or abs(s) >= 2**53:
            return None
        return self._add(node, op, [a], scalar=float(s))

    def _lower_slice_scatter(self, node: fx.Node, args, kw) -> int | None:
        """slice_scatter(self, src, dim, start, end, step) -> the slice_scatter kernel:
        a copy of self with src written into the slice (bounds normalized as torch's
        slicing does)."""
        names = ("self", "src", "dim", "start", "end", "step")
        a = dict(zip(names, args)) | kw
        x, src = a["self"], a["src"]
        if not (self._tensor(x) and self._tensor(src)):
            return None
        if self.vals[src].dtype != self.vals[x].dtype:
            return None
        shape = self.vals[x].shape
        if len(shape) == 0:
            return None
        dim = int(self._value(a.get("dim", 0))) % len(shape)
        size = int(shape[dim])
        step = int(self._value(a.get("step", 1)) or 1)

        def bound(b, default):
            b = self._value(b)
            b = default if b is None else int(b)
            return min(max(b + size if b < 0 else b, 0), size)

        start = bound(a.get("start"), 0)
        end = max(bound(a.get("end"), size), start)
        return self._add(node, "slice_scatter", [x, src], dims=[dim, start, end, step])

    def _lower_avg_pool(self, node: fx.Node, args, kw) -> int | None:
        """avg_pool2d on a 4-D input -> the avg_pool2d kernel (EfficientNet, Inception:
        count_include_pad and divisor_override as torch's; ceil_mode is in the output
        sizes)."""
        names = ("self", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                 "divisor_override")
        a = dict(zip(names, args)) | kw
        x = a["self"]
        if not self._tensor(x) or self.vals[x].dim() != 4:
            return None
        attrs = self._pool_attrs(a["kernel_size"], a.get("stride"), a.get("padding"), None)
        if attrs is None:
            return None
        divisor = self._value(a.get("divisor_override"))
        attrs += [int(bool(self._value(a.get("count_include_pad", True)))), int(divisor or 0)]
        return self._add(node, "avg_pool2d", [x], pool=attrs)

    def _lower_index_put(self, node: fx.Node, args, kw) -> int | None:
        """index_put(self, indices, values[, accumulate]) with integer index tensors
        (broadcasting, on any dims: a static KV cache's update, index_add with
        accumulate, Informer's `context[b, h, index] = update`) -> the index_put kernel;
        one boolean mask without accumulate and one value -> a where; None otherwise
        (run it eagerly)."""
        self_, indices, values = args[:3]
        accumulate = bool(self._value(kw.get("accumulate", args[3] if len(args) > 3 else False)))
        given = [(d, i) for d, i in enumerate(indices) if i is not None]
        if not given or not self._tensor(values) or not all(self._tensor(i) for _, i in given):
            return None
        if len(given) == 1 and self.vals[given[0][1]].dtype == torch.bool and not accumulate:
            return self._lower_masked_put(node, self_, given[0][0], given[0][1], values)
        if any(self.vals[i].dtype not in _INDEX_DTYPES for _, i in given):
            return None
        return self._add(node, "index_put", [self_] + [i for _, i in given] + [values],
                         dims=[d for d, _ in given] + [int(accumulate)])

    def _lower_masked_put(self, node: fx.Node, x: fx.Node, dim: int, mask: fx.Node,
                          value: fx.Node) -> int | None:
        """x[..., mask] = value (a boolean mask over dims dim.., one value: Longformer's
        global-attention mask fill) is where(mask, value, x), the mask given trailing
        unit dims for x's dims after it; None where the mask's shape is not x's there
        (eager raises the error) or the value is not one element."""
        xv, mv, vv = self.vals[x], self.vals[mask], self.vals[value]
        m = mv.dim()
        if m == 0 or tuple(xv.shape[dim:dim + m]) != tuple(mv.shape) or vv.numel() != 1 \
                or vv.dim() > xv.dim() or vv.dtype != xv.dtype:
            return None
        cond = self.ids[mask]
        rest = xv.dim() - dim - m
        if rest:
            sizes = list(mv.shape) + [1] * rest
            cond = self.g.add_node(
                op="view", target="aten.reshape.default", inputs=[cond], dtype=torch.bool,
                sizes=sizes, strides=[int(t) for t in mv.stride()] + [1] * rest,
                storage_offset=int(mv.storage_offset()))
            # Named by the index_put: a refused view runs the whole put eagerly
            # (Note [Refused nodes]), as a refused where does.
            self.calls[cond] = (node, [mask], None)
        return self._add(node, "where", [mask, value, x],
                         input_ids=[cond, self.ids[value], self.ids[x]])

    def _lower_im2col(self, node: fx.Node, t, args, kw) -> int | None:
        """F.unfold (im2col [N,C,H,W] -> [N, C*K, L]) / F.fold (col2im back, summing
        overlaps: MobileViTV2) -> one library kernel each, batched and floating; None
        otherwise (an eager step on trn's kernel)."""
        names = ("kernel_size", "dilation", "padding", "stride")
        a = dict(zip(("self",) + (("output_size",) if t is aten.col2im.default else ()) + names,
                     args), **kw)
        x, v = self.vals[args[0]], self.vals[node]
        if x.dim() != (4 if t is aten.im2col.default else 3) or not v.dtype.is_floating_point \
                or x.dtype != v.dtype or v.numel() == 0:
            return None
        pairs = [[int(self._value(e)) for e in a[k]] for k in names]
        if any(len(p) != 2 for p in pairs):
            return None
        (kh, kw_), (dh, dw), (ph, pw), (sh, sw) = pairs
        op = "im2col" if t is aten.im2col.default else "col2im"
        return self._add(node, op, [args[0]], pool=[kh, kw_, sh, sw, ph, pw, dh, dw])

    def _lower_conv(self, node: fx.Node, args, kw) -> int | None:
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed",
                 "output_padding", "groups")
        a = dict(zip(names, args), **kw)
        x, w, bias = a["input"], a["weight"], a.get("bias")
        transposed = bool(self._value(a.get("transposed", False)))
        if not (self._tensor(x) and self._tensor(w)):
            return None
        rank = self.vals[x].dim()
        if rank not in ((3, 4) if transposed else (3, 4, 5)) \
                or (bias is not None and not self._tensor(bias)):
            return None
        stride, padding, dilation = (
            [int(self._value(e)) for e in a[key]] for key in ("stride", "padding", "dilation")
        )
        # One value stands for every spatial dim (SigLIP's padding="valid" is [0]).
        stride, padding, dilation = (
            v * (rank - 2) if len(v) == 1 else v for v in (stride, padding, dilation)
        )
        if not (len(stride) == len(padding) == len(dilation) == rank - 2):
            return None
        begin, end = list(padding), list(padding)
        if rank < 5 and not transposed:  # kernels::Conv3d pads each side alike: no pad folded
            x = self._fold_zero_pad(x, rank, begin, end)
        # The core's attributes run over (T, H, W); a lower rank leaves the first unused.
        unused = 5 - rank
        stride, begin, end, dilation = (
            [fill] * unused + v for v, fill in ((stride, 1), (begin, 0), (end, 0), (dilation, 1))
        )
        inputs = [x, w] + ([bias] if bias is not None else [])
        conv = stride + begin + end + dilation + [int(self._value(a["groups"]))]
        # A transposed one's output_padding is in the node's sizes (the core checks them).
        return self._add(node, "conv_transpose" if transposed else "conv", inputs, conv=conv)

    def _fold_zero_pad(self, x: fx.Node, rank: int, begin: list, end: list) -> fx.Node:
        """A zero constant_pad_nd of the spatial dims feeding a convolution (HF
        MobileNet's TensorFlow-style "same" padding, often asymmetric) becomes
        the convolution's own padding: x's input is returned, begin/end grown."""
        if x.target is not aten.constant_pad_nd.default or not self._tensor(x.args[0]):
            return x
        try:
            pads = [int(self._value(p)) for p in x.args[1]]
            value = float(self._value(x.kwargs.get("value", x.args[2] if len(x.args) > 2 else 0)))
        except (KeyError, TypeError, ValueError):
            return x
        if value != 0 or len(pads) not in (2, 2 * (rank - 2)) or min(pads) < 0:
            return x
        for i in range(len(pads) // 2):  # pads run from the last dim backwards
            d = len(begin) - 1 - i  # the spatial dims' index: W last
            begin[d] += pads[2 * i]
            end[d] += pads[2 * i + 1]
        return x.args[0]

    def _lower_gathered_bmm(self, node: fx.Node, a, b) -> int | None:
        """Note [Gathered bmm]: off the CPU, transformers' MoE decode step
        (`batched_mm` experts) gathers every token's expert weights, w[ids]
        (megabytes per layer), and multiplies them with bmm. bmm of one
        `index.Tensor(w, [ids])` operand runs as trnscope.gathered_bmm instead:
        one kernel reads ids on the device and multiplies w[ids[b]] in place.
        The gather, left without users, is dropped (a pure eager node)."""
        for gathered, other, w_first in ((a, b, True), (b, a, False)):
            if not (isinstance(gathered, fx.Node) and gathered.target is aten.index.Tensor):
                continue
            w, idx = gathered.args[0], gathered.args[1]
            if not (len(idx) == 1 and self._tensor(w) and self._tensor(idx[0]) and self._tensor(other)):
                continue
            wv, iv = self.vals[w], self.vals[idx[0]]
            if wv.dim() != 3 or iv.dim() != 1 or iv.dtype not in (torch.int64, torch.int32):
                continue
            if wv.dtype != self.vals[other].dtype or not wv.dtype.is_floating_point:
                continue
            op = torch.ops.trnscope.gathered_bmm.default
            call = types.SimpleNamespace(target=op, args=(w, idx[0], other, w_first), kwargs={})
            tensors = [w, idx[0], other]
            gid = self.g.add_node(
                op="eager", target=str(op), inputs=[self.ids[x] for x in tensors],
                **self._meta(self.vals[node]),
            )
            self.calls[gid] = (call, tensors, None)
            self.reasons[gid] = "a gathered bmm (Note [Gathered bmm]): one native trn kernel"
            return gid
        return None

    def _lower_moe_fallback(self, node: fx.Node, args) -> int | None:
        """Note [MoE fallback]: under torch.compile transformers' MoE experts call
        transformers::grouped_mm_fallback, an opaque custom op that reads the
        group offsets back to the host (`offs.tolist()`, a sync per call) and runs
        one mm per expert. Its contract is torch._grouped_mm's (rows past the last
        offset are 0), so it runs as trn's _grouped_mm: one kernel, offsets read on
        the device, the experts' weights in the packed-weight cache."""
        x, w, offs = (list(args) + [None] * 3)[:3]
        if not all(self._tensor(a) for a in (x, w, offs)):
            return None
        xv, wv, ov = self.vals[x], self.vals[w], self.vals[offs]
        if not (xv.dim() == 2 and wv.dim() == 3 and ov.dim() == 1 and xv.dtype == wv.dtype
                and wv.dtype.is_floating_point and ov.dtype in (torch.int32, torch.int64)):
            return None
        call = types.SimpleNamespace(target=_grouped_mm_on_trn, args=(x, w, offs), kwargs={})
        gid = self.g.add_node(
            op="eager", target=str(node.target), inputs=[self.ids[a] for a in (x, w, offs)],
            **self._meta(self.vals[node]),
        )
        self.calls[gid] = (call, [x, w, offs], None)
        self.reasons[gid] = (
            "transformers' MoE fallback as one _grouped_mm kernel (Note [MoE fallback])"
        )
        return gid

    def _lower_clamp(self, node: fx.Node, t, args, kw) -> int | None:
        """clamp / hardtanh (relu6) with number bounds -> maximum then minimum with
        scalars (NaN stays NaN, lo > hi gives hi, as torch)."""
        if t is aten.hardtanh.default:
            lo = kw.get("min_val", args[1] if len(args) > 1 else -1.0)
            hi = kw.get("max_val", args[2] if len(args) > 2 else 1.0)
        elif t is aten.clamp_min.default:
            lo, hi = kw.get("min", args[1]), None
        elif t is aten.clamp_max.default:
            lo, hi = None, kw.get("max", args[1])
        else:
            lo = kw.get("min", args[1] if len(args) > 1 else None)
            hi = kw.get("max", args[2] if len(args) > 2 else None)
        lo, hi = (None if b is None else self._value(b) for b in (lo, hi))
        if not all(b is None or _is_number(b) for b in (lo, hi)) or lo is hi is None:
            return None
        if not self.vals[node].dtype.is_floating_point and any(
            b is not None and float(b) != int(b) for b in (lo, hi)
        ):
            return None  # an integer tensor with a fractional bound
        steps = [(op, float(b)) for op, b in (("maximum", lo), ("minimum", hi)) if b is not None]
        m = self._meta(self.vals[node])
        cur = self.ids[args[0]]
        for op, bound in steps:
            cur = self.g.add_node(op=op, target=str(node.target), inputs=[cur], **m, scalar=bound)
            # Should the core leave a step to the eager path, the whole clamp
            # runs there: clamping again after it changes nothing.
            self.calls[cur] = (node, [args[0]], None)
        return cur

    def _lower_tensor(self, node, t, args, kw) -> int:
        v = self.vals[node]
        try:
            if t in _BINARY:
                a, b = args[0], args[1]
                alpha = float(self._value(kw.get("alpha", args[2] if len(args) > 2 else 1)))
                if t in (aten.div.Tensor, aten.div.Scalar) and kw.get("rounding_mode") is not None:
                    return self._add_eager(node, reason="div with a rounding_mode is not a core op")
                if self._tensor(a) and self._tensor(b):
                    da, db = self.vals[a].dtype, self.vals[b].dtype
                    if da != db and not da.is_floating_point and not db.is_floating_point:
                        # Integers of two widths (LongT5's int64 positions against int32
                        # block ids): the core's integer kernels take one dtype, so the
                        # narrower operand is cast to the promoted one, as torch computes.
                        common = torch.result_type(self.vals[a], self.vals[b])  # 0-dim rule
                        ids = [self.ids[x] if self.vals[x].dtype == common else self._add_cast(x, common)
                               for x in (a, b)]
                        return self._add(node, _BINARY[t], [a, b], input_ids=ids, alpha=alpha)
                    return self._add(node, _BINARY[t], [a, b], alpha=alpha)
                first = not self._tensor(a)  # a number first (RWKV's `1 - time_mix`)
                if first and not (self._tensor(b) and alpha == 1 and _is_number(self._value(a))):
                    return self._add_eager(node, reason="the first operand is not a trn tensor")
                x, number = (b, float(self._value(a))) if first else (a, float(self._value(b)))
                if (
                    _BINARY[t] in _COMPARISONS
                    and not self.vals[x].dtype.is_floating_point
                    and not number.is_integer()
                ):
                    # The core compares in the tensor's dtype, which would truncate 2.5.
                    return self._add_eager(
                        node, reason="an integer tensor compared with a fractional number"
                    )
                return self._add(
                    node, _BINARY[t], [x], scalar=number, alpha=alpha, scalar_first=first
                )
            if t in (aten.rsub.Scalar, aten.pow.Scalar):  # scalar op tensor
                x, s = (args[0], args[1]) if t is aten.rsub.Scalar else (args[1], args[0])
                alpha = float(self._value(kw.get("alpha", args[2] if len(args) > 2 else 1)))
                if not self._tensor(x) or alpha != 1:
                    return self._add_eager(node, reason="alpha != 1 or no tensor operand")
                op = "sub" if t is aten.rsub.Scalar else "pow"
                return self._add(node, op, [x], scalar=float(self._value(s)), scalar_first=True)
            if t is aten.convolution.default:
                gid = self._lower_conv(node, args, kw)
                if gid is not None:
                    return gid
                return self._add_eager(
                    node, reason="a convolution the core does not lower (it takes 1-D, 2-D "
                    "and 3-D, transposed 1-D and 2-D): trn's native kernel runs"
                )
            if (
                t in _CLAMPS
                and self._tensor(args[0])
                and (
                    v.dtype.is_floating_point
                    or (  # BEiT's position index: integer bounds only (_lower_clamp checks)
                        v.dtype == self.vals[args[0]].dtype
                        and v.dtype != torch.bool
                        and t is not aten.hardtanh.default
                    )
                )
            ):
                gid = self._lower_clamp(node, t, args, kw)
                if gid is not None:
                    return gid
            if t in _UNARY:
                return self._add(node, _UNARY[t], [args[0]])
            if t in _MATH and self._tensor(args[0]) and v.dtype.is_floating_point \
                    and self.vals[args[0]].dtype == v.dtype:
                return self._add(node, _MATH[t], [args[0]])
            if t is aten.isnan.default and self._tensor(args[0]):  # clamp's decomposition
                if self.vals[args[0]].dtype.is_floating_point:
                    return self._add(node, "ne", [args[0], args[0]])  # only NaN != NaN
            if t in _LOGICAL and all(self._tensor(a) for a in args):
                return self._add(node, _LOGICAL[t], list(args))
            if (
                t in _BITWISE_ON_BOOL
                and all(self._tensor(a) for a in args)
                and all(self.vals[a].dtype == torch.bool for a in args)
            ):  # masks: `a & b`, `a | b`, `~a` on bool tensors
                return self._add(node, _BITWISE_ON_BOOL[t], list(args))
            if t is aten.cat.default:
                # torch.cat skips 1-D empty parts (a KV cache's first concat).
                parts = [p for p in args[0] if not _legacy_empty(self.vals.get(p))]
                dim = int(self._value(kw.get("dim", args[1] if len(args) > 1 else 0)))
                if len(parts) == 1 and self._tensor(parts[0]) and self.vals[parts[0]].shape == v.shape:
                    op = "cast" if v.dtype != self.vals[parts[0]].dtype else "clone"
                    return self._add(node, op, parts)
                if parts and all(
                    self._tensor(p) and self.vals[p].dim() == v.dim() for p in parts
                ):
                    return self._add(node, "cat", parts, dims=[dim % max(v.dim(), 1)])
            if t is aten.index_put.default:
                gid = self._lower_index_put(node, args, kw)
                if gid is not None:
                    return gid
            if t in (aten.arange.default, aten.arange.start, aten.arange.start_step):
                ends = [self._value(a) for a in args]
                start, step = (0, 1) if len(ends) == 1 else (ends[0], ends[2] if len(ends) > 2 else 1)
                if all(_is_number(e) for e in ends) and v.dim() == 1 and v.device.type == "trn":
                    return self._add(node, "arange", [], scalar=float(start), alpha=float(step))
            if t is aten.embedding.default and self._tensor(args[0]) and self._tensor(args[1]):
                weight, index = args[0], args[1]
                if self.vals[weight].dim() == 2 and self.vals[index].is_contiguous():
                    return self._add(node, "embedding", [weight, index])
                if self.vals[index].dtype in _INDEX_DTYPES:  # a broadcast index (BERT's token types)
                    return self._add(node, "index", [weight, index], dims=[0])
            if t is aten.index.Tensor and self._tensor(args[0]):
                # Advanced indexing by integer tensors (transformers' padding
                # masks: mask[batch_idx, kv_idx]); a bool index is data-dependent.
                picked = [(d, i) for d, i in enumerate(args[1]) if i is not None]
                if picked and all(
                    self._tensor(i) and self.vals[i].dtype in _INDEX_DTYPES for _, i in picked
                ):
                    return self._add(
                        node, "index", [args[0]] + [i for _, i in picked], dims=[d for d, _ in picked]
                    )
            if t is aten.index_select.default and self._tensor(args[0]) and self._tensor(args[2]):
                x = self.vals[args[0]]
                if x.dim() > 0 and self.vals[args[2]].dim() == 1:  # a 0-d index: eager
                    dim = int(self._value(args[1])) % x.dim()
                    return self._add(node, "index_select", [args[0], args[2]], dims=[dim])
            if t is aten.gather.default and self._tensor(args[0]) and self._tensor(args[2]):
                x = self.vals[args[0]]
                if x.dim() > 0 and not kw.get("sparse_grad", False):
                    dim = int(self._value(args[1])) % x.dim()
                    return self._add(node, "gather", [args[0], args[2]], dims=[dim])
            if t in (aten.scatter.value, aten.scatter.src, aten.scatter_add.default) \
                    and self._tensor(args[0]) and self._tensor(args[2]):
                x, src = self.vals[args[0]], args[3]  # the MoE routers' one-hot: scatter.value
                if x.dim() > 0 and not kw and self.vals[args[2]].dtype == torch.int64:
                    dim = int(self._value(args[1])) % x.dim()
                    add = int(t is aten.scatter_add.default)
                    value = self._value(src) if t is aten.scatter.value else None
                    if isinstance(value, (bool, int, float)) and float(value) == value:
                        return self._add(node, "scatter", [args[0], args[2]], dims=[dim, add],
                                         scalar=float(value))
                    if t is not aten.scatter.value and self._tensor(src):
                        return self._add(node, "scatter", [args[0], args[2], src], dims=[dim, add])
            if t is aten.logcumsumexp.default and self._tensor(args[0]):
                x = self.vals[args[0]]
                if x.dim() > 0 and x.dtype.is_floating_point:
                    dim = int(self._value(kw.get("dim", args[1]))) % x.dim()
                    return self._add(node, "logcumsumexp", [args[0]], dims=[dim])
            if t is aten.cumsum.default and self._tensor(args[0]):
                x = self.vals[args[0]]
                if x.dim() > 0 and v.dtype != torch.bool:  # masks' positions (OPT, RoBERTa)
                    dim = int(self._value(args[1])) % x.dim()
                    src = self.ids[args[0]]
                    if x.dtype != v.dtype:  # an int32 mask sums in int64, as torch's
                        src = self._add_cast(args[0], v.dtype)
                    gid = self.g.add_node(
                        op="cumsum", target=str(node.target), inputs=[src], dims=[dim], **self._meta(v)
                    )
                    self.calls[gid] = (node, [args[0]], None)
                    return gid
            if t in _DIVISIONS:
                gid = self._lower_division(node, t, args, kw)
                if gid is not None:
                    return gid
            if str(t) == "transformers.grouped_mm_fallback.default":
                gid = self._lower_moe_fallback(node, args)
                if gid is not None:
                    return gid
            if t is aten.slice_scatter.default:
                gid = self._lower_slice_scatter(node, args, kw)
                if gid is not None:
                    return gid
            if t is aten.copy.default and self._tensor(args[0]) and self._tensor(args[1]):
                # Note [Functional copy]: a functionalized `dst.copy_(src)` / `dst[...] =
                # src` is src's values in dst's layout, which views of it index by: a
                # clone (or cast) where that layout is the one its buffer gets:
                # contiguous (Mamba's cache updates), or strided from offset 0 without
                # overlap (the core keeps those strides, holes and all: BART's
                # shift_tokens_right writes a column), or where only a slice_scatter
                # reads the values (BART's other copy, into a slice at offset 1).
                src = args[1]
                scattered = node.users and all(  # and each scatter lowers (same dtypes)
                    u.target is aten.slice_scatter.default and u.args[1] is node
                    and u.args[0] is not node and self._tensor(u.args[0])
                    and self.vals[u.args[0]].dtype == v.dtype for u in node.users
                )
                dense = v.is_contiguous() and v.storage_offset() == 0
                holes = v.storage_offset() == 0 and _C._is_non_overlapping(v.shape, v.stride())
                if self.vals[src].shape == v.shape and (dense or holes or scattered):
                    op = "cast" if v.dtype != self.vals[src].dtype else "clone"
                    return self._add(node, op, [src])
            if t in (aten.im2col.default, aten.col2im.default) and self._tensor(args[0]):
                gid = self._lower_im2col(node, t, args, kw)
                if gid is not None:
                    return gid
            if t is aten._adaptive_avg_pool2d.default and self._tensor(args[0]) \
                    and self.vals[args[0]].dim() == 4 and v.dtype == self.vals[args[0]].dtype \
                    and v.dtype.is_floating_point and v.numel() > 0:
                return self._add(node, "adaptive_avg_pool2d", [args[0]])  # TextNet's head
            if t is aten.avg_pool2d.default:
                gid = self._lower_avg_pool(node, args, kw)
                if gid is not None:
                    return gid
            if t is aten.flip.default and self._tensor(args[0]) and self.vals[args[0]].dim() > 0:
                nd = self.vals[args[0]].dim()  # LED's chunked attention
                dims = sorted({int(self._value(d)) % nd for d in kw.get("dims", args[1])})
                return self._add(node, "flip", [args[0]], dims=dims)
            if t is aten.linalg_solve_triangular.default and self._tensor(args[0]) \
                    and self._tensor(args[1]):  # Qwen3-Next's chunked gated delta rule
                a, b = self.vals[args[0]], self.vals[args[1]]
                left = bool(self._value(kw.get("left", args[3] if len(args) > 3 else True)))
                if left and a.dtype == b.dtype == v.dtype and v.dtype in (torch.float32, torch.float64):
                    upper = bool(self._value(kw.get("upper", args[2] if len(args) > 2 else False)))
                    unit = bool(self._value(kw.get("unitriangular",
                                                   args[4] if len(args) > 4 else False)))
                    return self._add(node, "linalg_solve_triangular", [args[0], args[1]],
                                     dims=[int(upper), int(unit)])
            if t is aten.histc.default and self._tensor(args[0]):  # MoE expert counts
                if self.vals[args[0]].dtype != torch.bool:
                    bins = int(self._value(kw.get("bins", args[1] if len(args) > 1 else 100)))
                    lo = float(self._value(kw.get("min", args[2] if len(args) > 2 else 0)))
                    hi = float(self._value(kw.get("max", args[3] if len(args) > 3 else 0)))
                    if bins > 0 and math.isfinite(lo) and math.isfinite(hi) and lo <= hi:
                        return self._add(node, "histc", [args[0]], dims=[bins], scalar=lo,
                                         alpha=hi)  # else eager, which raises as CPU
            if t in (aten.argmax.default, aten.argmin.default) and self._tensor(args[0]):
                x = self.vals[args[0]]  # argmax: CLIP's text pooling
                dim = kw.get("dim", args[1] if len(args) > 1 else None)
                if dim is not None and x.dim() > 0 and x.dtype != torch.bool:
                    op = "argmax" if t is aten.argmax.default else "argmin"
                    return self._add(node, op, [args[0]], dims=[int(self._value(dim)) % x.dim()])
            if t is aten.constant_pad_nd.default and self._tensor(args[0]):  # Swin's windows
                pads = [int(self._value(p)) for p in args[1]]  # negative ones crop
                value = self._value(kw.get("value", args[2] if len(args) > 2 else 0))
                if _is_number(value):
                    return self._add(node, "pad", [args[0]], dims=pads, scalar=float(value))
            if t is aten.gelu.default:
                approx = kw.get("approximate", args[1] if len(args) > 1 else "none")
                return self._add(node, "gelu_tanh" if approx == "tanh" else "gelu", [args[0]])
            if t is aten.where.self and all(self._tensor(a) for a in args[:3]):
                return self._add(node, "where", list(args[:3]))
            bool_reduce = t in _BOOL_REDUCE and self.vals[args[0]].dtype == torch.bool
            if t in _REDUCE or bool_reduce:
                x = args[0]
                dims = (
                    self._value(args[1])
                    if len(args) > 1 and t not in (aten.sum.default, aten.mean.default)
                    else None
                )
                dims = kw.get("dim", dims)
                if isinstance(dims, int):  # any.dim / all.dim
                    dims = [dims]
                nd = len(self.vals[x].shape)
                if dims is None or len(dims) == 0:
                    dims = list(range(nd))
                if bool_reduce and nd and 0 in [self.vals[x].shape[d] for d in dims]:
                    return self._add_eager(node, reason="any / all over no elements")
                op = _BOOL_REDUCE[t] if bool_reduce else _REDUCE[t]
                return self._add(node, op, [x], dims=[int(d) for d in dims])
            if t in (aten._softmax.default, aten._log_softmax.default):
                op = "softmax" if t is aten._softmax.default else "log_softmax"
                return self._add(node, op, [args[0]], dims=[int(self._value(args[1]))])
            if t in (aten._to_copy.default, aten.clone.default, aten.lift_fresh_copy.default):
                x = args[0]
                dev = kw.get("device")
                if dev is not None and torch.device(dev).type != "trn":
                    return self._add_eager(node, reason=f"a copy to {dev}")
                op = "cast" if v.dtype != self.vals[x].dtype else "clone"
                return self._add(node, op, [x])
            if t is aten.bmm.default:
                gid = self._lower_gathered_bmm(node, args[0], args[1])
                if gid is not None:
                    return gid
            if t in (aten.mm.default, aten.bmm.default):
                return self._add(node, "mm" if t is aten.mm.default else "bmm", list(args[:2]))
            if t is aten.addmm.default:
                return self._add(
                    node,
                    "addmm",
                    list(args[:3]),
                    beta=float(self._value(kw.get("beta", 1))),
                    alpha=float(self._value(kw.get("alpha", 1))),
                )
            if t in _FULL:
                if t in (aten.zeros.default, aten.zeros_like.default) or t in _EMPTY:
                    value = 0.0
                elif t in (aten.ones.default, aten.ones_like.default):
                    value = 1.0
                elif t is aten.scalar_tensor.default:
                    value = self._value(args[0])
                else:
                    value = self._value(args[1])
                return self._add(node, "full", [], scalar=float(value))
            if t is aten._neg_view.default and self._tensor(args[0]):
                # A view whose values are negated (z.conj().imag): the program
                # holds no bits, so it is the negation.
                return self._add(node, "neg", [args[0]])
            if _is_view_op(t) and self._tensor(args[0]) and v.dtype == self.vals[args[0]].dtype:
                return self._add(node, "view", [args[0]])
        except (KeyError, TypeError, ValueError) as e:
            # An argument or a node the core does not take: run it eagerly.
            return self._add_eager(node, reason=f"an argument the core does not take ({e!r})")
        return self._add_eager(node)


_warned_eager: set[tuple[str, str]] = set()


def _warn_eager_nodes(targets: list[str], reasons: list[str]) -> None:
    """One UserWarning per (op, reason) and process: the op runs as an eager trn op."""
    for t, r in zip(targets, reasons):
        if (t, r) in _warned_eager or t.startswith("trnscope."):  # our own native ops
            continue
        _warned_eager.add((t, r))
        warnings.warn(
            f"trn compile: {t} runs as an eager trn op inside the compiled program ({r}); "
            "see trnscope.compile_stats()",
            UserWarning,
            stacklevel=4,
        )


# ---- Execution --------------------------------------------------------------------------------
def _pure(node: fx.Node) -> bool:
    """An aten op without side effects: no mutation, no RNG (Note [Eager nodes]:
    the core drops an unused pure eager node, e.g. a pad folded into a conv)."""
    t = node.target
    return (
        isinstance(t, torch._ops.OpOverload)
        and t.namespace in ("aten", "prims")
        and not t._schema.is_mutable
        and torch.Tag.nondeterministic_seeded not in t.tags
        and not node.is_impure()
    )


def _grouped_mm_on_trn(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """transformers' grouped_mm_fallback(x, w, offs) as trn's _grouped_mm (Note [MoE fallback])."""
    return torch._grouped_mm(x, w, offs if offs.dtype == torch.int32 else offs.to(torch.int32))


def _out_overload(target) -> Any:
    """The out= overload of a functional aten op with one result (index.Tensor ->
    index.Tensor_out) that trn implements natively, or None: its arguments are
    the op's plus `out` (an overload left to the CPU fallback would copy more)."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    schema = target._schema
    if len(schema.returns) != 1 or schema.is_mutable:
        return None
    want = [(a.name, str(a.type)) for a in schema.arguments]
    packet = target.overloadpacket
    for name in packet.overloads():
        op = getattr(packet, name)
        args = op._schema.arguments
        ok = len(args) == len(want) + 1 and args[-1].is_out and len(op._schema.returns) == 1
        if ok and [(a.name, str(a.type)) for a in args[:-1]] == want:
            native = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")
            return op if native else None
    return None


def _span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last) bytes a tensor's elements occupy (arena views share one storage)."""
    if t.numel() == 0:
        return (0, 0)
    lo = t.data_ptr()
    extent = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return (lo, lo + (extent + 1) * t.element_size())


def _overlaps(out: torch.Tensor, tensors) -> bool:
    lo, hi = _span(out)
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device == out.device:
            a, b = _span(t)
            if a < hi and lo < b:
                return True
    return False


def _eager_step(
    calls: dict, consts: dict, step_nodes: list[int], outs: dict, complex_steps: dict, i: int,
    inputs: list, out: torch.Tensor,
) -> None:
    """Runs eager step i (Note [Eager nodes]) as its aten op on trn tensors, writes `out`.

    An op with an out= overload writes `out` itself (the gathered expert weights
    of a MoE decode step are megabytes: no second copy), unless `out` shares
    memory with an input."""
    gid = step_nodes[i]
    node, tensor_nodes, item = calls[gid]
    complex_in, complex_out = complex_steps.get(gid, ((), False))
    if complex_in:  # Note [Complex values]: the program holds the pairs
        inputs = list(inputs)
        for k in complex_in:
            inputs[k] = torch.view_as_complex(inputs[k])
    tensors = dict(zip(tensor_nodes, inputs))  # one input per core input of the node

    def sub(a):
        if isinstance(a, fx.Node):
            return tensors[a] if a in tensors else consts[a]
        return a

    with torch.no_grad():
        args = fx.node.map_aggregate(node.args, sub)
        kwargs = fx.node.map_aggregate(node.kwargs, sub)
        op = outs.get(gid)
        if op is not None and not complex_out and not _overlaps(out, inputs):
            op(*args, **kwargs, out=out)
            return
        res = node.target(*args, **kwargs)
        res = res if item is None else res[item]
        out.copy_(torch.view_as_real(res.resolve_conj()) if complex_out else res)


class _Compiled:
    """A program for one signature plus what running it needs. Immutable.

    Note [Call path]: the device idles from the start of a compiled call until the
    program's first launch, so everything a call does before it is work the
    device waits for. What depends only on the signature (which arguments are
    tensors, which are 0-dim CPU tensors, the graph's constant tensors, whether
    the outputs need rearranging) is settled here at compile time; a call of a
    graph whose arguments are all trn tensors hands its argument list to the
    program as it is. Dynamo's guards keep the devices and dtypes the signature
    saw.
    """

    def __init__(self, lowering: _Lowering, program, gm: fx.GraphModule):
        self.program = program
        self.tensor_inputs = lowering.tensor_inputs
        self.cpu_inputs = lowering.cpu_inputs
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # compiled under aot_autograd's fake mode
            self.attrs = [  # a complex constant is held as its pairs (Note [Complex values])
                torch.view_as_real(a.resolve_conj()) if a.is_complex() else a
                for a in (getattr(gm, a) for a in lowering.attr_inputs)
            ]
        self.device = lowering.device
        # The graph's constant tensors, on the inputs' device already.
        self.attrs_bound = self.device is not None and all(a.device == self.device for a in self.attrs)
        self.template = lowering.output_template
        self.complex_inputs = lowering.complex_inputs
        self.gm = gm
        self.prelude = lowering.prelude  # Note [Host prelude]
        self.prelude_inputs = lowering.prelude_inputs
        self.prelude_args = lowering.prelude_args
        self.assert_msgs = [msg for _, msg in lowering.asserts]
        n = len(self.template)
        self.plain_outputs = self.template == [("t", i) for i in range(n)]
        self.all_args = (
            not self.cpu_inputs
            and not self.complex_inputs
            and not self.attrs
            and not self.prelude
            and self.tensor_inputs == list(range(lowering.num_placeholders))
        )
        # None: the program has no eager steps, so no callable is made per call.
        calls = dict(lowering.calls)
        outs = {}
        for gid in program.eager_nodes:
            node, _, item = calls[gid]
            # Complex steps write their pairs (Note [Complex values]): no out= overload.
            op = _out_overload(node.target) if item is None and gid not in lowering.complex_steps \
                else None
            if op is not None:
                outs[gid] = op
        self._eager = (
            functools.partial(
                _eager_step, calls, dict(lowering.consts), list(program.eager_nodes), outs,
                dict(lowering.complex_steps),
            )
            if len(program.eager_nodes)
            else None
        )

    def run_prelude(self, args: list) -> dict:
        """Note [Host prelude]: the graph's per-call CPU values, in graph order."""
        env: dict = {n: args[i] for n, i in self.prelude_args.items()}
        for node in self.prelude:
            if node.op == "get_attr":
                env[node] = getattr(self.gm, node.target)
                continue
            a, kw = pytree.tree_map(lambda x: env[x] if isinstance(x, fx.Node) else x,
                                    (node.args, node.kwargs))
            with torch.no_grad():
                env[node] = node.target(*a, **kw)
        return env

    def bind_inputs(self, args: list, host: dict | None = None) -> list:
        """The program's input tensors for the graph's arguments (and the host
        prelude's values, Note [Host prelude])."""
        if self.all_args:
            return args
        tensors = [args[i] for i in self.tensor_inputs]
        if self.attrs_bound and not self.cpu_inputs and not self.complex_inputs and not host:
            return tensors + self.attrs
        dev = next((t.device for t in tensors if t.device.type == "trn"), None)
        dev = dev or self.device or torch.device("trn")
        for i in self.cpu_inputs:
            tensors[i] = tensors[i].to(dev)
        for i in self.complex_inputs:  # Note [Complex values]
            tensors[i] = torch.view_as_real(tensors[i].resolve_conj())
        made = [host[n].contiguous().to(dev) for n in self.prelude_inputs] if host else []
        return tensors + made + [a.to(dev) for a in self.attrs]

    def __call__(self, args: list) -> list:
        host = self.run_prelude(args) if self.prelude else None
        outs = self.program.run(self.bind_inputs(args, host), self._eager)
        if self.assert_msgs:  # Note [Graph asserts]: a read-back per assert
            n = len(outs) - len(self.assert_msgs)
            for cond, msg in zip(outs[n:], self.assert_msgs):
                if not bool(cond):
                    raise RuntimeError(msg)
            outs = outs[:n]
        if self.plain_outputs:
            return outs
        return [
            outs[x] if k == "t"
            else torch.view_as_complex(outs[x]) if k == "z"
            else x(args) if k == "f"
            else (host[x].clone() if x.op == "get_attr" else host[x]) if k == "h"
            else x
            for k, x in self.template
        ]


def _ancestors(node: fx.Node) -> set[fx.Node]:
    seen, stack = set(), [node]
    while stack:
        for a in stack.pop().all_input_nodes:
            if a not in seen:
                seen.add(a)
                stack.append(a)
    return seen


def _concrete_vals(gm: fx.GraphModule, args: list) -> dict[fx.Node, Any]:
    """node -> FakeTensor/number for concrete inputs (specializes a dynamic graph)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    vals: dict[fx.Node, Any] = {}

    class _Prop(fx.Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            if n.target is aten.copy.default and isinstance(r, torch.Tensor) \
                    and r.storage_offset() != 0:
                # A functional copy is a new tensor in dst's layout from offset 0, as the
                # traced meta has it; the fake kernel keeps a view dst's offset, so the
                # views of the copy read past its buffer (Note [Functional copy]).
                r = torch.empty_strided(r.shape, r.stride(), dtype=r.dtype, device=r.device)
            vals[n] = r
            return r

    with mode:
        fakes = [
            mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        _Prop(gm).run(*fakes)
    return vals


def _stable_hash(text: str) -> int:
    """64-bit hash that is the same in every process (unlike hash() of a str)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _dump_dir(options: dict) -> str | None:
    return options.get("dump_dir") or config.dump_dir or os.environ.get("TRNSCOPE_DUMP_DIR") or None


def _fold_host_constants(gm: fx.GraphModule) -> None:
    """Note [Host constants]: model code builds some tensors on the CPU out of
    constants alone: torch.tensor literals Dynamo lifts into get_attr constants
    (Mistral's and Gemma 2's mask values, DeBERTa's attention scale), index tables
    from a torch.arange without a device (BEiT's relative positions). Their values
    cannot depend on a call's inputs, so they are computed once here, on the CPU
    with the graph's own ops, and each pure trn-side user takes the result as a
    constant tensor on the graph's trn device (the program's constant inputs).
    A value stays as it was where a graph output or an impure op uses it.
    Rewrites gm in place."""
    device = next(
        (
            v.device
            for n in gm.graph.nodes
            if n.op == "placeholder"
            and isinstance(v := n.meta.get("val"), torch.Tensor)
            and v.device.type == "trn"
        ),
        None,
    )
    if device is None:
        return
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # the compiler runs under aot_autograd's fake mode
        _fold_host_constants_on(gm, device)


def _fold_host_constants_on(gm: fx.GraphModule, device: torch.device) -> None:
    known: dict[fx.Node, torch.Tensor] = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            v = getattr(gm, node.target, None)
            if isinstance(v, torch.Tensor) and v.device.type == "cpu":
                known[node] = v
            continue
        v = node.meta.get("val")
        if node.op != "call_function" or not _pure(node):
            continue
        if not (isinstance(v, torch.Tensor) and v.device.type == "cpu"):
            continue
        ins = [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)]
        if all(a in known for a in ins):
            args, kwargs = pytree.tree_map(
                lambda a: known[a] if isinstance(a, fx.Node) else a, (node.args, node.kwargs)
            )
            with torch.no_grad():
                known[node] = node.target(*args, **kwargs)
    replaced = 0
    first = next(iter(gm.graph.nodes))
    for node, value in known.items():
        # Only trn-side users: a CPU op may not take a trn tensor, even a 0-dim one.
        users = [
            u
            for u in node.users
            if u not in known
            and u.op == "call_function"
            and _pure(u)
            and any(
                isinstance(t, torch.Tensor) and t.device.type == "trn"
                for t in pytree.tree_leaves(u.meta.get("val"))
            )
        ]
        if not users:
            continue
        name = f"_trn_host_constant_{replaced}"
        while hasattr(gm, name):
            name += "_"
        gm.register_buffer(name, value.to(device), persistent=False)
        with gm.graph.inserting_before(first):
            const = gm.graph.get_attr(name)
        const.meta["val"] = getattr(gm, name)
        for u in users:
            u.replace_input_with(node, const)
            replaced += 1
    if replaced:
        for node in reversed(list(known)):
            if not node.users:
                gm.graph.erase_node(node)
        gm.recompile()


# Note [Number inputs]
# Dynamo lifts a changing Python int into a SymInt input: a static cache's
# length (Mistral's and Gemma 2's sliding-window layers pass theirs, and the
# graph returns it plus the new tokens). The lowering bakes numbers into the
# program, so a number that reaches a tensor op is part of the program's key
# (one program per value: correct, and compiled again per value). A number
# that only feeds number outputs through Python arithmetic is not: those
# outputs are evaluated per call from the call's arguments.
_SYM_NUMBER_TYPES = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)


def _number_arithmetic(node: fx.Node) -> bool:
    """A node computing a number from numbers with Python's operators."""
    return (
        node.op == "call_function"
        and isinstance(node.meta.get("val"), _SYM_NUMBER_TYPES)
        and getattr(node.target, "__module__", None) in ("_operator", "operator", "math")
    )


def _unkeyed_numbers(gm: fx.GraphModule) -> set[int]:
    """Indices of number placeholders that reach only number outputs (Note [Number inputs])."""
    out = set()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, p in enumerate(placeholders):
        if not isinstance(p.meta.get("val"), _SYM_NUMBER_TYPES):
            continue
        seen, stack, baked = {p}, [p], False
        while stack and not baked:
            for u in stack.pop().users:
                if u.op == "output":
                    continue
                if not _number_arithmetic(u):
                    baked = True
                    break
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
        if not baked:
            out.add(i)
    return out


def _number_output(node: fx.Node, index: dict[fx.Node, int]) -> Callable[[list], Any]:
    """A number output as a function of the call's arguments."""

    def ev(a, args):
        if not isinstance(a, fx.Node):
            return a
        if a.op == "placeholder":
            return args[index[a]]
        return a.target(*(ev(x, args) for x in a.args), **{k: ev(v, args) for k, v in a.kwargs.items()})

    return lambda args: ev(node, args)


class _GraphRunner:
    """The callable aot_autograd gets for one aten graph: a program per
    signature (one for a static graph). Called by the thread running the model."""

    def __init__(self, gm: fx.GraphModule, names: list[str], options: dict):
        _fold_host_constants(gm)
        self.gm, self.names, self.options = gm, names, options
        self.programs: dict[cache.Signature, Callable] = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        vals = {n: n.meta.get("val") for n in gm.graph.nodes}
        self.static = all(
            not isinstance(v, torch.SymInt)
            and not (
                isinstance(v, torch.Tensor)
                and any(isinstance(s, torch.SymInt) for s in (*v.shape, *v.stride()))
            )
            for v in (vals[n] for n in placeholders)
        )
        self.unkeyed = _unkeyed_numbers(gm)
        numbers = [i for i, n in enumerate(placeholders) if isinstance(vals[n], _SYM_NUMBER_TYPES)]
        self.bakes_numbers = any(i not in self.unkeyed for i in numbers)
        self.single: Callable | None = None
        if self.static:
            fakes = [vals[n] for n in placeholders]
            self.single = self._compile(vals, fakes, specialized=False)
        self._boxed_call = True

    def _compile(self, vals, args, specialized: bool) -> Callable:
        sig = cache.signature_of(args, self.unkeyed)
        record: dict = {
            "specialized": specialized,
            "fallback": None,
            "artifact": None,
            "kernels": [],
            "eager_nodes": [],
            "eager_reasons": [],
            "num_kernels": 0,
        }
        start = time.perf_counter()
        shapes = " ".join("x".join(map(str, t[0])) or "()" for t in sig[:4])
        with torch.profiler.record_function(
            f"trn::compile [{shapes}{' ...' if len(sig) > 4 else ''}]"
        ):
            try:
                lowering, program = self._lower_and_compile(vals)
                # Programs of a graph that bakes number inputs in share its aten
                # graph's hash: the core graph's differs with every value.
                graph_hash = (
                    _stable_hash(str(self.gm.graph)) if self.bakes_numbers else lowering.g.hash()
                )
                run: Callable = _Compiled(lowering, program, self.gm)
                record["kernels"] = [k["name"] for k in program.kernels]
                record["num_kernels"] = len(record["kernels"])
                record["eager_nodes"] = list(program.eager_targets)
                record["eager_reasons"] = [
                    lowering.reasons.get(n) or r
                    for n, r in zip(program.eager_nodes, program.eager_reasons)
                ]
                _warn_eager_nodes(record["eager_nodes"], record["eager_reasons"])
                path = _dump_dir(self.options)
                if path:
                    os.makedirs(path, exist_ok=True)
                    sig_hash = _stable_hash(repr(sig)) & 0xFFFFFFFF
                    record["artifact"] = os.path.join(
                        path, f"trn_program_{graph_hash:016x}_{sig_hash:08x}.json"
                    )
                    with open(record["artifact"], "w") as f:
                        f.write(program.to_json())
            except Exception as e:  # noqa: BLE001 - never fail a compile on our own error
                # Correct but slow (the last resort): the aten graph runs op by op on trn.
                graph_hash = _stable_hash(str(self.gm.graph))
                record["fallback"] = f"{type(e).__name__}: {e}"
                warnings.warn(
                    f"trn compile: running the graph eagerly ({record['fallback']})",
                    UserWarning,
                    stacklevel=2,
                )
                gm = self.gm

                def run(args, gm=gm):
                    with torch.no_grad():
                        return list(gm(*args))

        record["duration_s"] = time.perf_counter() - start
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        names = self.names if len(self.names) == len(placeholders) else [p.name for p in placeholders]
        cache.note_compile(record, graph_hash, sig, names)
        self.programs[sig] = run
        return run

    def _lower_and_compile(self, vals) -> tuple[_Lowering, Any]:
        """Note [Refused nodes]: the core compiler may refuse a node the lowering
        made (a view whose strides do not describe the memory the compiler gave
        its source); its error names the node. That node then runs as an eager
        step, computed by its aten op from its inputs as the program holds them
        (a view only if its result does not depend on that layout: _LOGICAL_VIEWS),
        and the graph compiles again, up to _MAX_REFUSED times before the whole
        graph runs eagerly (the last resort). The reason is in compile_stats()."""
        refused: dict[tuple[fx.Node, int | None], str] = {}
        while True:
            lowering = _Lowering(self.gm, dict(vals), refused)
            lowering.lower()
            self._evaluate_number_outputs(lowering)
            try:
                return lowering, _C._compile_graph(
                    lowering.g, fuse=bool(self.options.get("fuse", config.fuse))
                )
            except ValueError as e:
                key = _refused_node(lowering, str(e))
                if key is None or key in refused or len(refused) >= _MAX_REFUSED:
                    raise
                refused[key] = f"the compiler refused it ({e})"

    def _evaluate_number_outputs(self, lowering: _Lowering) -> None:
        """Number outputs of unkeyed number inputs are computed per call (Note [Number inputs])."""
        if not self.unkeyed:
            return
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        index = {p: i for i, p in enumerate(placeholders)}
        unkeyed = {placeholders[i] for i in self.unkeyed}
        out = next(n for n in self.gm.graph.nodes if n.op == "output")
        leaves = pytree.tree_leaves(out.args[0])
        for i, (a, (kind, _)) in enumerate(zip(leaves, lowering.output_template)):
            # The output may be the number input itself (a graph that only passes
            # a size on: JetMoE's router graph-breaks on .tolist()).
            if kind == "c" and isinstance(a, fx.Node) and unkeyed & (_ancestors(a) | {a}):
                lowering.output_template[i] = ("f", _number_output(a, index))

    def __call__(self, args: list) -> list:
        run = self.single
        if run is None:
            # Numbers that reach tensor ops are keys too (Note [Number inputs]).
            sig = cache.signature_of(args, self.unkeyed)
            run = self.programs.get(sig)
            if run is None:
                run = self._compile(_concrete_vals(self.gm, args), args, specialized=True)
        out = run(args)
        args.clear()
        return out


_MAX_REFUSED = 8
_ASSERTS = (aten._assert_async.msg, aten._assert_async.default)
_ASSERT_DEFAULT_MSG = {  # CPU's messages without (or with an empty) msg
    aten._assert_async.msg: "Assertion is failed",
    aten._assert_async.default: "Expected Tensor with single nonzero value, but got zero",
}
_REFUSED_NODE = re.compile(r"trn compiler: node (\d+) \(")  # compiler::FailNode's form
# Views whose result is defined by logical indexing alone: as an eager step they
# give the same elements whatever layout the program gave their input. Others
# (as_strided's raw strides, view's stride requirements) are not refused.
_LOGICAL_VIEWS = {
    aten.expand.default, aten.select.int, aten.slice.Tensor, aten.unsqueeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.permute.default,
    aten.transpose.int, aten.t.default, aten.diagonal.default, aten.unfold.default,
    aten.narrow.default, aten.alias.default, aten.split.Tensor,
    aten.split_with_sizes.default, aten.unbind.int,
}


def _refused_node(lowering: _Lowering, message: str) -> tuple[fx.Node, int | None] | None:
    """The (fx node, output index) a core compile error names, if it may run as an
    eager step instead (Note [Refused nodes]): made from an fx node, not eager already."""
    m = _REFUSED_NODE.search(message)
    gid = int(m.group(1)) if m else -1
    if gid not in lowering.calls or gid in lowering.reasons:
        return None
    node, _, idx = lowering.calls[gid]
    if not isinstance(node, fx.Node):
        return None  # a cast the lowering made (_add_cast)
    if _is_view_op(node.target) and node.target not in _LOGICAL_VIEWS:
        return None
    return node, idx  # a getitem's lowering names the multi-output op and the index


def _input_names(dynamo_gm: fx.GraphModule) -> list[str]:
    return [n.name for n in dynamo_gm.graph.nodes if n.op == "placeholder"]


def trn_backend(gm: fx.GraphModule, example_inputs: list, options: dict | None = None, **kwargs):
    """torch.compile backend "trn" (inference). options: fuse (bool), dump_dir (str)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    opts = dict(options or {})
    names = _input_names(gm)

    def fw_compiler(aten_gm: fx.GraphModule, aten_inputs: list):
        return _GraphRunner(aten_gm, names, opts)

    def bw_compiler(aten_gm: fx.GraphModule, aten_inputs: list):
        # Inference backend: a backward pass runs its aten graph op by op on trn.
        return make_boxed_func(aten_gm.forward)

    return aot_autograd(
        fw_compiler=fw_compiler, bw_compiler=bw_compiler, decompositions=decomposition_table()
    )(gm, example_inputs)
