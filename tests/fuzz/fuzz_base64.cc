// SPDX-License-Identifier: Apache-2.0
// base64_encode and base64_decode (the -bin header's encoding). Input: used
// both as text to decode and as bytes to encode. Invariants beyond "no
// crash": any bytes encode to canonical padded base64 that decodes back to
// them, also without its padding; text that decodes is canonical: encoding
// the result gives the text back (padded).
#include <string>

#include "fuzz_support.h"
#include "headroom/orca/load_header.h"

namespace orca = headroom::orca;
using headroom::fuzz::fail;

namespace {
constexpr std::string_view kTarget = "fuzz_base64";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = headroom::fuzz::as_text(data, size);
  const std::string encoded = orca::base64_encode(input);
  if (encoded.size() % 4 != 0 || encoded.size() != (size + 2) / 3 * 4) fail(kTarget, "encoded length is wrong");
  auto back = orca::base64_decode(encoded);
  if (!back || *back != input) fail(kTarget, "padded encoding does not decode back");
  std::string unpadded = encoded;
  while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
  auto back2 = orca::base64_decode(unpadded);
  if (!back2 || *back2 != input) fail(kTarget, "unpadded encoding does not decode back");

  auto decoded = orca::base64_decode(input);
  if (!decoded) {
    if (decoded.error().message.empty()) fail(kTarget, "rejected without a message");
    return 0;
  }
  std::string padded(input);
  while (padded.size() % 4 != 0) padded += '=';
  if (orca::base64_encode(*decoded) != padded)
    fail(kTarget, "\"" + std::string(input) + "\" decodes, but is not the canonical encoding of what it decodes to");
  return 0;
}
