// ParseMeta: the facts of meta.json (or the trace's "trnscope" object) that
// the analyses use, each under the names our exporters and older versions
// wrote (docs/analyzer.md). Unknown keys are ignored.
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdint>

#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {
namespace {

namespace dom = simdjson::dom;
using Elem = simdjson::simdjson_result<dom::element>;  // carries "not found"

Elem Find(dom::object o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    Elem e = o.at_key(k);
    if (!e.error()) return e;
  }
  return Elem(simdjson::NO_SUCH_FIELD);
}

// A JSON number as a count or a size. A double outside the integer type's range
// (1e308, NaN) makes the plain cast undefined behaviour: counts saturate, sizes
// become `dflt` (unknown).
uint64_t Count(double d) {
  if (!(d > 0)) return 0;
  return d < 0x1p64 ? static_cast<uint64_t>(d) : UINT64_MAX;
}

int64_t Size(double d, int64_t dflt) {
  return d >= -0x1p63 && d < 0x1p63 ? static_cast<int64_t>(d) : dflt;
}

void OpCounts(Elem e, std::vector<std::pair<std::string, uint64_t>>* out) {
  dom::object o;
  if (e.get_object().get(o)) {
    dom::array a;  // also accept a list of names
    if (!e.get_array().get(a)) {
      for (dom::element x : a) {
        std::string_view s;
        if (!x.get_string().get(s)) out->emplace_back(std::string(s), 1);
      }
    }
    return;
  }
  for (auto [k, v] : o) {
    uint64_t n = 1;
    int64_t i = 0;
    double d = 0;
    if (!v.get_uint64().get(n)) {
    } else if (!v.get_int64().get(i)) {
      n = i > 0 ? static_cast<uint64_t>(i) : 0;
    } else if (!v.get_double().get(d)) {
      n = Count(d);
    } else {
      n = 1;
    }
    out->emplace_back(std::string(k), n);
  }
  std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
}

double Number(Elem e, double dflt = 0) {
  double d;
  if (!e.get_double().get(d)) return d;
  int64_t i;
  if (!e.get_int64().get(i)) return static_cast<double>(i);
  uint64_t u;
  if (!e.get_uint64().get(u)) return static_cast<double>(u);
  return dflt;
}

std::vector<int64_t> Shape(Elem e) {
  std::vector<int64_t> out;
  dom::array a;
  if (e.get_array().get(a)) return out;
  for (dom::element x : a) out.push_back(Size(Number(Elem(dom::element(x)), -1), -1));
  return out;
}

}  // namespace

bool ParseMeta(std::string_view json, MetaInfo* meta, std::string* error) {
  dom::parser parser;
  simdjson::padded_string p(json);
  dom::element root;
  if (auto err = parser.parse(p).get(root)) {
    *error = fmt::format("invalid JSON ({})", simdjson::error_message(err));
    return false;
  }
  dom::object o;
  if (root.get_object().get(o)) {
    *error = "expected a JSON object";
    return false;
  }
  meta->present = true;
  meta->raw.assign(json);
  OpCounts(Find(o, {"fallback_ops", "fallbacks", "cpu_fallbacks"}), &meta->fallback_ops);
  OpCounts(Find(o, {"float64_downcasts", "float64", "downcasts"}), &meta->float64_downcasts);
  Elem d = Find(o, {"dropped_events", "dropped", "dropped_total"});
  dom::object dobj;
  if (!d.get_object().get(dobj)) {
    meta->dropped_events = Count(Number(Find(dobj, {"total", "dropped_total", "events"})));
  } else {
    meta->dropped_events = Count(Number(d));
  }
  dom::object po;
  if (!Find(o, {"host_peaks", "peaks"}).get_object().get(po)) {
    meta->peak_gflops = Number(Find(po, {"peak_gflops", "gflops", "gemm_gflop_s"}));
    meta->peak_gbps = Number(Find(po, {"peak_gbps", "gbps", "copy_bandwidth_gb_s", "bandwidth_gbps"}));
  }
  dom::array compiles;
  if (!Find(o, {"compile_records", "compiles", "compile", "recompiles"}).get_array().get(compiles)) {
    for (dom::element c : compiles) {
      CompileRecord r;
      dom::object co;
      if (!c.get_object().get(co)) {
        std::string_view s;
        if (!Find(co, {"graph", "graph_hash", "name", "frame", "key"}).get_string().get(s)) r.graph = s;
        if (!Find(co, {"reason", "recompile_reason"}).get_string().get(s)) r.reason = s;
        double ns = Number(Find(co, {"duration_ns", "compile_ns", "time_ns"}), -1);
        if (ns < 0) ns = Number(Find(co, {"duration_ms", "compile_ms"}), -1) * 1e6;
        if (ns < 0) ns = Number(Find(co, {"duration_s", "seconds", "compile_s"}), 0) * 1e9;
        r.duration_ns = ns > 0 ? Size(ns, INT64_MAX) : 0;
        dom::array shapes;
        if (!Find(co, {"shapes", "input_shapes", "inputs"}).get_array().get(shapes))
          for (dom::element sh : shapes) r.shapes.push_back(Shape(Elem(dom::element(sh))));
        // trnscope's records: "signature": [{"shape": [...], "stride": ..., "dtype": ...}].
        if (!Find(co, {"signature"}).get_array().get(shapes))
          for (dom::element sig : shapes) {
            dom::object so;
            if (!sig.get_object().get(so)) r.shapes.push_back(Shape(Find(so, {"shape"})));
          }
      }
      meta->compiles.push_back(std::move(r));
    }
  }
  dom::object go;
  if (!Find(o, {"time_correlation", "sync_guard", "sync"}).get_object().get(go)) {
    bool b;
    if (!Find(go, {"device_requested", "device_activities"}).get_bool().get(b))
      meta->device_requested = b;
    if (!Find(go, {"synchronized_at_stop"}).get_bool().get(b)) meta->guard_synchronized = b;
    const double pending = Number(Find(go, {"commands_in_flight"}), -1);
    if (pending >= 0) meta->commands_in_flight = Size(pending, INT64_MAX);
    std::string_view w;
    if (!Find(go, {"warning"}).get_string().get(w)) meta->guard_warning = w;
  }
  return true;
}

}  // namespace trn::analysis
