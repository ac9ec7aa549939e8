// `trnscope`: the analyzer's command line (summary, compare, report, export) and the
// device-level view (inspect, device-profile: cli/device_commands.cc).
// Exit codes (docs/analyzer.md): 0 ok, 1 usage error, 2 unreadable or invalid
// input, 3 partial input (output written from what was recovered), 4 cannot
// write the output.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/device_commands.h"
#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"
#include "core/analysis/reports/compare.h"
#include "core/analysis/reports/explorer_template.h"
#include "core/analysis/reports/report_data.h"
#include "core/analysis/reports/sqlite_export.h"
#include "core/analysis/reports/summary_text.h"

namespace {

using namespace trn::analysis;

constexpr const char* kVersion = "trnscope 0.1.0";
enum Exit { kOk = 0, kUsage = 1, kBadInput = 2, kPartial = 3, kWriteError = 4 };
// Inputs at least this large get a progress bar (when stderr is a terminal).
constexpr uint64_t kProgressBytes = uint64_t{64} << 20;

// Draws a progress bar on stderr at most every 100 ms. One thread.
class Progress {
 public:
  explicit Progress(std::string label) : label_(std::move(label)), start_(Clock::now()) {}
  ~Progress() {
    if (drawn_) std::fputs("\r\033[K", stderr);
  }
  void operator()(uint64_t done, uint64_t total) {
    if (total < kProgressBytes) return;
    const auto now = Clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double frac = total ? std::min(1.0, static_cast<double>(done) / total) : 0;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30, fill = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r%s [%s%s] %3.0f%% %.0f MB/s", label_.c_str(),
                 std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(),
                 100 * frac, secs > 0 ? done / secs / 1e6 : 0.0);
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  Clock::time_point start_, last_;
  bool drawn_ = false;
};

struct Run {
  std::unique_ptr<TraceModel> model;
  Summary summary;
  std::vector<Insight> insights;
};

// Loads and analyzes one trace; prints the error and returns false if it is
// unreadable. *partial is set if anything was skipped or the file was cut.
bool LoadRun(const std::string& path, const std::string& name, const std::string& meta,
             Run* run, bool* partial) {
  LoadOptions opt;
  opt.name = name;
  opt.meta_path = meta;
  const bool tty = isatty(STDERR_FILENO);
  Progress progress(fmt::format("reading {}", path));
  if (tty) opt.tokenize.progress = std::ref(progress);
  LoadResult r = LoadTrace(path, opt);
  if (!r.ok) {
    fmt::print(stderr, "trnscope: error: {}\n", r.error);
    return false;
  }
  run->model = std::move(r.model);
  const ParseReport& p = run->model->parse;
  if (p.skipped > 0 || p.truncated) {
    *partial = true;
    fmt::print(stderr, "trnscope: warning: {}: recovered {} events, skipped {}{}\n", path,
               p.events, p.skipped, p.truncated ? " (file truncated)" : "");
    for (size_t i = 0; i < std::min<size_t>(3, p.warnings.size()); ++i)
      fmt::print(stderr, "  {}\n", p.warnings[i]);
  }
  run->summary = Summarize(*run->model);
  run->insights = ComputeInsights(*run->model, run->summary);
  return true;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool WriteFile(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trnscope: where does the time go? Analyzes torch.profiler / trnscope Chrome "
               "traces (.json or .json.gz; meta.json beside the trace is read when present).\n"
               "Exit codes: 0 ok, 1 usage, 2 unreadable/invalid input, 3 partial input "
               "(recovered), 4 cannot write output.",
               "trnscope"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);

  std::string trace, meta, name, sqlite_out, report_out, template_path, json_out;
  std::vector<std::string> traces, names;
  size_t top = 25;

  auto* summary = app.add_subcommand("summary", "Per-op table, top kernels, device busy/idle, "
                                                "host-bound gaps and recommendations");
  summary->add_option("TRACE", trace, "trace.json or trace.json.gz")->required();
  summary->add_option("--meta", meta, "meta.json (default: beside the trace)");
  summary->add_option("--name", name, "run name (default: folder or file name)");
  summary->add_option("--top", top, "ops to list (0: all)")->capture_default_str();

  auto* compare = app.add_subcommand("compare", "Runs side by side, per op and in total");
  compare->add_option("TRACES", traces, "two or more traces")->required()->expected(2, -1);
  compare->add_option("--names", names, "run names, in order")->delimiter(',');
  compare->add_option("--top", top, "ops to list (0: all)")->capture_default_str();

  auto* report = app.add_subcommand("report", "Write the HTML explorer for one or more traces");
  report->add_option("TRACES", traces, "one or more traces")->required()->expected(1, -1);
  report->add_option("-o,--output", report_out, "output HTML file")->required();
  report->add_option("--names", names, "run names, in order")->delimiter(',');
  report->add_option("--template", template_path,
                     "explorer template HTML (default: the built-in explorer)");
  report->add_option("--json", json_out, "also write the report data as JSON");

  auto* exp = app.add_subcommand("export", "Export ops, kernels, flows, counters, metadata");
  exp->add_option("TRACE", trace, "trace.json or trace.json.gz")->required();
  exp->add_option("--sqlite", sqlite_out, "SQLite database to (re)create")->required();
  exp->add_option("--meta", meta, "meta.json (default: beside the trace)");
  exp->add_option("--name", name, "run name");

  trn::cli::DeviceCommands device;
  trn::cli::AddDeviceCommands(app, &device);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }

