// The constraints of reference/neuroncore.md, one broken at a time on a valid
// program; each error must name the instruction, the operand and the limit.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "core/isa/executable.h"
#include "core/isa/isa_test_util.h"
#include "core/isa/target.h"

namespace trn::isa {
namespace {

using testing::MatmulTile;

std::string ErrorAfter(const std::function<void(Executable&)>& edit, Target t = Target::kTrn2) {
  Executable exe = MatmulTile(t);
  edit(exe);
  return Validate(exe).error;
}

TEST(Validate, TheExampleProgramIsValidOnBothTargets) {
  EXPECT_EQ(Validate(MatmulTile(Target::kTrn1)).error, "");
  EXPECT_EQ(Validate(MatmulTile(Target::kTrn2)).error, "");
}

TEST(Validate, PartitionsAtMost128) {
  const std::string e = ErrorAfter([](Executable& x) {
    x.allocations[2].partitions = 128;
    x.instructions[4].dst.partitions = 129;
    x.instructions[4].src0.partitions = 129;
  });
  EXPECT_EQ(e,
            "instruction 4 (tensor_copy on vector): dst [129, 512]: 129 partitions; the limit "
            "is 128 (nl.tile_size.pmax)");
}

TEST(Validate, MovingFreeSizeAtMost512) {
  const std::string e = ErrorAfter([](Executable& x) {
    x.allocations[1].bytes = 1024 * 4;
    x.instructions[3].src0.sizes[0] = 1024;
  });
  EXPECT_NE(e.find("instruction 3 (multiply_moving on tensor): moving [128, 1024] has free size "
                   "1024; the limit is 512"),
            std::string::npos)
      << e;
}

TEST(Validate, StationaryFreeSizeAtMost128) {
  const std::string e = ErrorAfter([](Executable& x) {
    x.allocations[0].bytes = 256 * 4;
    x.instructions[2].src0.sizes[0] = 256;
  });
  EXPECT_NE(e.find("instruction 2 (load_stationary on tensor): stationary [128, 256] has free "
                   "size 256; the limit is 128"),
            std::string::npos)
      << e;
}

TEST(Validate, PsumOverflowNamesTheAllocation) {
  const std::string e = ErrorAfter([](Executable& x) { x.allocations[3].bytes = 20 << 10; });
  EXPECT_EQ(e,
            "allocation 3 ('acc'): needs 20480 bytes per partition at offset 0 of psum; a "
            "partition of trn2 has 16384 (PSUM overflow)");
}

TEST(Validate, SbufCapacityDependsOnTheTarget) {
  const auto edit = [](Executable& x) { x.allocations[2].bytes = 200 << 10; };  // ~203 KiB end
  EXPECT_NE(ErrorAfter(edit, Target::kTrn1).find("(SBUF overflow)"), std::string::npos);
  EXPECT_EQ(ErrorAfter(edit, Target::kTrn2), "");  // 224 KiB per partition on NC-v3
}

TEST(Validate, MatmulStaysInOnePsumBank) {
  const std::string e = ErrorAfter([](Executable& x) {
    x.allocations[3].bytes = 4096;
    x.instructions[3].dst.offset = 256;  // bytes 1024..3071: crosses the 2 KiB bank
    x.instructions[4].src0.offset = 256;
  });
  EXPECT_NE(e.find("instruction 3 (multiply_moving on tensor): result [128, 512] spans PSUM bytes "
                   "[1024, 3071] of each partition, crossing a 2048-byte bank"),
            std::string::npos)
      << e;
}

TEST(Validate, MatmulResultIsFloat32Psum) {
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.instructions[3].dst.memory = Memory::kSbuf;
            }).find("is in sbuf but allocation 'acc' is psum"),
            std::string::npos);
  const std::string e =
      ErrorAfter([](Executable& x) { x.instructions[3].dst.dtype = DType::kBFloat16; });
  EXPECT_NE(e.find("the result must be a float32 PSUM tile, got psum bfloat16"), std::string::npos)
      << e;
}

