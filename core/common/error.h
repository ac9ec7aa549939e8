// The exceptions core throws for errors a user can cause: Note [Errors in core]
// in core/common/assert.h says which kind of failure takes which path.
#pragma once

#include <stdexcept>

namespace trn {

// A failure the user can act on: the message names the value or the file and
// what was expected. Base of the errors below.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Bad input: an argument, an environment variable, a spec, a malformed file.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A device allocation that does not fit; names the size, the free bytes and the core.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};
// A command that failed on a core, reported at the next synchronizing call.
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace trn
