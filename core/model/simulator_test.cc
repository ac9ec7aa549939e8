// Hand-computed schedules for the timing model (Note [Simulator]) and the
// published cost formulas (cost.h), with the constants of isa::Spec().
#include "core/model/simulator.h"

#include <gtest/gtest.h>

#include "core/isa/isa_test_util.h"
#include "core/isa/target.h"
#include "core/model/cost.h"
#include "core/model/tiled_matmul.h"

namespace trn::model {
namespace {

using isa::AluOp;
using isa::Engine;
using isa::Executable;
using isa::Instruction;
using isa::Memory;
using isa::Opcode;
using isa::Target;
using isa::Tile;
using isa::testing::Hbm;
using isa::testing::Make;
using isa::testing::Sbuf;

// An executable with n SBUF allocations of 128 partitions x `bytes`, no tensors.
Executable Scratch(int n, int64_t bytes = 4096, Target target = Target::kTrn2) {
  Executable x;
  x.name = "scratch";
  x.target = target;
  for (int i = 0; i < n; ++i) {
    x.allocations.push_back({"s" + std::to_string(i), Memory::kSbuf, 0, 128, i * bytes, bytes});
  }
  return x;
}

Timeline Simulated(const Executable& x, SimOptions o = {}) {
  Timeline t;
  const Status s = Simulate(x, o, &t);
  EXPECT_EQ(s.error, "");
  return t;
}

const isa::TargetSpec& kTrn2 = isa::Spec(Target::kTrn2);

TEST(Cost, PublishedFormulas) {
  const auto cycles = [](Instruction ins) { return ComputeCost(ins, kTrn2).cycles; };
  Instruction mm = Make(Opcode::kMultiplyMoving, Sbuf(0, 128, 512, DType::kFloat32, Memory::kPsum),
                        Sbuf(1, 128, 512, DType::kBFloat16), Sbuf(2, 128, 128, DType::kBFloat16));
  EXPECT_EQ(cycles(mm), 512);  // max(min(64, 128), 512)
  EXPECT_EQ(ComputeCost(mm, kTrn2).hw_instructions, 1);
  EXPECT_EQ(ComputeCost(mm, kTrn2).flops, 2.0 * 128 * 128 * 512);
  mm.src0.sizes[0] = 32;
  EXPECT_EQ(cycles(mm), 64);  // max(min(64, 128), 32)
  mm.src1.sizes[0] = 16;
  EXPECT_EQ(cycles(mm), 32);  // max(min(64, 16), 32)
  mm.src0.sizes[0] = 512;
  mm.src1.sizes[0] = 128;
  mm.src0.dtype = mm.src1.dtype = DType::kFloat32;
  EXPECT_EQ(cycles(mm), 2048);  // fp32: 4x, two passes
  EXPECT_EQ(ComputeCost(mm, kTrn2).hw_instructions, 2);

  Instruction tt =
      Make(Opcode::kTensorTensor, Sbuf(0, 128, 1000), Sbuf(1, 128, 1000), Sbuf(2, 128, 1000));
  tt.op0 = AluOp::kAdd;
  EXPECT_EQ(cycles(tt), 2000);  // two SBUF fp32 inputs: 2N
  tt.src1.memory = Memory::kPsum;
  EXPECT_EQ(cycles(tt), 1000);  // one in PSUM: N
  tt.src1.memory = Memory::kSbuf;
  tt.src0.dtype = tt.src1.dtype = DType::kBFloat16;
  EXPECT_EQ(cycles(tt), 1000);  // SBUF bf16 add, contiguous: N
  tt.op0 = AluOp::kMax;
  EXPECT_EQ(cycles(tt), 2000);
  tt.src0.sizes[0] = tt.src1.sizes[0] = 10;
  EXPECT_EQ(cycles(tt), 64);  // MIN_II

  Instruction r = Make(Opcode::kTensorReduce, Sbuf(0, 128, 1, DType::kBFloat16),
                       Sbuf(1, 128, 600, DType::kBFloat16));
  r.op0 = AluOp::kAdd;
  EXPECT_EQ(cycles(r), 300);  // N/2 for bf16 add
  r.dst.dtype = DType::kFloat32;
  EXPECT_EQ(cycles(r), 600);
  EXPECT_EQ(cycles(Make(Opcode::kBnAggr, Sbuf(0, 128, 2), Sbuf(1, 128, 60))), 260);  // 13N/3
  EXPECT_EQ(cycles(Make(Opcode::kBnAggr, Sbuf(0, 128, 2), Sbuf(1, 128, 6))), 64);
  EXPECT_EQ(cycles(Make(Opcode::kIota, Sbuf(0, 128, 100), {})), 250);  // 150 + N
  Instruction act =
      Make(Opcode::kActivationReduce, Sbuf(0, 128, 300), Sbuf(1, 128, 300), Sbuf(2, 128, 1));
  EXPECT_EQ(cycles(act), 364);  // max(MIN_II, N) + MIN_II
  Instruction ms = Make(Opcode::kMemset, Sbuf(0, 128, 1000, DType::kBFloat16), {});
  EXPECT_EQ(cycles(ms), 500);  // zero, bf16: N/2
  ms.imm0 = 1.0;
  EXPECT_EQ(cycles(ms), 1000);
  Instruction tr = Make(Opcode::kTranspose, Sbuf(0, 100, 128, DType::kBFloat16, Memory::kPsum),
                        Sbuf(1, 128, 100, DType::kBFloat16));
  EXPECT_EQ(cycles(tr), 128);  // Tensor: max(P, min(64, F))
  EXPECT_EQ(ComputeCost(tr, kTrn2).flops, 2.0 * 128 * 128 * 100);
}

TEST(Simulator, IndependentEnginesOverlap) {
  Executable x = Scratch(4, 8192);
  x.instructions.push_back(Make(Opcode::kTensorCopy, Sbuf(0, 128, 960), Sbuf(1, 128, 960)));
  Instruction act = Make(Opcode::kActivation, Sbuf(2, 128, 1200), Sbuf(3, 128, 1200));
  x.instructions.push_back(act);
  const Timeline t = Simulated(x);
  EXPECT_DOUBLE_EQ(t.start_ns[0], 0);
  EXPECT_DOUBLE_EQ(t.end_ns[0], 1000);  // 960 cycles at 0.96 GHz
  EXPECT_DOUBLE_EQ(t.start_ns[1], 0);
  EXPECT_DOUBLE_EQ(t.end_ns[1], 1000);  // 1200 cycles at 1.2 GHz
  EXPECT_DOUBLE_EQ(t.total_ns, 1000);
  EXPECT_TRUE(t.dependencies.empty());
  EXPECT_DOUBLE_EQ(t.engine_active_ns[static_cast<int>(Engine::kVector)], 1000);
  EXPECT_DOUBLE_EQ(t.engine_active_ns[static_cast<int>(Engine::kScalar)], 1000);
}

TEST(Simulator, ARawDependencySerialisesAcrossEngines) {
  Executable x = Scratch(3);
  x.instructions.push_back(Make(Opcode::kTensorCopy, Sbuf(0, 128, 960), Sbuf(1, 128, 960)));
  x.instructions.push_back(Make(Opcode::kActivation, Sbuf(2, 128, 960), Sbuf(0, 128, 960)));
  const Timeline t = Simulated(x);
  const double semaphore = 100 / 1.2;  // cross-engine latency, Scalar's clock
  EXPECT_DOUBLE_EQ(t.start_ns[1], 1000 + semaphore);
  EXPECT_DOUBLE_EQ(t.end_ns[1], 1000 + semaphore + 800);
  ASSERT_EQ(t.dependencies.size(), 1u);
  EXPECT_EQ(t.dependencies[0].from, 0u);
  EXPECT_EQ(t.dependencies[0].to, 1u);
  EXPECT_EQ(t.dependencies[0].kind, DepKind::kRaw);
  // Semaphore waits are not activity: Scalar is active only its own 800 ns.
  EXPECT_DOUBLE_EQ(t.engine_active_ns[static_cast<int>(Engine::kScalar)], 800);
}

TEST(Simulator, WriteAfterReadAndWriteAfterWrite) {
  Executable x = Scratch(3);
  x.instructions.push_back(Make(Opcode::kTensorCopy, Sbuf(0, 128, 960), Sbuf(1, 128, 960)));
  // Scalar overwrites s1 (read by the copy) and s0 (written by it).
  x.instructions.push_back(Make(Opcode::kActivation, Sbuf(1, 128, 960), Sbuf(2, 128, 960)));
  x.instructions.push_back(Make(Opcode::kActivation, Sbuf(0, 128, 960), Sbuf(2, 128, 960)));
  const Timeline t = Simulated(x);
  ASSERT_EQ(t.dependencies.size(), 2u);
  EXPECT_EQ(t.dependencies[0].kind, DepKind::kWar);
  EXPECT_EQ(t.dependencies[1].kind, DepKind::kWaw);
  EXPECT_DOUBLE_EQ(t.start_ns[1], 1000 + 100 / 1.2);
  EXPECT_DOUBLE_EQ(t.start_ns[2], t.end_ns[1]);  // in order on Scalar, after the WAW's wait
}

TEST(Simulator, DisjointPartitionsOfOneBufferDoNotDepend) {
  Executable x = Scratch(2);
  Instruction a = Make(Opcode::kTensorCopy, Sbuf(0, 64, 960), Sbuf(1, 64, 960));
  Instruction b = Make(Opcode::kActivation, Sbuf(0, 64, 960), Sbuf(1, 64, 960));
  b.dst.partition_start = 64;
  x.instructions = {a, b};
  EXPECT_TRUE(Simulated(x).dependencies.empty());
  x.instructions[1].dst.partition_start = 32;  // overlaps partitions 32..63
  EXPECT_EQ(Simulated(x).dependencies.size(), 1u);
}

TEST(Simulator, DependentScalarInstructionsMatchTheTrn1Measurement) {
  // reference/neuroncore.md: back-to-back dependent 1-element Scalar
  // instructions 189 ns apart on NC-v2 (the model: MIN_II + the dependent latency).
  Executable x = Scratch(2, 4096, Target::kTrn1);
  for (int i = 0; i < 10; ++i) {
    x.instructions.push_back(Make(Opcode::kActivation, Sbuf(i % 2, 1, 1), Sbuf((i + 1) % 2, 1, 1)));
  }
  const Timeline t = Simulated(x);
  const double apart = (t.start_ns[9] - t.start_ns[1]) / 8;
  EXPECT_NEAR(apart, 189.0, 189.0 * 0.15);
  EXPECT_DOUBLE_EQ(apart, 264 / 1.4);
}

TEST(Simulator, DmaSpreadsPartitionsOverItsEngines) {
  Executable x;
  x.target = Target::kTrn2;
  x.tensors = {{"in", isa::TensorKind::kInput, DType::kFloat32, {128, 1024}},
               {"small", isa::TensorKind::kInput, DType::kBFloat16, {4, 4096}}};
  x.allocations = {{"t", Memory::kSbuf, 0, 128, 0, 4096}, {"u", Memory::kSbuf, 0, 128, 4096, 8192}};
  // [128, 1024] fp32: 16 engines x 8 rows of 4 KiB, one run each.
  x.instructions.push_back(Make(Opcode::kDmaCopy, Sbuf(0, 128, 1024), Hbm(0, 128, 1024, 1024)));
  const Timeline t = Simulated(x);
  ASSERT_EQ(t.transfers.size(), 16u);
  const double per_engine = 8 * 20.0 + 8 * 4096 / 23.0;
  for (const DmaTransfer& d : t.transfers) {
    EXPECT_EQ(d.bytes, 8 * 4096);
    EXPECT_EQ(d.runs, 8);
    EXPECT_DOUBLE_EQ(d.start_ns, 1300);  // the trigger latency
    EXPECT_DOUBLE_EQ(d.end_ns, 1300 + per_engine);
  }
  EXPECT_DOUBLE_EQ(t.engine_active_ns[static_cast<int>(Engine::kDma)], per_engine);
  EXPECT_EQ(t.hbm_bytes, 128 * 4096);

  // reference/neuroncore.md: one DMA engine, HBM -> SBUF, [4, 4096] bf16 (32 KiB): 1,416 ns.
  Instruction small =
      Make(Opcode::kDmaCopy, Sbuf(1, 4, 4096, DType::kBFloat16), Hbm(1, 4, 4096, 4096));
  small.src0.dtype = DType::kBFloat16;
  x.instructions = {small};
  const Timeline s = Simulated(x);
  ASSERT_EQ(s.transfers.size(), 1u);
  const double dur = s.transfers[0].end_ns - s.transfers[0].start_ns;
  EXPECT_NEAR(dur, 1416.0, 1416.0 * 0.10);
}

TEST(Simulator, DmasOnTheSameEnginesQueueAndOthersOverlap) {
  Executable x;
  x.target = Target::kTrn2;
  x.tensors = {{"in", isa::TensorKind::kInput, DType::kFloat32, {128, 512}}};
  x.allocations = {{"t", Memory::kSbuf, 0, 128, 0, 2048}, {"u", Memory::kSbuf, 0, 128, 2048, 2048}};
  Instruction a = Make(Opcode::kDmaCopy, Sbuf(0, 8, 512), Hbm(0, 8, 512, 512));
  Instruction b = Make(Opcode::kDmaCopy, Sbuf(1, 8, 512), Hbm(0, 8, 512, 512));  // same engine 0
  Instruction c = Make(Opcode::kDmaCopy, Sbuf(1, 8, 512), Hbm(0, 8, 512, 512));
  c.dst.partition_start = 8;  // engine 1
  c.queue = 1;
  x.instructions = {a, b, c};
  const Timeline t = Simulated(x);
  const double one = 8 * 20.0 + 8 * 2048 / 23.0;
  EXPECT_DOUBLE_EQ(t.end_ns[0], 1300 + one);
  EXPECT_DOUBLE_EQ(t.start_ns[1], 1300 + one);  // waits for engine 0
  EXPECT_DOUBLE_EQ(t.start_ns[2], 1300);        // engine 1 is free
  EXPECT_DOUBLE_EQ(t.engine_active_ns[static_cast<int>(Engine::kDma)], 2 * one);
  EXPECT_EQ(t.instruction_counts[static_cast<int>(Engine::kDma)], 3);
}

// Note [DMA queues]: copies on DMA engine 0 (partitions 0..7) around one that
// waits for a Vector result; 512 B and 2 KiB rows, one run each.
Executable Queues() {
  Executable x;
  x.target = Target::kTrn2;
  x.tensors = {{"in", isa::TensorKind::kInput, DType::kFloat32, {8, 2048}},
               {"out", isa::TensorKind::kOutput, DType::kFloat32, {8, 2048}},
               {"out2", isa::TensorKind::kOutput, DType::kFloat32, {8, 2048}}};
  for (int i = 0; i < 6; ++i) {
    x.allocations.push_back({"s" + std::to_string(i), Memory::kSbuf, 0, 128, i * 8192, 8192});
  }
  return x;
}
Instruction HbmLoad(uint32_t alloc, int64_t free) {  // HBM "in" -> SBUF, [8, free] fp32
  return Make(Opcode::kDmaCopy, Sbuf(alloc, 8, free), Hbm(0, 8, free, 2048));
}
constexpr double kSmallRow = 20 + 512 / 23.0, kBigRow = 20 + 2048 / 23.0;  // ns per row

TEST(Simulator, AWaitingCopyDoesNotBlockReadyOnesBehindIt) {
  Executable x = Queues();
  x.instructions = {
      Make(Opcode::kTensorCopy, Sbuf(0, 8, 960), Sbuf(1, 8, 960)),        // Vector, 1000 ns
      Make(Opcode::kDmaCopy, Hbm(1, 8, 512, 2048), Sbuf(0, 8, 512)),      // waits for it
      HbmLoad(2, 128), HbmLoad(3, 128), HbmLoad(4, 512)};                          // ready at 1300
  const Timeline t = Simulated(x);
  const double waiting = 1000 + 1300;  // the Vector copy's end + the trigger latency
  EXPECT_NEAR(t.start_ns[1], waiting, 1e-9);  // keeps its time: issued first
  EXPECT_NEAR(t.end_ns[1], waiting + 8 * kBigRow, 1e-9);
  // The ready copies run in its gap, in issue order ...
  EXPECT_NEAR(t.start_ns[2], 1300, 1e-9);
  EXPECT_NEAR(t.end_ns[2], 1300 + 8 * kSmallRow, 1e-9);
  EXPECT_NEAR(t.start_ns[3], 1300 + 8 * kSmallRow, 1e-9);
  EXPECT_NEAR(t.end_ns[3], 1300 + 16 * kSmallRow, 1e-9);
  // ... and copy 4's rows, as many whole rows as fit (2 of 8), the rest after copy 1.
  const double gap_left = waiting - (1300 + 16 * kSmallRow);
  ASSERT_GT(gap_left, 2 * kBigRow);
  ASSERT_LT(gap_left, 3 * kBigRow);
  EXPECT_NEAR(t.start_ns[4], 1300 + 16 * kSmallRow, 1e-9);
  EXPECT_NEAR(t.end_ns[4], waiting + 14 * kBigRow, 1e-9);
  std::vector<DmaTransfer> four;
  for (const DmaTransfer& d : t.transfers) {
    EXPECT_EQ(d.dma_engine, 0);
    if (d.instruction == 4) four.push_back(d);
  }
  ASSERT_EQ(four.size(), 2u);
  EXPECT_EQ(four[0].bytes, 2 * 2048);
  EXPECT_EQ(four[0].runs, 2);
  EXPECT_NEAR(four[0].end_ns, 1300 + 16 * kSmallRow + 2 * kBigRow, 1e-9);
  EXPECT_EQ(four[1].bytes, 6 * 2048);
  EXPECT_NEAR(four[1].start_ns, waiting + 8 * kBigRow, 1e-9);
  EXPECT_EQ(t.transfers.size(), 5u);
  // The engine never idled from 1300 to the end: DMA active is that whole span.
  EXPECT_NEAR(t.engine_active_ns[static_cast<int>(Engine::kDma)], t.end_ns[4] - 1300, 1e-9);
  EXPECT_NEAR(t.total_ns, waiting + 14 * kBigRow, 1e-9);
}

TEST(Simulator, ACopyReadyInsideAGapLeavesItsStartToLaterOnes) {
  Executable x = Queues();
  x.instructions = {
      Make(Opcode::kTensorCopy, Sbuf(0, 8, 1920), Sbuf(1, 8, 1920)),  // Vector, 0..2000 ns
      Make(Opcode::kDmaCopy, Hbm(1, 8, 512, 2048), Sbuf(0, 8, 512)),  // ready 3300
      Make(Opcode::kActivation, Sbuf(2, 8, 1200), Sbuf(1, 8, 1200)),  // Scalar, 0..1000 ns
      Make(Opcode::kDmaCopy, Hbm(2, 8, 128, 2048), Sbuf(2, 8, 128)),  // ready 2300
      HbmLoad(3, 128), HbmLoad(4, 512)};                                  // ready 1300
  const Timeline t = Simulated(x);
  EXPECT_NEAR(t.start_ns[1], 3300, 1e-9);
  // Copy 3 splits the gap [0, 3300) into [0, 2300) and [2300 + 8 small rows, 3300).
  EXPECT_NEAR(t.start_ns[3], 2300, 1e-9);
  EXPECT_NEAR(t.end_ns[3], 2300 + 8 * kSmallRow, 1e-9);
  // Copy 4 takes the front one from its ready time ...
  EXPECT_NEAR(t.start_ns[4], 1300, 1e-9);
  EXPECT_NEAR(t.end_ns[4], 1300 + 8 * kSmallRow, 1e-9);
  // ... copy 5 what is left of it (6 rows of 2 KiB) and the back one (2 rows).
  const double front = 2300 - (1300 + 8 * kSmallRow), back = 3300 - t.end_ns[3];
  ASSERT_GT(front, 6 * kBigRow);
  ASSERT_LT(front, 7 * kBigRow);
  ASSERT_GT(back, 2 * kBigRow);
  EXPECT_NEAR(t.start_ns[5], 1300 + 8 * kSmallRow, 1e-9);
  EXPECT_NEAR(t.end_ns[5], t.end_ns[3] + 2 * kBigRow, 1e-9);
  EXPECT_NEAR(t.end_ns[1], 3300 + 8 * kBigRow, 1e-9);  // unmoved by any of them
}

TEST(Simulator, TheMatmulTileProgram) {
  const Executable x = isa::testing::MatmulTile();
  const Timeline t = Simulated(x);
  // load_stationary waits for lhsT's DMA; multiply_moving for rhs's.
  EXPECT_GT(t.start_ns[2], t.end_ns[0]);
  EXPECT_GE(t.start_ns[3], t.end_ns[1]);
  EXPECT_GE(t.start_ns[3], t.end_ns[2]);
  EXPECT_GT(t.start_ns[4], t.end_ns[3]);
  EXPECT_GE(t.start_ns[5], t.end_ns[4] + 1300);
  EXPECT_DOUBLE_EQ(t.end_ns[3] - t.start_ns[3], 2048 / 2.4);  // fp32 N = 512
  EXPECT_EQ(t.instruction_counts[static_cast<int>(Engine::kTensor)], 1 + 2);
  EXPECT_DOUBLE_EQ(t.useful_flops, 2.0 * 128 * 128 * 512);
  const Metrics m = ComputeMetrics(x, t);
  EXPECT_DOUBLE_EQ(m.hfu, t.tensor_flops / (kTrn2.tensor_peak_flops * t.total_ns * 1e-9));
  EXPECT_DOUBLE_EQ(m.arithmetic_intensity, 2.0 * 128 * 128 * 512 / t.hbm_bytes);
  EXPECT_EQ(t.hbm_bytes, (128 * 128 + 2 * 128 * 512) * 4);
  EXPECT_TRUE(m.memory_bound);  // ~43 FLOP/B, ridge ~110
  EXPECT_NEAR(m.ridge_point, 78.64e12 / 716e9, 0.01);
  EXPECT_DOUBLE_EQ(m.average_dma_bytes, static_cast<double>(t.dma_bytes) / 3);
  // Occupancy: every allocation is live at some point, all released at the end.
  ASSERT_FALSE(t.occupancy.empty());
  EXPECT_EQ(t.occupancy.back().sbuf_bytes, 0);
  EXPECT_EQ(t.occupancy.back().psum_bytes, 0);
  int64_t peak_psum = 0;
  for (const OccupancyPoint& p : t.occupancy) peak_psum = std::max(peak_psum, p.psum_bytes);
  EXPECT_EQ(peak_psum, 128 * 2048);
  // Deterministic.
  const Timeline u = Simulated(x);
  EXPECT_EQ(u.start_ns, t.start_ns);
  EXPECT_EQ(u.end_ns, t.end_ns);
}

TEST(Simulator, Fp32MatmulsAtTheTutorialsRate) {
  // reference/neuroncore.md: 32,768 fp32 matmuls x 2,048 cycles / 2.4 GHz =
  // 27.96 ms of Tensor time (28.16 ms measured). Here 4096 of them, back to
  // back on one stationary tile: Tensor active = 4096 x 2048 / 2.4 ns.
  Executable x = isa::testing::MatmulTile();
  x.allocations[3].bytes = 16 << 10;
  const Instruction mm = x.instructions[3];
  x.instructions.resize(3);
  for (int i = 0; i < 4096; ++i) {
    Instruction m = mm;
    m.dst.offset = (i % 8) * 512;  // rotate over the 8 PSUM banks
    m.accumulate = i >= 8;
    x.instructions.push_back(m);
  }
  const Timeline t = Simulated(x);
  const double tensor = t.engine_active_ns[static_cast<int>(Engine::kTensor)];
  const double load = 4 * 128 / 2.4;  // the one load_stationary (fp32: 4 x M cycles)
  EXPECT_NEAR(tensor - load, 4096 * 2048 / 2.4, 1e-6 * tensor);
  EXPECT_EQ(t.instruction_counts[static_cast<int>(Engine::kTensor)], 1 + 2 * 4096);
}

// Note [Tensor engine rows]: a stationary already in SBUF loads beside the
// running multiply; one whose DMA lands during the multiply loads after it.
Executable TwoWeights() {
  Executable x;
  x.target = Target::kTrn2;
  x.tensors = {{"b", isa::TensorKind::kInput, DType::kFloat32, {128, 128}}};
  x.allocations = {{"a", Memory::kSbuf, 0, 128, 0, 512},
                   {"b", Memory::kSbuf, 0, 128, 512, 512},
                   {"moving", Memory::kSbuf, 0, 128, 1024, 2048},
                   {"acc", Memory::kPsum, 0, 128, 0, 3 * 2048}};
  return x;
}
Instruction Load(uint32_t weights) {
  return Make(Opcode::kLoadStationary, Tile{}, Sbuf(weights, 128, 128));
}
Instruction Multiply(uint32_t weights, int bank, bool accumulate = false) {
  Instruction m = Make(Opcode::kMultiplyMoving, Sbuf(3, 128, 512, DType::kFloat32, Memory::kPsum),
                       Sbuf(2, 128, 512), Sbuf(weights, 128, 128));
  m.dst.offset = bank * 512;
  m.accumulate = accumulate;
  return m;
}
constexpr double kLoadNs = 4 * 128 / 2.4, kMultiplyNs = 4 * 512 / 2.4;  // fp32 on trn2

TEST(Simulator, AReadyStationaryLoadsBesideTheRunningMultiply) {
  Executable x = TwoWeights();
  x.instructions = {Load(0), Multiply(0, 0), Load(1), Multiply(1, 1), Load(0),
                    Multiply(0, 0, /*accumulate=*/true)};
  const Timeline t = Simulated(x);
  const double l = kLoadNs, m = kMultiplyNs;
  const std::vector<double> start = {0, l, l, l + m, l + m, l + 2 * m};
  const std::vector<double> end = {l, l + m, 2 * l, l + 2 * m, 2 * l + m, l + 3 * m};
  for (size_t i = 0; i < start.size(); ++i) {
    EXPECT_NEAR(t.start_ns[i], start[i], 1e-9) << i;
    EXPECT_NEAR(t.end_ns[i], end[i], 1e-9) << i;
  }
  // The accumulating multiply 5 follows multiply 1 with no dependent latency.
  EXPECT_NEAR(t.engine_active_ns[static_cast<int>(Engine::kTensor)], l + 3 * m, 1e-9);
  EXPECT_EQ(t.instruction_counts[static_cast<int>(Engine::kTensor)], 3 + 3 * 2);
}

TEST(Simulator, AStationaryArrivingMidMultiplyLoadsAfterIt) {
  Executable x = TwoWeights();
  Instruction dma = Make(Opcode::kDmaCopy, Sbuf(1, 128, 128), Hbm(0, 128, 128, 128));
  x.instructions = {dma, Load(0), Multiply(0, 0), Multiply(0, 1), Load(1), Multiply(1, 2)};
  const Timeline t = Simulated(x);
  const double l = kLoadNs, m = kMultiplyNs;
  // 16 DMA engines x 8 rows of 512 B; the load sees it a semaphore later.
  const double arrives = 1300 + 8 * (20 + 512 / 23.0) + 100 / 2.4;
  ASSERT_GT(arrives, t.start_ns[3]);  // after multiply 3 was dispatched ...
  ASSERT_LT(arrives, t.end_ns[3]);    // ... before it ends
  EXPECT_NEAR(t.start_ns[3], l + m, 1e-9);
  EXPECT_NEAR(t.start_ns[4], l + 2 * m, 1e-9);  // so it waits for multiply 3
  EXPECT_NEAR(t.start_ns[5], 2 * l + 2 * m, 1e-9);
  EXPECT_NEAR(t.engine_active_ns[static_cast<int>(Engine::kTensor)], 2 * l + 3 * m, 1e-9);
}

TEST(Simulator, TensorThrottleRampsUp) {
  Executable x = isa::testing::MatmulTile();
  const Instruction mm = x.instructions[3];
  x.instructions.resize(3);
  for (int i = 0; i < 20; ++i) x.instructions.push_back(mm);
  const Timeline plain = Simulated(x);
  SimOptions o;
  o.tensor_throttle = true;
  const Timeline throttled = Simulated(x, o);
  const double full = 2048 / 2.4;
  EXPECT_DOUBLE_EQ(throttled.end_ns[3] - throttled.start_ns[3], full / 0.5);  // starts at 50 %
  const double last = throttled.end_ns.back() - throttled.start_ns.back();
  EXPECT_NEAR(last, full, 1e-9 * full);  // > 3 us of busy time later: full speed
  EXPECT_GT(throttled.total_ns, plain.total_ns);
}

TEST(Simulator, RejectsAnInvalidProgram) {
  Executable x = isa::testing::MatmulTile();
  x.allocations[1].bytes = 1024 * 4;
  x.instructions[3].src0.sizes[0] = 1024;
  Timeline t;
  EXPECT_NE(Simulate(x, {}, &t).error.find("instruction 3 (multiply_moving on tensor): moving "
                                           "[128, 1024] has free size 1024; the limit is 512"),
            std::string::npos);
}

}  // namespace
}  // namespace trn::model

