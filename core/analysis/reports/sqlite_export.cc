#include "core/analysis/reports/sqlite_export.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdio>
#include <memory>

namespace trn::analysis {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE lanes(id INTEGER PRIMARY KEY, name TEXT, kind TEXT, pid TEXT, tid TEXT);
CREATE TABLE ops(id INTEGER PRIMARY KEY, name TEXT, kind TEXT, lane_id INTEGER, start_ns INTEGER,
  dur_ns INTEGER, self_ns INTEGER, depth INTEGER, parent_id INTEGER, external_id INTEGER,
  correlation INTEGER, device_self_ns INTEGER, device_total_ns INTEGER, input_dims TEXT,
  input_types TEXT);
CREATE TABLE kernels(id INTEGER PRIMARY KEY, name TEXT, kind TEXT, lane_id INTEGER,
  start_ns INTEGER, dur_ns INTEGER, correlation INTEGER, external_id INTEGER, op_id INTEGER,
  op_name TEXT, link TEXT, flops INTEGER, bytes_read INTEGER, bytes_written INTEGER);
CREATE TABLE flows(id INTEGER PRIMARY KEY, cat TEXT, flow_id INTEGER, from_id INTEGER,
  to_id INTEGER, from_ts_ns INTEGER, to_ts_ns INTEGER);
CREATE TABLE counters(name TEXT, pid TEXT, ts_ns INTEGER, value REAL);
CREATE TABLE metadata(key TEXT PRIMARY KEY, value TEXT);
CREATE INDEX ops_name ON ops(name);
CREATE INDEX kernels_op ON kernels(op_id);
)sql";

// One database connection plus its prepared statements; one thread.
class Db {
 public:
  ~Db() {
    for (sqlite3_stmt* s : stmts_) sqlite3_finalize(s);
    if (db_) sqlite3_close(db_);
  }
  bool Open(const std::string& path) {
    std::remove(path.c_str());
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) return Fail("open");
    return Exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;") && Exec(kSchema) &&
           Exec("BEGIN");
  }
  bool Exec(const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      error = msg ? msg : "sqlite error";
      sqlite3_free(msg);
      return false;
    }
    return true;
  }
  sqlite3_stmt* Prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
      Fail("prepare");
      return nullptr;
    }
    stmts_.push_back(s);
    return s;
  }
  bool Step(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE || Fail("insert");
  }
  bool Fail(const char* what) {
    error = fmt::format("{}: {}", what, db_ ? sqlite3_errmsg(db_) : "out of memory");
    return false;
  }
  std::string error;

 private:
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> stmts_;
};

