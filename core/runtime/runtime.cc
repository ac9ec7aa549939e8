// Devices, streams, events and the runtime singleton. See runtime.h.
#include "core/runtime/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/common/assert.h"
#include "core/trace/trace.h"

namespace trn::rt {

int64_t NowNs() { return trace::WallNs(); }  // one clock for events and traces

namespace {

// Fetches a cache line in the exclusive state, ready for stores (PREFETCHW;
// a NOP on x86-64 CPUs without it). Note [Launch stores].
inline void PrefetchForWrite(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, /*rw=*/1, /*locality=*/3);
#endif
}

// One Record() of an event: the point in a stream it marks. Shared by the
// event (its latest recording) and by the commands that complete or wait on
// it. Written once by the recording core's worker; read by anyone.
struct RecordPoint {
  int device_index = -1;
  Device* device = nullptr;
  Stream* stream = nullptr;
  std::atomic<bool> done{false};
  int64_t timestamp_ns = 0;  // written before `done` is released
};

enum class CommandType : uint8_t { kTask, kMemcpy, kCallback, kRecord, kWait };

// One queued command. Plain fields instead of a wrapping lambda, and the Task
// inline (Note [Inline tasks]): enqueueing a kernel allocates nothing.
// Cache-line aligned: the worker reading one slot never shares a line with a
// producer writing the next (Note [Launch queue]).
struct alignas(64) Command {
  CommandType type = CommandType::kTask;
  KernelInfo info;  // what the profiler records for this command
  Task task;
  std::function<void()> callback;
  std::shared_ptr<RecordPoint> point;  // kRecord / kWait
  void* dst = nullptr;                 // kMemcpy
  const void* src = nullptr;
  size_t bytes = 0;
  std::shared_ptr<void> keepalive;
  // Set at enqueue when a profiling session captures this command's
  // execution (Note [Tracer hot path]).
  bool traced = false;
  uint64_t correlation_id = 0;
  uint64_t launch_id = 0;

  // Drops what the command holds (captures may free device memory), on the
  // worker, before the command counts as completed.
  void Release() {
    task = nullptr;
    callback = nullptr;
    point.reset();
    keepalive.reset();
  }
};

// Note [Launch queue]
// The host thread that enqueues and the worker that executes never share a
// lock on the launch path. Each stream's commands live in a chain of
// fixed-size segments: producers (serialized among themselves by the
// stream's push mutex, uncontended in the usual one-thread eager loop) write
// the next slot and publish it by a release store of `enqueued`; the worker,
// the only consumer, sees it with an acquire load, runs the command in its
// slot (no copy out) and publishes `completed`. A full segment is chained to
// a new one (or one the worker handed back), so enqueueing never waits
// for the worker. The worker's mutex only guards sleeping, host waits,
// stream creation and errors (Note [Worker spin]).
class CommandQueue {
 public:
  CommandQueue() : head_(new Segment), tail_(head_) {}
  ~CommandQueue() {
    for (Segment* s = head_; s != nullptr;) {
      Segment* next = s->next.load(std::memory_order_relaxed);
      delete s;
      s = next;
    }
    for (Segment* s = free_.load(std::memory_order_relaxed); s != nullptr;) {
      Segment* next = s->next.load(std::memory_order_relaxed);
      delete s;
      s = next;
    }
  }
  CommandQueue(const CommandQueue&) = delete;
  CommandQueue& operator=(const CommandQueue&) = delete;

