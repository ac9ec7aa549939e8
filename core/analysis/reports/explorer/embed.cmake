# cmake -DIN=explorer.html -DOUT=explorer_template.cc -P embed.cmake
# Writes a C++ source that holds IN's bytes, so the analyzer needs no file at
# run time (reports/explorer_template.h). Bytes, not a raw string literal: the
# template may contain any delimiter, and its size is past some compilers'
# string-literal limits.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by embed.cmake; edit the template, not this file.\n"
  "#include \"core/analysis/reports/explorer_template.h\"\n\n"
  "namespace trn::analysis {\nnamespace {\n"
  "const unsigned char kTemplate[] = {${bytes}0};\n"
  "}  // namespace\n\n"
  "std::string_view ExplorerTemplate() {\n"
  "  return {reinterpret_cast<const char*>(kTemplate), sizeof(kTemplate) - 1};\n}\n\n"
  "}  // namespace trn::analysis\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
