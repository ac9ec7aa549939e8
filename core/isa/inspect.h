// `trnscope inspect`: a readable listing of an executable.
#pragma once

#include <string>

#include "core/isa/executable.h"

namespace trn::isa {

// The header, the I/O tensor table, the SBUF/PSUM plan, instruction counts per
// engine and DMA queue, and the first `first` instructions of each engine with
// their operands and source lines.
std::string FormatInspect(const Executable& exe, int first);

// One operand: "psum acc[128, 512] float32" (+ " @p<start>" and " +<offset>" when set).
std::string FormatOperand(const Executable& exe, const Tile& t);

// One instruction with its operands and source, e.g.
// "multiply_moving dst=psum acc[128, 512] float32 src0=... (matmul.py:9 nisa.nc_matmul)".
std::string FormatInstruction(const Executable& exe, const Instruction& ins);

}  // namespace trn::isa
