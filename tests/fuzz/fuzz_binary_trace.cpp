// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the binary trace reader (trace::read_binary), with the file size as size hint
// (as read_file passes it) and without one (a stream of unknown length). TraceError is the
// expected outcome for bad input. Oracles: both reads agree; an accepted trace writes back to
// the same bytes when the input is in the current format version, and in any case reads back
// equal from both writers.
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

#include "fuzz_common.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"

namespace {

std::optional<ipusim::trace::Trace> read(const std::string& bytes, std::uint64_t hint,
                                         std::string* error, std::string* identity = nullptr) {
  try {
    std::istringstream in(bytes);
    return ipusim::trace::read_binary(in, "fuzz.itb", hint, identity);
  } catch (const ipusim::Error& e) {
    *error = e.what();
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  const std::string input = fuzz::as_string(data, size);
  std::string hinted_error, unhinted_error;
  std::string identity;
  const auto hinted = read(input, input.size(), &hinted_error, &identity);
  const auto unhinted = read(input, 0, &unhinted_error);
  if (hinted.has_value() != unhinted.has_value())
    fuzz::fuzz_fail("the size hint changed whether the trace is accepted",
                    hinted ? unhinted_error : hinted_error);
  if (!hinted) return 0;
  const trace::Trace& t = *hinted;
  if (!(*unhinted == t)) fuzz::fuzz_fail("the size hint changed the trace");

  try {
    std::ostringstream bin;
    trace::write_binary(t, bin);
    const std::string bytes = bin.str();
    std::uint32_t version = 0;
    if (input.size() >= 12) std::memcpy(&version, input.data() + 8, 4);  // little-endian host
    // A current-version file is canonical: it must be reproduced byte for byte (and so is its
    // identity the hash of its own bytes), unless its vertices lack late parameters, which the
    // reader then says by identifying it by its serialisation.
    if (version == trace::kFormatVersion && bytes != input && identity != trace::identity(t))
      fuzz::fuzz_fail("binary writer does not reproduce an accepted current-version file");
    if (version == trace::kFormatVersion && identity != trace::identity(t))
      fuzz::fuzz_fail(
          "the identity read from a current-version file is not that of its serialisation");
    std::istringstream bin_in(bytes);
    if (!(trace::read_binary(bin_in, "again.itb", bytes.size()) == t))
      fuzz::fuzz_fail("binary round trip changed the trace");

    std::ostringstream text;
    trace::write_text(t, text);
    std::istringstream text_in(text.str());
    if (!(trace::read_text(text_in, "again.trace") == t))
      fuzz::fuzz_fail("text round trip changed the trace", text.str());
  } catch (const Error& e) {
    fuzz::fuzz_fail("an accepted trace could not be written and read back", e.what());
  }
  try {
    trace::check_tiles(t, 1472, "fuzz.itb");
  } catch (const TraceError&) {
  }
  return 0;
}
