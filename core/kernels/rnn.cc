// The fused LSTM and GRU cells (torch's _thnn_fused_lstm_cell /
// _thnn_fused_gru_cell): the gate math of one time step after its two GEMMs,
// one pass per batch row. A row is used in place when it is a contiguous
// float32 run, otherwise converted through per-thread scratch.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/rnn.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/kernels/elementwise-inl.h"
#include "core/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {

// Runs body(j, loads) over [0, h) a vector at a time: full vectors read and
// write the rows in place, the tail goes through lane buffers (rows are not
// padded). `ins` / `outs` are row pointers; a null input reads as zeros, a
// null output is skipped.
template <size_t NIn, size_t NOut, class Body>
HWY_INLINE void ForEachVector(const float* const (&ins)[NIn], float* const (&outs)[NOut],
                              size_t h, const Body& body) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF v[NIn], r[NOut];
  size_t j = 0;
  for (; j + N <= h; j += N) {
    for (size_t k = 0; k < NIn; ++k) v[k] = ins[k] ? hn::LoadU(d, ins[k] + j) : hn::Zero(d);
    body(d, v, r);
    for (size_t k = 0; k < NOut; ++k) {
      if (outs[k]) hn::StoreU(r[k], d, outs[k] + j);
    }
  }
  if (j == h) return;
  HWY_ALIGN float buf[kMaxLanesF32];
  for (size_t k = 0; k < NIn; ++k) {
    for (size_t i = 0; i < N; ++i) buf[i] = ins[k] && j + i < h ? ins[k][j + i] : 0.0f;
    v[k] = hn::Load(d, buf);
  }
  body(d, v, r);
  for (size_t k = 0; k < NOut; ++k) {
    if (!outs[k]) continue;
    hn::Store(r[k], d, buf);
    for (size_t i = 0; j + i < h; ++i) outs[k][j + i] = buf[i];
  }
}

// One LSTM row: ig, hg are the 4h gate rows (i, f, g, o), b the summed biases
// (or null); outputs hy, cy and ws (the activated gates, or null).
void LstmRowF32(const float* ig, const float* hg, const float* b, const float* cx, float* hy,
                float* cy, float* ws, size_t h) {
  const float* ins[13] = {ig, ig + h, ig + 2 * h, ig + 3 * h, hg, hg + h, hg + 2 * h, hg + 3 * h,
                          b, b ? b + h : nullptr, b ? b + 2 * h : nullptr,
                          b ? b + 3 * h : nullptr, cx};
  float* outs[6] = {hy, cy, ws, ws ? ws + h : nullptr, ws ? ws + 2 * h : nullptr,
                    ws ? ws + 3 * h : nullptr};
  ForEachVector(ins, outs, h, [](DF d, const VF* v, VF* r) {
    const VF i = SigmoidF(d, hn::Add(hn::Add(v[0], v[4]), v[8]));
    const VF f = SigmoidF(d, hn::Add(hn::Add(v[1], v[5]), v[9]));
    const VF g = TanhF(d, hn::Add(hn::Add(v[2], v[6]), v[10]));
    const VF o = SigmoidF(d, hn::Add(hn::Add(v[3], v[7]), v[11]));
    const VF c = hn::MulAdd(f, v[12], hn::Mul(i, g));
    r[0] = hn::Mul(o, TanhF(d, c));
    r[1] = c;
    r[2] = i;
    r[3] = f;
    r[4] = g;
    r[5] = o;
  });
}

