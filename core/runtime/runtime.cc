// Devices, streams, events and the runtime singleton. See runtime.h.
#include "core/runtime/runtime.h"

#include <pthread.h>
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

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kTensor: return "tensor";
    case Engine::kVector: return "vector";
    case Engine::kScalar: return "scalar";
    case Engine::kDma: return "dma";
  }
  return "?";
}

const char* CommandKindName(CommandKind k) {
  switch (k) {
    case CommandKind::kKernel: return "kernel";
    case CommandKind::kCopyH2D: return "copy_h2d";
    case CommandKind::kCopyD2H: return "copy_d2h";
    case CommandKind::kCopyD2D: return "copy_d2d";
    case CommandKind::kCopyH2H: return "copy_h2h";
  }
  return "?";
}

int64_t NowNs() { return trace::WallNs(); }  // one clock for events and traces

namespace {

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

// One queued command. Plain fields instead of a wrapping lambda so that
// enqueueing allocates nothing beyond what the caller's Task already holds.
struct Command {
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

  // Drops what the command holds (captures may free device memory), outside
  // the worker's lock.
  void Release() {
    task = nullptr;
    callback = nullptr;
    point.reset();
    keepalive.reset();
  }
};

// Growable FIFO ring of commands. A deque would allocate a node every few
// commands (Command is ~170 bytes); the ring only allocates when it grows.
// Guarded by the owning worker's mutex.
class CommandRing {
 public:
  CommandRing() : buf_(kInitialCapacity) {}
  bool empty() const { return size_ == 0; }
  Command& front() { return buf_[head_]; }
  void Push(Command&& c) {
    if (size_ == buf_.size()) Grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = std::move(c);
    ++size_;
  }
  void PopInto(Command& out) {
    out = std::move(buf_[head_]);
    Advance();
  }
  void Drop() {
    buf_[head_].Release();
    Advance();
  }

 private:
  static constexpr size_t kInitialCapacity = 64;  // power of two
  void Advance() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --size_;
  }
  void Grow() {
    std::vector<Command> bigger(buf_.size() * 2);
    for (size_t i = 0; i < size_; ++i) {
      bigger[i] = std::move(buf_[(head_ + i) & (buf_.size() - 1)]);
    }
    buf_.swap(bigger);
    head_ = 0;
  }
  std::vector<Command> buf_;
  size_t head_ = 0;
  size_t size_ = 0;
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
  r.engine = static_cast<uint8_t>(info.engine);
  r.command_kind = static_cast<uint8_t>(info.kind);
  r.device = static_cast<int16_t>(s.device_index());
  r.stream = static_cast<int16_t>(s.id());
  r.correlation_id = correlation_id;
  r.launch_id = launch_id;
  return r;
}