  // ---- Producers, holding push_mu ----
  // The slot the next Publish() makes visible: a released command whose
  // fields the caller overwrites.
  Command& Claim() {
    if (tail_index_ == kSlots) {
      Segment* s = TakeFree();
      if (s == nullptr) s = new Segment;
      tail_->next.store(s, std::memory_order_release);
      tail_ = s;
      tail_index_ = 0;
    }
    return tail_->slots[tail_index_];
  }
  void Publish() {
    ++tail_index_;
    enqueued.store(enqueued.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // Note [Launch stores]
  // A launch writes its slot (last written by the worker's Command::Release)
  // and `enqueued` (which the spinning worker keeps reading): lines in the
  // worker's cache. The push mutex's unlock, a locked instruction, waits until
  // those stores are visible, i.e. for a cross-core round trip per line.
  // Fetching all of them for writing just before the stores makes the round
  // trips overlap: the host cost of a small eager op on Sapphire Rapids went
  // from 1.4x to 1.0x CPU PyTorch's. Fetched any earlier (at the previous
  // Publish), the lines were back in the worker's cache by the time of the
  // stores, and a read prefetch (__builtin_prefetch without -mprfchw) leaves
  // them shared, which saves nothing.
  void PrefetchLaunchLines(const Command& slot) {
    const char* p = reinterpret_cast<const char*>(&slot);
    for (size_t off = 0; off < sizeof(Command); off += 64) PrefetchForWrite(p + off);
    PrefetchForWrite(&enqueued);
  }

  // ---- The worker ----
  // The oldest command not yet completed, or null.
  Command* Head() {
    if (enqueued.load(std::memory_order_acquire) == completed.load(std::memory_order_relaxed)) {
      return nullptr;
    }
    if (head_index_ == kSlots) {  // the producer chained the next segment before publishing
      Segment* next = head_->next.load(std::memory_order_acquire);
      TRN_ASSERT(next != nullptr, "launch queue: a published command has no segment");
      GiveFree(head_);
      head_ = next;
      head_index_ = 0;
    }
    return &head_->slots[head_index_];
  }
  // Retires the head command (already released).
  void Pop() {
    ++head_index_;
    completed.store(completed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  std::mutex push_mu;
  // Commands published / retired. Written by producers under push_mu and by
  // the worker respectively; read by anyone. Apart, so that they do not share
  // a cache line with each other or with the worker's head.
  alignas(64) std::atomic<uint64_t> enqueued{0};
  alignas(64) std::atomic<uint64_t> completed{0};

 private:
  static constexpr int kSlots = 32;
  struct Segment {
    Command slots[kSlots];
    std::atomic<Segment*> next{nullptr};
  };
  alignas(64) Segment* head_;  // the worker's
  int head_index_ = 0;
  alignas(64) Segment* tail_;  // the producers'
  int tail_index_ = 0;
  // Emptied segments the worker hands back for reuse, so that a deep queue
  // does not allocate a segment every kSlots launches: a stack linked through
  // Segment::next, pushed by the worker and popped by producers under push_mu.
  // One popper at a time, so no ABA. Holds at most kMaxFree segments.
  static constexpr int kMaxFree = 32;
  std::atomic<Segment*> free_{nullptr};
  std::atomic<int> free_count_{0};

  Segment* TakeFree() {  // producers, holding push_mu
    Segment* s = free_.load(std::memory_order_acquire);
    while (s != nullptr &&
           !free_.compare_exchange_weak(s, s->next.load(std::memory_order_relaxed),
                                        std::memory_order_acquire)) {
    }
    if (s == nullptr) return nullptr;
    free_count_.fetch_sub(1, std::memory_order_relaxed);
    s->next.store(nullptr, std::memory_order_relaxed);
    return s;
  }
  void GiveFree(Segment* s) {  // the worker
    if (free_count_.load(std::memory_order_relaxed) >= kMaxFree) {
      delete s;
      return;
    }
    free_count_.fetch_add(1, std::memory_order_relaxed);
    Segment* top = free_.load(std::memory_order_relaxed);
    do {
      s->next.store(top, std::memory_order_relaxed);
    } while (!free_.compare_exchange_weak(top, s, std::memory_order_release,
                                          std::memory_order_relaxed));
  }
};

thread_local const Device::Worker* tls_worker = nullptr;

// Workers of all live devices, so that completing an event can wake a core
// that sleeps waiting for it (cross-device waits). Lock order: registry mutex,
// then a worker's mutex. Leaked: workers of the leaked runtime never leave.
std::mutex& RegistryMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<Device::Worker*>& Registry() {
  static auto* workers = new std::vector<Device::Worker*>;
  return *workers;
}

template <typename F>
Status RunGuarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::Error(fmt::format("threw an exception: {}", e.what()));
  } catch (...) {
    return Status::Error("threw an unknown exception");
  }
}

trace::Record TraceRecordOf(const KernelInfo& info, const Stream& s, uint64_t correlation_id,
                           uint64_t launch_id) {
  trace::Record r;
  r.name = info.name;
  r.op = info.op;
  r.flops = info.flops;
  r.bytes_read = info.bytes_read;
  r.bytes_written = info.bytes_written;
  r.engine = info.engine;
  r.command_kind = info.kind;
  r.device = static_cast<int16_t>(s.device_index());
  r.stream = static_cast<int16_t>(s.id());
  r.correlation_id = correlation_id;
  r.launch_id = launch_id;
  return r;
}

// A host-side runtime span (synchronize) from `start` ticks to now.
void EmitHostSpan(trace::RecordKind kind, RuntimeCall call, int device, int stream,
                  int64_t start) {
  trace::Record r;
  r.kind = kind;
  r.name = RuntimeCallName(call);
  r.device = static_cast<int16_t>(device);
  r.stream = static_cast<int16_t>(stream);
  r.correlation_id = trace::CurrentCorrelation();
  r.start = start;
  r.end = trace::Ticks();
  trace::Emit(r);
}

}  // namespace

// ---- Internal state -----------------------------------------------------------

// The latest recording of an event. Any thread.
struct Event::State {
  std::shared_ptr<RecordPoint> Last() const {
    std::lock_guard<std::mutex> lock(mu);
    return last;
  }
  mutable std::mutex mu;
  std::shared_ptr<RecordPoint> last;
};

// A stream's pending commands (Note [Launch queue]) and its first failure
// since the last synchronizing call (guarded by the device worker's mutex).
struct Stream::Queue {
  CommandQueue commands;
  std::string error;
  uint64_t error_seq = 0;  // device-wide order of failures: the first one wins
};

// A core's worker thread and the streams it executes. Any thread enqueues
// (lock-free towards the worker, Note [Launch queue]); only the worker thread
// runs commands. `mu` guards stream creation, errors and the sleep / wake
// handshakes of the worker and of waiting host threads.
struct Device::Worker {
  static constexpr int kMaxStreams = kStreamPoolSize + 1;

