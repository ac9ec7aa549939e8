// The compiler against independent double-precision references: graphs built
// by hand as the torch frontend builds them (aten sequences of AOTAutograd),
// compiled, run kernel by kernel on host buffers in step order through the
// executor the torch bridge uses (eager steps by a scalar reference of their
// node), on every compiled SIMD target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/common/names.h"
#include "core/compiler/executor.h"
#include "core/compiler/graph.h"
#include "core/compiler/program.h"
#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::compiler {
namespace {

using kernels::testing::Empty;
using kernels::testing::FillRandom;
using kernels::testing::ForEachTarget;
using kernels::testing::TestTensor;
using Sizes = std::vector<int64_t>;

// ---- graph building, as the frontend does it -----------------------------------------
Meta MetaOf(const TestTensor& t) {
  Meta m;
  m.dtype = t.dtype();
  m.sizes = t.sizes();
  m.strides.assign(t.ref.strides, t.ref.strides + t.ref.ndim);
  return m;
}
Meta M(DType dt, Sizes sizes) {
  Meta m;
  m.dtype = dt;
  m.sizes = std::move(sizes);
  return m;
}
int Bin(Graph& g, Op op, int a, int b, const Sizes& out, const char* target,
        DType dt = DType::kFloat32) {
  Node n;
  n.op = op;
  n.target = target;
  n.inputs = {a, b};
  n.meta = M(dt, out);
  return g.AddNode(n);
}
int BinS(Graph& g, Op op, int a, double s, const Sizes& out, const char* target,
         DType dt = DType::kFloat32) {
  Node n;
  n.op = op;
  n.target = target;
  n.inputs = {a};
  n.scalar = s;
  n.has_scalar = true;
  n.meta = M(dt, out);
  return g.AddNode(n);
}
int Un(Graph& g, Op op, int a, const Sizes& out, const char* target, DType dt = DType::kFloat32) {
  Node n;
  n.op = op;
  n.target = target;
  n.inputs = {a};
  n.meta = M(dt, out);
  return g.AddNode(n);
}
int Red(Graph& g, Op op, int a, std::vector<int64_t> dims, const Sizes& out, const char* target,
        DType dt = DType::kFloat32) {
  Node n;
  n.op = op;
  n.target = target;
  n.inputs = {a};
  n.dims = std::move(dims);
  n.meta = M(dt, out);
  return g.AddNode(n);
}
int ViewOf(Graph& g, int a, const Sizes& sizes, const Sizes& strides, int64_t offset,
           DType dt = DType::kFloat32) {
  Node n;
  n.op = Op::kView;
  n.target = "aten.view.default";
  n.inputs = {a};
  n.meta = M(dt, sizes);
  n.meta.strides = strides;
  n.meta.storage_offset = offset;
  return g.AddNode(n);
}
int Mm(Graph& g, Op op, std::vector<int> in, const Sizes& out, const char* target) {
  Node n;
  n.op = op;
  n.target = target;
  n.inputs = std::move(in);
  n.meta = M(DType::kFloat32, out);
  return g.AddNode(n);
}

int Constant(Graph& g, double v) {
  Node n;
  n.op = Op::kConstant;
  n.target = "aten.scalar_tensor.default";
  n.scalar = v;
  n.meta = M(DType::kFloat32, {});
  return g.AddNode(n);
}
int Where(Graph& g, int cond, int a, int b, const Sizes& out) {
  Node n;
  n.op = Op::kWhere;
  n.target = "aten.where.self";
  n.inputs = {cond, a, b};
  n.meta = M(DType::kFloat32, out);
  return g.AddNode(n);
}

// ---- execution -------------------------------------------------------------------------
using EagerFn = std::function<void(const EagerStep&, const std::vector<TensorRef>& in,
                                   const TensorRef& out)>;

// The memory of a test tensor as torch describes it: its storage and the
// element offset of its data there.
InputMemory MemoryOf(const TestTensor& t) {
  char* storage = reinterpret_cast<char*>(t.storage->data());
  const int64_t bytes = static_cast<char*>(t.ref.data) - storage;
  return {storage, bytes / static_cast<int64_t>(ItemSize(t.dtype()))};
}

// Runs each step in place on the calling thread (eager steps through `eager`).
class HostRunner : public StepRunner {
 public:
  HostRunner(const Program& p, const Bindings& b, const EagerFn& eager)
      : p_(p), b_(b), eager_(eager) {}
  void RunKernel(int k) override {
    const Status s = p_.RunKernel(k, b_.base);
    EXPECT_TRUE(s.ok()) << s.error;
  }
  void RunEager(int index) override {
    const EagerStep& e = p_.eager()[index];
    std::vector<TensorRef> in;
    for (const View& v : e.inputs) in.push_back(BindView(b_, v));
    EXPECT_TRUE(eager_) << "unexpected eager step " << e.target;
    if (eager_) eager_(e, in, BindView(b_, e.output));
  }

 private:
  const Program& p_;
  const Bindings& b_;
  const EagerFn& eager_;
};

// Runs `p` over `inputs` (bound in place, through the executor as the bridge
// binds torch tensors) and returns the outputs.
std::vector<TestTensor> Execute(const Program& p, const std::vector<TestTensor>& inputs,
                                const EagerFn& eager = nullptr) {
  std::vector<TestTensor> owned;
  // Temps live in one arena (Note [Temp arena]), poisoned like the outputs:
  // a value read before it is written shows up as NaN.
  owned.push_back(Empty(DType::kFloat32, {p.arena_bytes() / 4 + 1}));
  for (int64_t e = 0; e < owned.back().numel(); ++e) owned.back().Set(e, NAN);
  void* arena = owned.back().ref.data;
  Bindings base;
  base.base.assign(p.buffers().size(), nullptr);
  for (size_t i = 0; i < p.buffers().size(); ++i) {
    const Buffer& b = p.buffers()[i];
    if (b.kind != Buffer::Kind::kOutput) continue;
    owned.push_back(Empty(b.dtype, {b.numel}));
    for (int64_t e = 0; e < b.numel; ++e) owned.back().Set(e, NAN);
    base.base[i] = owned.back().ref.data;
  }
  EXPECT_EQ(inputs.size(), p.input_views().size());
  BindBuffers(p, [&](int i) { return MemoryOf(inputs.at(i)); }, arena, &base);
  HostRunner runner(p, base, eager);
  RunSteps(p, runner);
  std::vector<TestTensor> outs;
  for (const View& v : p.output_views()) {
    TestTensor t;
    t.storage = owned.empty() ? nullptr : owned.front().storage;  // keep something alive
    t.ref = BindView(base, v);
    outs.push_back(t);
  }
  // Outputs must outlive `owned`: copy them into fresh contiguous tensors.
  std::vector<TestTensor> copies;
  for (const TestTensor& o : outs) {
    TestTensor c = Empty(o.dtype(), o.sizes());
    for (int64_t i = 0; i < o.numel(); ++i) c.Set(i, o.At(i));
    copies.push_back(c);
  }
  return copies;
}

void ExpectClose(const TestTensor& out, const std::vector<double>& ref, double rel,
                 double abs_tol = 1e-6) {
  ASSERT_EQ(out.numel(), static_cast<int64_t>(ref.size()));
  int bad = 0;
  for (int64_t i = 0; i < out.numel() && bad < 5; ++i) {
    const double tol = kernels::testing::StorageTol(out.dtype(), ref[i], rel);
    const std::string err = kernels::testing::CheckClose(out.At(i), ref[i], 0, tol + abs_tol);
    if (!err.empty()) {
      ADD_FAILURE() << "element " << i << ": " << err;
      ++bad;
    }
  }
}

int CountNonViewNodes(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op != Op::kView && node.op != Op::kInput;
  return n;
}

TestTensor Random(DType dt, const Sizes& s, uint32_t seed, double lo = -2, double hi = 2) {
  TestTensor t = Empty(dt, s);
  FillRandom(t, seed, lo, hi);
  return t;
}

// ---- RMSNorm ---------------------------------------------------------------------------
// x.pow(2).mean(-1, keepdim=True) + eps -> rsqrt -> x * r (* weight).
Graph RmsNormGraph(const Sizes& s, bool weight, DType dt = DType::kFloat32) {
  Graph g;
  const int x = g.AddInput(M(dt, s));
  const int w = weight ? g.AddInput(M(dt, {s.back()})) : -1;
  Sizes row = s;
  row.back() = 1;
  int xf = x;
  if (dt != DType::kFloat32) xf = Un(g, Op::kCast, x, s, "prims.convert_element_type.default");
  const int p = BinS(g, Op::kPow, xf, 2.0, s, "aten.pow.Tensor_Scalar");
  const int m = Red(g, Op::kMean, p, {-1}, row, "aten.mean.dim");
  const int a = BinS(g, Op::kAdd, m, 1e-6, row, "aten.add.Tensor");
  const int r = Un(g, Op::kRsqrt, a, row, "aten.rsqrt.default");
  int y = Bin(g, Op::kMul, xf, r, s, "aten.mul.Tensor");
  if (dt != DType::kFloat32) y = Un(g, Op::kCast, y, s, "prims.convert_element_type.default", dt);
  if (weight) y = Bin(g, Op::kMul, y, w, s, "aten.mul.Tensor", dt);
  g.SetOutputs({y});
  return g;
}

std::vector<double> RmsNormRef(const TestTensor& x, const TestTensor* w, DType dt) {
  const int64_t h = x.sizes().back(), rows = x.numel() / h;
  std::vector<double> out(static_cast<size_t>(x.numel()));
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < h; ++i) ss += x.At(r * h + i) * x.At(r * h + i);
    const double rstd = 1.0 / std::sqrt(ss / h + 1e-6);
    for (int64_t i = 0; i < h; ++i) {
      double v = x.At(r * h + i) * rstd;
      if (dt != DType::kFloat32) v = kernels::testing::RoundTo(dt, v);
      out[r * h + i] = w ? v * w->At(i) : v;
    }
  }
  return out;
}

TEST(CompilerTest, RmsNormIsOneKernel) {
  for (bool weight : {true, false}) {
    for (const Sizes& s : {Sizes{3, 5, 67}, Sizes{4, 1000}, Sizes{2, 1, 1537}}) {
      SCOPED_TRACE(testing::Message() << "weight " << weight << " H " << s.back());
      const Graph g = RmsNormGraph(s, weight);
      const Program p = Compile(g);
      ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
      EXPECT_STREQ(p.kernels()[0].name,
                   weight ? "fused[pow,mean,add,rsqrt,mul,mul]" : "fused[pow,mean,add,rsqrt,mul]");
      EXPECT_EQ(p.kernels()[0].aten_ops[0], "aten::pow.Tensor_Scalar");
      EXPECT_STREQ(p.kernels()[0].info.op, "aten::pow");
      TestTensor x = Random(DType::kFloat32, s, 1);
      TestTensor w = Random(DType::kFloat32, {s.back()}, 2);
      std::vector<TestTensor> in = {x};
      if (weight) in.push_back(w);
      ForEachTarget([&](const char*) {
        const auto out = Execute(p, in);
        ExpectClose(out[0], RmsNormRef(x, weight ? &w : nullptr, DType::kFloat32), 2e-6);
      });
    }
  }
}