namespace trn::model {
namespace {

// reference/neuroncore.md, "Calibration data": the basic tiled fp32 matmul
// 4096 x 8192 x 8192 on trn2 took 39.89 ms, DMA active 99.93 %, Tensor active
// 34.82 ms (87.28 %), HFU 17.52 %, DMA-bound.
TEST(Calibration, BasicTiledMatmulTrn2) {
  const isa::Executable x = BasicTiledMatmul(4096, 8192, 8192, DType::kFloat32, Target::kTrn2);
  SimOptions o;
  o.record_dependencies = false;
  Timeline t;
  ASSERT_EQ(Simulate(x, o, &t).error, "");
  const Metrics m = ComputeMetrics(x, t);
  EXPECT_NEAR(t.total_ns / 1e6, 39.89, 39.89 * 0.10);
  EXPECT_GE(t.engine_active_ns[static_cast<int>(Engine::kDma)] / t.total_ns, 0.95);
  EXPECT_NEAR(t.engine_active_ns[static_cast<int>(Engine::kTensor)] / 1e6, 34.82, 34.82 * 0.10);
  EXPECT_EQ(t.instruction_counts[static_cast<int>(Engine::kTensor)], 32768 + 65536);
  EXPECT_NEAR(m.hfu, 0.1752, 0.02);
  EXPECT_TRUE(m.memory_bound);
  // 4096 * 8192 * 8192 * 2 FLOPs, ~10.9 GB of HBM traffic.
  EXPECT_DOUBLE_EQ(t.useful_flops, 4096.0 * 8192 * 8192 * 2);
  EXPECT_NEAR(t.hbm_bytes / 1e9, 10.9, 0.1);
}

}  // namespace
}  // namespace trn::model