  Device* device = nullptr;
  std::mutex mu;
  std::condition_variable work_cv;  // the worker sleeps here when nothing is ready
  std::condition_variable done_cv;  // host threads wait here for completions
  // Note [Wake handshakes]: a waker publishes its change, issues a seq_cst
  // fence and then reads the flag; the sleeper sets the flag, fences and
  // then re-checks for the change before it blocks under mu. One of the two
  // always sees the other, so no wake-up is lost, and the launch path only
  // reads a flag that stays in its cache while the worker is busy or spinning.
  std::atomic<bool> sleeping{false};   // the worker blocks on work_cv
  std::atomic<int> host_waiters{0};    // host threads block on done_cv
  std::atomic<bool> stop{false};
  std::array<std::unique_ptr<Stream>, kMaxStreams> owned;  // by id; guarded by mu
  std::array<std::atomic<Stream*>, kMaxStreams> streams{};  // by id, created lazily
  std::array<std::atomic<Stream*>, kMaxStreams> active{};   // creation order
  std::atomic<int> num_active{0};
  int next_rr = 0;        // round-robin start among active streams (worker only)
  int next_pool = 0;      // NewStream() counter; guarded by mu
  uint64_t failures = 0;  // numbers error_seq; guarded by mu
  std::thread thread;

  // Caller holds mu.
  Stream& CreateStream(int id) {
    owned[id] = std::make_unique<Stream>(device, device->index(), id);
    Stream* s = owned[id].get();
    const int n = num_active.load(std::memory_order_relaxed);
    active[n].store(s, std::memory_order_relaxed);
    num_active.store(n + 1, std::memory_order_release);
    streams[id].store(s, std::memory_order_release);
    return *s;
  }

  // Appends c to s's queue and wakes the worker if it sleeps. Any thread.
  void Push(Stream& s, Command&& c) {
    CommandQueue& q = s.queue().commands;
    {
      std::lock_guard<std::mutex> lock(q.push_mu);
      Command& slot = q.Claim();
      q.PrefetchLaunchLines(slot);
      slot = std::move(c);
      q.Publish();
    }
    Wake();
  }

