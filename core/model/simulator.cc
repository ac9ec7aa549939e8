// Note [Simulator]
// One pass over the program in issue order. For instruction i:
//  1. Dependencies: each operand is a box (a partition range x a byte range of
//     its buffer; HBM tiles: an element range). i depends on the last writes
//     its reads overlap (RAW) and, if it writes, on every earlier access its
//     write overlaps (WAR, WAW). A write that covers earlier accesses replaces
//     them (later accesses reach them through it), and a read replaces the
//     same engine's earlier read of a box it covers (engines retire in order),
//     so the access lists stay short.
//  2. Ready time: the latest end of its dependencies plus a latency — a RAW on
//     the same engine waits dependent_latency_cycles, a dependency across
//     engines a semaphore (cross_engine_latency_cycles of the consumer), and a
//     DMA starts dma_trigger_latency_ns after its trigger. Same-engine WAR/WAW
//     cost nothing (in order).
//  3. Start: max(ready, the engine's free time); a compute instruction then
//     holds its engine for cost cycles / clock (cost.h). A dma_copy's rows go
//     to the DMA engines serving their partitions (8 each); each engine moves
//     its rows run by run (dma_chunk_overhead_ns + bytes / bandwidth per run),
//     and the copy ends when its last engine does. A DMA engine serves ready
//     copies, not the issue order (Note [DMA queues]).
//     The Tensor engine has two rows (Note [Tensor engine rows]).
//  4. With tensor_throttle, MultiplyMoving runs at 50 % speed ramping to 100 %
//     over tensor_throttle_ramp_ns of busy time; an idle gap of half the ramp
//     re-engages the limit.
//
// Note [DMA queues]
// A DMA engine has several hardware queues, so a copy waiting for its
// semaphore does not hold up a ready copy issued after it: the engine serves
// whatever is ready while it would otherwise idle. In the one pass: each
// engine keeps its idle gaps (the stretches before a copy that started later
// than the engine was free); a copy's rows on that engine go, from its ready
// time on and in order, as whole rows into the first gaps they fit, the rest
// after the engine's last row. So a copy's share may run in pieces (one
// DmaTransfer each), the engine switching copies between rows.
// Deterministic priority: the issue order. A copy never delays one issued
// before it (those were placed first), and copies ready at the same time run
// in issue order. The one idealisation: a row runs in a gap only if it ends
// before the earlier copy's reserved start; the hardware, not knowing when
// that semaphore fires, could delay the earlier copy by up to one row.
// Gaps shorter than dma_chunk_overhead_ns are dropped: no row fits them.
// Evidence: the hoisted matmul (docs/device_model.md) publishes DMA active
// 99.73 % while each m's 64 lhsT loads wait for the previous m's multiplies;
// in issue order the next rhs loads queued behind them (~22 us per m).
//
// Note [Tensor engine rows]
// Neuron Explorer draws the Tensor engine as two rows, Tensor (LoadStationary:
// weights into the PE array) and TensorMatrix (MultiplyMoving: the moving tile
// streams through them), and the reference says the load "can overlap". The
// PE array holds two weight sets: one multiplies while the next loads. The
// engine dispatches in order; when it dispatches multiply j it looks at the
// next load: if that load's inputs are ready it runs beside multiply j,
// otherwise the queue blocks on a semaphore, which drains the array, and the
// load runs after multiply j. A multiply starts once its weights are in.
// Tensor active is the union of both rows. Evidence, the matmul tutorial on
// trn2 (reference/neuroncore.md, nki_research.md 5.1):
//  - hoisted, blocked-free and fully blocked versions: Tensor 28.16 / 28.28 /
//    28.16 ms for 32,768 fp32 matmuls, i.e. 2,048 cycles each (27.96 ms) and
//    no load time: their stationaries sit in SBUF long before use;
//  - the basic version: 34.82 ms = 32,768 x (853 + 213 ns): every load waits
//    for its stationary's DMA, which lands during the previous multiply, and
//    it issues ~32.8 K more Tensor instructions (163,912 vs 131,655), one
//    per matmul: the semaphore wait. The 213 ns (M cycles x 4 for fp32) is
//    fitted on it (cost.cc).
// Matmuls accumulating into one PSUM tile pay no dependent latency (the
// adders sit on the array's output): the hoisted version's chains of 64 run
// at 859 ns per matmul against 853 by the formula.
#include "core/model/simulator.h"

