// TRN_ASSERT: a broken invariant (a bug, never user input) aborts loudly.
// User input errors are thrown as rt::InvalidArgument / returned as Status.
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