// The peepholes (sum of squares, x * r * w in one pass) must not fire when the
// intermediate has another reader.
TEST(CompilerTest, PeepholesKeepSharedIntermediates) {
  const Sizes s = {3, 200}, row = {3, 1};
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, s));
  const int w = g.AddInput(M(DType::kFloat32, {200}));
  const int p = BinS(g, Op::kPow, x, 2.0, s, "aten.pow.Tensor_Scalar");
  const int m = Red(g, Op::kSum, p, {-1}, row, "aten.sum.dim_IntList");
  const int y = Bin(g, Op::kMul, x, m, s, "aten.mul.Tensor");
  const int z = Bin(g, Op::kMul, y, w, s, "aten.mul.Tensor");
  const int q = Bin(g, Op::kAdd, p, y, s, "aten.add.Tensor");  // second reader of p and y
  g.SetOutputs({z, q});
  const Program prog = Compile(g);
  ASSERT_EQ(prog.kernels().size(), 1u) << prog.Report();
  TestTensor tx = Random(DType::kFloat32, s, 60), tw = Random(DType::kFloat32, {200}, 61);
  std::vector<double> rz(600), rq(600);
  for (int r = 0; r < 3; ++r) {
    double ss = 0;
    for (int i = 0; i < 200; ++i) ss += tx.At(r * 200 + i) * tx.At(r * 200 + i);
    for (int i = 0; i < 200; ++i) {
      const double xv = tx.At(r * 200 + i);
      rz[r * 200 + i] = xv * ss * tw.At(i);
      rq[r * 200 + i] = xv * xv + xv * ss;
    }
  }
  ForEachTarget([&](const char*) {
    const auto out = Execute(prog, {tx, tw});
    ExpectClose(out[0], rz, 1e-5, 1e-5);
    ExpectClose(out[1], rq, 1e-5, 1e-5);
  });
}

TEST(CompilerTest, RmsNormBf16WithCastPair) {
  const Sizes s = {6, 300};
  const Graph g = RmsNormGraph(s, true, DType::kBFloat16);
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
  EXPECT_STREQ(p.kernels()[0].name,
               "fused[convert_element_type,pow,mean,add,rsqrt,mul,convert_element_type,mul]");
  TestTensor x = Random(DType::kBFloat16, s, 3), w = Random(DType::kBFloat16, {300}, 4);
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {x, w});
    EXPECT_EQ(out[0].dtype(), DType::kBFloat16);
    ExpectClose(out[0], RmsNormRef(x, &w, DType::kBFloat16), 1e-5, 1e-2);
  });
}

// ---- LayerNorm ---------------------------------------------------------------------------
TEST(CompilerTest, LayerNormIsOneKernel) {
  const Sizes s = {7, 777}, row = {7, 1};
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, s));
  const int w = g.AddInput(M(DType::kFloat32, {777}));
  const int b = g.AddInput(M(DType::kFloat32, {777}));
  const int mean = Red(g, Op::kMean, x, {1}, row, "aten.mean.dim");
  const int d = Bin(g, Op::kSub, x, mean, s, "aten.sub.Tensor");
  const int d2 = BinS(g, Op::kPow, d, 2.0, s, "aten.pow.Tensor_Scalar");
  const int var = Red(g, Op::kMean, d2, {-1}, row, "aten.mean.dim");
  const int ve = BinS(g, Op::kAdd, var, 1e-5, row, "aten.add.Tensor");
  const int rs = Un(g, Op::kRsqrt, ve, row, "aten.rsqrt.default");
  const int n = Bin(g, Op::kMul, d, rs, s, "aten.mul.Tensor");
  const int nw = Bin(g, Op::kMul, n, w, s, "aten.mul.Tensor");
  const int y = Bin(g, Op::kAdd, nw, b, s, "aten.add.Tensor");
  g.SetOutputs({y, mean});
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
  TestTensor tx = Random(DType::kFloat32, s, 5, -3, 5), tw = Random(DType::kFloat32, {777}, 6),
             tb = Random(DType::kFloat32, {777}, 7);
  std::vector<double> ref(tx.numel()), ref_mean(7);
  for (int r = 0; r < 7; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 777; ++i) m += tx.At(r * 777 + i);
    m /= 777;
    for (int i = 0; i < 777; ++i) v += (tx.At(r * 777 + i) - m) * (tx.At(r * 777 + i) - m);
    v /= 777;
    ref_mean[r] = m;
    for (int i = 0; i < 777; ++i) {
      ref[r * 777 + i] = (tx.At(r * 777 + i) - m) / std::sqrt(v + 1e-5) * tw.At(i) + tb.At(i);
    }
  }
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {tx, tw, tb});
    ExpectClose(out[0], ref, 1e-5, 1e-5);
    ExpectClose(out[1], ref_mean, 1e-5, 1e-6);
  });
}

// ---- softmax -----------------------------------------------------------------------------
std::vector<double> SoftmaxRef(const TestTensor& x, bool log) {
  const int64_t h = x.sizes().back(), rows = x.numel() / h;
  std::vector<double> out(x.numel());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < h; ++i) m = std::max(m, x.At(r * h + i));
    for (int64_t i = 0; i < h; ++i) s += std::exp(x.At(r * h + i) - m);
    for (int64_t i = 0; i < h; ++i) {
      out[r * h + i] = log ? x.At(r * h + i) - m - std::log(s) : std::exp(x.At(r * h + i) - m) / s;
    }
  }
  return out;
}

TEST(CompilerTest, SoftmaxDecomposedIsOneKernel) {
  const Sizes s = {2, 3, 1100}, row = {2, 3, 1};
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, s));
  const int m = Red(g, Op::kAmax, x, {-1}, row, "aten.amax.default");
  const int d = Bin(g, Op::kSub, x, m, s, "aten.sub.Tensor");
  const int e = Un(g, Op::kExp, d, s, "aten.exp.default");
  const int sum = Red(g, Op::kSum, e, {2}, row, "aten.sum.dim_IntList");
  const int y = Bin(g, Op::kDiv, e, sum, s, "aten.div.Tensor");
  g.SetOutputs({y});
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
  EXPECT_STREQ(p.kernels()[0].name, "fused[amax,sub,exp,sum,div]");
  TestTensor tx = Random(DType::kFloat32, s, 8, -10, 10);
  ForEachTarget([&](const char*) { ExpectClose(Execute(p, {tx})[0], SoftmaxRef(tx, false), 1e-5, 1e-7); });
}

TEST(CompilerTest, SoftmaxNodesAndNonLastDim) {
  for (Op op : {Op::kSoftmax, Op::kLogSoftmax}) {
    const Sizes s = {5, 300};
    Graph g;
    const int x = g.AddInput(M(DType::kFloat32, s));
    Node n;
    n.op = op;
    n.inputs = {x};
    n.dims = {-1};
    n.meta = M(DType::kFloat32, s);
    const int y = g.AddNode(n);
    n.dims = {0};  // not the last dim: a library kernel, still correct
    const int z = g.AddNode(n);
    g.SetOutputs({y, z});
    const Program p = Compile(g);
    EXPECT_EQ(p.kernels().size(), 2u);
    TestTensor tx = Random(DType::kFloat32, s, 9, -5, 5);
    TestTensor tt = tx.Transpose(0, 1);
    std::vector<double> ref_t = SoftmaxRef(tt, op == Op::kLogSoftmax), ref_z(tx.numel());
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 300; ++j) ref_z[i * 300 + j] = ref_t[j * 5 + i];
    }
    ForEachTarget([&](const char*) {
      const auto out = Execute(p, {tx});
      ExpectClose(out[0], SoftmaxRef(tx, op == Op::kLogSoftmax), 1e-5, 1e-6);
      ExpectClose(out[1], ref_z, 1e-5, 1e-6);
    });
  }
}

// ---- MLPs --------------------------------------------------------------------------------
// x [m, k] @ w.t() with w [n, k] given as a graph input (as nn.Linear's weight).
std::vector<double> LinearRef(const TestTensor& x, const TestTensor& w, const TestTensor* b) {
  const int64_t m = x.sizes()[0], k = x.sizes()[1], n = w.sizes()[0];
  std::vector<double> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b ? b->At(j) : 0;
      for (int64_t p = 0; p < k; ++p) s += x.At(i * k + p) * w.At(j * k + p);
      out[i * n + j] = s;
    }
  }
  return out;
}
int Transposed(Graph& g, int w, int64_t n, int64_t k) {  // aten.t of an [n, k] weight
  return ViewOf(g, w, {k, n}, {1, k}, 0);
}

TEST(CompilerTest, GeluMlpFusesBiasAndActivation) {
  const int64_t m = 37, k = 50, h = 70, o = 20;
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {m, k}));
  const int w1 = g.AddInput(M(DType::kFloat32, {h, k}));
  const int b1 = g.AddInput(M(DType::kFloat32, {h}));
  const int w2 = g.AddInput(M(DType::kFloat32, {o, h}));
  const int b2 = g.AddInput(M(DType::kFloat32, {o}));
  const int t1 = Transposed(g, w1, h, k);
  const int mm1 = Mm(g, Op::kMm, {x, t1}, {m, h}, "aten.mm.default");
  const int a1 = Bin(g, Op::kAdd, mm1, b1, {m, h}, "aten.add.Tensor");
  const int ge = Un(g, Op::kGelu, a1, {m, h}, "aten.gelu.default");
  const int t2 = Transposed(g, w2, o, h);
  const int y = Mm(g, Op::kAddmm, {b2, ge, t2}, {m, o}, "aten.addmm.default");
  g.SetOutputs({y});
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 2u) << p.Report();
  EXPECT_STREQ(p.kernels()[0].name, "fused[mm,add,gelu]");
  EXPECT_EQ(p.kernels()[0].info.engine, rt::Engine::kTensor);
  EXPECT_EQ(p.kernels()[0].info.flops, static_cast<uint64_t>(2 * m * h * k + 2 * m * h));
  TestTensor tx = Random(DType::kFloat32, {m, k}, 10), tw1 = Random(DType::kFloat32, {h, k}, 11),
             tb1 = Random(DType::kFloat32, {h}, 12), tw2 = Random(DType::kFloat32, {o, h}, 13),
             tb2 = Random(DType::kFloat32, {o}, 14);
  std::vector<double> hid = LinearRef(tx, tw1, &tb1);
  TestTensor th = Empty(DType::kFloat32, {m, h});
  for (int64_t i = 0; i < m * h; ++i) {
    th.Set(i, 0.5 * hid[i] * (1 + std::erf(hid[i] / std::sqrt(2.0))));
  }
  const std::vector<double> ref = LinearRef(th, tw2, &tb2);
  ForEachTarget([&](const char*) {
    ExpectClose(Execute(p, {tx, tw1, tb1, tw2, tb2})[0], ref, 2e-5, 2e-5);
  });
}