#include <algorithm>
#include <limits>

#include "core/common/assert.h"
#include "core/isa/target.h"
#include "core/model/cost.h"

namespace trn::model {

using isa::Engine;
using isa::Memory;
using isa::Opcode;

const char* DepKindName(DepKind k) {
  switch (k) {
    case DepKind::kRaw:
      return "raw";
    case DepKind::kWar:
      return "war";
    case DepKind::kWaw:
      return "waw";
  }
  TRN_ASSERT(false, "unknown DepKind");
  return "";
}

namespace {

// What an operand touches. On-chip: a partition range x a byte range of its
// allocation. HBM: a block of rows x columns of a row-major view with `pitch`
// elements per row when the tile is one (pitch > 0), else an element range
// (rows [0, 1), pitch 0). Two HBM boxes of different pitches compare as
// element ranges: conservative, never a missed dependency.
struct Box {
  int64_t pitch;
  int64_t p0, p1;  // partitions / rows [p0, p1)
  int64_t b0, b1;  // bytes / columns / elements [b0, b1]
  int64_t First() const { return p0 * pitch + b0; }
  int64_t Last() const { return (p1 - 1) * pitch + b1; }
  bool Overlaps(const Box& o) const {
    if (pitch == o.pitch) return p0 < o.p1 && o.p0 < p1 && b0 <= o.b1 && o.b0 <= b1;
    return First() <= o.Last() && o.First() <= Last();
  }
  bool Covers(const Box& o) const {
    if (pitch == o.pitch) return p0 <= o.p0 && o.p1 <= p1 && b0 <= o.b0 && o.b1 <= b1;
    return pitch == 0 && p1 == 1 && b0 <= o.First() && o.Last() <= b1;
  }
};

[[gnu::always_inline]] inline Box BoxOf(const isa::Tile& t) {
  int64_t last = t.offset;
  for (int d = 0; d < t.ndim; ++d) last += (t.sizes[d] - 1) * t.strides[d];
  if (t.memory != Memory::kHbm) {
    const int64_t item = static_cast<int64_t>(ItemSize(t.dtype));
    return {-1, t.partition_start, t.partition_start + t.partitions, t.offset * item,
            (last + 1) * item - 1};
  }
  const int64_t pitch = t.partition_stride;
  const int64_t width = last - t.offset;  // columns spanned within a row, minus one
  if (pitch > 0 && t.offset % pitch + width < pitch) {
    const int64_t row = t.offset / pitch, col = t.offset % pitch;
    return {pitch, row, row + t.partitions, col, col + width};
  }
  return {0, 0, 1, t.offset, last + (t.partitions - 1) * t.partition_stride};
}

struct Access {
  Box box;
  uint32_t instruction;
  Engine engine;
};

// The dependency rules of Note [Simulator], step 1. Reads and writes of a
// buffer are kept apart: a read scans only the writes, a write both.
class Tracker {
 public:
  explicit Tracker(const isa::Executable& exe)
      : hbm_(exe.tensors.size()), chip_(exe.allocations.size()) {}