  // Wakes the worker if it sleeps (Note [Wake handshakes]). Any thread.
  void Wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!sleeping.load(std::memory_order_relaxed)) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!sleeping.load(std::memory_order_relaxed)) return;
      sleeping.store(false, std::memory_order_relaxed);
    }
    work_cv.notify_one();
  }

  // Wakes host threads blocked in WaitUntil (Note [Wake handshakes]).
  // Worker thread, after publishing a completion.
  void NotifyHostWaiters() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (host_waiters.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    done_cv.notify_all();
  }

  // Blocks a host thread until pred() holds. Caller holds `lock` on mu.
  template <typename Pred>
  void WaitUntil(std::unique_lock<std::mutex>& lock, Pred pred) {
    TRN_ASSERT(tls_worker != this,
               "a command synchronized its own core (a Task or host callback must not "
               "synchronize the device it runs on: it would deadlock)");
    if (pred()) return;
    // Note [Host spin]
    lock.unlock();
    const bool ready = SpinUntil(pred, kHostSpin);
    lock.lock();
    if (ready || pred()) return;
    host_waiters.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    done_cv.wait(lock, pred);
    host_waiters.fetch_sub(1, std::memory_order_relaxed);
  }

  // The next command that can run and its stream, round-robin, or null. Wait
  // commands whose event completed are retired here. Worker thread only.
  Command* PickReady(Stream** stream) {
    const int n = num_active.load(std::memory_order_acquire);
    for (int k = 0; k < n; ++k) {
      int i = next_rr + k;
      if (i >= n) i -= n;
      Stream* s = active[i].load(std::memory_order_relaxed);
      CommandQueue& q = s->queue().commands;
      Command* c = q.Head();
      while (c != nullptr && c->type == CommandType::kWait &&
             c->point->done.load(std::memory_order_acquire)) {
        c->Release();
        q.Pop();
        NotifyHostWaiters();
        c = q.Head();
      }
      if (c != nullptr && c->type != CommandType::kWait) {
        next_rr = i + 1 == n ? 0 : i + 1;
        *stream = s;
        return c;
      }
    }
    return nullptr;
  }

  // Wakes every other sleeping worker: one of them may wait for the event
  // that just completed. Rare (once per Record).
  void WakeEventWaiters() {
    std::lock_guard<std::mutex> registry(RegistryMutex());
    for (Worker* w : Registry()) {
      if (w != this) w->Wake();
    }
  }

  // Note [Command lifecycle]
  // The one place where a command starts and ends on the core. The profiler's
  // worker-side start/end records go immediately around the switch; each
  // command carries its KernelInfo and the stream tells device and stream id.
  // Runs without mu held.
  Status Execute(Command& c) {
    switch (c.type) {
      case CommandType::kTask:
        return RunGuarded([&] { return c.task(); });
      case CommandType::kMemcpy:
        if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);
        return Status::Ok();
      case CommandType::kCallback:
        return RunGuarded([&] {
          c.callback();
          return Status::Ok();
        });
      case CommandType::kRecord:
        c.point->timestamp_ns = NowNs();
        c.point->done.store(true, std::memory_order_release);
        WakeEventWaiters();
        return Status::Ok();
      case CommandType::kWait:
        break;  // retired in PickReady, never executed
    }
    TRN_ASSERT(false, "unexpected command type");
    return Status::Ok();
  }

  Status ExecuteTraced(const Stream& s, Command& c) {
    const int64_t start = trace::Ticks();
    const Status st = Execute(c);
    const int64_t end = trace::Ticks();
    if (trace::Active()) {
      trace::Record r = TraceRecordOf(c.info, s, c.correlation_id, c.launch_id);
      r.kind = c.info.kind == CommandKind::kKernel ? trace::RecordKind::kKernel
                                                   : trace::RecordKind::kCopy;
      r.start = start;
      r.end = end;
      trace::Emit(r);
    }
    return st;
  }

  std::string DescribeFailure(const Stream& s, const Command& c, const Status& st) const {
    if (c.type == CommandType::kCallback) {
      return fmt::format("trn host callback failed on trn:{} stream {}: {}", s.device_index(),
                         s.id(), st.error);
    }
    const char* what = c.info.kind == CommandKind::kKernel ? "kernel" : "copy";
    const char* op = c.info.op != nullptr && c.info.op[0] != '\0' ? c.info.op : "no op";
    return fmt::format("trn {} '{}' ({}) failed on trn:{} stream {}: {}", what, c.info.name, op,
                       s.device_index(), s.id(), st.error);
  }

  // Runs the head command c of s in its slot, then retires it. Worker thread.
  void Run(Stream& s, Command& c) {
    const Status st = c.traced ? ExecuteTraced(s, c) : Execute(c);
    if (!st.ok()) {
      std::string error = DescribeFailure(s, c, st);
      std::lock_guard<std::mutex> lock(mu);
      Stream::Queue& q = s.queue();
      if (q.error.empty()) {
        q.error = std::move(error);
        q.error_seq = ++failures;
      }
    }
    c.Release();
    s.queue().commands.Pop();
    NotifyHostWaiters();
  }

  // Note [Worker spin]
  // An eager loop launches a small kernel every microsecond or two. If the
  // worker slept after each one, every launch would pay a futex wake on the
  // dispatching thread (the host cost per op). So an idle worker first polls
  // its queues for a short while, then sleeps. Bounded, so an idle device
  // costs no CPU.
  static constexpr auto kSpin = std::chrono::microseconds(50);

  // Note [Host spin]
  // The same on the other side: a host thread that synchronizes (a step of
  // generate(), .item(), a benchmark's synchronized call) polls for the
  // completion before it sleeps on done_cv. Asleep, it paid the futex wake and
  // the wake-up of an idle vCPU after the last kernel: a linear of
  // 128 x 256 x 256 with a synchronize took 372 us against 171 us per call
  // queued ten at a time, 98-160 us with the poll (AMD EPYC Zen 3 VM); a
  // 2-layer Llama forward and its synchronize 0.90x of the sleeping wait's
  // wall (medians of 10 alternating rounds). The host had nothing else to do:
  // the poll yields as below, and sleeps after kHostSpin, so a long wait
  // costs no CPU.
  static constexpr auto kHostSpin = std::chrono::milliseconds(20);

  // After a few microseconds the spin yields its core every few polls: on a
  // loaded machine the dispatching thread may be queued behind this worker on
  // the same core, and a busy-wait holding the core would slow the very
  // launches it waits for. Not at once: a yield is a syscall, and a worker
  // that keeps up with a fast producer should not pay it per command.
  static constexpr int kPollsBeforeYield = 16;  // ~16 x 16 pauses, a few us

  // Polls ready() for up to `limit`; true once it held. Any thread, without mu.
  template <typename Ready, typename Duration>
  static bool SpinUntil(Ready& ready, Duration limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (int i = 0;; ++i) {
      for (int k = 0; k < 16; ++k) __builtin_ia32_pause();
      if (ready()) return true;
      if (i >= kPollsBeforeYield && (i & 3) == 3) sched_yield();
      if ((i & 15) == 15 && std::chrono::steady_clock::now() >= until) return false;
    }
  }

  // True once a command may be ready or stop was requested. Worker only.
  bool SpinForWork() {
    auto ready = [this] { return MaybeReady(); };
    return SpinUntil(ready, kSpin);
  }

  // Something was published, a wait's event completed, or stop. Worker only.
  bool MaybeReady() {
    if (stop.load(std::memory_order_acquire)) return true;
    const int n = num_active.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      CommandQueue& q = active[i].load(std::memory_order_relaxed)->queue().commands;
      Command* c = q.Head();
      if (c != nullptr &&
          (c->type != CommandType::kWait || c->point->done.load(std::memory_order_acquire))) {
        return true;
      }
    }
    return false;
  }

  void Sleep() {
    std::unique_lock<std::mutex> lock(mu);
    sleeping.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (MaybeReady()) {
      sleeping.store(false, std::memory_order_relaxed);
      return;
    }
    work_cv.wait(lock, [&] { return !sleeping.load(std::memory_order_relaxed); });
  }

  void Loop() {
    tls_worker = this;
    for (;;) {
      Stream* s = nullptr;
      if (Command* c = PickReady(&s)) {
        Run(*s, *c);
        continue;
      }
      if (stop.load(std::memory_order_acquire)) return;  // drained what can run
      if (!SpinForWork()) Sleep();
    }
  }

  // Moves out the stream's pending error. Caller holds mu.
  static std::string TakeError(Stream& s) {
    std::string e = std::move(s.queue().error);
    s.queue().error.clear();
    return e;
  }

  // Commands of s enqueued and completed so far. Any thread.
  static uint64_t Enqueued(Stream& s) {
    return s.queue().commands.enqueued.load(std::memory_order_acquire);
  }
  static uint64_t Completed(Stream& s) {
    return s.queue().commands.completed.load(std::memory_order_acquire);
  }
};