TEST(CompilerTest, SwiGluMlpIsAtMostThreeKernels) {
  const int64_t m = 33, d = 40, f = 96;
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {m, d}));
  const int wg = g.AddInput(M(DType::kFloat32, {f, d}));
  const int wu = g.AddInput(M(DType::kFloat32, {f, d}));
  const int wd = g.AddInput(M(DType::kFloat32, {d, f}));
  const int gate = Mm(g, Op::kMm, {x, Transposed(g, wg, f, d)}, {m, f}, "aten.mm.default");
  const int s = Un(g, Op::kSilu, gate, {m, f}, "aten.silu.default");
  const int up = Mm(g, Op::kMm, {x, Transposed(g, wu, f, d)}, {m, f}, "aten.mm.default");
  const int h = Bin(g, Op::kMul, s, up, {m, f}, "aten.mul.Tensor");
  const int y = Mm(g, Op::kMm, {h, Transposed(g, wd, d, f)}, {m, d}, "aten.mm.default");
  g.SetOutputs({y});
  const Program p = Compile(g);
  EXPECT_LE(p.kernels().size(), 3u) << p.Report();
  TestTensor tx = Random(DType::kFloat32, {m, d}, 15, -1, 1),
             tg = Random(DType::kFloat32, {f, d}, 16, -0.5, 0.5),
             tu = Random(DType::kFloat32, {f, d}, 17, -0.5, 0.5),
             td = Random(DType::kFloat32, {d, f}, 18, -0.5, 0.5);
  const auto a = LinearRef(tx, tg, nullptr), b = LinearRef(tx, tu, nullptr);
  TestTensor th = Empty(DType::kFloat32, {m, f});
  for (int64_t i = 0; i < m * f; ++i) th.Set(i, a[i] / (1 + std::exp(-a[i])) * b[i]);
  const auto ref = LinearRef(th, td, nullptr);
  ForEachTarget([&](const char*) { ExpectClose(Execute(p, {tx, tg, tu, td})[0], ref, 2e-5, 1e-4); });
}

TEST(CompilerTest, ResidualAddChainAndBroadcastScalars) {
  const Sizes s = {4, 9, 130};
  Graph g;
  const int a = g.AddInput(M(DType::kFloat32, s));
  const int b = g.AddInput(M(DType::kFloat32, s));
  const int c = g.AddInput(M(DType::kFloat32, {9, 1}));   // broadcast over rows and columns
  const int z = g.AddInput(M(DType::kFloat32, {}));       // a 0-d tensor
  Node k;
  k.op = Op::kConstant;
  k.scalar = 0.25;
  k.meta = M(DType::kFloat32, {1});
  const int q = g.AddNode(k);
  const int r1 = Bin(g, Op::kAdd, a, b, s, "aten.add.Tensor");
  const int r2 = Bin(g, Op::kSub, r1, c, s, "aten.sub.Tensor");
  const int r3 = Bin(g, Op::kMul, r2, z, s, "aten.mul.Tensor");
  const int r4 = Bin(g, Op::kAdd, r3, q, s, "aten.add.Tensor");
  Node n;
  n.op = Op::kAdd;
  n.inputs = {r4, a};
  n.alpha = 2;
  n.meta = M(DType::kFloat32, s);
  const int r5 = g.AddNode(n);
  g.SetOutputs({r5});
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
  TestTensor ta = Random(DType::kFloat32, s, 19), tb = Random(DType::kFloat32, s, 20),
             tc = Random(DType::kFloat32, {9, 1}, 21), tz = Random(DType::kFloat32, {}, 22);
  std::vector<double> ref(ta.numel());
  for (int64_t i = 0; i < ta.numel(); ++i) {
    const int64_t row = (i / 130) % 9;
    ref[i] = ((ta.At(i) + tb.At(i)) - tc.At(row)) * tz.At(0) + 0.25 + 2 * ta.At(i);
  }
  ForEachTarget([&](const char*) { ExpectClose(Execute(p, {ta, tb, tc, tz})[0], ref, 1e-6, 1e-6); });
}

// A residual sum that is an output and the input of a norm (read again in the
// norm's second phase) or of a softmax (in its second and third): one kernel,
// both outputs right. A float32 sum is re-read from the output (Note [Re-read
// outputs]); a bfloat16 one from a spill slot, since the output holds it rounded.
TEST(CompilerTest, ResidualSumThatIsAnOutputFeedsANormAndASoftmax) {
  const Sizes s = {3, 5, 260}, row = {3, 5, 1};
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    for (bool softmax : {false, true}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + (softmax ? " softmax" : " rms_norm"));
      Graph g;
      const int a = g.AddInput(M(DType::kFloat32, s));
      const int b = g.AddInput(M(DType::kFloat32, s));
      const int w = g.AddInput(M(DType::kFloat32, {s.back()}));
      const int h = Bin(g, Op::kAdd, a, b, s, "aten.add.Tensor");
      int y;
      if (softmax) {
        const int m = Red(g, Op::kAmax, h, {-1}, row, "aten.amax.default");
        const int e = Un(g, Op::kExp, Bin(g, Op::kSub, h, m, s, "aten.sub.Tensor"), s,
                         "aten.exp.default");
        const int sum = Red(g, Op::kSum, e, {-1}, row, "aten.sum.dim_IntList");
        y = Bin(g, Op::kDiv, e, sum, s, "aten.div.Tensor");
      } else {
        const int p2 = BinS(g, Op::kPow, h, 2.0, s, "aten.pow.Tensor_Scalar");
        const int m = Red(g, Op::kMean, p2, {-1}, row, "aten.mean.dim");
        const int r = Un(g, Op::kRsqrt, BinS(g, Op::kAdd, m, 1e-6, row, "aten.add.Tensor"),
                         row, "aten.rsqrt.default");
        y = Bin(g, Op::kMul, Bin(g, Op::kMul, h, r, s, "aten.mul.Tensor"), w, s,
                "aten.mul.Tensor");
      }
      const int hout = dt == DType::kFloat32
                           ? h
                           : Un(g, Op::kCast, h, s, "prims.convert_element_type.default", dt);
      g.SetOutputs({hout, y});
      const Program p = Compile(g);
      ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
      TestTensor ta = Random(DType::kFloat32, s, 31, -3, 3), tb = Random(DType::kFloat32, s, 32, -3, 3),
                 tw = Random(DType::kFloat32, {s.back()}, 33);
      TestTensor sum = Empty(DType::kFloat32, s);
      std::vector<double> ref_h(ta.numel());
      for (int64_t i = 0; i < ta.numel(); ++i) {
        ref_h[i] = ta.At(i) + tb.At(i);
        sum.Set(i, ref_h[i]);
      }
      std::vector<double> ref_y = softmax ? SoftmaxRef(sum, false) : RmsNormRef(sum, &tw, DType::kFloat32);
      if (dt != DType::kFloat32) {
        for (double& v : ref_h) v = kernels::testing::RoundTo(dt, v);
      }
      ForEachTarget([&](const char*) {
        const auto out = Execute(p, {ta, tb, tw});
        ExpectClose(out[0], ref_h, dt == DType::kFloat32 ? 1e-6 : 0, 1e-6);
        ExpectClose(out[1], ref_y, 1e-5, 1e-6);
      });
    }
  }
}

// ---- views -------------------------------------------------------------------------------
TEST(CompilerTest, ViewsOfInputsAreStridesNotCopies) {
  // x [6, 8, 10]: permute(2, 0, 1) * expand(y[10,1,1]) + slice(z)[::2] ... -> reshape
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {6, 8, 10}));
  const int y = g.AddInput(M(DType::kFloat32, {10, 1, 1}));
  const int z = g.AddInput(M(DType::kFloat32, {20, 6, 8}));
  const int px = ViewOf(g, x, {10, 6, 8}, {1, 80, 10}, 0);     // permute
  const int ey = ViewOf(g, y, {10, 6, 8}, {1, 0, 0}, 0);       // expand
  const int sz = ViewOf(g, z, {10, 6, 8}, {96, 8, 1}, 48);     // z[1::2]
  const int m = Bin(g, Op::kMul, px, ey, {10, 6, 8}, "aten.mul.Tensor");
  const int a = Bin(g, Op::kAdd, m, sz, {10, 6, 8}, "aten.add.Tensor");
  const int r = ViewOf(g, a, {60, 8}, {8, 1}, 0);              // reshape of the result
  const int t = ViewOf(g, r, {8, 60}, {1, 8}, 0);              // view of a view
  const int o = Un(g, Op::kNeg, t, {8, 60}, "aten.neg.default");
  g.SetOutputs({o, t});
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 2u) << p.Report();  // views cost nothing
  TestTensor tx = Random(DType::kFloat32, {6, 8, 10}, 23), ty = Random(DType::kFloat32, {10, 1, 1}, 24),
             tz = Random(DType::kFloat32, {20, 6, 8}, 25);
  std::vector<double> av(480);
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 6; ++j) {
      for (int k = 0; k < 8; ++k) {
        av[(i * 6 + j) * 8 + k] = tx.At(j * 80 + k * 10 + i) * ty.At(i) + tz.At(((2 * i + 1) * 6 + j) * 8 + k);
      }
    }
  }
  std::vector<double> ref_t(480), ref_o(480);
  for (int c = 0; c < 8; ++c) {
    for (int rr = 0; rr < 60; ++rr) {
      ref_t[c * 60 + rr] = av[rr * 8 + c];
      ref_o[c * 60 + rr] = -av[rr * 8 + c];
    }
  }
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {tx, ty, tz});
    ExpectClose(out[0], ref_o, 0, 1e-6);
    ExpectClose(out[1], ref_t, 0, 1e-6);
  });
}

TEST(CompilerTest, ReshapeOfNonContiguousIsCloneAndView) {
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {4, 6}));
  const int t = ViewOf(g, x, {6, 4}, {1, 6}, 0);
  const int r = ViewOf(g, t, {24}, {}, 0);  // no strides: reshape semantics
  const int y = BinS(g, Op::kMul, r, 3.0, {24}, "aten.mul.Tensor");
  g.SetOutputs({y});
  const Program p = Compile(g);
  TestTensor tx = Random(DType::kFloat32, {4, 6}, 26);
  std::vector<double> ref(24);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 4; ++j) ref[i * 4 + j] = 3 * tx.At(j * 6 + i);
  }
  ExpectClose(Execute(p, {tx})[0], ref, 0, 1e-6);
}