  // Calls dep(producer, kind) for each dependency of instruction i's access
  // to tile t, whose box is `box` (BoxOf(t)).
  template <typename F>
  void Read(const isa::Tile& t, const Box& box, uint32_t i, Engine e, F&& dep) {
    Lists& l = ListsOf(t);
    for (const Access& a : l.writes) {
      if (a.box.Overlaps(box)) dep(a.instruction, DepKind::kRaw);
    }
    // The same engine re-reading what it read last: one record is enough.
    if (!l.reads.empty() && l.reads.back().engine == e && box.Covers(l.reads.back().box)) {
      l.reads.back() = {box, i, e};
    } else {
      l.reads.push_back({box, i, e});
    }
  }
  template <typename F>
  void Write(const isa::Tile& t, const Box& box, uint32_t i, Engine e, F&& dep) {
    Lists& l = ListsOf(t);
    // One pass per list: report the dependencies, drop what the write covers.
    size_t kept = 0;
    for (size_t k = 0; k < l.writes.size(); ++k) {
      const Access& a = l.writes[k];
      if (a.box.Overlaps(box)) dep(a.instruction, DepKind::kWaw);
      if (!box.Covers(a.box)) l.writes[kept++] = a;
    }
    l.writes.resize(kept);
    kept = 0;
    for (size_t k = 0; k < l.reads.size(); ++k) {
      const Access& a = l.reads[k];
      if (a.instruction != i && a.box.Overlaps(box)) dep(a.instruction, DepKind::kWar);
      if (!box.Covers(a.box)) l.reads[kept++] = a;
    }
    l.reads.resize(kept);
    l.writes.push_back({box, i, e});
  }

 private:
  struct Lists {
    std::vector<Access> reads, writes;
  };
  Lists& ListsOf(const isa::Tile& t) {
    return t.memory == Memory::kHbm ? hbm_[t.buffer] : chip_[t.buffer];
  }
  std::vector<Lists> hbm_, chip_;
};

class Simulator {
 public:
  Simulator(const isa::Executable& exe, const SimOptions& o, Timeline* out)
      : exe_(exe),
        spec_(isa::Spec(exe.target)),
        options_(o),
        t_(*out),
        tracker_(exe),
        ns_per_byte_(1.0 / spec_.dma_engine_bytes_per_ns),
        min_gap_(std::max(spec_.timing.dma_chunk_overhead_ns,
                          std::numeric_limits<double>::denorm_min())) {
    std::fill(std::begin(dma_gaps_end_), std::end(dma_gaps_end_), -1e300);
    for (int e = 0; e < isa::kNumEngines; ++e) {
      ns_per_cycle_[e] = 1.0 / EngineGhz(static_cast<Engine>(e), spec_);
    }
  }

  Status Run() {
    const size_t n = exe_.instructions.size();
    isa::Validator validator(exe_);
    if (Status s = validator.CheckTables(); !s.ok()) return s;
    Reset();
    t_.start_ns.resize(n);
    t_.end_ns.resize(n);
    engine_of_.resize(n);
    first_.assign(exe_.allocations.size(), 1e300);
    last_.assign(exe_.allocations.size(), -1);
    spans_.clear();
    // One pass: instructions are large (three tiles), so every extra walk over
    // them is a walk through memory.
    for (uint32_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) Prefetch(exe_.instructions[i + kPrefetchAhead]);
      if (Status s = validator.CheckInstruction(i); !s.ok()) return s;
      engine_of_[i] = exe_.instructions[i].engine;
      Issue(i);
      Touch(exe_.instructions[i], t_.start_ns[i], t_.end_ns[i]);
      t_.total_ns = std::max(t_.total_ns, t_.end_ns[i]);
    }
    Finish();
    return Status::Ok();
  }

 private:
  // An instruction spans 6 cache lines and the validator's first look at one
  // was the simulator's hottest load: fetch them a few instructions ahead.
  static constexpr uint32_t kPrefetchAhead = 4;
  static void Prefetch(const isa::Instruction& ins) {
    const char* p = reinterpret_cast<const char*>(&ins);
    for (size_t b = 0; b < sizeof(isa::Instruction); b += 64) __builtin_prefetch(p + b);
  }

  // A fresh timeline that keeps the vectors' capacity (a re-simulation
  // allocates nothing).
  void Reset() {
    Timeline fresh;
    std::swap(fresh.start_ns, t_.start_ns);
    std::swap(fresh.end_ns, t_.end_ns);
    std::swap(fresh.transfers, t_.transfers);
    std::swap(fresh.dependencies, t_.dependencies);
    std::swap(fresh.occupancy, t_.occupancy);
    fresh.start_ns.clear();
    fresh.end_ns.clear();
    fresh.transfers.clear();
    fresh.dependencies.clear();
    fresh.occupancy.clear();
    t_ = std::move(fresh);
  }