// ---- Event --------------------------------------------------------------------

Event::Event() : state_(std::make_shared<State>()) {}

void Event::Record(Stream& stream) {
  auto point = std::make_shared<RecordPoint>();
  point->device_index = stream.device_index();
  point->device = &stream.device();
  point->stream = &stream;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->last = point;
  }
  Command c;
  c.type = CommandType::kRecord;
  c.info.name = "event_record";
  c.point = std::move(point);
  if (trace::Wants(trace::RecordKind::kEventRecord, stream.device_index(), stream.id())) {
    EmitHostSpan(trace::RecordKind::kEventRecord, RuntimeCall::kEventRecord, stream.device_index(),
                 stream.id(), trace::Ticks());
  }
  stream.device().worker().Push(stream, std::move(c));
}

bool Event::Query() const {
  auto p = state_->Last();
  return p == nullptr || p->done.load(std::memory_order_acquire);
}

void Event::Synchronize() const {
  auto p = state_->Last();
  if (p == nullptr) return;  // never recorded: nothing to wait for (CUDA semantics)
  const int64_t start = trace::Active() ? trace::Ticks() : 0;
  Device::Worker& w = p->device->worker();
  std::string error;
  {
    std::unique_lock<std::mutex> lock(w.mu);
    w.WaitUntil(lock, [&] { return p->done.load(std::memory_order_acquire); });
    error = Device::Worker::TakeError(*p->stream);
  }
  if (start != 0 &&
      trace::Wants(trace::RecordKind::kSynchronize, p->device_index, p->stream->id())) {
    EmitHostSpan(trace::RecordKind::kSynchronize, RuntimeCall::kEventSynchronize, p->device_index,
                 p->stream->id(), start);
  }
  if (!error.empty()) throw DeviceError(error);
}

double Event::ElapsedMs(const Event& end) const {
  auto check = [](const std::shared_ptr<RecordPoint>& p, const char* which) {
    if (p == nullptr) {
      throw InvalidArgument(fmt::format(
          "Event::ElapsedMs: the {} event was never recorded; record both events first", which));
    }
    if (!p->done.load(std::memory_order_acquire)) {
      throw InvalidArgument(fmt::format(
          "Event::ElapsedMs: the {} event has not completed yet; synchronize it first", which));
    }
  };
  auto a = state_->Last();
  auto b = end.state_->Last();
  check(a, "start");
  check(b, "end");
  return static_cast<double>(b->timestamp_ns - a->timestamp_ns) / 1e6;
}

int64_t Event::TimestampNs() const {
  auto p = state_->Last();
  return p != nullptr && p->done.load(std::memory_order_acquire) ? p->timestamp_ns : 0;
}

bool Event::was_recorded() const { return state_->Last() != nullptr; }

int Event::device_index() const {
  auto p = state_->Last();
  return p == nullptr ? -1 : p->device_index;
}

// ---- Stream -------------------------------------------------------------------

Stream::Stream(Device* device, int device_index, int id)
    : device_(device), device_index_(device_index), id_(id), queue_(std::make_unique<Queue>()) {}

Device& Stream::device() const { return *device_; }