// A clone and a one-input cat of the KV cache's head transpose ([B, S, H, D]
// viewed as [B, H, S, D]), in float32 and bool, each its own kernel (Note
// [Lone nodes]); bit-exact.
TEST(CompilerTest, LoneCopiesOfTransposedHeads) {
  const Sizes s = {2, 5, 3, 7}, heads = {2, 3, 5, 7}, strides = {105, 7, 21, 1};
  for (DType dt : {DType::kFloat32, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dt));
    Graph g;
    const int x = g.AddInput(M(dt, s));
    const int v = ViewOf(g, x, heads, strides, 0, dt);
    Node c;
    c.op = Op::kClone;
    c.target = "aten.clone.default";
    c.inputs = {v};
    c.meta = M(dt, heads);
    const int cl = g.AddNode(c);
    c.op = Op::kCat;
    c.target = "aten.cat.default";
    c.dims = {2};
    const int ct = g.AddNode(c);
    g.SetOutputs({cl, ct});
    const Program p = Compile(g);
    ASSERT_EQ(p.kernels().size(), 2u) << p.Report();
    TestTensor tx = Empty(dt, s);
    for (int64_t i = 0; i < tx.numel(); ++i) tx.Set(i, dt == DType::kBool ? (i * 7 % 3 == 0) : i - 50.5);
    std::vector<double> ref;
    for (int b = 0; b < 2; ++b) {
      for (int h = 0; h < 3; ++h) {
        for (int q = 0; q < 5; ++q) {
          for (int d = 0; d < 7; ++d) ref.push_back(tx.At(b * 105 + h * 7 + q * 21 + d));
        }
      }
    }
    ForEachTarget([&](const char*) {
      const auto out = Execute(p, {tx});
      ExpectClose(out[0], ref, 0, 0);
      ExpectClose(out[1], ref, 0, 0);
    });
  }
}

// ---- dtypes ------------------------------------------------------------------------------
TEST(CompilerTest, CastsAndFloat64) {
  const Sizes s = {5, 33};
  Graph g;
  const int x = g.AddInput(M(DType::kFloat64, s));
  const int h = g.AddInput(M(DType::kBFloat16, s));
  const int hf = Un(g, Op::kCast, h, s, "aten._to_copy.default", DType::kFloat64);
  const int e = Un(g, Op::kExp, x, s, "aten.exp.default", DType::kFloat64);
  const int a = Bin(g, Op::kAdd, e, hf, s, "aten.add.Tensor", DType::kFloat64);
  const int b = Un(g, Op::kCast, a, s, "aten._to_copy.default", DType::kBFloat16);
  const int c = Un(g, Op::kCast, b, s, "aten._to_copy.default", DType::kFloat32);
  const int d = BinS(g, Op::kMul, c, 0.5, s, "aten.mul.Tensor");
  g.SetOutputs({a, d});
  const Program p = Compile(g);
  EXPECT_EQ(p.kernels().size(), 1u) << p.Report();
  TestTensor tx = Random(DType::kFloat64, s, 27), th = Random(DType::kBFloat16, s, 28);
  std::vector<double> ra(tx.numel()), rd(tx.numel());
  for (int64_t i = 0; i < tx.numel(); ++i) {
    ra[i] = std::exp(tx.At(i)) + th.At(i);
    rd[i] = kernels::testing::RoundTo(DType::kBFloat16, ra[i]) * 0.5;
  }
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {tx, th});
    EXPECT_EQ(out[0].dtype(), DType::kFloat64);
    ExpectClose(out[0], ra, 1e-6, 1e-6);  // float64 is computed in float32
    ExpectClose(out[1], rd, 1e-2, 1e-6);
  });
}

// ---- eager fallback, fuse=false ---------------------------------------------------------
TEST(CompilerTest, UnusedEagerNodesRunUnlessPure) {
  // Note [Eager nodes]: an unread pure eager node (a pad folded into a conv)
  // is dropped; an unread impure one (an RNG draw) still runs.
  const Sizes s = {2, 8};
  for (bool pure : {true, false}) {
    Graph g;
    const int x = g.AddInput(M(DType::kFloat32, s));
    Node e;
    e.op = Op::kEager;
    e.target = pure ? "aten.constant_pad_nd.default" : "aten.rand_like.default";
    e.inputs = {x};
    e.meta = M(DType::kFloat32, s);
    e.pure = pure;
    g.AddNode(e);
    g.SetOutputs({BinS(g, Op::kMul, x, 2.0, s, "aten.mul.Tensor")});
    const Program p = Compile(g);
    EXPECT_EQ(p.eager().size(), pure ? 0u : 1u) << e.target;
    EXPECT_EQ(p.kernels().size(), 1u);
  }
}

TEST(CompilerTest, UnknownOpRunsEagerBetweenKernels) {
  const Sizes s = {3, 40};
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, s));
  const int a = BinS(g, Op::kMul, x, 2.0, s, "aten.mul.Tensor");
  Node e;
  e.op = Op::kEager;
  e.target = "aten.my_cube.default";
  e.inputs = {a};
  e.meta = M(DType::kFloat32, s);
  const int c = g.AddNode(e);
  const int b = Bin(g, Op::kAdd, c, a, s, "aten.add.Tensor");
  const int i = Un(g, Op::kCast, b, s, "aten._to_copy.default", DType::kInt32);
  // int math: a library kernel over int32 (Note [Library kernels]), not eager
  const int j = BinS(g, Op::kMul, i, 3, s, "aten.mul.Tensor", DType::kInt32);
  g.SetOutputs({b, j});
  const Program p = Compile(g);
  ASSERT_EQ(p.eager().size(), 1u);
  EXPECT_EQ(p.eager()[0].target, "aten.my_cube.default");
  EXPECT_EQ(p.eager()[0].reason, "");  // a kEager node: the frontend knows why
  EXPECT_STREQ(p.kernels().back().name, "mul");
  EXPECT_NE(p.Report().find("aten.my_cube.default"), std::string::npos);
  TestTensor tx = Random(DType::kFloat32, s, 29);
  std::vector<double> rb(tx.numel()), rj(tx.numel());
  for (int64_t k = 0; k < tx.numel(); ++k) {
    const double v = 2 * tx.At(k);
    rb[k] = static_cast<float>(v * v * v) + v;
    rj[k] = 3 * static_cast<double>(static_cast<int32_t>(static_cast<float>(rb[k])));
  }
  auto eager = [&](const EagerStep& st, const std::vector<TensorRef>& in, const TensorRef& out) {
    TestTensor ti, to;
    ti.ref = in[0];
    to.ref = out;
    for (int64_t k = 0; k < ti.numel(); ++k) {
      const double v = ti.At(k);
      EXPECT_EQ(st.target, "aten.my_cube.default");
      to.Set(k, v * v * v);
    }
  };
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {tx}, eager);
    ExpectClose(out[0], rb, 1e-6, 1e-5);
    ExpectClose(out[1], rj, 0, 0);
  });
}

TEST(CompilerTest, NoFusionIsOneKernelPerNode) {
  const Graph g = RmsNormGraph({8, 64}, true);
  const Program p = Compile(g, CompileOptions{false});
  EXPECT_EQ(static_cast<int>(p.kernels().size()), CountNonViewNodes(g));
  TestTensor x = Random(DType::kFloat32, {8, 64}, 30), w = Random(DType::kFloat32, {64}, 31);
  ExpectClose(Execute(p, {x, w})[0], RmsNormRef(x, &w, DType::kFloat32), 2e-6);
}

TEST(CompilerTest, TempsWhoseLivesDoNotOverlapShareArenaBytes) {
  // Unfused rms_norm: a chain of temps, each dead two kernels after it is made.
  const Graph g = RmsNormGraph({8, 64}, true);
  const Program p = Compile(g, CompileOptions{false});
  int64_t sum = 0, temps = 0;
  for (const Buffer& b : p.buffers()) {
    if (b.kind != Buffer::Kind::kTemp) continue;
    ++temps;
    sum += b.numel * static_cast<int64_t>(ItemSize(b.dtype));
    EXPECT_EQ(b.arena_offset % 64, 0);
  }
  ASSERT_GE(temps, 3);
  EXPECT_LT(p.arena_bytes(), sum);
  TestTensor x = Random(DType::kFloat32, {8, 64}, 32), w = Random(DType::kFloat32, {64}, 33);
  ExpectClose(Execute(p, {x, w})[0], RmsNormRef(x, &w, DType::kFloat32), 2e-6);
}

// ---- a decoder block ---------------------------------------------------------------------
TEST(CompilerTest, DecoderBlockHasFarFewerKernelsThanNodes) {
  const int64_t b = 2, t = 8, d = 32, f = 64;
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {b, t, d}));
  const int wn1 = g.AddInput(M(DType::kFloat32, {d}));
  const int wq = g.AddInput(M(DType::kFloat32, {d, d}));
  const int wn2 = g.AddInput(M(DType::kFloat32, {d}));
  const int wg = g.AddInput(M(DType::kFloat32, {f, d}));
  const int wu = g.AddInput(M(DType::kFloat32, {f, d}));
  const int wd = g.AddInput(M(DType::kFloat32, {d, f}));
  auto rms = [&](int in, int w) {
    const Sizes s = {b, t, d}, row = {b, t, 1};
    const int p = BinS(g, Op::kPow, in, 2.0, s, "aten.pow.Tensor_Scalar");
    const int m = Red(g, Op::kMean, p, {-1}, row, "aten.mean.dim");
    const int a = BinS(g, Op::kAdd, m, 1e-6, row, "aten.add.Tensor");
    const int r = Un(g, Op::kRsqrt, a, row, "aten.rsqrt.default");
    const int y = Bin(g, Op::kMul, in, r, s, "aten.mul.Tensor");
    return Bin(g, Op::kMul, y, w, s, "aten.mul.Tensor");
  };
  auto linear = [&](int in, int w, int64_t n, int64_t k) {
    const int flat = ViewOf(g, in, {b * t, k}, {k, 1}, 0);
    const int mm = Mm(g, Op::kMm, {flat, Transposed(g, w, n, k)}, {b * t, n}, "aten.mm.default");
    return ViewOf(g, mm, {b, t, n}, {t * n, n, 1}, 0);
  };
  const int h1 = rms(x, wn1);
  const int q = linear(h1, wq, d, d);
  // "attention": softmax over the feature dim of q (stands in for scores).
  const Sizes s = {b, t, d};
  Node sm;
  sm.op = Op::kSoftmax;
  sm.inputs = {q};
  sm.dims = {-1};
  sm.meta = M(DType::kFloat32, s);
  const int att = g.AddNode(sm);
  const int r1 = Bin(g, Op::kAdd, x, att, s, "aten.add.Tensor");
  const int h2 = rms(r1, wn2);
  const int gate = linear(h2, wg, f, d);
  const int up = linear(h2, wu, f, d);
  const int si = Un(g, Op::kSilu, gate, {b, t, f}, "aten.silu.default");
  const int hm = Bin(g, Op::kMul, si, up, {b, t, f}, "aten.mul.Tensor");
  const int down = linear(hm, wd, d, f);
  const int out = Bin(g, Op::kAdd, r1, down, s, "aten.add.Tensor");
  g.SetOutputs({out});
  const Program p = Compile(g);
  const int nodes = CountNonViewNodes(g);
  EXPECT_LE(static_cast<int>(p.kernels().size()) * 2, nodes) << p.Report();
  EXPECT_LE(p.kernels().size(), 8u) << p.Report();
  if (std::getenv("TRN_PRINT_REPORT")) std::puts(p.Report().c_str());
  // Numerics against the same program without fusion (itself checked op by op above).
  const Program naive = Compile(g, CompileOptions{false});
  EXPECT_EQ(static_cast<int>(naive.kernels().size()), nodes);
  std::vector<TestTensor> in;
  uint32_t seed = 40;
  for (int id : g.inputs()) in.push_back(Random(DType::kFloat32, g.nodes()[id].meta.sizes, seed++, -1, 1));
  const auto ref = Execute(naive, in)[0].Values();
  ForEachTarget([&](const char*) { ExpectClose(Execute(p, in)[0], ref, 1e-4, 1e-5); });
}