  // Latency between producer p's end and consumer i's start.
  double Latency(uint32_t p, Engine consumer, DepKind kind) const {
    const Engine producer = engine_of_[p];  // not exe_.instructions[p]: a cache miss
    if (consumer == Engine::kDma) return 0;  // the trigger latency is added once
    const double ns_per_cycle = ns_per_cycle_[static_cast<int>(consumer)];
    if (producer != consumer) return spec_.timing.cross_engine_latency_cycles * ns_per_cycle;
    if (consumer == Engine::kTensor) return 0.0;  // Note [Tensor engine rows]
    return kind == DepKind::kRaw ? spec_.timing.dependent_latency_cycles * ns_per_cycle : 0.0;
  }

  double Ready(uint32_t i) {
    const isa::Instruction& ins = exe_.instructions[i];
    const isa::Operands io = isa::OperandsOf(ins);
    double ready = 0;
    const auto dep = [&](uint32_t p, DepKind kind) {
      ready = std::max(ready, t_.end_ns[p] + Latency(p, ins.engine, kind));
      if (options_.record_dependencies) t_.dependencies.push_back({p, i, kind});
    };
    const Box dst = io.reads_dst || io.writes_dst ? BoxOf(ins.dst) : Box{};
    const Box src1 = io.reads_src1 || io.writes_src1 ? BoxOf(ins.src1) : Box{};
    if (io.reads_src0) tracker_.Read(ins.src0, BoxOf(ins.src0), i, ins.engine, dep);
    if (io.reads_src1) tracker_.Read(ins.src1, src1, i, ins.engine, dep);
    if (io.reads_dst) tracker_.Read(ins.dst, dst, i, ins.engine, dep);
    if (io.writes_dst) tracker_.Write(ins.dst, dst, i, ins.engine, dep);
    if (io.writes_src1) tracker_.Write(ins.src1, src1, i, ins.engine, dep);
    // The stationary operand a MultiplyMoving multiplies is the one the Tensor
    // engine loaded last: in order on the same engine, no extra dependency.
    if (ins.engine == Engine::kDma) ready += spec_.timing.dma_trigger_latency_ns;
    return ready;
  }

  // An allocation is held from its first access's start to its last access's end.
  void Touch(const isa::Instruction& ins, double start, double end) {
    const isa::Operands io = isa::OperandsOf(ins);
    const isa::Tile* tiles[] = {io.writes_dst || io.reads_dst ? &ins.dst : nullptr,
                                io.reads_src0 ? &ins.src0 : nullptr,
                                io.reads_src1 || io.writes_src1 ? &ins.src1 : nullptr};
    for (const isa::Tile* t : tiles) {
      if (t == nullptr || t->memory == Memory::kHbm) continue;
      first_[t->buffer] = std::min(first_[t->buffer], start);
      last_[t->buffer] = std::max(last_[t->buffer], end);
    }
  }

  void Issue(uint32_t i) {
    const isa::Instruction& ins = exe_.instructions[i];
    const double ready = Ready(i);
    const int e = static_cast<int>(ins.engine);
    if (ins.engine == Engine::kDma) {
      IssueDma(i, ready);
      return;
    }
    const Cost cost = ComputeCost(ins, spec_);
    double dur = cost.cycles * ns_per_cycle_[e];
    double start = std::max(ready, engine_free_[e]);
    if (ins.engine == Engine::kTensor) start = TensorStart(ins.opcode, ready);
    if (options_.tensor_throttle && ins.opcode == Opcode::kMultiplyMoving) {
      if (start - tensor_.multiply_free > spec_.timing.tensor_throttle_ramp_ns / 2) warm_ns_ = 0;
      const double speed =
          0.5 + 0.5 * std::min(1.0, warm_ns_ / spec_.timing.tensor_throttle_ramp_ns);
      dur /= speed;
      warm_ns_ += dur;
    }
    const double end = start + dur;
    t_.start_ns[i] = start;
    t_.end_ns[i] = end;
    engine_free_[e] = end;
    if (ins.engine == Engine::kTensor) {
      TensorRetire(ins.opcode, start, end);
    } else {
      t_.engine_active_ns[e] += dur;
    }
    t_.instruction_counts[e] += cost.hw_instructions;
    t_.tensor_flops += cost.flops;
    if (ins.opcode == Opcode::kMultiplyMoving) t_.useful_flops += cost.flops;
    if (ins.opcode == Opcode::kTranspose) t_.transpose_flops += cost.flops;
  }