// One GRU row: ig, hg are the 3h gate rows (r, z, n); b is [r and z biases
// summed, the input n bias, the hidden n bias] (4h, or null); outputs hy and
// ws = (r, z, n, hx, hidden n gate with its bias), or null.
void GruRowF32(const float* ig, const float* hg, const float* b, const float* hx, float* hy,
               float* ws, size_t h) {
  const float* ins[11] = {ig, ig + h, ig + 2 * h, hg, hg + h, hg + 2 * h, b,
                          b ? b + h : nullptr, b ? b + 2 * h : nullptr, b ? b + 3 * h : nullptr,
                          hx};
  float* outs[6] = {hy, ws, ws ? ws + h : nullptr, ws ? ws + 2 * h : nullptr,
                    ws ? ws + 3 * h : nullptr, ws ? ws + 4 * h : nullptr};
  ForEachVector(ins, outs, h, [](DF d, const VF* v, VF* r) {
    const VF rg = SigmoidF(d, hn::Add(hn::Add(v[0], v[3]), v[6]));
    const VF zg = SigmoidF(d, hn::Add(hn::Add(v[1], v[4]), v[7]));
    const VF hn_ = hn::Add(v[5], v[9]);
    const VF ng = TanhF(d, hn::MulAdd(rg, hn_, hn::Add(v[2], v[8])));
    r[0] = hn::MulAdd(zg, hn::Sub(v[10], ng), ng);
    r[1] = rg;
    r[2] = zg;
    r[3] = ng;
    r[4] = v[10];
    r[5] = hn_;
  });
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/scratch.h"

namespace trn::kernels {

HWY_EXPORT(LstmRowF32);
HWY_EXPORT(GruRowF32);

namespace {

char* RowPtr(const TensorRef& t, int64_t r) {
  return static_cast<char*>(t.data) + r * t.strides[0] * ItemSize(t.dtype);
}
// Whether a 2-D tensor's rows are contiguous float32 runs (used in place).
bool Direct(const TensorRef& t) {
  return t.dtype == DType::kFloat32 && (t.strides[1] == 1 || t.sizes[1] <= 1);
}
// Row r as float32: in place, or converted into `stage`.
const float* RowIn(const TensorRef& t, int64_t r, float* stage) {
  if (Direct(t)) return reinterpret_cast<const float*>(RowPtr(t, r));
  internal::LoadAsF32(t.dtype, RowPtr(t, r), t.strides[1], t.sizes[1], stage);
  return stage;
}
// Where the kernel writes row r of an output: in place, or `stage` for Flush.
float* RowOut(const TensorRef& t, int64_t r, float* stage) {
  if (t.data == nullptr) return nullptr;
  return Direct(t) ? reinterpret_cast<float*>(RowPtr(t, r)) : stage;
}
void Flush(const TensorRef& t, int64_t r, const float* stage) {
  if (t.data != nullptr && !Direct(t)) {
    internal::StoreFromF32(t.dtype, RowPtr(t, r), t.strides[1], t.sizes[1], stage);
  }
}
void LoadVector(const TensorRef& t, float* dst) {
  internal::LoadAsF32(t.dtype, t.data, t.strides[0], t.sizes[0], dst);
}

struct CellShape {
  int64_t batch, hidden;
};

// The shared contract; returns (batch, hidden).
CellShape CheckCell(int gates, const TensorRef& state_out, const TensorRef& workspace,
                    int ws_gates, const TensorRef& igates, const TensorRef& hgates,
                    const TensorRef& state, const TensorRef& ibias, const TensorRef& hbias) {
  TRN_ASSERT(igates.ndim == 2 && hgates.ndim == 2 && state.ndim == 2 && state_out.ndim == 2,
             "rnn cell: 2-D gates and states");
  const int64_t b = igates.sizes[0], h = igates.sizes[1] / gates;
  TRN_ASSERT(igates.sizes[1] == gates * h && hgates.sizes[0] == b &&
                 hgates.sizes[1] == gates * h,
             "rnn cell: gates of [batch, gates * hidden]");
  const DType dt = igates.dtype;
  TRN_ASSERT(IsFloating(dt) && hgates.dtype == dt && state.dtype == dt && state_out.dtype == dt,
             "rnn cell: one floating dtype");
  for (const TensorRef* s : {&state, &state_out}) {
    TRN_ASSERT(s->sizes[0] == b && s->sizes[1] == h, "rnn cell: states of [batch, hidden]");
  }
  if (workspace.data != nullptr) {
    TRN_ASSERT(workspace.ndim == 2 && workspace.sizes[0] == b &&
                   workspace.sizes[1] == ws_gates * h && workspace.dtype == dt,
               "rnn cell: workspace of [batch, k * hidden]");
  }
  for (const TensorRef* bias : {&ibias, &hbias}) {
    TRN_ASSERT(bias->data == nullptr ||
                   (bias->ndim == 1 && bias->sizes[0] == gates * h && bias->dtype == dt),
               "rnn cell: biases of [gates * hidden]");
  }
  return {b, h};
}

}  // namespace

Status LstmCell(const TensorRef& hy, const TensorRef& cy, const TensorRef& workspace,
                const TensorRef& igates, const TensorRef& hgates, const TensorRef& cx,
                const TensorRef& ibias, const TensorRef& hbias) {
  const auto [batch, h] = CheckCell(4, hy, workspace, 4, igates, hgates, cx, ibias, hbias);
  TRN_ASSERT(cy.ndim == 2 && cy.sizes[0] == batch && cy.sizes[1] == h && cy.dtype == hy.dtype,
             "LstmCell: cy like hy");
  if (batch == 0 || h == 0) return Status::Ok();
  // Scratch: bias 4h | ig 4h | hg 4h | cx h | hy h | cy h | ws 4h.
  internal::ScratchBuffer<float> scratch;
  float* const s = scratch.Get(19 * h);
  if (s == nullptr) return Status::Error("lstm_cell: no host memory for the row scratch");
  float* const bias = ibias.data || hbias.data ? s : nullptr;
  if (bias != nullptr) {
    const TensorRef& first = ibias.data ? ibias : hbias;
    LoadVector(first, bias);
    if (ibias.data && hbias.data) {
      float* other = s + 4 * h;  // the ig stage, free until the first row
      LoadVector(hbias, other);
      for (int64_t j = 0; j < 4 * h; ++j) bias[j] += other[j];
    }
  }
  const auto row_fn = HWY_DYNAMIC_DISPATCH(LstmRowF32);
  for (int64_t r = 0; r < batch; ++r) {
    const float* ig = RowIn(igates, r, s + 4 * h);
    const float* hg = RowIn(hgates, r, s + 8 * h);
    const float* c = RowIn(cx, r, s + 12 * h);
    float* ho = RowOut(hy, r, s + 13 * h);
    float* co = RowOut(cy, r, s + 14 * h);
    float* wo = RowOut(workspace, r, s + 15 * h);
    row_fn(ig, hg, bias, c, ho, co, wo, static_cast<size_t>(h));
    Flush(hy, r, ho);
    Flush(cy, r, co);
    Flush(workspace, r, wo);
  }
  return Status::Ok();
}

Status GruCell(const TensorRef& hy, const TensorRef& workspace, const TensorRef& igates,
               const TensorRef& hgates, const TensorRef& hx, const TensorRef& ibias,
               const TensorRef& hbias) {
  const auto [batch, h] = CheckCell(3, hy, workspace, 5, igates, hgates, hx, ibias, hbias);
  if (batch == 0 || h == 0) return Status::Ok();
  // Scratch: bias 4h | ig 3h | hg 3h | hx h | hy h | ws 5h | hidden bias 3h.
  internal::ScratchBuffer<float> scratch;
  float* const s = scratch.Get(20 * h);
  if (s == nullptr) return Status::Error("gru_cell: no host memory for the row scratch");
  float* const bias = ibias.data || hbias.data ? s : nullptr;
  if (bias != nullptr) {
    // [b_ir + b_hr, b_iz + b_hz, b_in, b_hn]: r multiplies the hidden n gate
    // with its bias, so the n biases stay apart.
    float* const bi = s + 4 * h;   // the ig stage, free until the first row
    float* const bh = s + 17 * h;
    for (int64_t j = 0; j < 3 * h; ++j) bi[j] = bh[j] = 0.0f;
    if (ibias.data) LoadVector(ibias, bi);
    if (hbias.data) LoadVector(hbias, bh);
    for (int64_t j = 0; j < 2 * h; ++j) bias[j] = bi[j] + bh[j];
    for (int64_t j = 0; j < h; ++j) {
      bias[2 * h + j] = bi[2 * h + j];
      bias[3 * h + j] = bh[2 * h + j];
    }
  }
  const auto row_fn = HWY_DYNAMIC_DISPATCH(GruRowF32);
  for (int64_t r = 0; r < batch; ++r) {
    const float* ig = RowIn(igates, r, s + 4 * h);
    const float* hg = RowIn(hgates, r, s + 7 * h);
    const float* x = RowIn(hx, r, s + 10 * h);
    float* ho = RowOut(hy, r, s + 11 * h);
    float* wo = RowOut(workspace, r, s + 12 * h);
    row_fn(ig, hg, bias, x, ho, wo, static_cast<size_t>(h));
    Flush(hy, r, ho);
    Flush(workspace, r, wo);
  }
  return Status::Ok();
}

KernelInfo DescribeRnnCell(bool lstm, const TensorRef& hy, const TensorRef& igates,
                           const char* aten_op) {
  static const char* const kLstm[4] = {"lstm_cell_f32", "lstm_cell_f64", "lstm_cell_bf16",
                                       "lstm_cell_f16"};
  static const char* const kGru[4] = {"gru_cell_f32", "gru_cell_f64", "gru_cell_bf16",
                                      "gru_cell_f16"};
  int k = 0;
  switch (igates.dtype) {
    case DType::kFloat64: k = 1; break;
    case DType::kBFloat16: k = 2; break;
    case DType::kFloat16: k = 3; break;
    default: break;
  }
  KernelInfo info;
  info.name = (lstm ? kLstm : kGru)[k];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  const uint64_t n = static_cast<uint64_t>(hy.numel()), item = ItemSize(igates.dtype);
  // Per hidden unit: the gate sums, the activations (counted as one each) and
  // the state update. Reads both gate rows and the state; writes the state(s)
  // and the workspace.
  info.flops = n * (lstm ? 20 : 16);
  info.bytes_read = n * item * (lstm ? 9 : 7);
  info.bytes_written = n * item * 6;
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
