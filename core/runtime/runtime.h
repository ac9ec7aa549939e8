// The software accelerator's runtime: logical cores (one worker thread each),
// streams (in-order command queues), events and per-core device memory.
// Torch-free. See docs/device.md for the execution model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/common/error.h"
#include "core/common/launch.h"
#include "core/common/names.h"
#include "core/common/tensor_ref.h"

namespace trn::rt {

// ---- Errors -----------------------------------------------------------------
// Note [Errors in core] (core/common/assert.h); the runtime's spelling of them.
using ::trn::DeviceError;
using ::trn::Error;
using ::trn::InvalidArgument;
using ::trn::OutOfMemory;

// ---- Commands ---------------------------------------------------------------
// KernelInfo, Engine and CommandKind: core/common/launch.h; their names:
// core/common/names.h.

// Work executed on a core's worker thread. Captures keep inputs alive (e.g. a
// host tensor of a non_blocking H2D copy) until the command has run; they are
// destroyed on the worker, before the command counts as completed.
//
// Note [Inline tasks]
// A kernel's lambda captures its TensorRefs by value (~150 bytes each), far
// beyond std::function's 16-byte small buffer: every launch would malloc on
// the dispatching thread and free on the worker (a cross-thread free, the
// slowest path of glibc's malloc). Task keeps callables of up to
// kInlineBytes in place, so a launch allocates nothing; larger ones go to the
// heap. Move-only, so captures need not be copyable.
class Task {
 public:
  static constexpr size_t kInlineBytes = 640;  // four TensorRefs and some scalars

  Task() = default;
  Task(std::nullptr_t) {}  // NOLINT: an empty task, like std::function
  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, Task> &&
                                        std::is_invocable_r_v<Status, D&>>>
  Task(F&& f) {  // NOLINT: implicit, as std::function's
    if constexpr (sizeof(D) <= kInlineBytes && alignof(D) <= kAlign &&
                  std::is_nothrow_move_constructible_v<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      ::new (static_cast<void*>(buf_)) D*(new D(std::forward<F>(f)));
      ops_ = &kHeapOps<D>;
    }
  }
  Task(Task&& other) noexcept { MoveFrom(other); }
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      Reset();
      MoveFrom(other);
    }
    return *this;
  }
  Task& operator=(std::nullptr_t) {
    Reset();
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { Reset(); }

  Status operator()() { return ops_->invoke(buf_); }
  explicit operator bool() const { return ops_ != nullptr; }
  friend bool operator==(const Task& t, std::nullptr_t) { return t.ops_ == nullptr; }

 private:
  static constexpr size_t kAlign = 16;
  struct Ops {
    Status (*invoke)(void*);
    // Moves the callable from src to dst and destroys it in src; null: a
    // memcpy of `bytes` does (trivially copyable callables, heap pointers).
    void (*relocate)(void* dst, void* src);
    void (*destroy)(void*);  // null: nothing to destroy
    size_t bytes;
  };
  template <typename D>
  static constexpr Ops kInlineOps = {
      [](void* p) -> Status { return (*static_cast<D*>(p))(); },
      std::is_trivially_copyable_v<D> ? nullptr
                                      : +[](void* dst, void* src) {
                                          D* s = static_cast<D*>(src);
                                          ::new (dst) D(std::move(*s));
                                          s->~D();
                                        },
      std::is_trivially_destructible_v<D> ? nullptr
                                          : +[](void* p) { static_cast<D*>(p)->~D(); },
      sizeof(D)};
  template <typename D>
  static constexpr Ops kHeapOps = {
      [](void* p) -> Status { return (**static_cast<D**>(p))(); }, nullptr,
      [](void* p) { delete *static_cast<D**>(p); }, sizeof(D*)};

  void MoveFrom(Task& other) noexcept {
    ops_ = other.ops_;
    if (ops_ == nullptr) return;
    if (ops_->relocate != nullptr) {
      ops_->relocate(buf_, other.buf_);
    } else {
      std::memcpy(buf_, other.buf_, ops_->bytes);
    }
    other.ops_ = nullptr;
  }
  void Reset() {
    if (ops_ != nullptr && ops_->destroy != nullptr) ops_->destroy(buf_);
    ops_ = nullptr;
  }

  const Ops* ops_ = nullptr;
  alignas(kAlign) unsigned char buf_[kInlineBytes];
};

class Device;
class Stream;

// ---- Events -----------------------------------------------------------------
// An event marks a point in a stream. Copyable handle; any thread may call.
// Semantics follow CUDA: Query() on a never-recorded event is true; Wait()
// and Synchronize() refer to the most recent Record() at the time of the call.
class Event {
 public:
  Event();
  void Record(Stream& stream);
  bool Query() const;
  void Synchronize() const;  // blocks; throws DeviceError if the recording stream failed
  // Milliseconds between two completed recordings; InvalidArgument otherwise.
  double ElapsedMs(const Event& end) const;
  int64_t TimestampNs() const;  // completion time (ns since Unix epoch), 0 if none
  bool was_recorded() const;
  int device_index() const;  // -1 if never recorded

  struct State;
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};

// ---- Streams ----------------------------------------------------------------
// An in-order queue of commands on one core. Any thread may enqueue; it never
// waits for the core (Note [Launch queue]). Streams of one core interleave.
class Stream {
 public:
  int device_index() const { return device_index_; }
  int id() const { return id_; }  // 0 = default stream
  Device& device() const;

