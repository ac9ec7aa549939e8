// Tracer buffers, sessions and clock calibration. See Note [Tracer hot path].
#include "core/trace/trace.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "core/common/assert.h"

namespace trn::trace {

namespace detail {
std::atomic<bool> g_active{false};
std::atomic<uint32_t> g_modes{0};
std::atomic<uint64_t> g_device_mask{0};
std::atomic<uint64_t> g_stream_mask{0};
}  // namespace detail

bool IsDeviceSide(RecordKind k) { return k == RecordKind::kKernel || k == RecordKind::kCopy; }

uint32_t ModeOf(RecordKind k) {
  switch (k) {
    case RecordKind::kKernel:
    case RecordKind::kCopy: return kModeDevice;
    case RecordKind::kAlloc:
    case RecordKind::kFree: return kModeMemory;
    default: return kModeRuntime;
  }
}

int64_t WallNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace {

// ---- Clock calibration ----------------------------------------------------------
// A (ticks, ns) pair read as close together as we can: the smallest of a few
// tick brackets around clock_gettime.
struct ClockPair {
  int64_t ticks = 0;
  int64_t ns = 0;
};

ClockPair ReadPair() {
  ClockPair best;
  int64_t best_gap = INT64_MAX;
  for (int i = 0; i < 7; ++i) {
    int64_t t0 = Ticks();
    int64_t ns = WallNs();
    int64_t t1 = Ticks();
    if (t1 - t0 < best_gap) {
      best_gap = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

// Slope from the process's first pair to the latest; offset from the latest.
// A long baseline makes the slope accurate without sleeping to calibrate.
struct Calibration {
  std::mutex mu;
  ClockPair first = ReadPair();
  ClockPair last = first;
  double ns_per_tick = 0;

  void Update() {
    std::lock_guard<std::mutex> lock(mu);
    last = ReadPair();
    int64_t dt = last.ticks - first.ticks;
    if (dt > 0 && last.ns - first.ns > 1'000'000) {  // >= 1 ms baseline
      ns_per_tick = static_cast<double>(last.ns - first.ns) / static_cast<double>(dt);
    } else if (ns_per_tick == 0) {
      // Too short a baseline: measure over 2 ms once.
      ClockPair a = ReadPair();
      timespec req{0, 2'000'000};
      nanosleep(&req, nullptr);
      ClockPair b = ReadPair();
      ns_per_tick = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks);
      last = b;
    }
  }
  struct Map {
    ClockPair at;
    double ns_per_tick;
    int64_t operator()(int64_t ticks) const {
      return at.ns + static_cast<int64_t>(static_cast<double>(ticks - at.ticks) * ns_per_tick);
    }
  };
  Map Snapshot() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (ns_per_tick != 0) return {last, ns_per_tick};
    }
    Update();
    std::lock_guard<std::mutex> lock(mu);
    return {last, ns_per_tick};
  }
};

Calibration& Clock() {
  static Calibration* c = new Calibration();  // leaked: used from exiting threads
  return *c;
}

// ---- Buffers ----------------------------------------------------------------------
constexpr uint32_t kChunkRecords = 2048;  // 256 KiB

// A chunk is written by one thread at a time; `committed` publishes records.
struct Chunk {
  Record records[kChunkRecords];
  std::atomic<uint32_t> committed{0};
};

// Owns every chunk ever made (reused across sessions, never freed) and the
// list handed out in the current session. Threads lock it only for a chunk.
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Chunk>> all;
  std::vector<Chunk*> free_list;
  std::vector<Chunk*> in_use;
  std::atomic<uint64_t> generation{1};
  Config config;
  int64_t start_ns = 0;
  int64_t stop_ns = 0;
  bool open = false;
  std::atomic<uint64_t> count[kMaxDevices] = {};
  std::atomic<uint64_t> dropped[kMaxDevices] = {};
  std::atomic<uint64_t> max_per_device{0};

  Chunk* TakeChunk() {
    std::lock_guard<std::mutex> lock(mu);
    Chunk* c;
    if (!free_list.empty()) {
      c = free_list.back();
      free_list.pop_back();
    } else {
      all.push_back(std::make_unique<Chunk>());
      c = all.back().get();
    }
    c->committed.store(0, std::memory_order_relaxed);
    in_use.push_back(c);
    return c;
  }
};

Registry& Reg() {
  static Registry* r = new Registry();  // leaked: worker threads may outlive statics
  return *r;
}

struct ThreadState {
  Chunk* chunk = nullptr;
  uint64_t generation = 0;
  int64_t tid = 0;
  uint64_t corr_stack[64] = {};
  int corr_depth = 0;
};
thread_local ThreadState t_state;

std::atomic<uint64_t> g_launch_ids{0};

}  // namespace

