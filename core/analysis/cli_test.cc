// End-to-end tests of the `trnscope` binary (cli/trnscope_main.cc): exit
// codes, the SQLite export and the report written from an empty folder.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

#include "core/analysis/reports/report_data.h"

#include "core/analysis/test_util.h"

namespace trn::analysis {
namespace {

using namespace trn::analysis::testutil;

int RunCli(const std::string& args) {
  const int st = std::system((std::string(TRN_CLI_PATH) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Cli, ExitCodes) {
  EXPECT_EQ(RunCli("--version"), 0);
  EXPECT_EQ(RunCli("--help"), 0);
  EXPECT_EQ(RunCli(""), 1);
  EXPECT_EQ(RunCli("summary"), 1);
  EXPECT_EQ(RunCli("frobnicate x"), 1);
  EXPECT_EQ(RunCli("summary " + Path("nested_ops.json")), 0);
  EXPECT_EQ(RunCli("summary " + Path("malformed_truncated.json")), 3);
  for (const char* f : {"malformed_empty.json", "malformed_random.bin", "malformed_wrong_top.json",
                        "does_not_exist.json"})
    EXPECT_EQ(RunCli(std::string("summary ") + Path(f)), 2) << f;
  EXPECT_EQ(RunCli("compare " + Path("trn_rmsnorm.json") + " " + Path("cuda_style.json")), 0);
  const std::string tmp = ::testing::TempDir();
  EXPECT_EQ(RunCli("export " + Path("cuda_style.json") + " --sqlite " + tmp + "/c.db"), 0);
  EXPECT_EQ(Query(tmp + "/c.db", "SELECT COUNT(*) FROM kernels"),
            (std::vector<std::vector<std::string>>{{"4"}}));
  EXPECT_EQ(RunCli("export " + Path("cuda_style.json") + " --sqlite /nonexistent/dir/c.db"), 4);
  // report with a stub template (the explorer ships its own).
  std::ofstream(tmp + "/tpl.html") << "<html><script>const DATA=/*TRNSCOPE_DATA*/null;</script></html>";
  EXPECT_EQ(RunCli("report " + Path("trn_rmsnorm.json") + " " + Path("cuda_style.json") +
                   " --names naive,cuda --template " + tmp + "/tpl.html -o " + tmp + "/r.html"),
            0);
  EXPECT_EQ(RunCli("report " + Path("trn_rmsnorm.json") + " --template " + tmp +
                   "/no_such_template.html -o " + tmp + "/x.html"),
            2);
  const std::string html = Read(tmp + "/r.html");
  EXPECT_NE(html.find("\"format\":\"trnscope.report\""), std::string::npos);
  EXPECT_NE(html.find("\"name\":\"cuda\""), std::string::npos);
  EXPECT_EQ(html.find("/*TRNSCOPE_DATA*/"), std::string::npos);
}

// The explorer is compiled in: the binary copied alone into an empty folder
// writes a whole report, and names no template path in the source tree.
TEST(Cli, BinaryAloneWritesAReport) {
  const std::string dir = ::testing::TempDir() + "/trnscope_alone";
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir + " && cp " +
                         std::string(TRN_CLI_PATH) + " " + dir + "/trnscope")
                            .c_str()),
            0);
  const std::string binary = Read(dir + "/trnscope");
  ASSERT_FALSE(binary.empty());
  EXPECT_EQ(binary.find("explorer/explorer.html"), std::string::npos);
  const std::string trace = Path("trn_rmsnorm.json");
  const int st = std::system(("cd " + dir + " && ./trnscope report " + trace +
                              " -o report.html >/dev/null 2>&1")
                                 .c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  const std::string html = Read(dir + "/report.html");
  ASSERT_FALSE(html.empty()) << "no report.html in " << dir;
  // The explorer's own page, with this trace's data in place of the placeholder.
  const std::string tpl = Read(kData + "/../reports/explorer/explorer.html");
  ASSERT_FALSE(tpl.empty());
  const std::string head = tpl.substr(0, tpl.find(kDataPlaceholder));
  EXPECT_EQ(html.compare(0, head.size(), head), 0);
  EXPECT_EQ(html.find(kDataPlaceholder), std::string::npos);
  EXPECT_NE(html.find("\"format\":\"trnscope.report\""), std::string::npos);
  EXPECT_NE(html.find("\"name\":\"pow_f32\""), std::string::npos);  // a kernel of the trace
}

}  // namespace
}  // namespace trn::analysis