namespace trn::model {
namespace {

// A fingerprint of everything a timeline holds, to keep speed work from
// changing results. Retaken when Note [DMA queues] changed the schedule (with
// the DMA gaps switched off the new code gave the previous value); the first
// was taken before the DMA loop and the span union were rewritten for speed.
uint64_t Fingerprint(const Timeline& t) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  mix(t.start_ns.data(), t.start_ns.size() * sizeof(double));
  mix(t.end_ns.data(), t.end_ns.size() * sizeof(double));
  for (const DmaTransfer& d : t.transfers) {
    mix(&d.instruction, sizeof d.instruction);
    mix(&d.dma_engine, sizeof d.dma_engine);
    mix(&d.start_ns, sizeof d.start_ns);
    mix(&d.end_ns, sizeof d.end_ns);
  }
  for (const Dependency& d : t.dependencies) {
    mix(&d.from, sizeof d.from);
    mix(&d.to, sizeof d.to);
    mix(&d.kind, sizeof d.kind);
  }
  for (const OccupancyPoint& p : t.occupancy) mix(&p, sizeof p);
  mix(t.engine_active_ns, sizeof t.engine_active_ns);
  mix(&t.total_ns, sizeof t.total_ns);
  return h;
}

TEST(Simulator, TheTiledMatmulTimelineIsUnchanged) {
  const isa::Executable x = BasicTiledMatmul(512, 1024, 2048, DType::kFloat32, Target::kTrn2);
  const Timeline t = Simulated(x);
  EXPECT_EQ(Fingerprint(t), 10390171706929650609ull) << t.total_ns;
}

}  // namespace
}  // namespace trn::model