bool Start(const Config& config) {
  Registry& r = Reg();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.open) return false;
    r.open = true;
    r.config = config;
    r.in_use.clear();
    for (int d = 0; d < kMaxDevices; ++d) {
      r.count[d].store(0, std::memory_order_relaxed);
      r.dropped[d].store(0, std::memory_order_relaxed);
    }
    r.max_per_device.store(config.max_events_per_core, std::memory_order_relaxed);
    r.generation.fetch_add(1, std::memory_order_relaxed);
  }
  Clock().Update();
  r.start_ns = WallNs();
  detail::g_modes.store(config.modes, std::memory_order_relaxed);
  detail::g_device_mask.store(config.device_mask, std::memory_order_relaxed);
  detail::g_stream_mask.store(config.stream_mask, std::memory_order_relaxed);
  detail::g_active.store(true, std::memory_order_release);
  return true;
}

void Stop() {
  detail::g_active.store(false, std::memory_order_release);
  Reg().stop_ns = WallNs();
  Clock().Update();
}

bool SessionOpen() {
  Registry& r = Reg();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.open;
}

Collected Collect() {
  Registry& r = Reg();
  Collected out;
  std::lock_guard<std::mutex> lock(r.mu);
  out.config = r.config;
  out.start_ns = r.start_ns;
  out.stop_ns = r.stop_ns;
  size_t total = 0;
  for (Chunk* c : r.in_use) total += c->committed.load(std::memory_order_acquire);
  out.records.reserve(total);
  for (Chunk* c : r.in_use) {
    uint32_t n = c->committed.load(std::memory_order_acquire);
    out.records.insert(out.records.end(), c->records, c->records + n);
  }
  // Chunks go back to the pool; a new generation makes threads drop theirs.
  for (Chunk* c : r.in_use) r.free_list.push_back(c);
  r.in_use.clear();
  r.generation.fetch_add(1, std::memory_order_relaxed);
  r.open = false;
  out.dropped_per_device.resize(kMaxDevices);
  for (int d = 0; d < kMaxDevices; ++d) {
    out.dropped_per_device[d] = r.dropped[d].load(std::memory_order_relaxed);
    out.dropped_total += out.dropped_per_device[d];
  }
  Calibration::Map to_ns = Clock().Snapshot();
  for (Record& rec : out.records) {
    rec.start = to_ns(rec.start);
    rec.end = to_ns(rec.end);
  }
  std::stable_sort(out.records.begin(), out.records.end(),
                   [](const Record& a, const Record& b) { return a.start < b.start; });
  return out;
}

void Emit(const Record& record) {
  Registry& r = Reg();
  int d = record.device;
  TRN_ASSERT(d >= 0 && d < kMaxDevices, "trace record without a valid device");
  if (r.count[d].fetch_add(1, std::memory_order_relaxed) >=
      r.max_per_device.load(std::memory_order_relaxed)) {
    r.dropped[d].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadState& t = t_state;
  uint64_t gen = r.generation.load(std::memory_order_relaxed);
  Chunk* c = t.chunk;
  uint32_t n = c ? c->committed.load(std::memory_order_relaxed) : 0;
  if (c == nullptr || t.generation != gen || n == kChunkRecords) {
    if (!Active()) return;  // the session ended while we were here
    c = r.TakeChunk();
    t.chunk = c;
    t.generation = gen;
    n = 0;
  }
  if (t.tid == 0) t.tid = static_cast<int64_t>(syscall(SYS_gettid));
  Record& slot = c->records[n];
  slot = record;
  slot.tid = t.tid;
  c->committed.store(n + 1, std::memory_order_release);
}

uint64_t NextLaunchId() { return g_launch_ids.fetch_add(1, std::memory_order_relaxed) + 1; }

void PushCorrelation(uint64_t id) {
  ThreadState& t = t_state;
  if (t.corr_depth < 64) t.corr_stack[t.corr_depth] = id;
  ++t.corr_depth;
}

void PopCorrelation() {
  ThreadState& t = t_state;
  if (t.corr_depth > 0) --t.corr_depth;
}

uint64_t CurrentCorrelation() {
  const ThreadState& t = t_state;
  if (t.corr_depth == 0) return 0;
  return t.corr_stack[std::min(t.corr_depth, 64) - 1];
}

int64_t TicksToNs(int64_t ticks) { return Clock().Snapshot()(ticks); }

}  // namespace trn::trace
