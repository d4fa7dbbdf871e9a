// SPDX-License-Identifier: Apache-2.0
// headroom-config-reference: prints the key reference generated from the
// key table, and rewrites or checks the checked-in files that carry it
// (docs/configuration.md documents the command). Built, not installed.
//
//   headroom-config-reference --format markdown|man|toml|dict REGION
//   headroom-config-reference --update FILE...   rewrite the generated regions
//   headroom-config-reference --check FILE...    exit 1 if any region is stale
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config_reference.h"

namespace {

using headroom::agent::ReferenceFormat;

constexpr int kExitStale = 1;
constexpr int kExitUsage = 64;
constexpr const char* kFix = "cmake --build build --target config-reference";

int usage() {
  std::fprintf(stderr,
               "usage: headroom-config-reference --format markdown|man|toml|dict REGION\n"
               "       headroom-config-reference --update FILE...\n"
               "       headroom-config-reference --check FILE...\n");
  return kExitUsage;
}

bool read(const std::string& path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  text = s.str();
  return true;
}

// 0 when the file is as generated (or was rewritten), else the exit code.
int one_file(const std::string& path, bool update) {
  const auto format = headroom::agent::reference_format_of(path);
  if (!format) {
    std::fprintf(stderr, "%s: not a .md, .5, .toml or .dict file\n", path.c_str());
    return kExitUsage;
  }
  std::string text;
  if (!read(path, text)) {
    std::fprintf(stderr, "%s: cannot read it\n", path.c_str());
    return kExitUsage;
  }
  auto fresh = headroom::agent::regenerate(text, *format, path);
  if (!fresh) {
    std::fprintf(stderr, "%s\n", fresh.error().to_string().c_str());
    return kExitUsage;
  }
  if (*fresh == text) return 0;
  if (!update) {
    std::fprintf(stderr,
                 "%s: its generated key reference differs from the key table (agent/config/config_keys.cc); "
                 "run `%s` (or headroom-config-reference --update %s) and commit the result\n",
                 path.c_str(), kFix, path.c_str());
    return kExitStale;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << *fresh;
  if (!out.flush()) {
    std::fprintf(stderr, "%s: cannot write it\n", path.c_str());
    return kExitUsage;
  }
  std::printf("%s: regenerated\n", path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "--format") {
    const auto format = headroom::agent::parse_reference_format(args[1]);
    if (!format) return usage();
    auto text = headroom::agent::reference(*format, args[2]);
    if (!text) {
      std::fprintf(stderr, "headroom-config-reference: %s\n", text.error().message.c_str());
      return kExitUsage;
    }
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  if (args.size() < 2 || (args[0] != "--update" && args[0] != "--check")) return usage();
  int status = 0;
  for (std::size_t i = 1; i < args.size(); ++i)
    if (const int s = one_file(args[i], args[0] == "--update"); s > status) status = s;
  return status;
}