TEST(Validate, MatmulOperandsAreFloatingPoint) {
  const std::string e =
      ErrorAfter([](Executable& x) { x.instructions[3].src0.dtype = DType::kInt8; });
  EXPECT_NE(e.find("the Tensor engine multiplies floating-point tiles; moving is int8, "
                   "stationary"),
            std::string::npos)
      << e;
}

TEST(Validate, MatmulContractionSizesAgree) {
  const std::string e = ErrorAfter([](Executable& x) { x.instructions[3].src0.partitions = 64; });
  EXPECT_NE(e.find("contraction sizes differ: stationary [128, 128] has K = 128, moving [64, 512] "
                   "has K = 64"),
            std::string::npos)
      << e;
}

TEST(Validate, ComputeEnginesDoNotReadHbm) {
  const std::string e =
      ErrorAfter([](Executable& x) { x.instructions[4].src0 = testing::Hbm(1, 128, 512, 512); });
  EXPECT_EQ(e,
            "instruction 4 (tensor_copy on vector): src0 is in HBM; compute engines read and "
            "write SBUF or PSUM only (move it with dma_copy)");
}

TEST(Validate, PsumFreeSizeAtMost4K) {
  Executable x = MatmulTile();
  x.allocations[3].bytes = 16 << 10;
  x.allocations[2].bytes = 8192 * 4;
  x.allocations[2].byte_offset = 0;
  Instruction& copy = x.instructions[4];
  copy.src0.sizes[0] = copy.dst.sizes[0] = 4096;
  EXPECT_EQ(Validate(x).error.find("free size"), std::string::npos) << Validate(x).error;
  copy.src0.sizes[0] = copy.dst.sizes[0] = 4097;
  x.allocations[3].bytes = 16 << 10;
  const std::string e = Validate(x).error;
  EXPECT_NE(e.find("reaches byte 16388 of each partition of allocation 'acc', which has 16384"),
            std::string::npos)
      << e;
  copy.src0.sizes[0] = copy.dst.sizes[0] = 4000;
  copy.src0.strides[0] = 0;  // a broadcast read stays inside the bank; the free size is 4000
  copy.src0.ndim = 2;
  copy.src0.sizes[1] = 2;
  copy.src0.strides[1] = 1;
  copy.dst.sizes[0] = 8000;
  EXPECT_NE(Validate(x).error.find("src0 [128, 4000, 2] has free size 8000 in psum; the limit is "
                                   "4096"),
            std::string::npos)
      << Validate(x).error;
}

TEST(Validate, EngineMustRunTheOpcode) {
  const std::string e =
      ErrorAfter([](Executable& x) { x.instructions[4].engine = Engine::kTensor; });
  EXPECT_EQ(e,
            "instruction 4 (tensor_copy on tensor): tensor_copy does not run on the tensor "
            "engine");
  EXPECT_TRUE(RunsOn(Opcode::kTensorCopy, Engine::kScalar));
  EXPECT_TRUE(RunsOn(Opcode::kTensorCopy, Engine::kGpSimd));
  EXPECT_FALSE(RunsOn(Opcode::kActivation, Engine::kVector));
  EXPECT_FALSE(RunsOn(Opcode::kDmaCopy, Engine::kVector));
}

TEST(Validate, ShapesOfElementwiseOperandsAgree) {
  const std::string e = ErrorAfter([](Executable& x) { x.instructions[4].dst.sizes[0] = 256; });
  EXPECT_EQ(e,
            "instruction 4 (tensor_copy on vector): dst [128, 256] and src0 [128, 512] differ "
            "in shape");
}

TEST(Validate, TileMustFitItsBuffer) {
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.instructions[0].src0.offset = 1;
            }).find("reaches element 16384 of tensor 'lhsT', which has 16384"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.instructions[0].dst.buffer = 9;
            }).find("names allocation 9, the executable has 4"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.instructions[0].src0.buffer = 7;
            }).find("names tensor 7, the executable has 3"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.instructions[0].src0.strides[0] = -1;
            }).find("sizes are >= 1 and strides >= 0"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.instructions[0].src0.ndim = 5;
            }).find("5 free dims; a tile has 1..4"),
            std::string::npos);
}