// ---- reductions elsewhere ------------------------------------------------------------------
TEST(CompilerTest, FullAndLeadingReductions) {
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {30, 50}));
  const int a = Red(g, Op::kSum, x, {}, {}, "aten.sum.default");           // full: one row
  const int b = Red(g, Op::kAmax, x, {0}, {50}, "aten.amax.default");      // leading: library
  const int c = Red(g, Op::kMean, x, {0, 1}, {1, 1}, "aten.mean.dim");
  g.SetOutputs({a, b, c});
  const Program p = Compile(g);
  TestTensor tx = Random(DType::kFloat32, {30, 50}, 50);
  double sum = 0;
  std::vector<double> mx(50, -INFINITY);
  for (int i = 0; i < 30; ++i) {
    for (int j = 0; j < 50; ++j) {
      sum += tx.At(i * 50 + j);
      mx[j] = std::max(mx[j], tx.At(i * 50 + j));
    }
  }
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {tx});
    ExpectClose(out[0], {sum}, 1e-5, 1e-5);
    ExpectClose(out[1], mx, 0, 0);
    ExpectClose(out[2], {sum / 1500}, 1e-5, 1e-6);
  });
}

// Lone reductions over trailing dims (MobileNetV2's pooling: mean over H, W of
// [N, C, 3, 3]), keepdim and not, float32 and bfloat16: each its own library
// kernel (Note [Lone nodes]); next to them a constant output, a lone node
// without inputs.
TEST(CompilerTest, LoneTrailingReductions) {
  const Sizes s = {2, 5, 3, 3};
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dt));
    Graph g;
    const int x = g.AddInput(M(dt, s));
    const int mean = Red(g, Op::kMean, x, {2, 3}, {2, 5, 1, 1}, "aten.mean.dim", dt);
    const int sum = Red(g, Op::kSum, x, {-1}, {2, 5, 3}, "aten.sum.dim_IntList", dt);
    const int amin = Red(g, Op::kAmin, x, {1, 2, 3}, {2}, "aten.amin.default", dt);
    const int c = Constant(g, 2.5);  // a lone fill kernel: a node with no inputs
    g.SetOutputs({mean, sum, amin, c});
    const Program p = Compile(g);
    ASSERT_EQ(p.kernels().size(), 4u) << p.Report();
    const TestTensor tx = Random(dt, s, 51);
    std::vector<double> rmean(10, 0), rsum(30, 0), rmin(2, INFINITY);
    for (int64_t i = 0; i < tx.numel(); ++i) {
      rmean[i / 9] += tx.At(i) / 9;
      rsum[i / 3] += tx.At(i);
      rmin[i / 45] = std::min(rmin[i / 45], tx.At(i));
    }
    const double tol = dt == DType::kFloat32 ? 1e-6 : 1e-2;
    ForEachTarget([&](const char*) {
      const auto out = Execute(p, {tx});
      ExpectClose(out[0], rmean, tol, 1e-6);
      ExpectClose(out[1], rsum, tol, 1e-5);
      ExpectClose(out[2], rmin, 0, 0);
      ExpectClose(out[3], {2.5}, 0, 0);
    });
  }
}

