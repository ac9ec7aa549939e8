// Engine programs of the NKI matmul tutorial's basic tiled kernel, built
// directly in isa for the model's calibration test and benchmark
// (reference/neuroncore.md, "Calibration data"): result[M, N] = lhsT[K, M]^T @
// rhs[K, N] in tiles of K = 128, M = 128, N = 512; for each (m, n) the k loop
// loads both tiles, multiplies into one PSUM bank, then copies PSUM -> SBUF and
// stores. `buffers` rotating SBUF tiles per operand let loads run ahead.
#pragma once

#include <cstdint>

#include "core/isa/executable.h"

namespace trn::model {

isa::Executable BasicTiledMatmul(int64_t m, int64_t k, int64_t n, DType dtype, isa::Target target,
                                 int buffers = 4);

}  // namespace trn::model
