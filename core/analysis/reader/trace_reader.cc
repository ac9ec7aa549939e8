// LoadTrace: reads one trace file (plain or gzip) or buffer through the
// tokenizer and TraceParser, then finds its meta.json.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

#include "core/analysis/reader/event_parser.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

std::string RunNameFromPath(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  std::string file = slash == std::string::npos ? p : p.substr(slash + 1);
  std::string dir = slash == std::string::npos ? "" : p.substr(0, slash);
  for (const char* ext : {".gz", ".json"}) {
    const size_t n = std::strlen(ext);
    if (file.size() > n && file.compare(file.size() - n, n, ext) == 0) file.resize(file.size() - n);
  }
  if ((file == "trace" || file.rfind("trace.", 0) == 0) && !dir.empty()) {
    const size_t s2 = dir.rfind('/');
    std::string parent = s2 == std::string::npos ? dir : dir.substr(s2 + 1);
    if (!parent.empty() && parent != ".") return parent;
  }
  return file;
}

namespace {

bool IsGzipPath(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

LoadResult Load(const std::string& path, std::string_view buffer, bool from_buffer,
                const LoadOptions& options) {
  LoadResult r;
  auto m = std::make_unique<TraceModel>();
  m->path = path;
  m->name = !options.name.empty() ? options.name : RunNameFromPath(path);
  TraceParser parser(m.get());
  TokenizeResult t;
  if (from_buffer) {
    m->slices.reserve(buffer.size() / 400);
    t = TokenizeBuffer(buffer, parser, options.tokenize);
  } else {
    // Typical traces hold one slice per ~250-400 bytes: reserving avoids
    // regrowing (copies and a 2x peak) on big files.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !IsGzipPath(path)) m->slices.reserve(st.st_size / 320);
    t = TokenizeFile(path, parser, options.tokenize);
  }
  if (!t.ok) {
    r.error = t.error;
    return r;
  }
  parser.Finish();
  m->parse.bytes = t.stats.bytes;
  m->parse.events = t.stats.events;
  m->parse.skipped = t.stats.skipped;
  m->parse.truncated = t.stats.truncated;
  m->parse.recovered = t.stats.recovered;
  m->parse.warnings = std::move(t.stats.warnings);
  if (t.stats.warnings_dropped > 0)
    m->parse.warnings.push_back(fmt::format("... and {} more warnings", t.stats.warnings_dropped));
  // meta.json beside the trace, else the trace's own "trnscope" object.
  if (options.load_meta && !from_buffer) {
    std::vector<std::string> candidates;
    if (!options.meta_path.empty()) {
      candidates.push_back(options.meta_path);
    } else {
      const size_t slash = path.rfind('/');
      const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
      std::string stem = slash == std::string::npos ? path : path.substr(slash + 1);
      for (const char* ext : {".gz", ".json"}) {
        const size_t n = std::strlen(ext);
        if (stem.size() > n && stem.compare(stem.size() - n, n, ext) == 0) stem.resize(stem.size() - n);
      }
      candidates.push_back(dir + stem + ".meta.json");
      candidates.push_back(dir + "meta.json");
    }
    for (const std::string& c : candidates) {
      std::ifstream in(c, std::ios::binary);
      if (!in) continue;
      std::stringstream ss;
      ss << in.rdbuf();
      std::string err;
      m->meta.source = c;
      if (!ParseMeta(ss.str(), &m->meta, &err))
        m->parse.warnings.push_back(fmt::format("ignored {}: {}", c, err));
      break;
    }
  }
  if (!m->meta.present) {
    for (const auto& [k, v] : m->top_level) {
      if (k != "trnscope") continue;
      std::string err;
      MetaInfo meta;
      if (ParseMeta(v, &meta, &err)) {
        meta.source = "trace:trnscope";
        m->meta = std::move(meta);
      }
    }
  }
  if (m->meta.dropped_events > m->dropped_events) m->dropped_events = m->meta.dropped_events;
  r.ok = true;
  r.model = std::move(m);
  return r;
}

}  // namespace

LoadResult LoadTrace(const std::string& path, const LoadOptions& options) {
  return Load(path, {}, false, options);
}

LoadResult LoadTraceFromBuffer(std::string_view json, const LoadOptions& options) {
  return Load("<memory>", json, true, options);
}

}  // namespace trn::analysis