  // When a Tensor-engine instruction may start (Note [Tensor engine rows]).
  double TensorStart(Opcode op, double ready) const {
    const TensorRows& r = tensor_;
    switch (op) {
      case Opcode::kLoadStationary: {
        // Beside the running multiply if its data was there when that multiply
        // was dispatched, else after it.
        const double beside = ready <= r.multiply_start ? r.multiply_start : r.multiply_free;
        return std::max({ready, r.load_free, beside});
      }
      case Opcode::kMultiplyMoving:
        return std::max({ready, r.multiply_free, r.load_free});  // its weights are in
      default:  // a transpose streams through the whole array
        return std::max({ready, r.load_free, r.multiply_free});
    }
  }

  void TensorRetire(Opcode op, double start, double end) {
    TensorRows& r = tensor_;
    if (op == Opcode::kLoadStationary) {
      r.load_free = end;
    } else if (op == Opcode::kMultiplyMoving) {
      r.multiply_start = start;
      r.multiply_free = end;
    } else {
      r.load_free = r.multiply_free = r.multiply_start = end;
    }
    // Tensor active: the union of both rows' busy time. Starts never go back
    // (a load starts no earlier than the multiply before it, a multiply after
    // its load), so a watermark merges them.
    t_.engine_active_ns[static_cast<int>(Engine::kTensor)] +=
        std::max(0.0, end - std::max(start, r.covered));
    r.covered = std::max(r.covered, end);
  }

  // Not inlined: inside Issue its loop ran out of registers and spilled.
  [[gnu::noinline]] void IssueDma(uint32_t i, double ready) {
    const isa::Instruction& ins = exe_.instructions[i];
    TRN_ASSERT(spec_.dma_queues == kDmaEngines, "a core has 16 DMA engines");
    const DmaRows rows = PlanDma(ins, exe_);
    const double row_ns =
        rows.runs_per_row * spec_.timing.dma_chunk_overhead_ns + rows.row_bytes * ns_per_byte_;
    // One group of rows per DMA engine; no division in the loop (it ran 16
    // times per copy and was the simulator's hottest line).
    static_assert((kDmaEngines & (kDmaEngines - 1)) == 0, "a power of two");
    const int per = spec_.timing.dma_partitions_per_engine;
    const bool record = options_.record_transfers;
    const int end_row = rows.first + rows.partitions;
    double start = 1e300, end = ready;
    int p = rows.first;
    const double min_gap = min_gap_;  // a local: the transfer stores might alias a member
    // No integer division for the usual copy, which starts at partition 0.
    for (int g = rows.first < per ? 0 : rows.first / per; p < end_row; ++g) {
      const int group_end = std::min((g + 1) * per, end_row);
      const int q = g & (kDmaEngines - 1);
      int n = group_end - p;
      p = group_end;
      if (ready < dma_gaps_end_[q]) [[unlikely]] {
        const Placed in_gaps = FillGaps(q, n, row_ns, ready, i, rows);
        start = in_gaps.start < start ? in_gaps.start : start;
        end = in_gaps.end > end ? in_gaps.end : end;
        n = in_gaps.rows_left;
        if (n == 0) continue;
      }
      // After the engine's last row (Note [DMA queues]).
      const double free = dma_free_[q];
      const double s = ready > free ? ready : free;
      if (s - free >= min_gap) [[unlikely]] {
        dma_gaps_[q].push_back({free, s});
        dma_gaps_end_[q] = s;
      }
      const double e = s + n * row_ns;
      dma_free_[q] = e;
      start = s < start ? s : start;
      end = e > end ? e : end;
      if (record) {
        t_.transfers.push_back(
            {i, static_cast<uint8_t>(q), n * rows.row_bytes, n * rows.runs_per_row, s, e});
      }
    }
    const int64_t bytes = rows.row_bytes * rows.partitions;
    AddSpan(std::min(start, end), end);
    t_.start_ns[i] = std::min(start, end);
    t_.end_ns[i] = end;
    t_.instruction_counts[static_cast<int>(Engine::kDma)] += 1;
    t_.dma_count += 1;
    t_.dma_bytes += bytes;
    if (ins.dst.memory == Memory::kHbm || ins.src0.memory == Memory::kHbm) t_.hbm_bytes += bytes;
  }

