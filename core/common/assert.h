// TRN_ASSERT: a broken invariant (a bug, never user input) aborts loudly.
//
// Note [Errors in core]
// Two kinds of failure, kept apart (as c10's TORCH_CHECK / TORCH_INTERNAL_ASSERT):
// - Something the user caused or can fix (a bad argument or environment
//   variable, a malformed or unwritable file, a full device): a clear message
//   naming the value and what was expected. Code on the calling thread throws
//   a trn::Error (core/common/error.h: InvalidArgument, OutOfMemory,
//   DeviceError); code that must not throw returns it: kernels return a
//   Status (core/common/tensor_ref.h), which the runtime reports as a
//   DeviceError at the next synchronizing call; the tracer returns false or
//   counts a dropped record and never blocks.
// - A broken invariant (a bug, whatever the input): TRN_ASSERT, never thrown,
//   never caught.
// No other exception types leave core/runtime, core/trace or core/export.
#pragma once

#include <cstdio>
#include <cstdlib>

#define TRN_ASSERT(cond, msg)                                                      \
  do {                                                                             \
    if (__builtin_expect(!(cond), 0)) {                                            \
      std::fprintf(stderr, "trnscope: internal error at %s:%d: %s (%s)\n", __FILE__, \
                   __LINE__, msg, #cond);                                          \
      std::abort();                                                                \
    }                                                                              \
  } while (0)
