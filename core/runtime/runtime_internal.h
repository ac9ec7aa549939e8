// Runtime helpers shared by the runtime's .cc files and its tests; not part of
// the public interface (runtime.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trn::rt {

// Size the allocator reserves for a request of `bytes` (Note [Allocator
// rounding and reuse]): 512 B multiples up to 1 MiB, 2 MiB multiples above.
size_t RoundAllocationSize(size_t bytes);

// "512 B", "1.50 KiB", "3.99 GiB": binary units, two decimals.
std::string FormatBytes(uint64_t bytes);

}  // namespace trn::rt
