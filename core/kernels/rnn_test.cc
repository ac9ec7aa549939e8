// The fused LSTM / GRU cells against double-precision scalar references on
// every compiled SIMD target: hidden sizes across vector edges, every floating
// dtype, gates and states in odd layouts, each bias present or absent, with
// and without a workspace.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::CheckClose;
using testing::Empty;
using testing::ForEachTarget;
using testing::Layout;
using testing::MakeLayout;
using testing::MakeRandom;
using testing::StorageTol;
using testing::TestTensor;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct CellCase {
  int64_t batch, hidden;
  DType dtype;
  Layout layout;  // of the gates and the state
  bool ibias, hbias, workspace;
};

std::string Describe(const CellCase& c) {
  return std::string(DTypeName(c.dtype)) + " B " + std::to_string(c.batch) + " H " +
         std::to_string(c.hidden) + " " + testing::LayoutName(c.layout) +
         (c.ibias ? " ibias" : "") + (c.hbias ? " hbias" : "") + (c.workspace ? " ws" : "");
}

std::vector<CellCase> Cases() {
  std::vector<CellCase> cases;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {3, 5}, {2, 8}, {2, 17},
                                                           {4, 64}, {2, 33}, {0, 4}};
  for (const auto& [b, h] : shapes) {
    for (DType dt : testing::kFloatTypes) {
      cases.push_back({b, h, dt, Layout::kContiguous, true, true, true});
    }
    for (Layout l : testing::AllLayouts()) {
      cases.push_back({b, h, DType::kFloat32, l, true, true, true});
    }
    cases.push_back({b, h, DType::kFloat32, Layout::kContiguous, true, false, false});
    cases.push_back({b, h, DType::kFloat32, Layout::kContiguous, false, true, true});
    cases.push_back({b, h, DType::kBFloat16, Layout::kStep2, false, false, true});
  }
  return cases;
}

struct Inputs {
  TestTensor ig, hg, state, ib, hb;
};

Inputs MakeInputs(const CellCase& c, int gates) {
  Inputs in;
  const int64_t g = gates * c.hidden;
  in.ig = MakeRandom(c.dtype, {c.batch, g}, c.layout, 11, -3.0, 3.0);
  in.hg = MakeRandom(c.dtype, {c.batch, g}, c.layout, 12, -3.0, 3.0);
  in.state = MakeRandom(c.dtype, {c.batch, c.hidden}, c.layout, 13, -2.0, 2.0);
  // Biases step 2 when not float32, to cover the converting loads.
  const Layout bl = c.dtype == DType::kFloat32 ? Layout::kContiguous : Layout::kStep2;
  if (c.ibias) in.ib = MakeRandom(c.dtype, {g}, bl, 14, -1.0, 1.0);
  if (c.hbias) in.hb = MakeRandom(c.dtype, {g}, bl, 15, -1.0, 1.0);
  return in;
}

// Gate k of row r: both gate tensors plus the chosen biases.
double Gate(const Inputs& in, const CellCase& c, int gates, int64_t r, int64_t k, bool ib,
            bool hb, bool hidden_gate = true) {
  const int64_t g = gates * c.hidden;
  double v = in.ig.At(r * g + k) + (hidden_gate ? in.hg.At(r * g + k) : 0.0);
  if (ib && c.ibias) v += in.ib.At(k);
  if (hb && c.hbias) v += in.hb.At(k);
  return v;
}

void Expect(const TestTensor& t, int64_t i, double want, DType dt, const std::string& what) {
  const std::string err = CheckClose(t.At(i), want, 0.0, StorageTol(dt, want, 4e-6) + 1e-6);
  EXPECT_EQ(err, "") << what << " element " << i;
}

TEST(RnnCell, LstmMatchesTheScalarReference) {
  ForEachTarget([](const char*) {
    for (const CellCase& c : Cases()) {
      SCOPED_TRACE(Describe(c));
      const Inputs in = MakeInputs(c, 4);
      TestTensor hy = Empty(c.dtype, {c.batch, c.hidden}), cy = Empty(c.dtype, {c.batch, c.hidden});
      TestTensor ws = Empty(c.dtype, {c.batch, 4 * c.hidden});
      ASSERT_TRUE(LstmCell(hy.ref, cy.ref, c.workspace ? ws.ref : TensorRef{}, in.ig.ref,
                           in.hg.ref, in.state.ref, c.ibias ? in.ib.ref : TensorRef{},
                           c.hbias ? in.hb.ref : TensorRef{})
                      .ok());
      const int64_t h = c.hidden;
      for (int64_t r = 0; r < c.batch; ++r) {
        for (int64_t j = 0; j < h; ++j) {
          const double i = Sigmoid(Gate(in, c, 4, r, j, true, true));
          const double f = Sigmoid(Gate(in, c, 4, r, h + j, true, true));
          const double g = std::tanh(Gate(in, c, 4, r, 2 * h + j, true, true));
          const double o = Sigmoid(Gate(in, c, 4, r, 3 * h + j, true, true));
          const double cnew = f * in.state.At(r * h + j) + i * g;
          Expect(cy, r * h + j, cnew, c.dtype, "cy");
          Expect(hy, r * h + j, o * std::tanh(cnew), c.dtype, "hy");
          if (!c.workspace) continue;
          const double acts[4] = {i, f, g, o};
          for (int k = 0; k < 4; ++k) Expect(ws, r * 4 * h + k * h + j, acts[k], c.dtype, "ws");
        }
      }
    }
  });
}