// ---- graph validation, hash ----------------------------------------------------------------
TEST(CompilerTest, MalformedGraphsNameTheNode) {
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {4, 5}));
  auto expect_error = [&](Node n, const std::string& what) {
    try {
      g.AddNode(n);
      ADD_FAILURE() << "no error for " << what;
    } catch (const trn::InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("node 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  };
  Node bad_id;
  bad_id.op = Op::kNeg;
  bad_id.inputs = {7};
  bad_id.meta = M(DType::kFloat32, {4, 5});
  expect_error(bad_id, "refers to value 7");
  Node arity;
  arity.op = Op::kAdd;
  arity.inputs = {x};
  arity.meta = M(DType::kFloat32, {4, 5});
  expect_error(arity, "expects 2 tensor input(s), got 1");
  Node dims;
  dims.op = Op::kSum;
  dims.inputs = {x};
  dims.dims = {2};
  dims.meta = M(DType::kFloat32, {4});
  expect_error(dims, "dim 2 out of range");
  Node groups;  // 5 channels in 2 groups
  groups.op = Op::kGroupNorm;
  groups.inputs = {x};
  groups.dims = {2};
  groups.meta = M(DType::kFloat32, {4, 5});
  expect_error(groups, "group_norm of [4, 5] in 2 groups with weight none and bias none");
  Node rotate;  // made by Prepare only (Note [Rotate half])
  rotate.op = Op::kRotateHalf;
  rotate.inputs = {x};
  rotate.meta = M(DType::kFloat32, {4, 5});
  expect_error(rotate, "made by the compiler from a cat");
  Node bcast;
  bcast.op = Op::kNeg;
  bcast.inputs = {x};
  bcast.meta = M(DType::kFloat32, {4, 6});
  expect_error(bcast, "does not broadcast");
  Node mm;
  mm.op = Op::kMm;
  mm.inputs = {x, x};
  mm.meta = M(DType::kFloat32, {4, 5});
  expect_error(mm, "do not multiply");
  Node scatter;  // src [4, 3] into x[:, 1:5:2], which holds 2 columns
  scatter.op = Op::kSliceScatter;
  scatter.inputs = {x, x};
  scatter.dims = {1, 1, 5, 2};
  scatter.meta = M(DType::kFloat32, {4, 5});
  expect_error(scatter,
               "slice_scatter of [4, 5] into [4, 5] with (dim, start, end, step) = [1, 1, 5, 2]");
  Node avg;  // avg_pool2d has no dilation
  avg.op = Op::kAvgPool2d;
  avg.inputs = {x};
  avg.pool.dilation[0] = 2;
  avg.meta = M(DType::kFloat32, {4, 5});
  expect_error(avg, "avg_pool2d of [4, 5]");
  Node select;  // a 2-D index
  select.op = Op::kIndexSelect;
  select.inputs = {x, x};
  select.dims = {1};
  select.meta = M(DType::kFloat32, {4, 5});
  expect_error(select, "index_select of [4, 5] on dim 1 by index [4, 5] cannot give [4, 5]");
  EXPECT_THROW(g.SetOutputs({3}), trn::InvalidArgument);
}

// The library ops the sweep of transformers families added: scatter, index_put
// accumulating, the libm functions, transposed convolution.
TEST(CompilerTest, LibraryOpsRejectBadNodes) {
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {4, 5}));
  const int tall = g.AddInput(M(DType::kInt64, {6, 2}));
  const int pos = g.AddInput(M(DType::kInt64, {2}));
  const int idx = g.AddInput(M(DType::kInt64, {4, 2}));
  const int row = g.AddInput(M(DType::kFloat32, {5}));
  const int pair = g.AddInput(M(DType::kFloat32, {2}));
  const int x3 = g.AddInput(M(DType::kFloat32, {2, 5, 4}));
  const int w3 = g.AddInput(M(DType::kFloat32, {5, 2, 3}));
  auto node = [](Op op, std::vector<int> inputs, std::vector<int64_t> dims, Sizes out) {
    Node n;
    n.op = op;
    n.inputs = std::move(inputs);
    n.dims = std::move(dims);
    n.meta = M(DType::kFloat32, std::move(out));
    return n;
  };
  auto expect_error = [&](const Node& n, const std::string& what) {
    try {
      g.AddNode(n);
      ADD_FAILURE() << "no error for " << what;
    } catch (const trn::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  // An index taller than self off the scattered dim.
  expect_error(node(Op::kScatter, {x, tall}, {1, 0}, {4, 5}),
               "scatter into [4, 5] on dims [1, 0] by index [6, 2] cannot give [4, 5]");
  EXPECT_NO_THROW(g.AddNode(node(Op::kScatter, {x, idx}, {1, 1}, {4, 5})));
  expect_error(node(Op::kIndexPut, {x, pos, row}, {0, 2}, {4, 5}),  // accumulate is 0 or 1
               "index_put into [4, 5] on dims [0] by 1 indices of values [5] (accumulate 2)");
  EXPECT_NO_THROW(g.AddNode(node(Op::kIndexPut, {x, pos, row}, {0, 1}, {4, 5})));
  // x[idx, pos] (both dims; broadcast [4, 2]) takes values broadcasting to [4, 2]:
  // not a row of 5, nor dims out of order or missing accumulate.
  expect_error(node(Op::kIndexPut, {x, idx, pos, row}, {0, 1, 0}, {4, 5}),
               "index_put into [4, 5] on dims [0, 1] by 2 indices of values [5]");
  expect_error(node(Op::kIndexPut, {x, idx, pos, pair}, {1, 0, 0}, {4, 5}), "on dims [1, 0]");
  expect_error(node(Op::kIndexPut, {x, idx, pos, pair}, {0, 1}, {4, 5}), "on dims [0] by 2 indices");
  expect_error(node(Op::kIndexPut, {x, pos}, {0, 0}, {4, 5}), "got 2 inputs");
  EXPECT_NO_THROW(g.AddNode(node(Op::kIndexPut, {x, idx, pos, pair}, {0, 1, 0}, {4, 5})));
  // Indices of 8 dims on dim 0 of [4, 5] would make values 9-D: past kMaxDims.
  const int deep = g.AddInput(M(DType::kInt64, {1, 1, 1, 1, 1, 1, 1, 2}));
  expect_error(node(Op::kIndexPut, {x, deep, row}, {0, 0}, {4, 5}),
               "index_put into [4, 5] on dims [0] by 1 indices");
  // exp is a fused row op, not a library function.
  expect_error(node(Op::kMath, {x}, {static_cast<int64_t>(kernels::UnaryOp::kExp)}, {4, 5}),
               "math takes one function code");
  EXPECT_NO_THROW(
      g.AddNode(node(Op::kMath, {x}, {static_cast<int64_t>(kernels::UnaryOp::kAcos)}, {4, 5})));
  // [2, 5, 4] by [5, 2, 3], stride 2: W = 3 * 2 + 3 = 9, or 10 with output_padding 1.
  Node up = node(Op::kConvTranspose, {x3, w3}, {}, {2, 2, 10});
  up.conv.stride[2] = 2;
  EXPECT_NO_THROW(g.AddNode(up));
  up.meta.sizes = {2, 2, 11};
  expect_error(up, "transposed convolution of [2, 5, 4] by weight [5, 2, 3] (groups 1) cannot "
                   "give [2, 2, 11]");
  // Note [Complex values]: [4, 5] pairs are 4 complex numbers; a real [4, 5] broadcasts to
  // complex [3, 4, 5] only as values.
  const int z = g.AddInput(M(DType::kFloat32, {4, 5, 2}));
  const int64_t mul = static_cast<int64_t>(ComplexCode::kMul);
  EXPECT_NO_THROW(g.AddNode(node(Op::kComplex, {z, x}, {mul, 2}, {4, 5, 2})));
  expect_error(node(Op::kComplex, {z, x}, {mul, 0}, {4, 5, 2}),
               "complex op 2 (real-input bits 0) of [4, 5, 2], [4, 5] cannot give [4, 5, 2]");
  expect_error(node(Op::kComplex, {x, x}, {mul, 3}, {4, 5, 2}), "real-input bits 3");
  expect_error(node(Op::kComplex, {z}, {12, 0}, {4, 5, 2}), "complex takes dims (code 0..11");
  // FFT passes: r2c keeps at most the input's bins, c2c the same count.
  EXPECT_NO_THROW(g.AddNode(node(Op::kFft, {x}, {1, 1, 1}, {4, 3, 2})));
  expect_error(node(Op::kFft, {x}, {1, 1, 1}, {4, 6, 2}), "fft pass [1, 1, 1] of [4, 5]");
  expect_error(node(Op::kFft, {z}, {0, 1, 1}, {4, 4, 2}), "fft pass [0, 1, 1] of [4, 5, 2]");
  EXPECT_NO_THROW(g.AddNode(node(Op::kFft, {z}, {2, 1, 0}, {4, 8})));
  // im2col of [2, 5, 4] (3-D: no batch) and col2im to a size its columns do not tile.
  Node unfold = node(Op::kIm2Col, {x3}, {}, {2, 45, 1});
  unfold.pool.kernel[0] = unfold.pool.kernel[1] = 3;
  expect_error(unfold, "im2col of [2, 5, 4] (kernel 3x3, stride 1x1, padding 0x0, dilation 1x1)");
  const int cols = g.AddInput(M(DType::kFloat32, {2, 8, 6}));  // C = 2, 2x2 blocks, 6 of them
  Node fold = node(Op::kCol2Im, {cols}, {}, {2, 2, 4, 3});
  fold.pool.kernel[0] = fold.pool.kernel[1] = 2;
  EXPECT_NO_THROW(g.AddNode(fold));
  fold.meta.sizes = {2, 2, 4, 4};
  expect_error(fold, "col2im of [2, 8, 6] (kernel 2x2");
}

// kConv's attributes run over (T, H, W): a 2-D conv leaves T's unused and a
// 3-D conv (kernels::Conv3d) pads each side of a dim alike.
TEST(CompilerTest, ConvAttributesPerRank) {
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {1, 2, 3, 6, 6}));
  const int w = g.AddInput(M(DType::kFloat32, {4, 2, 1, 3, 3}));
  const int x2 = g.AddInput(M(DType::kFloat32, {1, 2, 6, 6}));
  const int w2 = g.AddInput(M(DType::kFloat32, {4, 2, 3, 3}));
  auto conv = [](int in, int wt, Sizes out) {
    Node n;
    n.op = Op::kConv;
    n.inputs = {in, wt};
    n.meta = M(DType::kFloat32, std::move(out));
    return n;
  };
  auto error_of = [&](const Node& n) {
    try {
      g.AddNode(n);
    } catch (const trn::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Node asym = conv(x, w, {1, 4, 3, 5, 4});  // H padded 1 before, 0 after
  asym.conv.padding[1] = 1;
  EXPECT_NE(error_of(asym).find("pads each side of a dim alike, got 1 before and 0 after dim 3"),
            std::string::npos) << error_of(asym);
  Node t_used = conv(x2, w2, {1, 4, 4, 4});  // a 2-D conv with a T stride
  t_used.conv.stride[0] = 2;
  EXPECT_NE(error_of(t_used).find("cannot give [1, 4, 4, 4]"), std::string::npos);
  Node ok3 = conv(x, w, {1, 4, 3, 2, 6});  // H stride 2, W padded 1 each side
  ok3.conv.stride[1] = 2;
  ok3.conv.padding[2] = ok3.conv.padding_end[2] = 1;
  EXPECT_EQ(error_of(ok3), "no error");
  Node ok2 = conv(x2, w2, {1, 4, 6, 5});  // W padded 1 before, 0 after
  ok2.conv.padding[1] = ok2.conv.padding[2] = ok2.conv.padding_end[1] = 1;
  EXPECT_EQ(error_of(ok2), "no error");
}

TEST(CompilerTest, HashIgnoresSizesButNotOps) {
  const uint64_t h1 = RmsNormGraph({4, 64}, true).Hash();
  const uint64_t h2 = RmsNormGraph({17, 4096}, true).Hash();
  const uint64_t h3 = RmsNormGraph({4, 64}, false).Hash();
  EXPECT_EQ(h1, h2);
  EXPECT_NE(h1, h3);
  Graph a, b;
  for (Graph* g : {&a, &b}) {
    const int x = g->AddInput(M(DType::kFloat32, {3}));
    g->SetOutputs({Un(*g, g == &a ? Op::kExp : Op::kLog, x, {3}, "")});
  }
  EXPECT_NE(a.Hash(), b.Hash());
  EXPECT_EQ(Compile(RmsNormGraph({4, 64}, true)).graph_hash(), h1);
}

// ---- artifact --------------------------------------------------------------------------------
// A minimal JSON reader (objects, arrays, strings, numbers, literals): enough
// to prove ToJson is well-formed and to read fields back.
struct Json {
  enum Kind { kNull, kBool, kNum, kStr, kArr, kObj } kind = kNull;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  const Json& operator[](const std::string& k) const { return obj.at(k); }
};
struct JsonParser {
  const std::string& s;
  size_t i = 0;
  void Ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  void Expect(char c) {
    Ws();
    if (i >= s.size() || s[i] != c) throw std::runtime_error(std::string("expected ") + c + " at " + std::to_string(i));
    ++i;
  }
  std::string Str() {
    Expect('"');
    std::string out;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\') ++i;
      out += s[i++];
    }
    Expect('"');
    return out;
  }
  Json Value() {
    Ws();
    Json j;
    if (s[i] == '{') {
      j.kind = Json::kObj;
      ++i;
      Ws();
      if (s[i] == '}') return ++i, j;
      while (true) {
        const std::string k = Str();
        Expect(':');
        j.obj[k] = Value();
        Ws();
        if (s[i] == '}') return ++i, j;
        Expect(',');
      }
    }
    if (s[i] == '[') {
      j.kind = Json::kArr;
      ++i;
      Ws();
      if (s[i] == ']') return ++i, j;
      while (true) {
        j.arr.push_back(Value());
        Ws();
        if (s[i] == ']') return ++i, j;
        Expect(',');
      }
    }
    if (s[i] == '"') {
      j.kind = Json::kStr;
      j.str = Str();
      return j;
    }
    if (s.compare(i, 4, "true") == 0 || s.compare(i, 5, "false") == 0 || s.compare(i, 4, "null") == 0) {
      j.kind = s[i] == 'n' ? Json::kNull : Json::kBool;
      i += s[i] == 'f' ? 5 : 4;
      return j;
    }
    size_t used = 0;
    j.kind = Json::kNum;
    j.num = std::stod(s.substr(i, 40), &used);
    if (used == 0) throw std::runtime_error("bad number at " + std::to_string(i));
    i += used;
    return j;
  }
};

TEST(CompilerTest, ArtifactAndReport) {
  const int64_t m = 8, k = 16, n = 12;
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {m, k}));
  const int w = g.AddInput(M(DType::kFloat32, {k, n}));
  const int mm = Mm(g, Op::kMm, {x, w}, {m, n}, "aten.mm.default");
  const int r = Un(g, Op::kRelu, mm, {m, n}, "aten.relu.default");
  Node e;
  e.op = Op::kEager;
  e.target = "aten.erfinv.default";
  e.inputs = {r};
  e.meta = M(DType::kFloat32, {m, n});
  const int y = g.AddNode(e);
  g.SetOutputs({y});
  const Program p = Compile(g);
  const std::string js = p.ToJson();
  JsonParser parser{js};
  Json j;
  ASSERT_NO_THROW(j = parser.Value()) << js;
  EXPECT_EQ(j["format"].str, "trnscope.program");
  EXPECT_EQ(j["version"].num, 1);
  ASSERT_EQ(j["kernels"].arr.size(), 1u);
  const Json& k0 = j["kernels"].arr[0];
  EXPECT_EQ(k0["name"].str, "fused[mm,relu]");
  EXPECT_EQ(k0["engine"].str, rt::EngineName(rt::Engine::kTensor));
  EXPECT_EQ(k0["aten_ops"].arr[0].str, "aten::mm.default");
  EXPECT_EQ(k0["flops"].num, 2.0 * m * n * k + m * n);
  EXPECT_EQ(k0["bytes_read"].num, 4.0 * (m * k + k * n));
  EXPECT_EQ(k0["bytes_written"].num, 4.0 * m * n);
  EXPECT_EQ(k0["reads"].arr[1]["sizes"].arr[1].num, n);
  ASSERT_EQ(j["eager"].arr.size(), 1u);
  EXPECT_EQ(j["eager"].arr[0]["target"].str, "aten.erfinv.default");
  EXPECT_EQ(j["steps"].arr.size(), 2u);
  EXPECT_EQ(j["steps"].arr[1]["kind"].str, "eager");
  const std::string rep = p.Report();
  EXPECT_NE(rep.find("1 kernel(s), 1 eager step(s)"), std::string::npos) << rep;
  EXPECT_NE(rep.find("eager (fallback) nodes: aten.erfinv.default"), std::string::npos) << rep;
  EXPECT_EQ(Intern("abc"), Intern(std::string("ab") + "c"));
}


// ---- decoder hot spots (Note [Elementwise walk order], Note [Pass-through reshapes]) ----


