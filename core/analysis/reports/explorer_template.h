// The explorer (reports/explorer/explorer.html), compiled into the analyzer
// by embed.cmake so that `trnscope report` works wherever the binary is.
#pragma once

#include <string_view>

namespace trn::analysis {

// The template's HTML, with the data placeholder (report_data.h) in it.
std::string_view ExplorerTemplate();

}  // namespace trn::analysis