namespace {
// Note [Tracing a launch]: the correlation id of the framework op is taken
// here, on the dispatching thread, and a launch id links the host-side
// launch span to the kernel's execution record (the trace's flow arrow).
void Enqueue(Stream& s, Command&& c) {
  const int dev = s.device_index(), sid = s.id();
  if (!trace::Active()) {  // the only cost when no session is active
    s.device().worker().Push(s, std::move(c));
    return;
  }
  const bool copy = c.info.kind != CommandKind::kKernel;
  const auto host_kind = copy ? trace::RecordKind::kMemcpy : trace::RecordKind::kLaunch;
  const bool host = trace::Wants(host_kind, dev, sid);
  c.traced = trace::Wants(copy ? trace::RecordKind::kCopy : trace::RecordKind::kKernel,
                          dev, sid);
  if (host || c.traced) {
    c.correlation_id = trace::CurrentCorrelation();
    c.launch_id = trace::NextLaunchId();
  }
  trace::Record r;
  if (host) {
    r = TraceRecordOf(c.info, s, c.correlation_id, c.launch_id);
    r.kind = host_kind;
    r.name = RuntimeCallName(copy ? RuntimeCall::kMemcpyAsync : RuntimeCall::kLaunchKernel);
    r.start = trace::Ticks();
  }
  s.device().worker().Push(s, std::move(c));
  if (host) {
    r.end = trace::Ticks();
    trace::Emit(r);
  }
}
}  // namespace

void Stream::Launch(const KernelInfo& info, Task&& task) {
  TRN_ASSERT(task != nullptr, "Stream::Launch with an empty Task");
  Command c;
  c.type = CommandType::kTask;
  c.info = info;
  c.task = std::move(task);
  Enqueue(*this, std::move(c));
}

void Stream::Memcpy(void* dst, const void* src, size_t bytes, CommandKind kind, const char* op,
                    std::shared_ptr<void> keepalive) {
  Command c;
  c.type = CommandType::kMemcpy;
  c.info.name = CopyName(kind);
  c.info.op = op != nullptr ? op : "";
  c.info.kind = kind;
  c.info.engine = Engine::kDma;
  c.info.bytes_read = bytes;
  c.info.bytes_written = bytes;
  c.dst = dst;
  c.src = src;
  c.bytes = bytes;
  c.keepalive = std::move(keepalive);
  Enqueue(*this, std::move(c));
}

void Stream::WaitEvent(const Event& event) {
  auto p = event.state()->Last();
  if (p == nullptr || p->done.load(std::memory_order_acquire)) return;  // nothing to wait for
  Command c;
  c.type = CommandType::kWait;
  c.info.name = "event_wait";
  c.point = std::move(p);
  if (trace::Wants(trace::RecordKind::kEventWait, device_index_, id_)) {
    EmitHostSpan(trace::RecordKind::kEventWait, RuntimeCall::kStreamWaitEvent, device_index_, id_,
                 trace::Ticks());
  }
  device_->worker().Push(*this, std::move(c));
}

void Stream::HostCallback(std::function<void()> fn) {
  TRN_ASSERT(fn != nullptr, "Stream::HostCallback with an empty function");
  Command c;
  c.type = CommandType::kCallback;
  c.info.name = "host_callback";
  c.callback = std::move(fn);
  Enqueue(*this, std::move(c));
}

bool Stream::Query() const {
  const CommandQueue& q = queue_->commands;
  return q.completed.load(std::memory_order_acquire) ==
         q.enqueued.load(std::memory_order_acquire);
}

void Stream::Synchronize() {
  const int64_t start = trace::Active() ? trace::Ticks() : 0;
  Device::Worker& w = device_->worker();
  std::string error;
  {
    std::unique_lock<std::mutex> lock(w.mu);
    const uint64_t target = Device::Worker::Enqueued(*this);
    w.WaitUntil(lock, [&] { return Device::Worker::Completed(*this) >= target; });
    error = Device::Worker::TakeError(*this);
  }
  if (start != 0 && trace::Wants(trace::RecordKind::kSynchronize, device_index_, id_)) {
    EmitHostSpan(trace::RecordKind::kSynchronize, RuntimeCall::kStreamSynchronize, device_index_,
                 id_, start);
  }
  if (!error.empty()) throw DeviceError(error);
}

// ---- Device -------------------------------------------------------------------

Device::Device(int index, int physical_core, uint64_t capacity)
    : index_(index),
      physical_(physical_core),
      allocator_(std::make_unique<Allocator>(index, capacity)),
      worker_(std::make_unique<Worker>()) {
  worker_->device = this;
  {
    std::lock_guard<std::mutex> lock(worker_->mu);
    worker_->CreateStream(0);
  }
  {
    std::lock_guard<std::mutex> registry(RegistryMutex());
    Registry().push_back(worker_.get());
  }
  worker_->thread = std::thread([w = worker_.get()] { w->Loop(); });
  allocator_->SetWaitIdle([this] { WaitIdle(); });
  const std::string name = fmt::format("trn:{} core", index);  // shown by top/gdb/perf
  pthread_setname_np(worker_->thread.native_handle(), name.substr(0, 15).c_str());
}

Device::~Device() {
  {
    std::lock_guard<std::mutex> registry(RegistryMutex());
    auto& r = Registry();
    r.erase(std::find(r.begin(), r.end(), worker_.get()));
  }
  worker_->stop.store(true, std::memory_order_release);  // it drains what can run, then exits
  worker_->Wake();
  worker_->thread.join();
}

Stream& Device::DefaultStream() { return *worker_->streams[0].load(std::memory_order_relaxed); }