// Llama's rotate_half on a [T, H*D] projection viewed as heads [1, H, T, D]:
// neg of the second half of each head (short strided rows), then the rotary
// mul/mul/add against [T, D] tables broadcast over the heads. Sizes make the
// row of segments cross chunk boundaries mid-segment (4440 > any chunk length).
TEST(CompilerTest, StridedHeadSlicesUseSegmentedRows) {
  const int64_t t = 37, h = 5, d = 48, hd = h * d, half = d / 2;
  Graph g;
  const int q = g.AddInput(M(DType::kFloat32, {t, hd}));
  const int cs = g.AddInput(M(DType::kFloat32, {t, d}));
  const int rot = g.AddInput(M(DType::kFloat32, {1, h, t, d}));  // a contiguous cat result
  const int heads = ViewOf(g, q, {1, h, t, d}, {t * hd, d, hd, 1}, 0);
  const int x2 = ViewOf(g, q, {1, h, t, half}, {t * hd, d, hd, 1}, half);
  Node neg;
  neg.op = Op::kNeg;
  neg.target = "aten.neg.default";
  neg.inputs = {x2};
  neg.meta = M(DType::kFloat32, {1, h, t, half});
  neg.meta.strides = {t * h * half, half, h * half, 1};  // FakeTensor keeps the head permutation
  const int ng = g.AddNode(neg);
  Node mul;
  mul.op = Op::kMul;
  mul.target = "aten.mul.Tensor";
  mul.inputs = {heads, cs};
  mul.meta = M(DType::kFloat32, {1, h, t, d});
  mul.meta.strides = {t * hd, d, hd, 1};
  const int a = g.AddNode(mul);
  const int b = Bin(g, Op::kMul, rot, cs, {1, h, t, d}, "aten.mul.Tensor");
  Node add = mul;
  add.op = Op::kAdd;
  add.target = "aten.add.Tensor";
  add.inputs = {a, b};
  const int y = g.AddNode(add);
  g.SetOutputs({ng, y});
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 2u) << p.Report();
  TestTensor tq = Random(DType::kFloat32, {t, hd}, 70), tc = Random(DType::kFloat32, {t, d}, 71),
             tr = Random(DType::kFloat32, {1, h, t, d}, 72);
  std::vector<double> rneg, ry;
  for (int64_t hh = 0; hh < h; ++hh) {
    for (int64_t tt = 0; tt < t; ++tt) {
      for (int64_t i = 0; i < half; ++i) rneg.push_back(-tq.At(tt * hd + hh * d + half + i));
    }
  }
  for (int64_t hh = 0; hh < h; ++hh) {
    for (int64_t tt = 0; tt < t; ++tt) {
      for (int64_t i = 0; i < d; ++i) {
        const double c = tc.At(tt * d + i);
        ry.push_back(tq.At(tt * hd + hh * d + i) * c + tr.At((hh * t + tt) * d + i) * c);
      }
    }
  }
  ForEachTarget([&](const char*) {
    const auto out = Execute(p, {tq, tc, tr});
    ExpectClose(out[0], rneg, 0, 0);
    ExpectClose(out[1], ry, 1e-6, 1e-6);
  });
}

// scores / s, masked_fill(causal bool mask [T, T] broadcast over heads, -inf),
// softmax: one kernel; the where is vectorized, the bool mask converted in
// chunks, a power-of-two divisor becomes an exact multiply.
TEST(CompilerTest, MaskedSoftmaxWithBroadcastBoolMask) {
  for (double div : {8.0, 3.0}) {
    for (int64_t t : {int64_t{37}, int64_t{130}}) {
      SCOPED_TRACE(testing::Message() << "div " << div << " T " << t);
      const int64_t h = 3;
      const Sizes s = {1, h, t, t};
      Graph g;
      const int x = g.AddInput(M(DType::kFloat32, {h, t, t}));
      const int mask = g.AddInput(M(DType::kBool, {t, t}));
      const int xv = ViewOf(g, x, s, {h * t * t, t * t, t, 1}, 0);
      const int sc = BinS(g, Op::kDiv, xv, div, s, "aten.div.Tensor");
      const int w = Where(g, mask, Constant(g, -INFINITY), sc, s);
      Node sm;
      sm.op = Op::kSoftmax;
      sm.target = "aten._softmax.default";
      sm.inputs = {w};
      sm.dims = {3};
      sm.meta = M(DType::kFloat32, s);
      g.SetOutputs({g.AddNode(sm)});
      const Program p = Compile(g);
      ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
      EXPECT_STREQ(p.kernels()[0].name, "fused[div,where,_softmax]");
      TestTensor tx = Random(DType::kFloat32, {h, t, t}, 80, -6, 6);
      TestTensor tm = Empty(DType::kBool, {t, t});
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < t; ++j) tm.Set(i * t + j, j > i);
      }
      std::vector<double> ref;
      for (int64_t hh = 0; hh < h; ++hh) {
        for (int64_t i = 0; i < t; ++i) {
          std::vector<double> row(t);
          double mx = -INFINITY, sum = 0;
          for (int64_t j = 0; j < t; ++j) {
            row[j] = j > i ? -INFINITY : tx.At((hh * t + i) * t + j) / div;
            mx = std::max(mx, row[j]);
          }
          for (double& v : row) sum += (v = std::exp(v - mx));
          for (double v : row) ref.push_back(v / sum);
        }
      }
      ForEachTarget([&](const char*) { ExpectClose(Execute(p, {tx, tm})[0], ref, 2e-6, 1e-7); });
    }
  }
}

// Outputs of at least 64 MiB are written with non-temporal stores straight from
// the computation (Note [Streamed outputs]); rows of 4099 floats start at every
// alignment, so both the streamed and the copied path run. The where has a
// broadcast scalar branch (a different specialization of the 3-input loop).
TEST(CompilerTest, HugeOutputsAreStreamedExactly) {
  const Sizes s = {4096, 4099};  // 64.1 MiB of f32
  const Graph g = RmsNormGraph(s, true);
  const Program p = Compile(g);
  ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
  TestTensor x = Random(DType::kFloat32, s, 91);
  TestTensor w = Random(DType::kFloat32, {s.back()}, 92);
  const std::vector<double> ref = RmsNormRef(x, &w, DType::kFloat32);
  ForEachTarget([&](const char*) { ExpectClose(Execute(p, {x, w})[0], ref, 2e-6); });

  const int64_t n = s[0] * s[1] + 3;
  Graph gw;
  const int mask = gw.AddInput(M(DType::kBool, {n}));
  const int xv = gw.AddInput(M(DType::kFloat32, {n}));
  gw.SetOutputs({Where(gw, mask, Constant(gw, 0.5), xv, {n})});
  const Program pw = Compile(gw);
  ASSERT_EQ(pw.kernels().size(), 1u) << pw.Report();
  TestTensor tm = Empty(DType::kBool, {n});
  TestTensor tx = Random(DType::kFloat32, {n}, 93);
  std::vector<double> wref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    tm.Set(i, (i * 7919) % 3 == 0);
    wref[i] = (i * 7919) % 3 == 0 ? 0.5 : tx.At(i);
  }
  ForEachTarget([&](const char*) { ExpectClose(Execute(pw, {tm, tx})[0], wref, 0); });
}

// Linear's residual: mm [T, N] -> _unsafe_view [1, T, N] -> add(x) is the GEMM's
// epilogue (one kernel); the same residual feeding an RMSNorm stays in the
// norm's row kernel; a view that splits the rows into a batch passes into the
// epilogue too; a view that is not a pure re-indexing (a head split plus
// transpose) does not pass through.
TEST(CompilerTest, ReshapeAfterMatmulPassesIntoTheEpilogue) {
  const int64_t t = 45, k = 40, n = 72;
  auto build = [&](bool norm, bool transpose) {
    Graph g;
    const int a = g.AddInput(M(DType::kFloat32, {t, k}));
    const int w = g.AddInput(M(DType::kFloat32, {n, k}));
    const int x = g.AddInput(M(DType::kFloat32, transpose ? Sizes{1, n / 8, t, 8} : Sizes{1, t, n}));
    const int mm = Mm(g, Op::kMm, {a, Transposed(g, w, n, k)}, {t, n}, "aten.mm.default");
    int v = ViewOf(g, mm, {1, t, n}, {t * n, n, 1}, 0);
    if (transpose) v = ViewOf(g, mm, {1, n / 8, t, 8}, {t * n, 8, n, 1}, 0);
    const Sizes s = transpose ? Sizes{1, n / 8, t, 8} : Sizes{1, t, n};
    const int r = Bin(g, Op::kAdd, x, v, s, "aten.add.Tensor");
    if (!norm) {
      g.SetOutputs({r});
      return g;
    }
    const int p2 = BinS(g, Op::kPow, r, 2.0, s, "aten.pow.Tensor_Scalar");
    const int m = Red(g, Op::kMean, p2, {-1}, {1, t, 1}, "aten.mean.dim");
    const int e = BinS(g, Op::kAdd, m, 1e-6, {1, t, 1}, "aten.add.Tensor");
    const int rs = Un(g, Op::kRsqrt, e, {1, t, 1}, "aten.rsqrt.default");
    g.SetOutputs({r, Bin(g, Op::kMul, r, rs, s, "aten.mul.Tensor")});
    return g;
  };
  TestTensor ta = Random(DType::kFloat32, {t, k}, 90), tw = Random(DType::kFloat32, {n, k}, 91);
  auto mmref = [&](int64_t i, int64_t j) {
    double acc = 0;
    for (int64_t q = 0; q < k; ++q) acc += ta.At(i * k + q) * tw.At(j * k + q);
    return acc;
  };
  {  // residual add: the epilogue
    const Program p = Compile(build(false, false));
    ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
    EXPECT_STREQ(p.kernels()[0].name, "fused[mm,add]");
    TestTensor tx = Random(DType::kFloat32, {1, t, n}, 92);
    std::vector<double> ref;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < n; ++j) ref.push_back(tx.At(i * n + j) + mmref(i, j));
    }
    ForEachTarget([&](const char*) { ExpectClose(Execute(p, {ta, tw, tx})[0], ref, 1e-5, 1e-5); });
  }
  {  // residual + rms_norm: the add stays in the norm's row kernel
    const Program p = Compile(build(true, false));
    ASSERT_EQ(p.kernels().size(), 2u) << p.Report();
    EXPECT_STREQ(p.kernels()[0].name, "mm");
    EXPECT_STREQ(p.kernels()[1].name, "fused[add,pow,mean,add,rsqrt,mul]");
    TestTensor tx = Random(DType::kFloat32, {1, t, n}, 93);
    std::vector<double> rr, rn;
    for (int64_t i = 0; i < t; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < n; ++j) {
        rr.push_back(tx.At(i * n + j) + mmref(i, j));
        ss += rr.back() * rr.back();
      }
      for (int64_t j = 0; j < n; ++j) rn.push_back(rr[i * n + j] / std::sqrt(ss / n + 1e-6));
    }
    ForEachTarget([&](const char*) {
      const auto out = Execute(p, {ta, tw, tx});
      ExpectClose(out[0], rr, 1e-5, 1e-5);
      ExpectClose(out[1], rn, 1e-5, 1e-5);
    });
  }
  // [T, N] viewed as [3, T/3, N] (batch 3): the epilogue walks that domain
  // (Note [Epilogue through a reshape]), a [T/3, N] operand broadcast over it;
  // the GEMM result is stored only when read elsewhere too (a second output),
  // then over the new domain, every row in its place.
  for (bool gemm_out : {false, true}) {
    Graph g;
    const int a = g.AddInput(M(DType::kFloat32, {t, k}));
    const int w = g.AddInput(M(DType::kFloat32, {n, k}));
    const int pos = g.AddInput(M(DType::kFloat32, {t / 3, n}));
    const int mm = Mm(g, Op::kMm, {a, Transposed(g, w, n, k)}, {t, n}, "aten.mm.default");
    const Sizes s3 = {3, t / 3, n};
    const int v = ViewOf(g, mm, s3, {t / 3 * n, n, 1}, 0);
    const int ge = Un(g, Op::kGelu, v, s3, "aten.gelu.default");
    const int r = Bin(g, Op::kAdd, ge, pos, s3, "aten.add.Tensor");
    g.SetOutputs(gemm_out ? std::vector<int>{r, mm} : std::vector<int>{r});
    const Program p = Compile(g);
    ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
    EXPECT_STREQ(p.kernels()[0].name, "fused[mm,gelu,add]");
    EXPECT_EQ(p.kernels()[0].info.bytes_written, static_cast<uint64_t>(t * n * 4 * (1 + gemm_out)))
        << p.Report();
    TestTensor tp = Random(DType::kFloat32, {t / 3, n}, 95);
    std::vector<double> ref, mmv;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double y = mmref(i, j);
        mmv.push_back(y);
        ref.push_back(0.5 * y * std::erfc(-y / std::sqrt(2.0)) + tp.At((i % (t / 3)) * n + j));
      }
    }
    ForEachTarget([&](const char*) {
      const auto out = Execute(p, {ta, tw, tp});
      ExpectClose(out[0], ref, 1e-5, 1e-5);
      if (gemm_out) ExpectClose(out[1], mmv, 1e-5, 1e-5);
    });
  }
  {  // a head split + transpose is not a re-indexing: the mm is stored, the add reads it
    const Program p = Compile(build(false, true));
    ASSERT_EQ(p.kernels().size(), 2u) << p.Report();
    TestTensor tx = Random(DType::kFloat32, {1, n / 8, t, 8}, 94);
    std::vector<double> ref;
    for (int64_t hh = 0; hh < n / 8; ++hh) {
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t j = 0; j < 8; ++j) {
          ref.push_back(tx.At((hh * t + i) * 8 + j) + mmref(i, hh * 8 + j));
        }
      }
    }
    ForEachTarget([&](const char*) { ExpectClose(Execute(p, {ta, tw, tx})[0], ref, 1e-5, 1e-5); });
  }
}