// A host-side runtime span (synchronize) from `start` ticks to now.
void EmitHostSpan(trace::RecordKind kind, const char* name, int device, int stream,
                  int64_t start) {
  trace::Record r;
  r.kind = kind;
  r.name = name;
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

// A stream's pending commands and its first failure since the last
// synchronizing call. Guarded by the device worker's mutex; `completed` is
// also read without it.
struct Stream::Queue {
  CommandRing ring;
  uint64_t enqueued = 0;
  std::atomic<uint64_t> completed{0};
  std::string error;
  uint64_t error_seq = 0;  // device-wide order of failures: the first one wins
};

// A core's worker thread and the streams it executes. Host threads enqueue
// and wait under `mu`; only the worker thread runs commands.
struct Device::Worker {
  static constexpr int kMaxStreams = kStreamPoolSize + 1;

  Device* device = nullptr;
  std::mutex mu;
  std::condition_variable work_cv;  // the worker sleeps here when nothing is ready
  std::condition_variable done_cv;  // host threads wait here for completions
  bool sleeping = false;
  // Bumped under mu whenever something may have become ready (a push, an
  // event completed elsewhere, stop): a spinning worker watches it without mu.
  std::atomic<uint64_t> epoch{0};
  bool stop = false;
  int host_waiters = 0;
  std::array<std::unique_ptr<Stream>, kMaxStreams> streams;  // by id, created lazily
  std::array<Stream*, kMaxStreams> active{};                 // creation order
  int num_active = 0;
  int next_rr = 0;        // round-robin start among active streams
  int next_pool = 0;      // NewStream() counter
  uint64_t failures = 0;  // numbers error_seq
  std::thread thread;

  // Caller holds mu.
  Stream& CreateStream(int id) {
    streams[id] = std::make_unique<Stream>(device, device->index(), id);
    active[num_active++] = streams[id].get();
    return *streams[id];
  }

  void Push(Stream& s, Command&& c) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      Stream::Queue& q = s.queue();
      q.ring.Push(std::move(c));
      ++q.enqueued;
      epoch.fetch_add(1, std::memory_order_release);
      wake = sleeping;
      sleeping = false;  // one notify is enough until the worker sleeps again
    }
    if (wake) work_cv.notify_one();
  }

  // Blocks a host thread until pred() holds. Caller holds `lock` on mu.
  template <typename Pred>
  void WaitUntil(std::unique_lock<std::mutex>& lock, Pred pred) {
    TRN_ASSERT(tls_worker != this,
               "a command synchronized its own core (a Task or host callback must not "
               "synchronize the device it runs on: it would deadlock)");
    if (pred()) return;
    ++host_waiters;
    done_cv.wait(lock, pred);
    --host_waiters;
  }

  // The next stream whose head command can run, round-robin, or null. Wait
  // commands whose event completed are retired here. Caller holds mu.
  Stream* PickReady() {
    for (int k = 0; k < num_active; ++k) {
      int i = next_rr + k;
      if (i >= num_active) i -= num_active;
      Stream* s = active[i];
      Stream::Queue& q = s->queue();
      while (!q.ring.empty() && q.ring.front().type == CommandType::kWait &&
             q.ring.front().point->done.load(std::memory_order_acquire)) {
        q.ring.Drop();
        q.completed.fetch_add(1, std::memory_order_release);
        if (host_waiters > 0) done_cv.notify_all();
      }
      if (!q.ring.empty() && q.ring.front().type != CommandType::kWait) {
        next_rr = i + 1 == num_active ? 0 : i + 1;
        return s;
      }
    }
    return nullptr;
  }

  // Wakes every other sleeping worker: one of them may wait for the event
  // that just completed. Rare (once per Record), so a broadcast is fine.
  void WakeEventWaiters() {
    std::lock_guard<std::mutex> registry(RegistryMutex());
    for (Worker* w : Registry()) {
      if (w == this) continue;
      bool wake;
      {
        std::lock_guard<std::mutex> lock(w->mu);
        w->epoch.fetch_add(1, std::memory_order_release);
        wake = w->sleeping;
        w->sleeping = false;
      }
      if (wake) w->work_cv.notify_one();
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
    const char* what =
        c.info.kind == CommandKind::kKernel ? "kernel" : CommandKindName(c.info.kind);
    const char* op = c.info.op != nullptr && c.info.op[0] != '\0' ? c.info.op : "no op";
    return fmt::format("trn {} '{}' ({}) failed on trn:{} stream {}: {}", what, c.info.name, op,
                       s.device_index(), s.id(), st.error);
  }

  // Note [Worker spin]
  // An eager loop launches a small kernel every microsecond or two. If the
  // worker slept after each one, every launch would pay a futex wake on the
  // dispatching thread (the host cost per op). So an idle worker first polls
  // `epoch` for a short while, then sleeps. Bounded, so an idle device costs
  // no CPU.
  static constexpr auto kSpin = std::chrono::microseconds(50);

  // Caller holds `lock`; returns with it held. True if something changed.
  bool SpinForWork(std::unique_lock<std::mutex>& lock) {
    const uint64_t seen = epoch.load(std::memory_order_acquire);
    lock.unlock();
    const auto until = std::chrono::steady_clock::now() + kSpin;
    bool changed = false;
    for (int i = 0; !changed; ++i) {
      for (int k = 0; k < 64 && !changed; ++k) {
        __builtin_ia32_pause();
        changed = epoch.load(std::memory_order_acquire) != seen;
      }
      if ((i & 15) == 15 && std::chrono::steady_clock::now() >= until) break;
    }
    lock.lock();
    return changed || epoch.load(std::memory_order_relaxed) != seen;
  }

  void Loop() {
    tls_worker = this;
    std::unique_lock<std::mutex> lock(mu);
    Command c;
    for (;;) {
      Stream* s = PickReady();
      if (s == nullptr) {
        if (stop) return;
        if (SpinForWork(lock)) continue;
        if (stop) return;
        sleeping = true;
        work_cv.wait(lock);
        sleeping = false;
        continue;
      }
      s->queue().ring.PopInto(c);
      lock.unlock();
      const Status st = c.traced ? ExecuteTraced(*s, c) : Execute(c);
      std::string error;
      if (!st.ok()) error = DescribeFailure(*s, c, st);
      c.Release();
      lock.lock();
      Stream::Queue& q = s->queue();
      if (!error.empty() && q.error.empty()) {
        q.error = std::move(error);
        q.error_seq = ++failures;
      }
      q.completed.fetch_add(1, std::memory_order_release);
      if (host_waiters > 0) done_cv.notify_all();
    }
  }

  // Moves out the stream's pending error. Caller holds mu.
  static std::string TakeError(Stream& s) {
    std::string e = std::move(s.queue().error);
    s.queue().error.clear();
    return e;
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
    EmitHostSpan(trace::RecordKind::kEventRecord, "event_record", stream.device_index(),
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
    EmitHostSpan(trace::RecordKind::kSynchronize, "event_synchronize", p->device_index,
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
    r.name = copy ? CommandKindName(c.info.kind) : "launch";
    r.start = trace::Ticks();
  }
  s.device().worker().Push(s, std::move(c));
  if (host) {
    r.end = trace::Ticks();
    trace::Emit(r);
  }
}
}  // namespace

void Stream::Launch(const KernelInfo& info, Task task) {
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
  c.info.name = CommandKindName(kind);
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
    EmitHostSpan(trace::RecordKind::kEventWait, "event_wait", device_index_, id_,
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
  std::lock_guard<std::mutex> lock(device_->worker().mu);
  return queue_->completed.load(std::memory_order_acquire) == queue_->enqueued;
}

void Stream::Synchronize() {
  const int64_t start = trace::Active() ? trace::Ticks() : 0;
  Device::Worker& w = device_->worker();
  std::string error;
  {
    std::unique_lock<std::mutex> lock(w.mu);
    const uint64_t target = queue_->enqueued;
    w.WaitUntil(lock,
                [&] { return queue_->completed.load(std::memory_order_acquire) >= target; });
    error = Device::Worker::TakeError(*this);
  }
  if (start != 0 && trace::Wants(trace::RecordKind::kSynchronize, device_index_, id_)) {
    EmitHostSpan(trace::RecordKind::kSynchronize, "stream_synchronize", device_index_, id_, start);
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
  {
    std::lock_guard<std::mutex> lock(worker_->mu);
    worker_->stop = true;  // the worker drains what can run, then exits
    worker_->epoch.fetch_add(1, std::memory_order_release);
  }
  worker_->work_cv.notify_one();
  worker_->thread.join();
}

Stream& Device::DefaultStream() { return *worker_->streams[0]; }

Stream& Device::GetStream(int id) {
  if (id < 0 || id > kStreamPoolSize) {
    throw InvalidArgument(fmt::format(
        "trn stream id {} is invalid on trn:{}: expected 0 (the default stream) to {}", id,
        index_, kStreamPoolSize));
  }
  std::lock_guard<std::mutex> lock(worker_->mu);
  if (worker_->streams[id] == nullptr) {
    throw InvalidArgument(fmt::format(
        "trn stream id {} does not exist on trn:{}: it was never handed out by NewStream() "
        "({} streams exist, default included)",
        id, index_, worker_->num_active));
  }
  return *worker_->streams[id];
}

Stream& Device::NewStream() {
  std::lock_guard<std::mutex> lock(worker_->mu);
  const int id = worker_->next_pool++ % kStreamPoolSize + 1;
  if (worker_->streams[id] == nullptr) return worker_->CreateStream(id);
  return *worker_->streams[id];
}

int Device::num_streams() const {
  std::lock_guard<std::mutex> lock(worker_->mu);
  return worker_->num_active;
}

void Device::WaitIdle() {
  Worker& w = *worker_;
  std::unique_lock<std::mutex> lock(w.mu);
  w.WaitUntil(lock, [&w] {
    for (int i = 0; i < w.num_active; ++i) {
      const Stream::Queue& q = w.active[i]->queue();
      if (q.completed.load(std::memory_order_acquire) < q.enqueued) return false;
    }
    return true;
  });
}

uint64_t Device::PendingCommands() const {
  std::lock_guard<std::mutex> lock(worker_->mu);
  uint64_t pending = 0;
  for (int i = 0; i < worker_->num_active; ++i) {
    const Stream::Queue& q = worker_->active[i]->queue();
    pending += q.enqueued - q.completed.load(std::memory_order_acquire);
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
    const int n = w.num_active;
    std::array<uint64_t, Worker::kMaxStreams> target;
    for (int i = 0; i < n; ++i) target[i] = w.active[i]->queue().enqueued;
    w.WaitUntil(lock, [&] {
      for (int i = 0; i < n; ++i) {
        if (w.active[i]->queue().completed.load(std::memory_order_acquire) < target[i]) {
          return false;
        }
      }
      return true;
    });
    uint64_t first_seq = UINT64_MAX;
    for (int i = 0; i < w.num_active; ++i) {
      Stream::Queue& q = w.active[i]->queue();
      if (q.error.empty()) continue;
      ++failed;
      const uint64_t seq = q.error_seq;
      std::string e = Worker::TakeError(*w.active[i]);
      if (seq < first_seq) {
        first_seq = seq;
        error = std::move(e);
      }
    }
  }
  if (start != 0 && trace::Wants(trace::RecordKind::kSynchronize, index_, -1)) {
    EmitHostSpan(trace::RecordKind::kSynchronize, "device_synchronize", index_, -1, start);
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

Runtime::Runtime() : impl_(std::make_unique<Impl>()) {
  const char* cores = std::getenv("TRN_VISIBLE_CORES");
  impl_->cores_spec = cores != nullptr ? cores : "0-1";
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

Device& Runtime::device(int index) {
  const int n = device_count();
  if (index < 0 || index >= n) {
    throw InvalidArgument(fmt::format(
        "trn device index {} is out of range: {} {} visible (TRN_VISIBLE_CORES={})", index, n,
        n == 1 ? "device is" : "devices are", impl_->cores_spec));
  }
  return *impl_->devices[index];
}

void Runtime::SynchronizeAll() {
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
  for (auto& d : impl_->devices) d->WaitIdle();
}

uint64_t Runtime::PendingCommandsAll() const {
  uint64_t pending = 0;
  for (const auto& d : impl_->devices) pending += d->PendingCommands();
  return pending;
}

// ---- Environment parsing ------------------------------------------------------

namespace {

constexpr int kMaxVisibleCores = 64;

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

std::vector<int> Runtime::ParseVisibleCores(const std::string& spec) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument(fmt::format(
        "TRN_VISIBLE_CORES='{}' is invalid: {}. Expected physical core ids and ascending "
        "ranges separated by commas, e.g. '0-1', '0,2', '3' or '0-1,4' (at most {} cores)",
        spec, why, kMaxVisibleCores));
  };
  std::vector<int> cores;
  std::string_view rest = spec;
  if (Trim(rest).empty()) throw fail("no cores listed");
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
    if (!ok) throw fail(fmt::format("'{}' is not a core id or a range like '0-3'", item));
    if (hi < lo) throw fail(fmt::format("range '{}' is descending", item));
    if (static_cast<int64_t>(hi) - lo + 1 + static_cast<int64_t>(cores.size()) >
        kMaxVisibleCores) {
      throw fail(fmt::format("more than {} cores", kMaxVisibleCores));
    }
    for (int c = lo; c <= hi; ++c) {
      if (std::find(cores.begin(), cores.end(), c) != cores.end()) {
        throw fail(fmt::format("core {} is listed twice", c));
      }
      cores.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return cores;
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
