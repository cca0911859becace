// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the text trace reader (trace::read_text). TraceError is the expected outcome
// for bad input. When the input is accepted, the trace must survive both writers and read back
// equal (docs/trace-format.md: "read(write(t)) == t in either form"), the canonical text must
// be a fixed point, and text and binary forms must have the same identity.
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_common.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ipusim;
  trace::Trace t;
  try {
    std::istringstream in(fuzz::as_string(data, size));
    t = trace::read_text(in, "fuzz.trace");
  } catch (const Error&) {
    return 0;
  }
  try {
    std::ostringstream text;
    trace::write_text(t, text);
    std::istringstream text_in(text.str());
    const trace::Trace from_text = trace::read_text(text_in, "canonical.trace");
    if (!(from_text == t)) fuzz::fuzz_fail("text round trip changed the trace", text.str());
    std::ostringstream text2;
    trace::write_text(from_text, text2);
    if (text2.str() != text.str())
      fuzz::fuzz_fail("canonical text is not a fixed point", text.str());

    std::ostringstream bin;
    trace::write_binary(t, bin);
    const std::string bytes = bin.str();
    std::istringstream bin_in(bytes);
    const trace::Trace from_binary = trace::read_binary(bin_in, "canonical.itb", bytes.size());
    if (!(from_binary == t)) fuzz::fuzz_fail("binary round trip changed the trace", text.str());
    if (trace::identity(from_text) != trace::identity(t))
      fuzz::fuzz_fail("identity differs after a text round trip", text.str());
  } catch (const Error& e) {
    fuzz::fuzz_fail("an accepted trace could not be written and read back", e.what());
  }
  try {
    trace::check_tiles(t, 1472, "fuzz.trace");
  } catch (const TraceError&) {
  }
  return 0;
}
