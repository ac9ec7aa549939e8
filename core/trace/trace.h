// The tracer: fixed-size records in per-thread chunks, collected after a
// profiling session. Torch-free. See Note [Tracer hot path].
//
// Note [Tracer hot path]
// When no session is active a producer pays one relaxed atomic load
// (Active()). When one is, a record costs a raw TSC read or two, a per-core
// relaxed counter increment and a store into the calling thread's current
// chunk: no lock, no allocation, no string (names are static pointers). A
// thread takes a lock only when its chunk is full. Past max_events_per_core
// records are dropped and counted, never blocking the traced program. Ticks
// become ns since the Unix epoch only at Collect().
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/launch.h"

namespace trn::trace {

enum class RecordKind : uint8_t {
  // Host side, on the dispatching thread: runtime API spans.
  kLaunch,        // a kernel enqueued (flow start)
  kMemcpy,        // a copy enqueued (flow start)
  kSynchronize,   // a host wait (stream, device, event)
  kEventRecord,   // an event recorded on a stream
  kEventWait,     // a stream made to wait for an event
  kAlloc,         // device memory allocated: value = bytes, in_use = after
  kFree,          // device memory freed: value = bytes, in_use = after
  // Device side, on the core's worker: execution spans.
  kKernel,        // a kernel ran (flow end)
  kCopy,          // a copy ran (flow end)
};
bool IsDeviceSide(RecordKind k);

// Which records a session keeps (ProfileConfig.modes).
enum Mode : uint32_t {
  kModeDevice = 1u << 0,   // kKernel, kCopy
  kModeRuntime = 1u << 1,  // kLaunch ... kEventWait
  kModeMemory = 1u << 2,   // kAlloc, kFree
};
uint32_t ModeOf(RecordKind k);

// 128 bytes, plain data. Times are raw ticks until Collect() converts them.
struct Record {
  int64_t start = 0;
  int64_t end = 0;                // == start for instants
  uint64_t correlation_id = 0;    // framework op that caused it (0: none)
  uint64_t launch_id = 0;         // flow id: launch -> kernel (0: none)
  const char* name = "";          // static: as exported (core/common/names.h)
  const char* op = "";            // static: aten op
  uint64_t flops = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  int64_t value = 0;              // kAlloc/kFree: bytes
  int64_t in_use = 0;             // kAlloc/kFree: device bytes allocated after
  int64_t tid = 0;                // OS thread id of the producing thread
  int16_t device = -1;
  int16_t stream = -1;
  RecordKind kind = RecordKind::kLaunch;
  rt::Engine engine = rt::Engine::kTensor;
  rt::CommandKind command_kind = rt::CommandKind::kKernel;
  uint8_t pad_[25] = {};
};
static_assert(sizeof(Record) == 128);

constexpr int kMaxDevices = 64;
constexpr int kMaxStreams = 64;

struct Config {
  uint64_t device_mask = ~uint64_t{0};  // bit d: trn:d is captured
  uint64_t stream_mask = ~uint64_t{0};  // bit s: stream id s is captured
  uint32_t modes = kModeDevice | kModeRuntime;
  uint64_t max_events_per_core = 1'000'000;
};

struct Collected {
  std::vector<Record> records;  // times in ns since the Unix epoch, sorted by start
  std::vector<uint64_t> dropped_per_device;  // kMaxDevices entries
  uint64_t dropped_total = 0;
  int64_t start_ns = 0;  // session start / stop, ns since epoch
  int64_t stop_ns = 0;
  Config config;
};

// ---- Session control (any thread; one session at a time) ----------------------
// Returns false if a session is already active.
bool Start(const Config& config);
void Stop();
// Records of the last stopped session; call after Stop(). Resets the buffers.
Collected Collect();
bool SessionOpen();  // between Start() and Collect()

// ---- Hot path ---------------------------------------------------------------------
namespace detail {
extern std::atomic<bool> g_active;
extern std::atomic<uint32_t> g_modes;
extern std::atomic<uint64_t> g_device_mask;
extern std::atomic<uint64_t> g_stream_mask;
}  // namespace detail

inline bool Active() { return detail::g_active.load(std::memory_order_relaxed); }

// True if a record of this kind for (device, stream) is captured this session.
inline bool Wants(RecordKind kind, int device, int stream) {
  if (!Active()) return false;
  if (!(detail::g_modes.load(std::memory_order_relaxed) & ModeOf(kind))) return false;
  if (device < 0 || device >= kMaxDevices ||
      !((detail::g_device_mask.load(std::memory_order_relaxed) >> device) & 1))
    return false;
  if (stream >= 0 &&
      (stream >= kMaxStreams || !((detail::g_stream_mask.load(std::memory_order_relaxed) >> stream) & 1)))
    return false;
  return true;
}

inline int64_t Ticks() { return static_cast<int64_t>(__builtin_ia32_rdtsc()); }

// Appends a record for `device` (counted against its max_events_per_core) to
// the calling thread's buffer. Call only when Wants() was true. Never blocks
// except to take a new chunk; a record past the limit is dropped and counted.
void Emit(const Record& record);

// Unique, never 0: the flow id of one launch.
uint64_t NextLaunchId();

// Correlation ids of framework ops (Kineto's pushCorrelationId), per thread.
void PushCorrelation(uint64_t id);
void PopCorrelation();
uint64_t CurrentCorrelation();

// ---- Clock ----------------------------------------------------------------------------
// ns since the Unix epoch of a raw tick value, using the current calibration.
int64_t TicksToNs(int64_t ticks);
int64_t WallNs();  // CLOCK_REALTIME, as c10::getTime()

}  // namespace trn::trace
