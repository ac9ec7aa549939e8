// Recurrent cells of the trn device: torch's fused LSTM / GRU cells and their
// backwards.
//
// Note [RNN cells off the CPU]: ATen's nn.LSTM / nn.GRU / LSTMCell / GRUCell
// (RNN.cpp) run each time step on a CUDA, XPU or PrivateUse1 tensor as two
// GEMMs and one _thnn_fused_lstm_cell / _thnn_fused_gru_cell. Those ops have
// CUDA kernels only, so the CPU fallback found no kernel to run and every
// LSTM or GRU on trn raised NotImplementedError. Here the forward is one
// launch of the core cell kernel; the backward formulas
// (_thnn_fused_lstm_cell_backward_impl, _thnn_fused_gru_cell_backward, CUDA
// only as well) are trn ops over the workspace the forward stored (CUDA's
// layout: LSTM (i, f, g, o) activated, GRU (r, z, n, hx, hn)).
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>
#include <tuple>
#include <vector>

#include "torch_bridge/fallback.h"
#include "torch_bridge/ops_util.h"

namespace trn::bridge::ops {
namespace {

// torch's rnn_cell_checkSizes, with the dtype rule of one kernel launch.
int CheckCell(const char* name, const at::Tensor& igates, const at::Tensor& hgates,
              const at::Tensor& state, const at::Tensor& ibias, const at::Tensor& hbias,
              int64_t factor) {
  const int device = CommonDevice(name, {&igates, &hgates, &state, &ibias, &hbias});
  TORCH_CHECK(igates.dim() == 2, name, ": expected input_gates of 2 dims [batch, ", factor,
              " * hidden], got ", igates.sizes());
  TORCH_CHECK(hgates.sizes() == igates.sizes(), name, ": expected hidden_gates of the size of ",
              "input_gates ", igates.sizes(), ", got ", hgates.sizes());
  const int64_t gates = igates.size(1);
  TORCH_CHECK(gates % factor == 0, name, ": expected the gates' size ", gates,
              " to be a multiple of ", factor);
  const int64_t hidden = gates / factor;
  TORCH_CHECK(state.dim() == 2 && state.size(0) == igates.size(0) && state.size(1) == hidden,
              name, ": expected a previous state of [", igates.size(0), ", ", hidden, "], got ",
              state.sizes());
  for (const at::Tensor* b : {&ibias, &hbias}) {
    TORCH_CHECK(!b->defined() || (b->dim() == 1 && b->size(0) == gates), name,
                ": expected biases of [", gates, "], got ", b->sizes());
  }
  const at::ScalarType dtype = igates.scalar_type();
  ComputeDType(dtype, name);
  TORCH_CHECK(at::isFloatingType(dtype), name, ": expected a floating dtype, got ", dtype);
  for (const at::Tensor* t : {&hgates, &state, &ibias, &hbias}) {
    TORCH_CHECK(!t->defined() || t->scalar_type() == dtype, name,
                ": expected every operand in ", dtype, ", got ", t->scalar_type());
  }
  return device;
}

TensorRef OptionalRef(const at::Tensor& t, const char* name) {
  return t.defined() ? Ref(t, name) : NoRef();
}

// The kernel's one-dtype contract, checked for every operand of a launch (a
// mismatch is an error here, not an abort on the worker).
void CheckOneDType(const char* name, std::initializer_list<const at::Tensor*> ts) {
  const at::ScalarType dtype = (*ts.begin())->scalar_type();
  for (const at::Tensor* t : ts) {
    TORCH_CHECK(!t->defined() || t->scalar_type() == dtype, name, ": expected every operand in ",
                dtype, ", got ", t->scalar_type());
  }
}

// One launch of the LSTM cell: hy, cy (and workspace, when defined) written
// in place, so that they may be views into a sequence's output.
void LaunchLstmCell(int device, const at::Tensor& hy, const at::Tensor& cy,
                    const at::Tensor& workspace, const at::Tensor& igates,
                    const at::Tensor& hgates, const at::Tensor& cx, const at::Tensor& ib,
                    const at::Tensor& hb) {
  const char* name = "aten::_thnn_fused_lstm_cell";
  CheckOneDType(name, {&igates, &hgates, &cx, &ib, &hb, &hy, &cy, &workspace});
  if (hy.numel() == 0) return;
  const TensorRef h = Ref(hy, name), c = Ref(cy, name), w = OptionalRef(workspace, name);
  const TensorRef ig = Ref(igates, name), hg = Ref(hgates, name), x = Ref(cx, name);
  const TensorRef rb = OptionalRef(ib, name), rh = OptionalRef(hb, name);
  Launch(device, kernels::DescribeRnnCell(true, h, ig, name),
         [=] { return kernels::LstmCell(h, c, w, ig, hg, x, rb, rh); });
}

void LaunchGruCell(int device, const at::Tensor& hy, const at::Tensor& workspace,
                   const at::Tensor& igates, const at::Tensor& hgates, const at::Tensor& hx,
                   const at::Tensor& ib, const at::Tensor& hb) {
  const char* name = "aten::_thnn_fused_gru_cell";
  CheckOneDType(name, {&igates, &hgates, &hx, &ib, &hb, &hy, &workspace});
  if (hy.numel() == 0) return;
  const TensorRef h = Ref(hy, name), w = OptionalRef(workspace, name);
  const TensorRef ig = Ref(igates, name), hg = Ref(hgates, name), x = Ref(hx, name);
  const TensorRef rb = OptionalRef(ib, name), rh = OptionalRef(hb, name);
  Launch(device, kernels::DescribeRnnCell(false, h, ig, name),
         [=] { return kernels::GruCell(h, w, ig, hg, x, rb, rh); });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> LstmCell(
    const at::Tensor& igates, const at::Tensor& hgates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor ib = input_bias.value_or(at::Tensor()), hb = hidden_bias.value_or(at::Tensor());
  const int device =
      CheckCell("aten::_thnn_fused_lstm_cell", igates, hgates, cx, ib, hb, 4);
  const at::ScalarType dtype = igates.scalar_type();
  at::Tensor hy = Empty(cx.sizes(), dtype, device), cy = Empty(cx.sizes(), dtype, device);
  at::Tensor workspace = Empty(igates.sizes(), dtype, device);
  LaunchLstmCell(device, hy, cy, workspace, igates, hgates, cx, ib, hb);
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor> GruCell(const at::Tensor& igates, const at::Tensor& hgates,
                                           const at::Tensor& hx,
                                           const std::optional<at::Tensor>& input_bias,
                                           const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor ib = input_bias.value_or(at::Tensor()), hb = hidden_bias.value_or(at::Tensor());
  const int device = CheckCell("aten::_thnn_fused_gru_cell", igates, hgates, hx, ib, hb, 3);
  const at::ScalarType dtype = igates.scalar_type();
  at::Tensor hy = Empty(hx.sizes(), dtype, device);
  at::Tensor workspace = Empty({hx.size(0), 5 * hx.size(1)}, dtype, device);
  LaunchGruCell(device, hy, workspace, igates, hgates, hx, ib, hb);
  return {hy, workspace};
}

// d sigmoid = s (1 - s), d tanh = 1 - t^2, from the stored activations.
at::Tensor SigmoidGrad(const at::Tensor& s) { return s * (1 - s); }
at::Tensor TanhGrad(const at::Tensor& t) { return 1 - t * t; }

std::tuple<at::Tensor, at::Tensor, at::Tensor> LstmCellBackward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const bool has_h = grad_hy.has_value() && grad_hy->defined();
  const bool has_c = grad_cy.has_value() && grad_cy->defined();
  if (!has_h && !has_c) return {};
  const std::vector<at::Tensor> a = workspace.chunk(4, 1);  // i, f, g, o
  at::Tensor gc = has_c ? *grad_cy : at::zeros_like(cx);
  at::Tensor go;
  if (has_h) {
    const at::Tensor tc = cy.tanh();
    go = *grad_hy * tc * SigmoidGrad(a[3]);
    gc = gc + *grad_hy * a[3] * TanhGrad(tc);
  } else {
    go = at::zeros_like(a[3]);
  }
  at::Tensor grad_gates = at::cat(
      {gc * a[2] * SigmoidGrad(a[0]), gc * cx * SigmoidGrad(a[1]), gc * a[0] * TanhGrad(a[2]), go},
      1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, gc * a[1], grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> GruCellBackward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const std::vector<at::Tensor> w = workspace.chunk(5, 1);  // r, z, n, hx, hn
  const at::Tensor gz = grad_hy * (w[3] - w[2]) * SigmoidGrad(w[1]);
  const at::Tensor gn = grad_hy * (1 - w[1]) * TanhGrad(w[2]);
  const at::Tensor gr = gn * w[4] * SigmoidGrad(w[0]);
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * w[0]}, 1);
  at::Tensor gib = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hy * w[1], gib, ghb};
}

// ---- whole sequences ---------------------------------------------------------------------
// Note [Sequence-level RNN]: ATen's lstm / gru for a non-CPU tensor run every
// time step as two GEMMs of `batch` rows (input and hidden projections) and
// one cell. The input projections do not depend on the recurrence, so here
// they are one GEMM of seq x batch rows per layer and direction (as cuDNN and
// oneDNN do), and each step is one GEMM (h W_hh^T) and one cell launch that
// adds the hidden bias and writes hy straight into the output sequence (and
// the last cy into c_n). nn.LSTM(256, 512), batch 8, 50 steps: the step GEMMs'
// weights alternated through L2 (W_ih, W_hh: 6 MB), and the per-step input
// GEMMs cost 2x the one large one. Taken for padded (not packed) input without
// autograd, dropout or LSTM projections; anything else runs ATen's composite
// (at::native::lstm / gru), whose cells are this file's kernels too.
// Whether autograd must record the call: reverse mode (grad mode and an input
// that requires grad) or forward mode (an input with a tangent, grad mode or not).
bool NeedsGrad(const at::Tensor& input, at::TensorList hx, at::TensorList params) {
  const bool reverse = at::GradMode::is_enabled();
  const auto needs = [&](const at::Tensor& t) {
    return t.defined() && ((reverse && t.requires_grad()) || t._fw_grad(/*level=*/0).defined());
  };
  if (needs(input)) return true;
  for (at::TensorList list : {hx, params}) {
    for (const at::Tensor& t : list) {
      if (needs(t)) return true;
    }
  }
  return false;
}

// Whether the fast path takes this call: per layer and direction (w_ih, w_hh
// [, b_ih, b_hh]) of one floating dtype, a 3-D input and states of [layers x
// directions, batch, hidden].
bool SequencePathApplies(const at::Tensor& input, at::TensorList hx, at::TensorList params,
                         bool has_biases, int64_t num_layers, double dropout, bool train,
                         bool bidirectional, bool batch_first, int64_t gates) {
  if (NeedsGrad(input, hx, params) || (train && dropout > 0 && num_layers > 1)) return false;
  // Under autocast the composite's cells cast their gates (Note [Autocast]); here
  // the GEMMs would come back in the autocast dtype beside float32 states.
  if (at::autocast::is_autocast_enabled(c10::DeviceType::PrivateUse1)) return false;
  if (input.dim() != 3 || input.size(batch_first ? 1 : 0) == 0 || hx.empty()) return false;
  const int64_t dirs = bidirectional ? 2 : 1, per = has_biases ? 4 : 2;
  if (num_layers < 1 || static_cast<int64_t>(params.size()) != num_layers * dirs * per) {
    return false;  // LSTM projections (w_hr), or a malformed list ATen will name
  }
  const at::ScalarType dtype = input.scalar_type();
  if (!at::isFloatingType(dtype) || dtype == at::kDouble || input.device().type() != c10::DeviceType::PrivateUse1) {
    return false;
  }
  const int64_t batch = input.size(batch_first ? 0 : 1), hidden = params[1].size(1);
  for (const at::Tensor& h : hx) {
    if (!h.defined() || h.scalar_type() != dtype || h.dim() != 3 ||
        h.size(0) != num_layers * dirs || h.size(1) != batch || h.size(2) != hidden ||
        h.device() != input.device()) {
      return false;
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(params.size()); ++i) {
    const at::Tensor& p = params[i];
    const int64_t k = i % per;
    const bool weight = k < 2;
    if (p.scalar_type() != dtype || p.device() != input.device() ||
        p.dim() != (weight ? 2 : 1) || p.size(0) != gates * hidden) {
      return false;
    }
  }
  return true;
}

template <bool kLstm>
std::tuple<at::Tensor, at::Tensor, at::Tensor> RunSequence(const at::Tensor& input,
                                                           at::TensorList hx,
                                                           at::TensorList params, bool has_biases,
                                                           int64_t num_layers, bool bidirectional,
                                                           bool batch_first) {
  const int device = DeviceIndex(input);
  const int64_t dirs = bidirectional ? 2 : 1, per = has_biases ? 4 : 2;
  const int64_t steps = input.size(batch_first ? 1 : 0), batch = input.size(batch_first ? 0 : 1);
  const int64_t hidden = params[1].size(1);
  const at::ScalarType dtype = input.scalar_type();
  at::Tensor h_n = Empty({num_layers * dirs, batch, hidden}, dtype, device);
  at::Tensor c_n = kLstm ? Empty({num_layers * dirs, batch, hidden}, dtype, device) : at::Tensor();
  at::Tensor layer_in = input;  // the first layer's input in the caller's layout
  bool in_batch_first = batch_first;
  at::Tensor out;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    out = Empty({steps, batch, dirs * hidden}, dtype, device);
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t idx = layer * dirs + d;
      const at::Tensor& w_ih = params[idx * per];
      const at::Tensor& w_hh = params[idx * per + 1];
      const at::Tensor b_ih = has_biases ? params[idx * per + 2] : at::Tensor();
      const at::Tensor b_hh = has_biases ? params[idx * per + 3] : at::Tensor();
      // [steps, batch, gates]: one GEMM over every step (a view of the
      // batch-first result: the cell reads rows at any stride).
      at::Tensor ig = b_ih.defined() ? at::linear(layer_in, w_ih, b_ih) : at::linear(layer_in, w_ih);
      if (in_batch_first) ig = ig.transpose(0, 1);
      const at::Tensor w_hh_t = w_hh.t();
      at::Tensor h = hx[0][idx];
      at::Tensor c = kLstm ? hx[1][idx] : at::Tensor();
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = d == 0 ? s : steps - 1 - s;
        const at::Tensor hg = at::mm(h, w_hh_t);
        at::Tensor hy = out[t].narrow(1, d * hidden, hidden);
        if constexpr (kLstm) {
          at::Tensor cy = s + 1 == steps ? c_n[idx] : Empty({batch, hidden}, dtype, device);
          LaunchLstmCell(device, hy, cy, at::Tensor(), ig[t], hg, c, at::Tensor(), b_hh);
          c = cy;
        } else {
          LaunchGruCell(device, hy, at::Tensor(), ig[t], hg, h, at::Tensor(), b_hh);
        }
        h = hy;
      }
      LaunchCopy(device, h_n[idx], h, kLstm ? "aten::lstm" : "aten::gru");
    }
    layer_in = out;
    in_batch_first = false;
  }
  return {batch_first ? out.transpose(0, 1) : out, h_n, c_n};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> Lstm(const at::Tensor& input, at::TensorList hx,
                                                    at::TensorList params, bool has_biases,
                                                    int64_t num_layers, double dropout, bool train,
                                                    bool bidirectional, bool batch_first) {
  if (hx.size() != 2 || !SequencePathApplies(input, hx, params, has_biases, num_layers, dropout,
                                             train, bidirectional, batch_first, 4)) {
    return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train,
                            bidirectional, batch_first);
  }
  return RunSequence<true>(input, hx, params, has_biases, num_layers, bidirectional, batch_first);
}