  void Launch(const KernelInfo& info, Task&& task);
  // Plain memcpy of `bytes` on the worker; `keepalive` is released after the copy.
  void Memcpy(void* dst, const void* src, size_t bytes, CommandKind kind, const char* op,
              std::shared_ptr<void> keepalive = nullptr);
  void WaitEvent(const Event& event);  // later commands wait for the event
  void HostCallback(std::function<void()> fn);

  bool Query() const;   // all enqueued commands done
  void Synchronize();   // waits; throws DeviceError naming the first failed kernel

  Stream(Device* device, int device_index, int id);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  struct Queue;
  Queue& queue() { return *queue_; }

 private:
  Device* device_;
  int device_index_;
  int id_;
  std::unique_ptr<Queue> queue_;
};

// ---- Device memory ----------------------------------------------------------
struct MemoryStats {
  uint64_t allocated = 0;       // bytes in live blocks (rounded sizes)
  uint64_t reserved = 0;        // bytes held: live + cached
  uint64_t peak_allocated = 0;  // since start or ResetPeak()
  uint64_t num_allocs = 0;      // Allocate() calls that succeeded
  uint64_t num_frees = 0;
  uint64_t capacity = 0;
};

// Caching allocator of one core. Blocks are 64-byte aligned host memory; a
// freed block is cached for reuse by the stream it was allocated on (stream
// order makes the reuse safe). Thread-safe.
class Allocator {
 public:
  Allocator(int device_index, uint64_t capacity);
  ~Allocator();
  // Throws OutOfMemory naming the requested size, the free bytes and the core.
  // bytes == 0 returns nullptr.
  void* Allocate(size_t bytes, int stream_id);
  void Free(void* ptr);
  MemoryStats Stats() const;
  void ResetPeak();
  void EmptyCache();  // returns cached blocks to the host (caller synchronized)
  // Called (without the allocator's lock) before cached blocks are returned to
  // the host on the out-of-memory path: queued kernels may still use them.
  void SetWaitIdle(std::function<void()> wait_idle);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- Devices ----------------------------------------------------------------
// One logical core: a worker thread executing its streams, plus memory.
// Owned by Runtime; lives for the process.
class Device {
 public:
  int index() const { return index_; }           // trn:<index>
  int physical_core() const { return physical_; }  // from TRN_VISIBLE_CORES
  Stream& DefaultStream();
  Stream& GetStream(int id);  // InvalidArgument for an unknown id
  Stream& NewStream();        // from a pool of kStreamPoolSize, round-robin
  int num_streams() const;    // created so far, default included
  Allocator& allocator() { return *allocator_; }
  void Synchronize();  // all streams; throws the first DeviceError
  // Waits for every queued command but leaves failures for the next
  // synchronizing call (the profiler must not swallow a user's error).
  void WaitIdle();
  uint64_t PendingCommands() const;  // enqueued, not yet completed

  static constexpr int kStreamPoolSize = 32;

  Device(int index, int physical_core, uint64_t capacity);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  struct Worker;
  Worker& worker() { return *worker_; }

 private:
  int index_;
  int physical_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Worker> worker_;
};

// Process-wide set of devices, created on first use from the environment:
//   TRN_VISIBLE_CORES  "0-1" (default), "0,2", "3": physical cores made visible
//   TRN_DEVICE_MEMORY  capacity per core: bytes or with K/M/G suffix (default 4G)
class Runtime {
 public:
  static Runtime& Get();
  int device_count() const;
  const std::string& visible_cores_spec() const;  // TRN_VISIBLE_CORES, or the default
  Device& device(int index);  // InvalidArgument naming the index and the count
  void SynchronizeAll();
  void WaitIdleAll();                  // Device::WaitIdle on every device
  uint64_t PendingCommandsAll() const;

  static constexpr const char* kDefaultVisibleCores = "0-1";
  static constexpr int kMaxVisibleCores = 64;

  // Parsers of the environment (exposed for tests and to Python); throw
  // InvalidArgument naming the variable and the value.
  static std::vector<int> ParseVisibleCores(const std::string& spec);
  static uint64_t ParseMemorySize(const std::string& spec);

  struct Impl;

 private:
  Runtime();
  std::unique_ptr<Impl> impl_;
};

// Ids and ascending ranges separated by commas ("0-1", "0,2", "3", "0-1,4"),
// in the order listed: the grammar of TRN_VISIBLE_CORES and of ProfileConfig's
// cores and streams. Throws InvalidArgument naming `what`='spec' for an id
// that is not a whole number, a descending range, an id listed twice or more
// than max_count ids.
std::vector<int> ParseIndexList(const std::string& spec, std::string_view what, int max_count);

// True in a child forked after the runtime started (Note [Fork]); device use
// there throws DeviceError.
bool InForkedChild();
void CheckNotForkedChild();

// Wall clock used for all timestamps: ns since the Unix epoch (CLOCK_REALTIME),
// consistent with c10::getTime().
int64_t NowNs();

}  // namespace trn::rt

// ---- Free observer (gemm: Note [Packed weight cache]) -----------------------
namespace trn::rt {
// Called by every core's Allocator::Free with the block's pointer, under the
// allocator's lock, before the block can be handed out again: caches keyed by
// device addresses drop what they hold for it. The observer must not call
// back into an allocator. One process-wide observer; null removes it.
using FreeObserver = void (*)(const void* block);
void SetFreeObserver(FreeObserver observer);
}  // namespace trn::rt
// ---- End of free observer ------------------------------------------------------