// Note [Rotate half]: q * cos + cat([-q2, q1], -1) * sin over the heads of a
// [B, T, H*D] projection is one row kernel, for each way the frontend may lay
// it out; a cat that is not rotate_half keeps its neg and cat kernels. Rows of
// the contiguous layout (t * d = 5120) span chunks, and 2h = 80 divides no power of two.
TEST(CompilerTest, RotaryEmbeddingIsOneKernel) {
  const int64_t b = 2, t = 64, h = 3, d = 80, half = d / 2;
  const Sizes heads = {b, h, t, d}, halves = {b, h, t, half}, hs = {t * h * d, d, h * d, 1};
  enum class Variant { kProjection, kContiguous, kComputedSource, kLastDimOutermost, kSwapped };
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    for (Variant var : {Variant::kProjection, Variant::kContiguous, Variant::kComputedSource,
                        Variant::kLastDimOutermost, Variant::kSwapped}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " variant " << static_cast<int>(var));
      Graph g;
      const int in = g.AddInput(M(dt, {b, t, h * d}));
      const int cs = g.AddInput(M(dt, {t, d}));
      const int sn = g.AddInput(M(dt, {t, d}));
      // kComputedSource: the heads are a value of the program (q * 2), not a
      // view of an input, and that value's kernel must store them for the gather.
      const bool computed = var == Variant::kComputedSource;
      // kContiguous: the input is already [b, h, t, d].
      const bool contiguous = var == Variant::kContiguous;
      const Sizes ins = contiguous ? Sizes{h * t * d, t * d, d, 1} : hs;
      const int qv = ViewOf(g, in, heads, ins, 0, dt);
      const int q = computed ? BinS(g, Op::kMul, qv, 2.0, heads, "aten.mul.Tensor", dt) : qv;
      const Sizes qs = computed || contiguous ? Sizes{h * t * d, t * d, d, 1} : hs;
      const int x1 = ViewOf(g, q, halves, qs, 0, dt);
      const int x2 = ViewOf(g, q, halves, qs, half, dt);
      const bool swapped = var == Variant::kSwapped;  // cat([-x1, x2]): not rotate_half
      const int ng = Un(g, Op::kNeg, swapped ? x1 : x2, halves, "aten.neg.default", dt);
      Node cat;
      cat.op = Op::kCat;
      cat.target = "aten.cat.default";
      cat.inputs = {ng, swapped ? x2 : x1};
      cat.dims = {3};
      cat.meta = M(dt, heads);
      const int rot = g.AddNode(cat);
      const int a = Bin(g, Op::kMul, q, cs, heads, "aten.mul.Tensor", dt);
      const int r = Bin(g, Op::kMul, rot, sn, heads, "aten.mul.Tensor", dt);
      Node add;
      add.op = Op::kAdd;
      add.target = "aten.add.Tensor";
      add.inputs = {a, r};
      add.meta = M(dt, heads);
      // kLastDimOutermost: the output's memory order puts the rotated dim outside
      // the others, which the elementwise walk would otherwise make rows of.
      if (var == Variant::kLastDimOutermost) add.meta.strides = {h * t, t, 1, b * h * t};
      const int out = g.AddNode(add);
      g.SetOutputs({out});
      const Program p = Compile(g);
      int rotates = 0;
      for (const auto& k : p.kernels()) {
        rotates += std::string(k.name).find("rotate_half") != std::string::npos;
      }
      if (swapped) {
        EXPECT_EQ(rotates, 0) << p.Report();
      } else if (computed) {
        EXPECT_EQ(rotates, 1) << p.Report();
        EXPECT_EQ(p.kernels().size(), 2u) << p.Report();  // q * 2 (* cos) and the rotation
      } else {
        ASSERT_EQ(p.kernels().size(), 1u) << p.Report();
        EXPECT_STREQ(p.kernels().back().name, "fused[rotate_half,mul,mul,add]");
        EXPECT_STREQ(p.kernels().back().info.op, "aten::neg");  // an aten op, the first covered
        const auto& ops = p.kernels().back().aten_ops;
        EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::neg.default"), ops.end());
        EXPECT_NE(std::find(ops.begin(), ops.end(), "aten::cat.default"), ops.end());
      }
      TestTensor tq = Random(dt, {b, t, h * d}, 71), tc = Random(dt, {t, d}, 72),
                 ts = Random(dt, {t, d}, 73);
      const double scale = computed ? 2.0 : 1.0;
      std::vector<double> ref;  // [b, h, t, d] in logical order
      for (int64_t i = 0; i < b; ++i) {
        for (int64_t hh = 0; hh < h; ++hh) {
          for (int64_t j = 0; j < t; ++j) {
            auto qv = [&](int64_t k) {
              return scale * tq.At(contiguous ? ((i * h + hh) * t + j) * d + k
                                              : (i * t + j) * h * d + hh * d + k);
            };
            for (int64_t k = 0; k < d; ++k) {
              const double rv = swapped ? (k < half ? -qv(k) : qv(k))
                                        : (k < half ? -qv(k + half) : qv(k - half));
              ref.push_back(qv(k) * tc.At(j * d + k) + rv * ts.At(j * d + k));
            }
          }
        }
      }
      // bfloat16: each op rounds (as torch's do); the two products reach 8, whose
      // half-ulp is 2^-5, and their sum cancels.
      const bool f32 = dt == DType::kFloat32;
      ForEachTarget([&](const char*) {
        ExpectClose(Execute(p, {tq, tc, ts})[0], ref, f32 ? 1e-6 : 1e-2, f32 ? 1e-5 : 0.08);
      });
    }
  }
}

// ---- the executor's buffer binding (Note [Buffer binding]) ---------------------------------

TEST(ExecutorTest, InputViewWithStorageOffsetIsReadInPlace) {
  // x = big[1:, ::2] of a 5x8 storage: storage offset 8, strides (8, 2).
  const TestTensor big = Random(DType::kFloat32, {5, 8}, 11);
  const TestTensor x = big.Slice(0, 1, 1, 4).Slice(1, 0, 2, 4);
  Graph g;
  Meta mx = MetaOf(x);
  mx.storage_offset = 8;
  const int in = g.AddInput(mx);
  g.SetOutputs({BinS(g, Op::kAdd, in, 1.0, {4, 4}, "aten.add.Tensor")});
  const Program p = Compile(g);
  const InputMemory memory = MemoryOf(x);
  ASSERT_EQ(memory.storage_offset, MemoryOf(big).storage_offset + 8);
  Bindings b;
  b.base.assign(p.buffers().size(), nullptr);
  BindBuffers(p, [&](int) { return memory; }, nullptr, &b);
  const int buffer = p.input_views()[0].buffer;
  ASSERT_EQ(p.buffers()[buffer].kind, Buffer::Kind::kInput);
  EXPECT_EQ(b.base[buffer], x.ref.data);
  EXPECT_EQ(StorageOffset(b, p.input_views()[0]), memory.storage_offset);
  std::vector<double> ref;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 4; ++j) ref.push_back(big.At((1 + i) * 8 + 2 * j) + 1.0);
  }
  ForEachTarget([&](const char*) { ExpectClose(Execute(p, {x})[0], ref, 1e-6, 0); });
}

TEST(ExecutorTest, OutputAliasingAnotherOutputSharesItsBuffer) {
  // y = 2x and z = y[1::2]: z is a view into y's buffer at offset 1.
  Graph g;
  const int x = g.AddInput(M(DType::kFloat32, {6}));
  const int y = BinS(g, Op::kMul, x, 2.0, {6}, "aten.mul.Tensor");
  const int z = ViewOf(g, y, {3}, {2}, 1);
  g.SetOutputs({y, z});
  const Program p = Compile(g);
  const View& vy = p.output_views()[0];
  const View& vz = p.output_views()[1];
  ASSERT_EQ(vz.buffer, vy.buffer);
  ASSERT_EQ(p.buffers()[vy.buffer].kind, Buffer::Kind::kOutput);
  std::vector<float> memory(6);
  Bindings b;
  b.base.assign(p.buffers().size(), nullptr);
  b.base[vy.buffer] = memory.data();
  const TestTensor tx = Random(DType::kFloat32, {6}, 12);
  BindBuffers(p, [&](int) { return MemoryOf(tx); }, nullptr, &b);
  EXPECT_EQ(StorageOffset(b, vy), 0);
  EXPECT_EQ(StorageOffset(b, vz), 1);
  EXPECT_EQ(BindView(b, vz).data, memory.data() + 1);
  const auto out = Execute(p, {tx});
  ExpectClose(out[0], {2 * tx.At(0), 2 * tx.At(1), 2 * tx.At(2), 2 * tx.At(3), 2 * tx.At(4),
                       2 * tx.At(5)}, 0, 0);
  ExpectClose(out[1], {2 * tx.At(1), 2 * tx.At(3), 2 * tx.At(5)}, 0, 0);
}

}  // namespace
}  // namespace trn::compiler