TEST(Validate, DmaMovesBytesOnAQueueOfTheCore) {
  EXPECT_EQ(ErrorAfter([](Executable& x) { x.instructions[5].queue = 16; }),
            "instruction 5 (dma_copy on dma): DMA queue 16 is out of range; a core has 16");
  const std::string e = ErrorAfter([](Executable& x) {
    x.tensors[2].dtype = DType::kBFloat16;
    x.instructions[5].dst.dtype = DType::kBFloat16;
  });
  EXPECT_NE(e.find("dma_copy moves bytes (cast with tensor_copy)"), std::string::npos) << e;
}

TEST(Validate, InstructionLimits) {
  Executable x = MatmulTile();
  x.allocations.push_back({"stats", Memory::kSbuf, 0, 128, 2000 * 4, 8 * 4});
  Instruction bn =
      testing::Make(Opcode::kBnStats, testing::Sbuf(4, 128, 6), testing::Sbuf(2, 128, 512));
  x.instructions.push_back(bn);
  EXPECT_EQ(Validate(x).error, "");
  x.instructions.back().dst.sizes[0] = 5;
  EXPECT_NE(Validate(x).error.find("dst [128, 5] must be [128, 6]"), std::string::npos);
  x.instructions.back() =
      testing::Make(Opcode::kTensorReduce, testing::Sbuf(4, 128, 1), testing::Sbuf(2, 128, 512));
  x.instructions.back().op0 = AluOp::kDivide;
  EXPECT_NE(Validate(x).error.find("tensor_reduce reduces with add, max, min or multiply, not "
                                   "divide"),
            std::string::npos);
  x.instructions.back() = testing::Make(Opcode::kTensorTensor, testing::Sbuf(2, 128, 512),
                                        testing::Sbuf(2, 128, 512), testing::Sbuf(1, 128, 512));
  EXPECT_NE(Validate(x).error.find("tensor_tensor needs an operation"), std::string::npos);
  x.instructions.back().op0 = AluOp::kAdd;
  EXPECT_EQ(Validate(x).error, "");
  Instruction wait;
  wait.opcode = Opcode::kSemaphoreWait;
  wait.engine = Engine::kSync;
  wait.semaphore = 300;
  x.instructions.push_back(wait);
  EXPECT_NE(Validate(x).error.find("semaphore 300 is out of range; trn2 has 256"),
            std::string::npos);
}

TEST(Validate, PerPartitionScalarsAndPartialReductions) {
  Executable x = MatmulTile();
  x.allocations.push_back({"v", Memory::kSbuf, 0, 128, 2000 * 4, 2 * 512 * 4});
  // operand 0 from a [128, 1] tile: src1 is read, and must be one scalar per partition.
  Instruction ts = testing::Make(Opcode::kTensorScalar, testing::Sbuf(4, 128, 512),
                                 testing::Sbuf(2, 128, 512), testing::Sbuf(4, 128, 1));
  ts.op0 = AluOp::kSubtract;
  ts.value = 1;
  EXPECT_TRUE(OperandsOf(ts).reads_src1);
  x.instructions.push_back(ts);
  EXPECT_EQ(Validate(x).error, "");
  x.instructions.back().src1.sizes[0] = 2;
  EXPECT_NE(Validate(x).error.find("the per-partition scalars src1 [128, 2] must be [128, 1]"),
            std::string::npos)
      << Validate(x).error;
  x.instructions.back().value = 4;
  EXPECT_NE(Validate(x).error.find("value 4 names scalar operands"), std::string::npos);
  x.instructions.back().value = 0;
  EXPECT_FALSE(OperandsOf(x.instructions.back()).reads_src1);
  EXPECT_EQ(Validate(x).error, "");

  // [128, 8, 64] reduced over its inner dim -> [128, 8]; [128, 3] is no group count.
  Instruction r = testing::Make(Opcode::kTensorReduce, testing::Sbuf(4, 128, 8),
                                testing::Sbuf(2, 128, 512));
  r.src0.ndim = 2;
  r.src0.sizes[0] = 8;
  r.src0.sizes[1] = 64;
  r.src0.strides[0] = 64;
  r.op0 = AluOp::kAdd;
  x.instructions.back() = r;
  EXPECT_EQ(Validate(x).error, "");
  x.instructions.back().dst.sizes[0] = 3;
  EXPECT_NE(Validate(x).error.find("dst [128, 3] must be [128, G] with G the product"),
            std::string::npos)
      << Validate(x).error;
}