Stream& Device::GetStream(int id) {
  if (id < 0 || id > kStreamPoolSize) {
    throw InvalidArgument(fmt::format(
        "trn stream id {} is invalid on trn:{}: expected 0 (the default stream) to {}", id,
        index_, kStreamPoolSize));
  }
  Stream* s = worker_->streams[id].load(std::memory_order_acquire);  // no lock: launch path
  if (s == nullptr) {
    throw InvalidArgument(fmt::format(
        "trn stream id {} does not exist on trn:{}: it was never handed out by NewStream() "
        "({} streams exist, default included)",
        id, index_, num_streams()));
  }
  return *s;
}

Stream& Device::NewStream() {
  std::lock_guard<std::mutex> lock(worker_->mu);
  const int id = worker_->next_pool++ % kStreamPoolSize + 1;
  Stream* s = worker_->streams[id].load(std::memory_order_relaxed);
  return s != nullptr ? *s : worker_->CreateStream(id);
}

int Device::num_streams() const { return worker_->num_active.load(std::memory_order_acquire); }

void Device::WaitIdle() {
  Worker& w = *worker_;
  std::unique_lock<std::mutex> lock(w.mu);
  const int n = w.num_active.load(std::memory_order_acquire);
  w.WaitUntil(lock, [&w, n] {
    for (int i = 0; i < n; ++i) {
      Stream& s = *w.active[i].load(std::memory_order_relaxed);
      if (Worker::Completed(s) < Worker::Enqueued(s)) return false;
    }
    return true;
  });
}

uint64_t Device::PendingCommands() const {
  uint64_t pending = 0;
  const int n = worker_->num_active.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    Stream& s = *worker_->active[i].load(std::memory_order_relaxed);
    const uint64_t done = Worker::Completed(s);  // first: completed never passes enqueued
    pending += Worker::Enqueued(s) - done;
  }
  return pending;
}

void Device::Synchronize() {
  const int64_t start = trace::Active() ? trace::Ticks() : 0;
  Worker& w = *worker_;
  std::string error;
  int failed = 0;
  {
    std::unique_lock<std::mutex> lock(w.mu);
    const int n = w.num_active.load(std::memory_order_acquire);
    std::array<uint64_t, Worker::kMaxStreams> target;
    for (int i = 0; i < n; ++i) target[i] = Worker::Enqueued(*w.active[i].load(std::memory_order_relaxed));
    w.WaitUntil(lock, [&] {
      for (int i = 0; i < n; ++i) {
        if (Worker::Completed(*w.active[i].load(std::memory_order_relaxed)) < target[i]) {
          return false;
        }
      }
      return true;
    });
    uint64_t first_seq = UINT64_MAX;
    const int all = w.num_active.load(std::memory_order_acquire);
    for (int i = 0; i < all; ++i) {
      Stream& s = *w.active[i].load(std::memory_order_relaxed);
      Stream::Queue& q = s.queue();
      if (q.error.empty()) continue;
      ++failed;
      const uint64_t seq = q.error_seq;
      std::string e = Worker::TakeError(s);
      if (seq < first_seq) {
        first_seq = seq;
        error = std::move(e);
      }
    }
  }
  if (start != 0 && trace::Wants(trace::RecordKind::kSynchronize, index_, -1)) {
    EmitHostSpan(trace::RecordKind::kSynchronize, RuntimeCall::kDeviceSynchronize, index_, -1,
                 start);
  }
  if (failed > 1) {
    error += fmt::format(" (and {} more failed streams on trn:{})", failed - 1, index_);
  }
  if (!error.empty()) throw DeviceError(error);
}

// ---- Runtime ------------------------------------------------------------------

struct Runtime::Impl {
  std::string cores_spec;
  std::vector<std::unique_ptr<Device>> devices;
};

// Note [Fork]: a child forked after the runtime started has its memory but
// not its core threads, and may have copied a lock mid-use; like torch.cuda,
// it gets a clear error on any device use instead of a hang. Memory freed in
// the child is left alone (a copy of the parent's, reclaimed at exit).
namespace {
std::atomic<bool> g_forked_child{false};
void MarkForkedChild() { g_forked_child.store(true, std::memory_order_relaxed); }
}  // namespace

bool InForkedChild() { return g_forked_child.load(std::memory_order_relaxed); }

void CheckNotForkedChild() {
  if (InForkedChild()) {
    throw DeviceError(
        "trn cannot be used in a process forked after the trn runtime started (its core "
        "threads do not survive fork); start worker processes with multiprocessing's "
        "'spawn' or 'forkserver' method, or touch trn only after the fork");
  }
}

Runtime::Runtime() : impl_(std::make_unique<Impl>()) {
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, MarkForkedChild); });
  const char* cores = std::getenv("TRN_VISIBLE_CORES");
  impl_->cores_spec = cores != nullptr ? cores : kDefaultVisibleCores;
  const std::vector<int> physical = ParseVisibleCores(impl_->cores_spec);
  const char* memory = std::getenv("TRN_DEVICE_MEMORY");
  const uint64_t capacity = memory != nullptr ? ParseMemorySize(memory) : uint64_t{4} << 30;
  for (size_t i = 0; i < physical.size(); ++i) {
    impl_->devices.push_back(std::make_unique<Device>(static_cast<int>(i), physical[i], capacity));
  }
}