TEST(RnnCell, GruMatchesTheScalarReference) {
  ForEachTarget([](const char*) {
    for (const CellCase& c : Cases()) {
      SCOPED_TRACE(Describe(c));
      const Inputs in = MakeInputs(c, 3);
      TestTensor hy = Empty(c.dtype, {c.batch, c.hidden});
      TestTensor ws = Empty(c.dtype, {c.batch, 5 * c.hidden});
      ASSERT_TRUE(GruCell(hy.ref, c.workspace ? ws.ref : TensorRef{}, in.ig.ref, in.hg.ref,
                          in.state.ref, c.ibias ? in.ib.ref : TensorRef{},
                          c.hbias ? in.hb.ref : TensorRef{})
                      .ok());
      const int64_t h = c.hidden, g3 = 3 * h;
      for (int64_t r = 0; r < c.batch; ++r) {
        for (int64_t j = 0; j < h; ++j) {
          const double rg = Sigmoid(Gate(in, c, 3, r, j, true, true));
          const double zg = Sigmoid(Gate(in, c, 3, r, h + j, true, true));
          const double hn = in.hg.At(r * g3 + 2 * h + j) + (c.hbias ? in.hb.At(2 * h + j) : 0.0);
          const double ng = std::tanh(Gate(in, c, 3, r, 2 * h + j, true, false, false) + rg * hn);
          const double hx = in.state.At(r * h + j);
          Expect(hy, r * h + j, ng + zg * (hx - ng), c.dtype, "hy");
          if (!c.workspace) continue;
          const double stored[5] = {rg, zg, ng, hx, hn};
          for (int k = 0; k < 5; ++k) Expect(ws, r * 5 * h + k * h + j, stored[k], c.dtype, "ws");
        }
      }
    }
  });
}

// Saturated gates as float32 gives them: sigmoid(40) = tanh(40) = 1 and
// sigmoid(-120) = 0 exactly (e^-120 underflows); a NaN gate gives NaN.
TEST(RnnCell, SaturatedAndNaNGates) {
  ForEachTarget([](const char*) {
    const int64_t h = 9;
    TestTensor ig = Empty(DType::kFloat32, {1, 4 * h}), hg = Empty(DType::kFloat32, {1, 4 * h});
    TestTensor cx = Empty(DType::kFloat32, {1, h});
    for (int64_t k = 0; k < 4 * h; ++k) {
      ig.Set(k, (k / h) % 2 == 0 ? 40.0 : -120.0);
      hg.Set(k, 0.0);
    }
    ig.Set(h - 1, std::nan(""));  // the i gate of the last unit
    for (int64_t j = 0; j < h; ++j) cx.Set(j, 0.5);
    TestTensor hy = Empty(DType::kFloat32, {1, h}), cy = Empty(DType::kFloat32, {1, h});
    ASSERT_TRUE(LstmCell(hy.ref, cy.ref, TensorRef{}, ig.ref, hg.ref, cx.ref, TensorRef{},
                         TensorRef{})
                    .ok());
    // i = 1, f = 0, g = tanh(40) = 1, o = 0: cy = 1, hy = 0.
    for (int64_t j = 0; j + 1 < h; ++j) {
      EXPECT_EQ(cy.At(j), 1.0) << j;
      EXPECT_EQ(hy.At(j), 0.0) << j;
    }
    EXPECT_TRUE(std::isnan(cy.At(h - 1)));
  });
}

TEST(RnnCell, Describe) {
  TestTensor hy = Empty(DType::kBFloat16, {2, 8}), ig = Empty(DType::kBFloat16, {2, 32});
  const KernelInfo lstm = DescribeRnnCell(true, hy.ref, ig.ref, "aten::_thnn_fused_lstm_cell");
  EXPECT_STREQ(lstm.name, "lstm_cell_bf16");
  EXPECT_STREQ(lstm.op, "aten::_thnn_fused_lstm_cell");
  EXPECT_EQ(lstm.bytes_read, 16u * 2 * 9);
  const KernelInfo gru = DescribeRnnCell(false, hy.ref, ig.ref, "aten::_thnn_fused_gru_cell");
  EXPECT_STREQ(gru.name, "gru_cell_bf16");
}

}  // namespace
}  // namespace trn::kernels
