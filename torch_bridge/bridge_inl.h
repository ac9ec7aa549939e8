// Inline part of bridge.h: error translation.
#pragma once

#include <c10/util/Exception.h>

namespace trn::bridge {

template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const rt::OutOfMemory& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  } catch (const rt::InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const rt::DeviceError& e) {
    TORCH_CHECK(false, e.what());
  }
}

}  // namespace trn::bridge