TEST(Validate, Transposes) {
  Executable x = MatmulTile();
  x.allocations.push_back({"t", Memory::kSbuf, 0, 128, 2000 * 4, 32 * 4});
  Instruction t =
      testing::Make(Opcode::kTranspose, testing::Sbuf(4, 32, 32), testing::Sbuf(2, 32, 32));
  t.engine = Engine::kVector;
  x.instructions.push_back(t);
  EXPECT_EQ(Validate(x).error, "");
  x.instructions.back().dst.sizes[0] = 16;
  EXPECT_NE(Validate(x).error.find("must be the transpose of src0"), std::string::npos);
  x.instructions.back().engine = Engine::kTensor;
  x.instructions.back().dst.sizes[0] = 32;
  EXPECT_NE(Validate(x).error.find("a Tensor-engine transpose writes PSUM"), std::string::npos);
}

TEST(Isa, NamesAreDistinctAndStreamsSplitTheProgram) {
  std::set<std::string> names;
  for (int op = 0; op < kNumOpcodes; ++op) names.insert(OpcodeName(static_cast<Opcode>(op)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumOpcodes));
  names.clear();
  for (int e = 0; e < kNumEngines; ++e) names.insert(EngineName(static_cast<Engine>(e)));
  EXPECT_EQ(names, (std::set<std::string>{"tensor", "vector", "scalar", "gpsimd", "sync", "dma"}));

  const Executable x = MatmulTile();
  EXPECT_EQ(x.Stream(Engine::kDma), (std::vector<uint32_t>{0, 1, 5}));
  EXPECT_EQ(x.Stream(Engine::kTensor), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(x.Stream(Engine::kVector), (std::vector<uint32_t>{4}));
  EXPECT_EQ(x.DmaQueue(1), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(x.Stream(Engine::kGpSimd).empty());

  Target t;
  EXPECT_TRUE(ParseTarget("TRN1", &t) && t == Target::kTrn1);
  EXPECT_TRUE(ParseTarget("nc-v3", &t) && t == Target::kTrn2);
  EXPECT_FALSE(ParseTarget("trn9", &t));
  EXPECT_DOUBLE_EQ(Spec(Target::kTrn2).tensor_peak_flops, 128.0 * 128 * 2 * 2.4e9);
  EXPECT_EQ(Spec(Target::kTrn1).sbuf_partition_bytes, 192 << 10);
  EXPECT_EQ(Spec(Target::kTrn2).psum_bank_bytes(), 2048);
}

}  // namespace
}  // namespace trn::isa

namespace trn::isa {
namespace {

// A corrupt file may hold any value: none of these may overflow int64 on the way
// to its error (UBSan would catch it in the fuzz target).
TEST(Validate, HugeValuesAreErrorsNotOverflows) {
  EXPECT_NE(ErrorAfter([](Executable& x) { x.tensors[0].shape = {int64_t{1} << 40, 1 << 20}; })
                .find("has more than 281474976710656 elements"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) { x.allocations[0].partition_start = 0x7fffffff; })
                .find("are outside the 128 partitions"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) {
              x.allocations[0].byte_offset = INT64_MAX - 1;
            }).find("(SBUF overflow)"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) { x.instructions[0].src0.sizes[0] = INT64_MAX; })
                .find("at most 2^20 and 2^40"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) { x.instructions[0].src0.partition_stride = INT64_MAX; })
                .find("must be in [0, 2^40]"),
            std::string::npos);
  EXPECT_NE(ErrorAfter([](Executable& x) { x.instructions[4].dst.partition_start = -5; })
                .find("must be in [0, 2^40]"),
            std::string::npos);
}

}  // namespace
}  // namespace trn::isa