void Text(sqlite3_stmt* s, int i, std::string_view v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
void Int(sqlite3_stmt* s, int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
void IdOrNull(sqlite3_stmt* s, int i, uint32_t v) {
  if (v == kNone) sqlite3_bind_null(s, i);
  else sqlite3_bind_int64(s, i, v);
}
void TextOrNull(sqlite3_stmt* s, int i, std::string_view v) {
  if (v.empty()) sqlite3_bind_null(s, i);
  else Text(s, i, v);
}

}  // namespace

bool ExportSqlite(const TraceModel& m, const Summary& s, const std::string& db_path,
                  std::string* error) {
  Db db;
  auto fail = [&]() {
    *error = fmt::format("cannot write SQLite database '{}': {}", db_path, db.error);
    return false;
  };
  if (!db.Open(db_path)) return fail();
  sqlite3_stmt* lane = db.Prepare("INSERT INTO lanes VALUES(?,?,?,?,?)");
  sqlite3_stmt* op = db.Prepare("INSERT INTO ops VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  sqlite3_stmt* kern = db.Prepare("INSERT INTO kernels VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  sqlite3_stmt* flow = db.Prepare("INSERT INTO flows VALUES(?,?,?,?,?,?,?)");
  sqlite3_stmt* ctr = db.Prepare("INSERT INTO counters VALUES(?,?,?,?)");
  sqlite3_stmt* meta = db.Prepare("INSERT OR REPLACE INTO metadata VALUES(?,?)");
  if (!lane || !op || !kern || !flow || !ctr || !meta) return fail();
  for (size_t i = 0; i < m.lanes.size(); ++i) {
    const Lane& l = m.lanes[i];
    Int(lane, 1, static_cast<int64_t>(i));
    Text(lane, 2, l.name);
    Text(lane, 3, l.kind == LaneKind::kCpu ? "cpu" : "device");
    Text(lane, 4, l.pid);
    Text(lane, 5, l.tid);
    if (!db.Step(lane)) return fail();
  }
  for (uint32_t i = 0; i < m.slices.size(); ++i) {
    const Slice& x = m.slices[i];
    if (!x.on_device()) {
      Int(op, 1, i);
      Text(op, 2, m.Name(x));
      Text(op, 3, SliceKindName(x.kind));
      Int(op, 4, x.lane);
      Int(op, 5, x.start_ns);
      Int(op, 6, x.dur_ns);
      Int(op, 7, x.self_ns);
      Int(op, 8, x.depth);
      IdOrNull(op, 9, x.parent);
      Int(op, 10, static_cast<int64_t>(x.external_id));
      Int(op, 11, static_cast<int64_t>(x.correlation));
      Int(op, 12, x.device_self_ns);
      Int(op, 13, x.device_total_ns);
      TextOrNull(op, 14, m.Str(x.input_dims));
      TextOrNull(op, 15, m.Str(x.input_types));
      if (!db.Step(op)) return fail();
    } else {
      Int(kern, 1, i);
      Text(kern, 2, m.Name(x));
      Text(kern, 3, SliceKindName(x.kind));
      Int(kern, 4, x.lane);
      Int(kern, 5, x.start_ns);
      Int(kern, 6, x.dur_ns);
      Int(kern, 7, static_cast<int64_t>(x.correlation));
      Int(kern, 8, static_cast<int64_t>(x.external_id));
      IdOrNull(kern, 9, x.op);
      if (x.op != kNone) Text(kern, 10, m.Name(m.slices[x.op]));
      else sqlite3_bind_null(kern, 10);
      TextOrNull(kern, 11, LinkViaName(x.link));
      Int(kern, 12, static_cast<int64_t>(x.flops));
      Int(kern, 13, static_cast<int64_t>(x.bytes_read));
      Int(kern, 14, static_cast<int64_t>(x.bytes_written));
      if (!db.Step(kern)) return fail();
    }
  }
  for (size_t i = 0; i < m.flows.size(); ++i) {
    const FlowLink& f = m.flows[i];
    Int(flow, 1, static_cast<int64_t>(i));
    Text(flow, 2, m.Str(f.cat));
    Int(flow, 3, static_cast<int64_t>(f.id));
    IdOrNull(flow, 4, f.from);
    IdOrNull(flow, 5, f.to);
    Int(flow, 6, f.from_ts);
    Int(flow, 7, f.to_ts);
    if (!db.Step(flow)) return fail();
  }
  for (const CounterSeries& c : m.counters) {
    for (const auto& [ts, v] : c.points) {
      Text(ctr, 1, c.name);
      Text(ctr, 2, c.pid);
      Int(ctr, 3, ts);
      sqlite3_bind_double(ctr, 4, v);
      if (!db.Step(ctr)) return fail();
    }
  }
  const Totals& t = s.totals;
  const std::pair<std::string, std::string> rows[] = {
      {"name", m.name},
      {"path", m.path},
      {"t0_ns", std::to_string(m.t0_ns)},
      {"span_ns", std::to_string(t.span_ns)},
      {"device_ns", std::to_string(t.device_ns)},
      {"events", std::to_string(m.parse.events)},
      {"skipped", std::to_string(m.parse.skipped)},
      {"truncated", m.parse.truncated ? "1" : "0"},
      {"dropped_events", std::to_string(m.dropped_events)},
      {"unlinked_device", std::to_string(m.unlinked_device)},
      {"meta_json", m.meta.present ? m.meta.raw : ""},
  };
  for (const auto& [k, v] : rows) {
    Text(meta, 1, k);
    Text(meta, 2, v);
    if (!db.Step(meta)) return fail();
  }
  for (const auto& [k, v] : m.top_level) {
    Text(meta, 1, "trace." + k);
    Text(meta, 2, v);
    if (!db.Step(meta)) return fail();
  }
  if (!db.Exec("COMMIT")) return fail();
  return true;
}

}  // namespace trn::analysis