std::tuple<at::Tensor, at::Tensor> Gru(const at::Tensor& input, const at::Tensor& hx,
                                       at::TensorList params, bool has_biases, int64_t num_layers,
                                       double dropout, bool train, bool bidirectional,
                                       bool batch_first) {
  if (!SequencePathApplies(input, {hx}, params, has_biases, num_layers, dropout, train,
                           bidirectional, batch_first, 3)) {
    return at::native::gru(input, hx, params, has_biases, num_layers, dropout, train,
                           bidirectional, batch_first);
  }
  auto [out, h_n, unused] =
      RunSequence<false>(input, {hx}, params, has_biases, num_layers, bidirectional, batch_first);
  return {out, h_n};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, lib) {
  NativeKernels m(lib);  // Note [dtypes the kernels do not take]
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(LstmCell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(GruCell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(LstmCellBackward));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(GruCellBackward));
  m.impl("lstm.input", TORCH_FN(Lstm));
  m.impl("gru.input", TORCH_FN(Gru));
}

// lstm / gru are CompositeImplicitAutograd: without a kernel at the autograd
// key the composite would run there and never reach PrivateUse1. Lstm / Gru
// call that composite themselves whenever autograd must record.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(Lstm));
  m.impl("gru.input", TORCH_FN(Gru));
}

}  // namespace trn::bridge::ops