// Note [Runtime lifetime]
// The runtime is created on first use and intentionally leaked: torch frees
// tensors (through our allocator) and may synchronize during static
// destruction, after any static of ours would have been destroyed. Leaking
// keeps devices, streams and allocators valid until the process ends; the OS
// reclaims the memory and the worker threads.
Runtime& Runtime::Get() {
  static Runtime* runtime = new Runtime();  // retried on the next call if the env is invalid
  return *runtime;
}

int Runtime::device_count() const { return static_cast<int>(impl_->devices.size()); }

const std::string& Runtime::visible_cores_spec() const { return impl_->cores_spec; }

Device& Runtime::device(int index) {
  CheckNotForkedChild();
  const int n = device_count();
  if (index < 0 || index >= n) {
    throw InvalidArgument(fmt::format(
        "trn device index {} is out of range: {} {} visible (TRN_VISIBLE_CORES={})", index, n,
        n == 1 ? "device is" : "devices are", impl_->cores_spec));
  }
  return *impl_->devices[index];
}

void Runtime::SynchronizeAll() {
  CheckNotForkedChild();
  // Drain every device even if one failed, then report the first failure.
  std::string error;
  for (auto& d : impl_->devices) {
    try {
      d->Synchronize();
    } catch (const DeviceError& e) {
      if (error.empty()) error = e.what();
    }
  }
  if (!error.empty()) throw DeviceError(error);
}

void Runtime::WaitIdleAll() {
  CheckNotForkedChild();
  for (auto& d : impl_->devices) d->WaitIdle();
}

uint64_t Runtime::PendingCommandsAll() const {
  uint64_t pending = 0;
  for (const auto& d : impl_->devices) pending += d->PendingCommands();
  return pending;
}

// ---- Environment parsing ------------------------------------------------------

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A whole non-negative decimal integer, or false.
template <typename T>
bool ParseUnsigned(std::string_view s, T* out) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::vector<int> ParseIndexList(const std::string& spec, std::string_view what, int max_count) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument(fmt::format(
        "{}='{}' is invalid: {}. Expected ids and ascending ranges separated by commas, e.g. "
        "'0-1', '0,2', '3' or '0-1,4' (at most {} ids)",
        what, spec, why, max_count));
  };
  std::vector<int> ids;
  std::string_view rest = spec;
  if (Trim(rest).empty()) throw fail("nothing listed");
  for (;;) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    int lo = 0, hi = 0;
    const size_t dash = item.find('-');
    bool ok;
    if (dash == std::string_view::npos) {
      ok = ParseUnsigned(item, &lo);
      hi = lo;
    } else {
      ok = ParseUnsigned(Trim(item.substr(0, dash)), &lo) &&
           ParseUnsigned(Trim(item.substr(dash + 1)), &hi);
    }
    if (!ok) throw fail(fmt::format("'{}' is not an id or a range like '0-3'", item));
    if (hi < lo) throw fail(fmt::format("range '{}' is descending", item));
    if (static_cast<int64_t>(hi) - lo + 1 + static_cast<int64_t>(ids.size()) > max_count) {
      throw fail(fmt::format("more than {} ids", max_count));
    }
    for (int c = lo; c <= hi; ++c) {
      if (std::find(ids.begin(), ids.end(), c) != ids.end()) {
        throw fail(fmt::format("{} is listed twice", c));
      }
      ids.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return ids;
}

static_assert(Runtime::kMaxVisibleCores <= trace::kMaxDevices,
              "the tracer's device mask must cover every visible core");

std::vector<int> Runtime::ParseVisibleCores(const std::string& spec) {
  return ParseIndexList(spec, "TRN_VISIBLE_CORES", kMaxVisibleCores);
}

uint64_t Runtime::ParseMemorySize(const std::string& spec) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument(fmt::format(
        "TRN_DEVICE_MEMORY='{}' is invalid: {}. Expected a positive whole number of bytes, "
        "optionally with a K, M or G suffix (also KiB/MiB/GiB; powers of 1024), e.g. "
        "'4G', '512MiB' or '1073741824'",
        spec, why));
  };
  const std::string_view s = Trim(spec);
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  uint64_t value = 0;
  if (!ParseUnsigned(s.substr(0, digits), &value)) throw fail("no byte count");
  std::string suffix;
  for (char ch : Trim(s.substr(digits))) suffix += static_cast<char>(std::toupper(ch));
  int shift;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    shift = 30;
  } else {
    throw fail(fmt::format("unknown suffix '{}'", Trim(s.substr(digits))));
  }
  if (value == 0) throw fail("the capacity must be positive");
  if (value > (UINT64_MAX >> shift)) throw fail("the size overflows 64 bits");
  return value << shift;
}

}  // namespace trn::rt