  // An idle stretch of a DMA engine before its last row (Note [DMA queues]).
  struct Gap {
    double start, end;
  };
  struct Placed {
    int rows_left;
    double start, end;  // of the rows placed (start > end: none)
  };

  // Places what fits of n rows of copy i, row_ns each, into DMA engine q's
  // gaps from `ready` on (Note [DMA queues]): whole rows, in the first gaps
  // they fit; returns the rows left for after the engine's last row.
  [[gnu::noinline]] Placed FillGaps(int q, int n, double row_ns, double ready, uint32_t i,
                                    const DmaRows& rows) {
    std::vector<Gap>& gaps = dma_gaps_[q];
    Placed placed{n, 1e300, -1e300};
    // The first gap ending after `ready`; gaps are disjoint, so ends are sorted.
    // It is usually among the last few: walk back, then bisect what is left.
    size_t k = gaps.size();
    for (int steps = 0; k > 0 && gaps[k - 1].end > ready; --k) {
      if (++steps == 8) {
        k = static_cast<size_t>(
            std::partition_point(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(k),
                                 [ready](const Gap& g) { return g.end <= ready; }) -
            gaps.begin());
        break;
      }
    }
    while (n > 0 && k < gaps.size()) {
      const Gap g = gaps[k];
      const double s = std::max(g.start, ready);
      int fit = static_cast<int>(std::min<double>(n, (g.end - s) / row_ns));
      while (fit > 0 && s + fit * row_ns > g.end) --fit;  // rounding
      if (fit == 0) {
        ++k;
        continue;
      }
      const double e = s + fit * row_ns;
      placed.start = std::min(placed.start, s);
      placed.end = std::max(placed.end, e);
      if (options_.record_transfers) {
        t_.transfers.push_back(
            {i, static_cast<uint8_t>(q), fit * rows.row_bytes, fit * rows.runs_per_row, s, e});
      }
      n -= fit;
      // What is left of the gap: before s (ready fell inside it) and after e.
      const bool before = s - g.start >= min_gap_;
      const bool after = g.end - e >= min_gap_;
      if (before && after) {
        gaps[k].end = s;
        gaps.insert(gaps.begin() + static_cast<std::ptrdiff_t>(k) + 1, {e, g.end});
        k += 1;
      } else if (before) {
        gaps[k].end = s;
        k += 1;
      } else if (after) {
        gaps[k].start = e;
      } else {
        gaps.erase(gaps.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    dma_gaps_end_[q] = gaps.empty() ? -1e300 : gaps.back().end;
    placed.rows_left = n;
    return placed;
  }

  // DMA active time: the union of the dma_copy instructions' spans, kept as
  // disjoint sorted intervals. A copy's span overlaps the last few (copies
  // start roughly in issue order), so this walks a short tail, not a sort.
  void AddSpan(double s, double e) {
    std::vector<std::pair<double, double>>& v = spans_;
    size_t k = v.size();
    while (k > 0 && v[k - 1].second >= s) --k;  // v[k..] end at or after s
    size_t j = k;
    while (j < v.size() && v[j].first <= e) ++j;  // v[k..j) overlap [s, e]
    if (j == k) {
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(k), {s, e});
      return;
    }
    v[k] = {std::min(s, v[k].first), std::max(e, v[j - 1].second)};
    v.erase(v.begin() + static_cast<std::ptrdiff_t>(k) + 1, v.begin() + static_cast<std::ptrdiff_t>(j));
  }

  void Finish() {
    double active = 0;
    for (const auto& [s, e] : spans_) {
      if (e > s) active += e - s;
    }
    t_.engine_active_ns[static_cast<int>(Engine::kDma)] = active;
    Occupancy();
  }

  // SBUF/PSUM held over time, from each allocation's first and last access (Touch).
  void Occupancy() {
    const size_t na = exe_.allocations.size();
    const std::vector<double>& first = first_;
    const std::vector<double>& last = last_;
    struct Event {
      double t;
      int64_t sbuf, psum;
    };
    std::vector<Event> events;
    for (size_t a = 0; a < na; ++a) {
      if (last[a] < 0) continue;
      const isa::Allocation& al = exe_.allocations[a];
      const int64_t bytes = al.bytes * al.partitions;
      const bool sbuf = al.memory == Memory::kSbuf;
      events.push_back({first[a], sbuf ? bytes : 0, sbuf ? 0 : bytes});
      events.push_back({last[a], sbuf ? -bytes : 0, sbuf ? 0 : -bytes});
    }
    std::sort(events.begin(), events.end(),
              [](const Event& x, const Event& y) { return x.t < y.t; });
    int64_t sbuf = 0, psum = 0;
    for (size_t k = 0; k < events.size();) {
      const double t = events[k].t;
      for (; k < events.size() && events[k].t == t; ++k) {
        sbuf += events[k].sbuf;
        psum += events[k].psum;
      }
      t_.occupancy.push_back({t, sbuf, psum});
    }
  }

  const isa::Executable& exe_;
  const isa::TargetSpec& spec_;
  const SimOptions& options_;
  Timeline& t_;
  Tracker tracker_;
  double engine_free_[isa::kNumEngines] = {};
  // The Tensor engine's two rows (Note [Tensor engine rows]).
  struct TensorRows {
    double load_free = 0;        // the LoadStationary row: its last load's end
    double multiply_start = -1;  // the MultiplyMoving row: its last multiply's dispatch
    double multiply_free = 0;    // ... and end
    double covered = 0;          // Tensor busy time counted up to here
  } tensor_;
  // Per DMA engine (Note [DMA queues]): idle from dma_free_ on, its gaps
  // before that, and the last gap's end (-1e300: none), so that a copy ready
  // after every gap, the common case, reads two arrays and no vector.
  double dma_free_[kDmaEngines] = {};
  double dma_gaps_end_[kDmaEngines];
  std::vector<Gap> dma_gaps_[kDmaEngines];
  double warm_ns_ = 0;
  const double ns_per_byte_;
  // Gaps shorter than this hold no row (a row costs at least one run's overhead).
  const double min_gap_;
  double ns_per_cycle_[isa::kNumEngines];
  std::vector<std::pair<double, double>> spans_;  // their union so far, AddSpan()
  std::vector<double> first_, last_;              // per allocation, Touch()
  std::vector<Engine> engine_of_;                 // per instruction
};

}  // namespace

Status Simulate(const isa::Executable& exe, const SimOptions& options, Timeline* out) {
  Status s = Simulator(exe, options, out).Run();
  if (!s.ok()) *out = Timeline{};  // no partial timeline of an invalid program
  return s;
}

Metrics ComputeMetrics(const isa::Executable& exe, const Timeline& t) {
  const isa::TargetSpec& spec = isa::Spec(exe.target);
  Metrics m;
  const double seconds = t.total_ns * 1e-9;
  if (seconds > 0) {
    m.hfu = t.tensor_flops / (spec.tensor_peak_flops * seconds);
    m.mfu = t.useful_flops / (spec.tensor_peak_flops * seconds);
    m.mbu = static_cast<double>(t.hbm_bytes) / seconds / (spec.hbm_peak_gb_s * 1e9);
  }
  m.ridge_point = spec.tensor_peak_flops / (spec.hbm_peak_gb_s * 1e9);
  m.arithmetic_intensity = t.hbm_bytes > 0 ? t.tensor_flops / t.hbm_bytes : 0;
  m.memory_bound = m.arithmetic_intensity < m.ridge_point;
  m.average_dma_bytes = t.dma_count > 0 ? static_cast<double>(t.dma_bytes) / t.dma_count : 0;
  return m;
}

}  // namespace trn::model