  if (const int code = trn::cli::RunDeviceCommands(device); code >= 0) return code;
  bool partial = false;
  if (summary->parsed() || exp->parsed()) {
    Run run;
    if (!LoadRun(trace, name, meta, &run, &partial)) return kBadInput;
    if (summary->parsed()) {
      const std::string text = FormatSummary(*run.model, run.summary, run.insights, top);
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      std::string error;
      if (!ExportSqlite(*run.model, run.summary, sqlite_out, &error)) {
        fmt::print(stderr, "trnscope: error: {}\n", error);
        return kWriteError;
      }
      fmt::print("wrote {} ({} ops, {} kernels/copies, {} flows)\n", sqlite_out,
                 run.summary.totals.ops + run.summary.totals.runtime_calls,
                 run.summary.totals.kernels + run.summary.totals.copies, run.model->flows.size());
    }
    return partial ? kPartial : kOk;
  }

  if (!names.empty() && names.size() != traces.size()) {
    fmt::print(stderr, "trnscope: error: --names has {} names for {} traces\n", names.size(),
               traces.size());
    return kUsage;
  }
  std::vector<Run> runs(traces.size());
  for (size_t i = 0; i < traces.size(); ++i)
    if (!LoadRun(traces[i], names.empty() ? "" : names[i], "", &runs[i], &partial))
      return kBadInput;
  if (compare->parsed()) {
    std::vector<RunView> views;
    for (const Run& r : runs) views.push_back({r.model.get(), &r.summary});
    const std::string text = FormatCompare(views, top);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return partial ? kPartial : kOk;
  }
  // report
  std::vector<ReportRun> rr;
  for (const Run& r : runs) rr.push_back({r.model.get(), &r.summary, &r.insights});
  const std::string json = BuildReportJson(rr, kVersion);
  // The built-in explorer, or --template (to try an edited explorer.html).
  std::string html(ExplorerTemplate()), page;
  if (!template_path.empty() && !ReadFile(template_path, &html)) {
    fmt::print(stderr, "trnscope: error: cannot read the template '{}' (an HTML file expected)\n",
               template_path);
    return kBadInput;
  }
  if (!EmbedReport(html, json, &page)) {
    fmt::print(stderr, "trnscope: error: the explorer template has no {} placeholder\n",
               kDataPlaceholder);
    return kBadInput;
  }
  if (!WriteFile(report_out, page) || (!json_out.empty() && !WriteFile(json_out, json))) {
    fmt::print(stderr, "trnscope: error: cannot write '{}': {}\n", report_out, std::strerror(errno));
    return kWriteError;
  }
  fmt::print("wrote {} ({} run(s))\n", report_out, runs.size());
  return partial ? kPartial : kOk;
}
