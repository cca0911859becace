// SPDX-License-Identifier: Apache-2.0
// Trace format (v1 to v3): catalogue, structural checks, text and binary readers/writers, runs.
#include "ipusim/trace/trace_io.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ipusim/plan/conv.hpp"
#include "ipusim/trace/codelet.hpp"
#include "ipusim/trace/program.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::trace {
namespace {

// Succeeds when `text` contains `part`; the failure message shows both.
::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

Trace parse(const std::string& text, const std::string& origin = "t.trace") {
  std::istringstream in(text);
  return read_text(in, origin);
}

std::string to_text(const Trace& t) {
  std::ostringstream out;
  write_text(t, out);
  return out.str();
}

std::string to_binary(const Trace& t) {
  std::ostringstream out(std::ios::binary);
  write_binary(t, out);
  return out.str();
}

Trace from_binary(const std::string& bytes, std::uint64_t size_hint) {
  std::istringstream in(bytes, std::ios::binary);
  return read_binary(in, "t.itb", size_hint);
}

// The message of the TraceError thrown by `f`, or a failure if none is thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const TraceError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected TraceError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected TraceError, nothing was thrown";
  return {};
}

std::string text_error(const std::string& text) {
  return error_of([&] { parse(text); });
}

// Canonical text (as write_text produces it) using every codelet, every step kind, nested
// repeats, several IPUs, replicas and global exchanges.
const char* const kEveryFeature =
    R"(ipusim-trace 6
name every_feature
replicas 4
meta samples_per_step 3200
meta sample_unit images
global_exchange stage_copies pass=pipeline_copy op=copy
  copy src=0 dst=3 bytes=1048576
  copy src=3 dst=1 bytes=0
end
global_exchange none
end
ipu 0
tensor w kind=weight dtype=half tiles=0..1471 bytes=8192
tensor acts kind=activation dtype=float tiles=5 bytes=0 live=2..10
tensor grads kind=gradient dtype=int tiles=2..3 bytes=16 live=16
computeset convs layer=b1/conv1,b2/conv1 pass=forward op=conv
  vertex tiles=0..1023 amp_conv1x1 in=half partials=float positions=128 in_chans=256 out_chans=256 groups=1 coeff_load_bits=64
  vertex tiles=1024..1471 amp_convnx1 in=float partials=float positions=64 in_chans=16 out_chans=32 groups=2 kernel_h=3 kernel_w=5 width=8
  vertex tiles=7 dot in=half partials=float length=1024 count=3
end
computeset elementwise
  vertex tiles=0..15 reduce op=max in=float out=half outputs=8 inputs=4
  vertex tiles=16 unary op=gelu dtype=half n=0
  vertex tiles=17..18 binary op=div dtype=float n=1000
  vertex tiles=19 scaled_add dtype=half n=4096
  vertex tiles=20 cast from=float to=char n=77
  vertex tiles=21 copy bytes=1099511627776
  vertex tiles=22..30 dynamic_slice dtype=int elems=5 copies=9
  vertex tiles=40 count=3 step=8 unary op=relu dtype=half n=16
  vertex tiles=100..101 count=2 step=-50 copy bytes=4
  vertex tiles=60 count=2 step=0 copy bytes=4
end
exchange fetch layer=encoder3/attention pass=weight_gradient
  transfer src=5 dst=6..7,9 bytes=65536 mode=multicast
  transfer src=0..15 dst=0..15 bytes=64 mode=personalised
  transfer src=2 dst=0 bytes=14 mode=multicast count=5 src_step=2 dst_step=0 bytes_step=0
  transfer src=0 dst=0..3,8 bytes=4704 mode=multicast count=3 src_step=1 dst_step=4 bytes_step=-672
  transfer src=20..21 dst=30 bytes=8 mode=personalised count=2 src_step=-20 dst_step=0 bytes_step=0
  move positions=6 channels=4 element_bytes=2 from=0/1/3x4 to=8/2/2x2/channels_outer
  reduce_scatter members=4 member_step=2 fan_in=2 stride=1 element_bytes=4 groups=0:100,64/8/3:7
end
exchange empty
end
program
  host to_ipu tiles=0..15 bytes=1024 memory=host overlap=yes pass=host_io op=copy
  repeat 10
    exchange fetch
    sync
    compute convs
    repeat 3
      compute elementwise
      sync group=replica
      repeat 1099511627776
        exchange empty
      end
    end
    global_exchange stage_copies
  end
  host from_ipu tiles=0 bytes=4 memory=streaming overlap=no
  sync group=replicas:2
  collective all_reduce bytes=51200000 dtype=half group=replicas method=auto pass=gradient_allreduce
  collective reduce_scatter bytes=8 dtype=float group=all method=bidirectional_ring
  collective all_gather bytes=0 dtype=half group=replica method=quad_ring layer=bn1 pass=recompute op=batch_norm
  collective broadcast bytes=64 dtype=int group=replicas:4 method=broadcast_reduce
end
ipu 3
computeset only
  vertex tiles=0 copy bytes=8
end
program
  compute only pass=recompute
end
ipu 1
program
end
)";

TEST(TraceCatalogue, SlotsMatchParameterNames) {
  EXPECT_EQ(param_index(Codelet::kAmpConv1x1, "positions"), slot::kAmpPositions);
  EXPECT_EQ(param_index(Codelet::kAmpConvNx1, "kernel_w"), slot::kAmpKernelW);
  EXPECT_EQ(param_index(Codelet::kAmpConv1x1, "kernel_h"), std::nullopt);
  EXPECT_EQ(param_index(Codelet::kDot, "count"), slot::kDotCount);
  EXPECT_EQ(param_index(Codelet::kReduce, "inputs"), slot::kReduceInputs);
  EXPECT_EQ(param_index(Codelet::kCast, "to"), slot::kCastTo);
  EXPECT_EQ(param_index(Codelet::kDynamicSlice, "copies"), slot::kSliceCopies);
  ASSERT_EQ(codelet_catalogue().size(), kCodeletCount);
  for (std::size_t i = 0; i < kCodeletCount; ++i) {
    const auto& spec = codelet_catalogue()[i];
    EXPECT_EQ(static_cast<std::size_t>(spec.id), i);
    EXPECT_EQ(codelet_by_name(spec.name), spec.id);
  }
  EXPECT_EQ(codelet_by_name("conv"), std::nullopt);
}

TEST(TraceCatalogue, DefaultsBoundsAndEnums) {
  EXPECT_EQ(dtype_bytes(DType::kHalf), 2u);
  EXPECT_EQ(dtype_bytes(DType::kFloat), 4u);
  EXPECT_EQ(dtype_bytes(DType::kInt), 4u);
  EXPECT_EQ(dtype_bytes(DType::kChar), 1u);
  EXPECT_EQ(dtype_by_name("char"), DType::kChar);
  EXPECT_EQ(op_by_name("sigmoid"), Op::kSigmoid);
  EXPECT_EQ(op_by_name("plus"), std::nullopt);

  const auto& dot = codelet_spec(Codelet::kDot);
  EXPECT_EQ(dot.params[slot::kDotPartials].default_value, static_cast<std::int64_t>(DType::kFloat));
  EXPECT_FALSE(dot.params[slot::kDotLength].default_value.has_value());
  EXPECT_EQ(codelet_spec(Codelet::kAmpConv1x1).params[slot::kAmpGroups].default_value, 1);

  EXPECT_TRUE(op_allowed(Codelet::kReduce, Op::kMax));
  EXPECT_FALSE(op_allowed(Codelet::kReduce, Op::kMul));
  EXPECT_TRUE(op_allowed(Codelet::kBinary, Op::kMin));
  EXPECT_FALSE(op_allowed(Codelet::kBinary, Op::kRelu));
  EXPECT_TRUE(op_allowed(Codelet::kUnary, Op::kSquare));
  EXPECT_FALSE(op_allowed(Codelet::kUnary, Op::kAdd));

  EXPECT_EQ(param_problem(Codelet::kAmpConv1x1, slot::kAmpPositions, 0), std::nullopt);
  EXPECT_EQ(param_problem(Codelet::kAmpConv1x1, slot::kAmpPositions, -1).value_or(""),
            "parameter 'positions' of amp_conv1x1 must be in 0..1099511627776, found -1");
  EXPECT_TRUE(contains(param_problem(Codelet::kAmpConv1x1, slot::kAmpInChans, 0).value_or(""),
                       "must be in 1.."));
  EXPECT_TRUE(contains(param_problem(Codelet::kCopy, slot::kCopyBytes, kMaxCount + 1).value_or(""),
                       "found 1099511627777"));
  EXPECT_TRUE(
      contains(param_problem(Codelet::kReduce, slot::kReduceOp, static_cast<std::int64_t>(Op::kMul))
                   .value_or(""),
               "must be one of add, max, found 'mul'"));
  EXPECT_TRUE(
      contains(param_problem(Codelet::kCast, slot::kCastFrom, 9).value_or(""), "must be a dtype"));
}

TEST(TraceText, ParsesHandWrittenTrace) {
  const Trace t = parse(R"(# comment lines and blank lines are ignored

ipusim-trace 1
name matmul_2048
ipu 0
tensor A kind=activation dtype=half tiles=0..1471 bytes=8192
computeset mm   # trailing comments too
  vertex tiles=0..1023 amp_conv1x1 in=half partials=half positions=128 in_chans=256 out_chans=256
  vertex tiles=5 dot length=64 count=2
end
exchange fetch
  transfer src=5 dst=6..7,9 bytes=65536
  transfer src=0..15 dst=0..15 bytes=64 mode=personalised
end
program
  exchange fetch
  sync
  compute mm
  host to_ipu tiles=0..15 bytes=1024
  repeat 10
    sync
  end
end
)");
  EXPECT_EQ(t.version, kFormatVersion);  // a version 1 file reads as the current form
  EXPECT_EQ(t.name, "matmul_2048");
  ASSERT_EQ(t.ipus.size(), 1u);
  const IpuProgram& p = t.ipus[0];
  EXPECT_EQ(p.ipu, 0u);
  ASSERT_EQ(p.tensors.size(), 1u);
  EXPECT_EQ(p.tensors[0], (Tensor{"A", TensorKind::kActivation, DType::kHalf, {0, 1471}, 8192}));

  ASSERT_EQ(p.compute_sets.size(), 1u);
  EXPECT_EQ(p.compute_sets[0].name, "mm");
  ASSERT_EQ(p.compute_sets[0].vertices.size(), 2u);
  const Vertex& amp = p.compute_sets[0].vertices[0];
  EXPECT_EQ(amp.codelet, Codelet::kAmpConv1x1);
  EXPECT_EQ(amp.tiles, (TileRange{0, 1023}));
  EXPECT_EQ(amp.params[slot::kAmpIn], static_cast<std::int64_t>(DType::kHalf));
  EXPECT_EQ(amp.params[slot::kAmpPartials], static_cast<std::int64_t>(DType::kHalf));
  EXPECT_EQ(amp.params[slot::kAmpPositions], 128);
  EXPECT_EQ(amp.params[slot::kAmpInChans], 256);
  EXPECT_EQ(amp.params[slot::kAmpOutChans], 256);
  EXPECT_EQ(amp.params[slot::kAmpGroups], 1);   // default
  EXPECT_EQ(amp.params[slot::kAmpKernelH], 0);  // unused slot
  const Vertex& dot = p.compute_sets[0].vertices[1];
  EXPECT_EQ(dot.codelet, Codelet::kDot);
  EXPECT_EQ(dot.tiles, (TileRange{5, 5}));
  EXPECT_EQ(dot.params[slot::kDotIn], static_cast<std::int64_t>(DType::kHalf));
  EXPECT_EQ(dot.params[slot::kDotPartials], static_cast<std::int64_t>(DType::kFloat));
  EXPECT_EQ(dot.params[slot::kDotLength], 64);
  EXPECT_EQ(dot.params[slot::kDotCount], 2);

  ASSERT_EQ(p.exchanges.size(), 1u);
  const Exchange& ex = p.exchanges[0];
  EXPECT_EQ(ex.name, "fetch");
  ASSERT_EQ(ex.transfers.size(), 2u);
  EXPECT_EQ(ex.transfers[0].src, (TileRange{5, 5}));
  EXPECT_EQ(ex.transfers[0].bytes, 65536u);
  EXPECT_EQ(ex.transfers[0].mode, TransferMode::kMulticast);
  auto d0 = ex.destinations(ex.transfers[0]);
  ASSERT_EQ(d0.size(), 2u);
  EXPECT_EQ(d0[0], (TileRange{6, 7}));
  EXPECT_EQ(d0[1], (TileRange{9, 9}));
  EXPECT_EQ(ex.transfers[1].mode, TransferMode::kPersonalised);
  ASSERT_EQ(ex.destinations(ex.transfers[1]).size(), 1u);
  EXPECT_EQ(ex.destinations(ex.transfers[1])[0], (TileRange{0, 15}));

  ASSERT_EQ(p.steps.size(), 5u);
  EXPECT_EQ(p.steps[0].kind, StepKind::kExchange);
  EXPECT_EQ(p.steps[0].index, 0u);
  EXPECT_EQ(p.steps[1].kind, StepKind::kSync);
  EXPECT_EQ(p.steps[2].kind, StepKind::kCompute);
  EXPECT_EQ(p.steps[2].index, 0u);
  EXPECT_EQ(p.steps[3].kind, StepKind::kHost);
  EXPECT_EQ(p.steps[3].direction, HostDirection::kToIpu);
  EXPECT_EQ(p.steps[3].tiles, (TileRange{0, 15}));
  EXPECT_EQ(p.steps[3].bytes, 1024u);
  EXPECT_EQ(p.steps[4].kind, StepKind::kRepeat);
  EXPECT_EQ(p.steps[4].count, 10u);
  ASSERT_EQ(p.steps[4].body.size(), 1u);
  EXPECT_EQ(p.steps[4].body[0].kind, StepKind::kSync);
}

TEST(TraceText, AcceptsCrlfAndTabs) {
  const Trace t = parse(
      "ipusim-trace 1\r\nipu 2\r\ncomputeset c\r\n\tvertex tiles=1 copy bytes=3\r\nend\r\n"
      "program\r\n\tcompute c\r\nend\r\n");
  ASSERT_EQ(t.ipus.size(), 1u);
  EXPECT_EQ(t.ipus[0].ipu, 2u);
  EXPECT_EQ(t.ipus[0].compute_sets[0].vertices[0].params[slot::kCopyBytes], 3);
}

TEST(TraceRoundTrip, BinaryWithoutTheNx1WidthReadsAsWidthZero) {
  // A version-2 binary file written before amp_convnx1 gained `width` (the fuzz seed
  // v2_every_feature.bin, 2026-11-30) holds 8 parameters for it: it reads as width = 0, equal
  // to its text twin, and its identity is that of its current-version serialisation.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/fuzz/";
  std::string id;
  const Trace bin = read_file(dir + "binary_trace/corpus/v2_every_feature.bin", &id);
  const Trace text = read_file(dir + "text_trace/corpus/v2_every_feature.txt");
  EXPECT_EQ(bin, text);
  bool found = false;
  for (const auto& cs : bin.ipus[0].compute_sets)
    for (const auto& v : cs.vertices)
      if (v.codelet == Codelet::kAmpConvNx1) {
        found = true;
        EXPECT_EQ(v.params[slot::kAmpWidth], 0);
      }
  EXPECT_TRUE(found);
  EXPECT_EQ(id, identity(bin));
}

TEST(TraceRoundTrip, BinaryWithoutTheWeightLoadWidthReadsAsTheChipRate) {
  // A binary file written before the AMP codelets gained `coeff_load_bits` (the fuzz seed
  // conv2d.bin) lacks it: it reads as 0 (the chip's full rate), and the text form omits it.
  const std::string dir = std::string(IPUSIM_SOURCE_DIR) + "/tests/fuzz/";
  const Trace bin = read_file(dir + "binary_trace/corpus/conv2d.bin");
  int amp = 0;
  for (const auto& cs : bin.ipus[0].compute_sets)
    for (const auto& v : cs.vertices) {
      if (v.codelet == Codelet::kAmpConv1x1) {
        ++amp;
        EXPECT_EQ(v.params[slot::kAmp1x1CoeffLoadBits], 0);
      }
      if (v.codelet == Codelet::kAmpConvNx1) {
        ++amp;
        EXPECT_EQ(v.params[slot::kAmpNx1CoeffLoadBits], 0);
        EXPECT_EQ(v.params[slot::kAmpNx1WeightHeight], 0);  // older still: one kernel row
      }
    }
  EXPECT_GT(amp, 0);
  EXPECT_EQ(to_text(bin).find("coeff_load_bits"), std::string::npos);
}

TEST(TraceRoundTrip, Nx1WeightHeightRoundTripsAndOnly124AreAccepted) {
  const std::string ok = R"(ipusim-trace 1
ipu 0
computeset stem
  vertex tiles=0..3 amp_convnx1 in=half partials=half positions=112 in_chans=3 out_chans=64 groups=1 kernel_h=7 kernel_w=7 width=112 weight_height=4
end
)";
  const Trace t = parse(ok);
  EXPECT_EQ(t.ipus[0].compute_sets[0].vertices[0].params[slot::kAmpNx1WeightHeight], 4);
  EXPECT_NE(to_text(t).find("weight_height=4"), std::string::npos);
  EXPECT_EQ(from_binary(to_binary(t), 0), t);
  std::string bad = ok;
  bad.replace(bad.find("weight_height=4"), 15, "weight_height=3");
  EXPECT_EQ(text_error(bad),
            "t.trace:4: parameter 'weight_height' of amp_convnx1 must be 1, 2 or 4, found 3");
}

TEST(TraceRoundTrip, TextBinaryTextIsExact) {
  const Trace ir = parse(kEveryFeature);
  ASSERT_EQ(ir.ipus.size(), 3u);
  EXPECT_EQ(ir.ipus[1].ipu, 3u);  // section order is kept
  // The canonical text writes back byte for byte.
  const std::string text = to_text(ir);
  EXPECT_EQ(text, kEveryFeature);
  // Through binary and back: equal IR, identical text.
  const std::string bytes = to_binary(ir);
  ASSERT_EQ(bytes.substr(0, 8), "IPUTRACE");
  for (std::uint64_t hint : {std::uint64_t{0}, static_cast<std::uint64_t>(bytes.size())}) {
    const Trace back = from_binary(bytes, hint);
    EXPECT_EQ(back, ir);
    EXPECT_EQ(to_text(back), text);
    EXPECT_EQ(to_binary(back), bytes);
  }
}

// Groups of some of a replica's IPUs (2-D tensor parallelism's): `replica:K` (K consecutive
// IPUs) and `replica:K/S` (K IPUs S apart) write back as read, through binary too, and a
// stride or size that does not tile the replica's IPUs is an error naming the step.
TEST(TraceRoundTrip, GroupsOfSomeOfAReplicasIpusRoundTrip) {
  std::string text = "ipusim-trace 6\nname sub\nreplicas 1\n";
  for (int i = 0; i < 4; ++i)
    text += fmt::format(
        "ipu {}\nprogram\n  sync group=replica:2\n"
        "  collective all_reduce bytes=8 dtype=half group=replica:2/2 method=ring\nend\n",
        i);
  const Trace ir = parse(text);
  EXPECT_EQ(ir.ipus[0].steps[0].group, (trace::Group{GroupKind::kReplica, 2, 1}));
  EXPECT_EQ(ir.ipus[0].steps[1].group, (trace::Group{GroupKind::kReplica, 2, 2}));
  EXPECT_EQ(to_text(ir), text);
  const std::string bytes = to_binary(ir);
  const Trace back = from_binary(bytes, 0);
  EXPECT_EQ(back, ir);
  EXPECT_EQ(to_binary(back), bytes);
  // 3 IPUs 1 apart, and 2 IPUs 3 apart (blocks of 6), do not tile 4.
  std::string three = text;
  three.replace(three.find("replica:2\n"), 10, "replica:3\n");
  EXPECT_TRUE(contains(text_error(three),
                       "groups 3 IPUs 1 apart (blocks of 3), which does not "
                       "divide the replica's 4 IPUs"));
  std::string wide = text;
  wide.replace(wide.find("replica:2/2"), 11, "replica:2/3");
  EXPECT_TRUE(contains(text_error(wide), "groups 2 IPUs 3 apart (blocks of 6)"));
  EXPECT_TRUE(contains(
      text_error("ipusim-trace 2\nipu 0\nprogram\n  sync group=replica:1/0\n"),
      "t.trace:4: expected replica:<count> or replica:<count>/<stride>, counts of at least 1, "
      "found 'replica:1/0'"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 2\nipu 0\nprogram\n  sync group=all:2\n"),
                       "expected a group size only as replicas:<count>, replica:<count> or "
                       "replica:<count>/<stride>, found 'all:2'"));
}

TEST(TraceRoundTrip, OmittedDefaultsAreWrittenCanonically) {
  const Trace t = parse(
      "ipusim-trace 1\nipu 0\ntensor x tiles=0 bytes=2\ncomputeset c\n"
      "  vertex tiles=0 reduce outputs=1 inputs=2\nend\nexchange e\n"
      "  transfer src=0 dst=1 bytes=4\nend\n");
  EXPECT_EQ(
      to_text(t),
      "ipusim-trace 6\nreplicas 1\nipu 0\ntensor x kind=activation dtype=half tiles=0 bytes=2\n"
      "computeset c\n  vertex tiles=0 reduce op=add in=float out=half outputs=1 inputs=2\n"
      "end\nexchange e\n  transfer src=0 dst=1 bytes=4 mode=multicast\nend\nprogram\nend\n");
}

// Issue 14: the readers and write_file give the identity without re-serialising a current
// binary file; it is the value identity() gives, for every kind of input.
TEST(TraceIdentity, ReadersAndWriterGiveTheSameIdentity) {
  const Trace ir = parse(kEveryFeature);
  const std::string id = identity(ir);
  std::ostringstream bin, text;
  write_binary(ir, bin);
  write_text(ir, text);
  // Current binary: hashed as read, in blocks of 64 KiB, and from a stream of unknown size.
  std::string got;
  std::istringstream bin_in(bin.str());
  EXPECT_EQ(read_binary(bin_in, "t.itb", bin.str().size(), &got), ir);
  EXPECT_EQ(got, id);
  std::istringstream bin_in2(bin.str());
  got.clear();
  read_binary(bin_in2, "t.itb", 0, &got);
  EXPECT_EQ(got, id);
  // Text: the identity of its binary form, whatever the spelling.
  std::istringstream text_in("# a comment\n" + text.str());
  got.clear();
  EXPECT_EQ(read_text(text_in, "t.trace", &got), ir);
  EXPECT_EQ(got, id);

  // A large trace (many 64 KiB blocks, hashed on the reader's helper thread).
  Trace big = ir;
  ComputeSet& cs = big.ipus[0].compute_sets[0];
  const Vertex v = cs.vertices[0];
  cs.vertices.clear();
  for (std::uint32_t i = 0; i < 400000; ++i) {
    Vertex one = v;
    one.tiles = {i % 1000, i % 1000};  // a new tile every time: no two records alike
    cs.vertices.push_back(one);
  }
  std::ostringstream big_bin;
  write_binary(big, big_bin);
  ASSERT_GT(big_bin.str().size(), 4u << 20);
  std::istringstream big_in(big_bin.str());
  got.clear();
  read_binary(big_in, "big.itb", big_bin.str().size(), &got);
  EXPECT_EQ(got, identity(big));

  // An older version: its bytes differ from the current form, its identity does not. A
  // hand-made v1 file: one compute set with one copy vertex on tiles 0..3, one compute step.
  Trace simple = parse(
      "ipusim-trace 1\nipu 0\ncomputeset cs\n  vertex tiles=0..3 copy bytes=8\nend\nprogram\n  "
      "compute cs\nend\n");
  std::string v1 = "IPUTRACE";
  const auto put = [&](std::uint64_t value, int n) {
    for (int i = 0; i < n; ++i) v1 += static_cast<char>((value >> (8 * i)) & 0xff);
  };
  put(1, 4);  // version
  put(0, 4);  // name ""
  put(1, 4);  // one IPU
  put(0, 4);  // ipu 0
  put(0, 4);  // no tensors
  put(1, 4);  // one compute set
  put(2, 4);  // name "cs"
  v1 += "cs";
  put(1, 4);  // one vertex
  put(static_cast<std::uint64_t>(Codelet::kCopy), 1);
  put(0, 4);  // tiles 0..3
  put(3, 4);
  put(1, 1);  // one parameter
  put(8, 8);  // bytes=8
  put(0, 4);  // no exchanges
  put(1, 4);  // one step: compute 0
  put(0, 1);
  put(0, 4);
  std::istringstream v1_in(v1);
  got.clear();
  EXPECT_EQ(read_binary(v1_in, "v1.itb", v1.size(), &got), simple);
  EXPECT_EQ(got, identity(simple));

  // write_file hashes the bytes it writes (binary) or gives identity() (text).
  const auto dir =
      std::filesystem::path(::testing::TempDir()) / ("trace_id_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  got.clear();
  write_file(ir, (dir / "k.itb").string(), Format::kBinary, Checked::kYes, &got);
  EXPECT_EQ(got, id);
  got.clear();
  write_file(ir, (dir / "k.trace").string(), Format::kText, Checked::kNo, &got);
  EXPECT_EQ(got, id);
  got.clear();
  EXPECT_EQ(read_file((dir / "k.itb").string(), &got), ir);
  EXPECT_EQ(got, id);
  std::filesystem::remove_all(dir);
}

TEST(TraceIdentity, SameForTextAndBinaryFiles) {
  const Trace ir = parse(kEveryFeature);
  const auto dir =
      std::filesystem::path(::testing::TempDir()) / ("trace_io_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text_path = (dir / "k.trace").string();
  const std::string bin_path = (dir / "k.itb").string();
  EXPECT_EQ(format_for_path(text_path), Format::kText);
  EXPECT_EQ(format_for_path((dir / "k.txt").string()), Format::kText);
  EXPECT_EQ(format_for_path(bin_path), Format::kBinary);
  write_file(ir, text_path, format_for_path(text_path));
  write_file(ir, bin_path, format_for_path(bin_path));

  const Trace from_text = read_file(text_path);
  const Trace from_bin = read_file(bin_path);
  EXPECT_EQ(from_text, ir);
  EXPECT_EQ(from_bin, ir);
  const std::string id = identity(ir);
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(identity(from_text), id);
  EXPECT_EQ(identity(from_bin), id);

  Trace changed = ir;
  changed.ipus[0].tensors[0].bytes_per_tile += 1;
  EXPECT_NE(identity(changed), id);

  EXPECT_TRUE(contains(error_of([&] { read_file((dir / "missing.itb").string()); }),
                       "missing.itb: cannot open"));
  std::filesystem::remove_all(dir);
}

// --- text errors -------------------------------------------------------------------------------

TEST(TraceTextErrors, UnknownParameterSuggestsAndNamesLine) {
  const std::string msg = text_error(R"(ipusim-trace 1
ipu 0
computeset mm
  vertex tiles=0 copy bytes=1


  vertex tiles=0..3 amp_conv1x1 in=half posiitons=128 in_chans=4 out_chans=4
end
)");
  EXPECT_EQ(msg,
            "t.trace:7: unknown parameter 'posiitons' for codelet amp_conv1x1 (did you mean "
            "'positions'?)");
}

TEST(TraceTextErrors, UnknownNamesSuggestClosest) {
  const std::string head = "ipusim-trace 1\nipu 0\ncomputeset c\n";
  EXPECT_TRUE(contains(text_error(head + "  vertex tiles=0 amp_conv1x2 positions=1\nend\n"),
                       "t.trace:4: unknown codelet 'amp_conv1x2' (did you mean 'amp_conv1x1'?)"));
  EXPECT_TRUE(contains(text_error(head + "  vertex tiles=0 dot in=hlaf length=1 count=1\nend\n"),
                       "t.trace:4: unknown dtype 'hlaf' for parameter 'in' of dot (did you mean "
                       "'half'?)"));
  EXPECT_TRUE(contains(text_error(head + "  vertex tiles=0 unary op=relo n=3\nend\n"),
                       "t.trace:4: unknown op 'relo' for parameter 'op' of unary (did you mean "
                       "'relu'?)"));
  EXPECT_TRUE(
      contains(text_error(head + "  vertex tiles=0 reduce op=mul outputs=1 inputs=1\nend\n"),
               "t.trace:4: invalid op 'mul' for parameter 'op' of reduce (expected one "
               "of: add, max)"));
  EXPECT_TRUE(contains(text_error(head + "  vertex tiles=0 copy\nend\n"),
                       "t.trace:4: expected bytes=<value> for codelet copy (required, no "
                       "default), found no bytes="));
  EXPECT_TRUE(contains(text_error(head + "  vertex tiles=0 copy bytes=-1\nend\n"),
                       "t.trace:4: parameter 'bytes' of copy must be in 0..1099511627776, "
                       "found -1"));
  EXPECT_TRUE(contains(text_error(head + "  vertex tiles=0 copy bytes=1099511627777\nend\n"),
                       "found 1099511627777"));
  EXPECT_TRUE(contains(text_error(head + "  vertx tiles=0 copy bytes=1\nend\n"),
                       "t.trace:4: expected one of vertex, end in a 'computeset' block, found "
                       "unknown directive 'vertx' (did you mean 'vertex'?)"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\nipu 0\ntensor t tiles=0 bytes=1 knd=weight\n"),
                       "t.trace:3: unknown key 'knd' for tensor 't' (did you mean 'kind'?)"));
}

TEST(TraceTextErrors, MissingEnd) {
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\ncomputeset mm\n  vertex tiles=0 copy bytes=1\n"),
            "t.trace:4: expected 'end' for computeset 'mm' opened at line 3, found end of file");
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\nprogram\n  repeat 2\n    sync\n  end\n"),
            "t.trace:6: expected 'end' for the program opened at line 3, found end of file");
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\nprogram\n  repeat 2\n    sync\n"),
            "t.trace:5: expected 'end' for the repeat opened at line 4, found end of file");
}

TEST(TraceTextErrors, BadTileRange) {
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\ncomputeset mm\n  vertex tiles=5..3 copy "
                       "bytes=1\nend\n"),
            "t.trace:4: expected a tile range with first <= last for tiles=, found '5..3'");
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\nipu 0\ntensor a tiles=1..x bytes=1\n"),
                       "t.trace:3: expected a tile range like 5 or 0..1471 for tiles=, found "
                       "'1..x'"));
}

TEST(TraceTextErrors, UndefinedAndDuplicateNames) {
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\ncomputeset mm\nend\nprogram\n  compute mn\nend\n"),
            "t.trace:6: expected the name of a compute set defined above, found undefined "
            "compute set 'mn' (did you mean 'mm'?)");
  EXPECT_TRUE(
      contains(text_error("ipusim-trace 1\nipu 0\nexchange x\nend\nprogram\n  compute x\nend\n"),
               "('x' is an exchange: use 'exchange x')"));
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\ncomputeset mm\nend\ncomputeset mm\nend\n"),
            "t.trace:5: expected a new compute set name, found 'mm' (already defined at line 3)");
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\nipu 0\nprogram\nend\nipu 0\n"),
                       "t.trace:5: expected each IPU once, found a second 'ipu 0'"));
}

TEST(TraceTextErrors, OverlappingDestinations) {
  EXPECT_EQ(text_error("ipusim-trace 1\nipu 0\nexchange e\n  transfer src=0 dst=4..9,1,8 bytes=4\n"
                       "end\n"),
            "t.trace:4: expected destination ranges that do not overlap, found tile 8 twice in "
            "dst=4..9,1,8");
  const std::array<TileRange, 3> disjoint{TileRange{5, 6}, TileRange{0, 4}, TileRange{7, 7}};
  EXPECT_EQ(first_shared_tile(disjoint), std::nullopt);
  const std::array<TileRange, 3> shared{TileRange{5, 9}, TileRange{0, 4}, TileRange{2, 3}};
  EXPECT_EQ(first_shared_tile(shared), 2u);
}

TEST(TraceTextErrors, HeaderAndStructure) {
  EXPECT_EQ(text_error(""), "t.trace:0: expected the header 'ipusim-trace 6', found end of file");
  EXPECT_EQ(text_error("ipu 0\n"),
            "t.trace:1: expected the header 'ipusim-trace 6', found 'ipu 0'");
  EXPECT_TRUE(contains(text_error("ipusim-trace 7\n"),
                       "t.trace:1: expected trace format version 1 to 6, found version 7"));
  EXPECT_TRUE(
      contains(text_error("ipusim-trace 1\ntensor a tiles=0 bytes=1\n"),
               "t.trace:2: expected one of name, replicas, meta, global_exchange, ipu before the "
               "first 'ipu' section, found 'tensor'"));
  // Version 2 features in a version 1 file.
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\nreplicas 2\n"),
                       "t.trace:2: 'replicas' needs trace format version 2"));
  EXPECT_TRUE(
      contains(text_error("ipusim-trace 2\nreplicas 4\nipu 0\nprogram\n  sync group=replicas:3\n"),
               "t.trace:5: expected a group size dividing the 4 replicas, found 'replicas:3'"));
  EXPECT_TRUE(contains(
      text_error("ipusim-trace 2\nipu 0\nprogram\n  collective all_reduce bytes=4 group=tile\n"),
      "t.trace:4: expected a group of IPUs for a collective"));
  EXPECT_TRUE(
      contains(text_error("ipusim-trace 2\nipu 0\nprogram\n  collective all_reduse bytes=4\n"),
               "t.trace:4: unknown collective 'all_reduse' (did you mean 'all_reduce'?)"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\nipu 0\nend\n"), "found 'end' with no open"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\n"), "expected at least one 'ipu <index>'"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 1\nipu 0\nprogram\n  repeat 0\n"),
                       "t.trace:4: expected a repeat count 1..1099511627776, found '0'"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 2\nipu 0\nprogram\n  sync now\nend\n"),
                       "t.trace:4: expected key=value, found 'now'"));
}

std::string nested_repeats(std::size_t depth) {
  std::string text = "ipusim-trace 1\nipu 0\nprogram\n";
  for (std::size_t i = 0; i < depth; ++i) text += "repeat 2\n";
  text += "sync\n";
  for (std::size_t i = 0; i < depth; ++i) text += "end\n";
  return text + "end\n";
}

TEST(TraceTextErrors, RepeatNestingIsCapped) {
  const Trace ok = parse(nested_repeats(kMaxRepeatDepth));
  // Deepest legal nesting round-trips through both forms.
  EXPECT_EQ(from_binary(to_binary(ok), 0), ok);
  EXPECT_EQ(parse(to_text(ok)), ok);
  EXPECT_EQ(text_error(nested_repeats(kMaxRepeatDepth + 1)),
            "t.trace:68: expected repeats nested at most 64 deep, found a deeper one");
}

// --- structural checks -------------------------------------------------------------------------

TEST(TraceStructure, CheckTilesNamesItem) {
  Trace t = parse(
      "ipusim-trace 1\nipu 0\ncomputeset mm\n  vertex tiles=0 copy bytes=1\n"
      "  vertex tiles=1 copy bytes=1\n  vertex tiles=2 copy bytes=1\n"
      "  vertex tiles=1500 copy bytes=1\nend\nprogram\n  compute mm\nend\n");
  EXPECT_NO_THROW(check_tiles(t, 1501, "mm.trace"));
  EXPECT_EQ(error_of([&] { check_tiles(t, 1472, "mm.trace"); }),
            "mm.trace: compute set 'mm' vertex 3 uses tile 1500 but the chip has 1472 tiles");
  Trace multi = parse(kEveryFeature);
  EXPECT_EQ(error_of([&] { check_tiles(multi, 1024, "k.trace"); }),
            "k.trace: ipu 0 tensor 'w' is placed on tiles 0..1471 but the chip has 1024 tiles");
  multi.ipus[0].tensors[0].tiles = {0, 10};
  multi.ipus[0].compute_sets[0].vertices[1].tiles = {0, 10};
  multi.ipus[0].exchanges[0].dst_pool[1] = {1023, 1024};
  EXPECT_EQ(error_of([&] { check_tiles(multi, 1024, "k.trace"); }),
            "k.trace: ipu 0 exchange 'fetch' transfer 0 sends to tiles 1023..1024 but the chip "
            "has 1024 tiles");
}

TEST(TraceStructure, CheckStructureRejectsBadIr) {
  const Trace good = parse(kEveryFeature);
  EXPECT_NO_THROW(check_structure(good, "x"));
  {
    Trace t = good;
    t.ipus[0].steps[1].body[2].index = 7;
    EXPECT_EQ(error_of([&] { check_structure(t, "x"); }),
              "x: ipu 0 program step 1.2 (compute) refers to compute set 7 but there are 2");
  }
  {
    Trace t = good;
    t.ipus[0].compute_sets[1].vertices[0].params[slot::kReduceOp] =
        static_cast<std::int64_t>(Op::kRelu);
    EXPECT_EQ(error_of([&] { check_structure(t, "x"); }),
              "x: ipu 0 compute set 'elementwise' vertex 0: parameter 'op' of reduce must be one "
              "of add, max, found 'relu'");
  }
  {
    Trace t = good;
    t.ipus[0].compute_sets[0].vertices[0].params[slot::kAmpKernelW] = 3;  // not amp_conv1x1's
    EXPECT_TRUE(contains(error_of([&] { check_structure(t, "x"); }),
                         "non-zero value 3 in unused parameter slot 7"));
  }
  {
    Trace t = good;
    t.ipus[0].steps[1].count = 0;
    EXPECT_TRUE(contains(error_of([&] { check_structure(t, "x"); }),
                         "program step 1 (repeat) has count = 0, expected 1..1099511627776"));
  }
  {
    Trace t = good;
    t.ipus[0].tensors[1].bytes_per_tile = std::uint64_t{1} << 41;
    EXPECT_TRUE(contains(error_of([&] { check_structure(t, "x"); }),
                         "tensor 'acts' has bytes = 2199023255552"));
  }
  {
    Trace t = good;
    t.ipus[0].steps[0].index = 1;  // a host step does not use `index`
    EXPECT_TRUE(contains(error_of([&] { check_structure(t, "x"); }),
                         "program step 0 (host) sets fields that its kind does not use"));
  }
  {
    Trace t = good;
    t.ipus[2].ipu = 0;
    EXPECT_EQ(error_of([&] { check_structure(t, "x"); }), "x: ipu 0 appears twice");
  }
  {
    Trace t = good;
    t.ipus[0].exchanges[0].transfers[1].dst_first = 0;
    EXPECT_TRUE(contains(error_of([&] { check_structure(t, "x"); }),
                         "exchange 'fetch' transfer 1 destinations start at pool index 0, "
                         "expected 2"));
  }
  {
    Trace t = good;
    t.ipus[0].exchanges[0].dst_pool[1] = {7, 7};
    EXPECT_EQ(error_of([&] { check_structure(t, "x"); }),
              "x: ipu 0 exchange 'fetch' transfer 0 lists destination tile 7 twice (destination "
              "ranges must not overlap)");
  }
  {
    Trace t = good;
    t.ipus[0].tensors[0].name = "has space";
    EXPECT_TRUE(contains(error_of([&] { to_text(t); }),
                         "trace 'every_feature': ipu 0 tensor 'has space' has an invalid name"));
  }
}

// --- binary errors -----------------------------------------------------------------------------

TEST(TraceBinaryErrors, TruncationAtEveryByteIsAnError) {
  const std::string bytes = to_binary(parse(kEveryFeature));
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    const std::string part = bytes.substr(0, cut);
    for (std::uint64_t hint : {std::uint64_t{0}, static_cast<std::uint64_t>(cut)}) {
      const std::string msg = error_of([&] { from_binary(part, hint); });
      EXPECT_TRUE(contains(msg, "t.itb@")) << "cut at " << cut;
    }
  }
  // A cut in the middle of a field says how much is missing.
  EXPECT_EQ(error_of([&] { from_binary(bytes.substr(0, 10), 0); }),
            "t.itb@10: truncated format version: expected 2 more bytes, file ends");
  // Trailing garbage is reported too.
  EXPECT_TRUE(contains(error_of([&] { from_binary(bytes + "x", 0); }),
                       "expected the end of the file after the last IPU program"));
}

TEST(TraceBinaryErrors, HugeCountRejectedBeforeAllocating) {
  const std::string bytes = to_binary(parse(kEveryFeature));
  // Layout: magic 8, version 4, name length 4 + "every_feature" 13, replicas 4, global
  // exchange count 4, "stage_copies" (4 + 12, provenance 6, copy count 4, 2 copies x 16),
  // "none" (4 + 4, provenance 6, copy count 4), IPU count 4, IPU index 4, tensor count 4.
  const std::size_t meta = 4 + (4 + 16 + 4 + 4) + (4 + 11 + 4 + 6);  // count, 2 key/value pairs
  const std::size_t ipu_count_at =
      8 + 4 + 4 + 13 + 4 + meta + 4 + (4 + 12 + 6 + 4 + 32) + (4 + 4 + 6 + 4);
  const std::size_t tensor_count_at = ipu_count_at + 4 + 4;
  const std::size_t name_length_at = 12;
  for (std::size_t at : {ipu_count_at, tensor_count_at, name_length_at}) {
    std::string patched = bytes;
    std::memset(patched.data() + at, 0xff, 4);
    const auto start = std::chrono::steady_clock::now();
    const std::string with_hint = error_of([&] { from_binary(patched, patched.size()); });
    const std::string without_hint = error_of([&] { from_binary(patched, 0); });
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_LT(elapsed, std::chrono::seconds(2));
    EXPECT_TRUE(contains(with_hint, "t.itb@" + std::to_string(at) + ": expected "));
    EXPECT_TRUE(contains(without_hint, "t.itb@"));
  }
  std::string patched = bytes;
  std::memset(patched.data() + tensor_count_at, 0xff, 4);
  EXPECT_EQ(error_of([&] { from_binary(patched, patched.size()); }),
            fmt::format("t.itb@{}: expected a count of tensors that fits in the remaining {} "
                        "bytes, found 4294967295 (at least 23 bytes each)",
                        tensor_count_at, bytes.size() - tensor_count_at - 4));
  std::memcpy(patched.data() + tensor_count_at, bytes.data() + tensor_count_at, 4);
  std::memset(patched.data() + name_length_at, 0xff, 4);
  EXPECT_EQ(error_of([&] { from_binary(patched, 0); }),
            "t.itb@12: expected a trace name of at most 4096 bytes, found length 4294967295");
}

TEST(TraceBinaryErrors, BadMagicVersionAndEnums) {
  const std::string bytes = to_binary(parse(kEveryFeature));
  EXPECT_EQ(error_of([&] { from_binary("ipusim-trace 1\n", 0); }),
            "t.itb@0: expected the magic 'IPUTRACE' of a binary trace, found 'ipusim-t'");
  EXPECT_EQ(error_of([&] { from_binary("IPU", 0); }),
            "t.itb@0: expected the magic 'IPUTRACE' of a binary trace, found 'IPU'");
  std::string v7 = bytes;
  v7[8] = 7;
  EXPECT_EQ(error_of([&] { from_binary(v7, 0); }),
            "t.itb@8: expected trace format version 1 to 6, found version 7");
  // First tensor's kind byte: after the global exchanges (see HugeCountRejectedBeforeAllocating),
  // IPU count, IPU index, tensor count, name length 4 + "w" 1.
  const std::size_t meta = 4 + (4 + 16 + 4 + 4) + (4 + 11 + 4 + 6);
  const std::size_t kind_at =
      8 + 4 + 4 + 13 + 4 + meta + 4 + (4 + 12 + 6 + 4 + 32) + (4 + 4 + 6 + 4) + 4 + 4 + 4 + 4 + 1;
  std::string bad_kind = bytes;
  bad_kind[kind_at] = 42;
  EXPECT_EQ(error_of([&] { from_binary(bad_kind, 0); }),
            fmt::format("t.itb@{}: expected a tensor kind 0..7, or 128 more with a lifetime, "
                        "found 42",
                        kind_at));
  bad_kind[kind_at] = static_cast<char>(0x80 | 42);
  EXPECT_EQ(error_of([&] { from_binary(bad_kind, 0); }),
            fmt::format("t.itb@{}: expected a tensor kind 0..7, or 128 more with a lifetime, "
                        "found 170",
                        kind_at));
}

// Hand-built binary: one IPU whose program is `depth` nested repeats around a sync.
std::string binary_nested_repeats(std::size_t depth) {
  std::string b = "IPUTRACE";
  auto u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) b += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  auto u64 = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) b += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  u32(kFormatVersion);  // version (the header and steps are the same in v2 and v3)
  u32(0);               // name ""
  u32(1);               // replicas
  u32(0);               // meta entries
  u32(0);               // global exchanges
  u32(1);               // one IPU
  u32(0);               // ipu 0
  u32(0);               // tensors
  u32(0);               // compute sets
  u32(0);               // exchanges
  for (std::size_t i = 0; i < depth; ++i) {
    u32(1);
    b += static_cast<char>(StepKind::kRepeat);
    u64(2);
  }
  u32(1);
  b += static_cast<char>(StepKind::kSync);
  b += static_cast<char>(GroupKind::kTile);
  u32(0);  // group size
  return b;
}

TEST(TraceBinaryErrors, RepeatNestingIsCapped) {
  const Trace ok = from_binary(binary_nested_repeats(kMaxRepeatDepth), 0);
  EXPECT_EQ(to_binary(ok), binary_nested_repeats(kMaxRepeatDepth));
  const std::string deep = binary_nested_repeats(kMaxRepeatDepth + 1);
  // The 65th repeat starts after the 48-byte header and 64 x (4-byte count + 9-byte repeat) + 4.
  EXPECT_EQ(error_of([&] { from_binary(deep, deep.size()); }),
            fmt::format("t.itb@{}: expected repeats nested at most 64 deep, found a deeper one",
                        48 + 64 * 13 + 4));
  // Far deeper nesting fails the same way, without exhausting the stack.
  const std::string very_deep = binary_nested_repeats(100000);
  EXPECT_TRUE(contains(error_of([&] { from_binary(very_deep, 0); }),
                       "expected repeats nested at most 64 deep"));
}

// --- runs (v3) -----------------------------------------------------------------------------------

// The transfers of an exchange, one line each, as expanded from its runs.
std::vector<std::string> transfer_lines(const Exchange& ex) {
  std::vector<std::string> out;
  ex.for_each([&](const TransferView& t) {
    std::string dst;
    for (const TileRange& r : t.dst)
      dst += fmt::format("{}{}..{}", dst.empty() ? "" : ",", r.first, r.last);
    out.push_back(fmt::format("{}..{} -> {} {} {}", t.src.first, t.src.last, dst, t.bytes,
                              kTransferModeNames[static_cast<std::size_t>(t.mode)]));
  });
  return out;
}

TEST(TraceRuns, HandWrittenRunsExpandAsSpelled) {
  const Trace t = parse(R"(ipusim-trace 3
ipu 0
computeset c
  vertex tiles=1..2 count=3 step=10 copy bytes=4
  vertex tiles=9 count=2 step=-9 copy bytes=8
end
exchange e
  transfer src=2 dst=0 bytes=14 count=4 src_step=2
  transfer src=0 dst=0..3,8 bytes=4704 count=3 src_step=1 dst_step=4 bytes_step=-672
  transfer src=5..6 dst=7 bytes=1 mode=personalised
end
program
  compute c
  exchange e
end
)");
  const Exchange& ex = t.ipus[0].exchanges[0];
  ASSERT_EQ(ex.transfers.size(), 3u);  // read as spelled: three records
  EXPECT_EQ(ex.transfer_count(), 8u);
  const std::vector<std::string> expected{
      "2..2 -> 0..0 14 multicast",           "4..4 -> 0..0 14 multicast",
      "6..6 -> 0..0 14 multicast",           "8..8 -> 0..0 14 multicast",
      "0..0 -> 0..3,8..8 4704 multicast",    "1..1 -> 4..7,12..12 4032 multicast",
      "2..2 -> 8..11,16..16 3360 multicast", "5..6 -> 7..7 1 personalised"};
  EXPECT_EQ(transfer_lines(ex), expected);
  const ComputeSet flat = expanded(t.ipus[0].compute_sets[0]);
  std::vector<TileRange> tiles;
  for (const Vertex& v : flat.vertices) tiles.push_back(v.tiles);
  EXPECT_EQ(tiles, (std::vector<TileRange>{{1, 2}, {11, 12}, {21, 22}, {9, 9}, {0, 0}}));
  // The expanded form has the same transfers; coalescing it gives back the runs the compiler
  // would write (here the same records: each was already a maximal run).
  Exchange again = expanded(ex);
  EXPECT_EQ(again.transfers.size(), 8u);
  EXPECT_EQ(transfer_lines(again), expected);
  coalesce(again);
  EXPECT_EQ(again, ex);
}

TEST(TraceRuns, AddCoalescesAndRoundTripsExactly) {
  // The pattern of a compiled reduction: each destination tile receives from every even tile
  // but itself, then a few irregular transfers.
  Exchange ex{"reduce", {}, {}};
  Exchange literal{"reduce", {}, {}};
  std::vector<std::string> lines;
  for (std::uint32_t d = 0; d < 16; d += 2)
    for (std::uint32_t s = 0; s < 16; s += 2) {
      if (s == d) continue;
      const TileRange dst{d, d};
      ex.add({s, s}, {&dst, 1}, 14);
      literal.add_run({s, s}, {&dst, 1}, 14, TransferMode::kMulticast, 1, 0, 0, 0);
    }
  for (std::uint32_t s : {3u, 7u, 8u}) {
    const TileRange dst{1, 1};
    ex.add({s, s}, {&dst, 1}, s);
    literal.add_run({s, s}, {&dst, 1}, s, TransferMode::kMulticast, 1, 0, 0, 0);
  }
  EXPECT_EQ(ex.transfer_count(), 8u * 7u + 3u);
  EXPECT_LT(ex.transfers.size(), 20u);
  EXPECT_EQ(transfer_lines(ex), transfer_lines(literal));
  EXPECT_EQ(expanded(ex), literal);
  Exchange c = literal;
  coalesce(c);
  EXPECT_EQ(c, ex);  // coalesce() and add() build the same runs
  coalesce(c);
  EXPECT_EQ(c, ex);  // idempotent

  // Both forms (runs and one record per transfer) round-trip exactly through text and binary.
  for (const Exchange* e : {&ex, &literal}) {
    Trace t;
    t.ipus.emplace_back().exchanges.push_back(*e);
    const std::string text = to_text(t);
    EXPECT_EQ(parse(text), t);
    EXPECT_EQ(from_binary(to_binary(t), 0), t);
    EXPECT_EQ(to_text(from_binary(to_binary(parse(text)), 0)), text);
  }
}

// add()'s inline extension of a run to one destination range builds the same records as the
// general rule (add_general) for any sequence: runs of every step, breaks in the source, the
// destination, the bytes or the mode, several destination ranges, and runs reaching their end.
TEST(TraceRuns, AddsInlineRunExtensionIsTheGeneralRule) {
  std::mt19937 rng(31);
  for (int round = 0; round < 200; ++round) {
    Exchange fast{"x", {}, {}}, general{"x", {}, {}};
    std::uniform_int_distribution<int> pick(0, 9);
    std::uint32_t src = 0, dst = 100;
    std::uint64_t bytes = 64;
    std::int64_t step = 1;
    for (int i = 0; i < 300; ++i) {
      switch (pick(rng)) {
        case 0:
          step = pick(rng) - 3;
          break;  // a new source step
        case 1:
          dst += static_cast<std::uint32_t>(pick(rng));
          break;  // the destination moves
        case 2:
          bytes += static_cast<std::uint64_t>(pick(rng));
          break;
        default:
          break;
      }
      src = static_cast<std::uint32_t>(std::max<std::int64_t>(0, src + step));
      const bool two = pick(rng) == 0;
      const std::array<TileRange, 2> d{TileRange{dst, dst}, TileRange{dst + 2, dst + 3}};
      const auto mode = pick(rng) == 0 ? TransferMode::kPersonalised : TransferMode::kMulticast;
      fast.add({src, src}, {d.data(), two ? 2u : 1u}, bytes, mode);
      general.add_general({src, src}, {d.data(), two ? 2u : 1u}, bytes, mode);
    }
    ASSERT_EQ(fast, general) << "round " << round;
    EXPECT_LT(fast.transfers.size(), 300u);  // some runs formed
  }
}

// Version 1 and 2 files read as the same program as the version 3 file with the same lines:
// one record per transfer and vertex line (runs only where a v3 file spells them).
TEST(TraceRuns, OldFilesReadToTheSameProgram) {
  const std::string root = std::string(IPUSIM_SOURCE_DIR) + "/tests/";
  int files = 0;
  for (const std::string dir : {"regression/traces", "fuzz/text_trace/corpus"}) {
    for (const auto& entry : std::filesystem::directory_iterator(root + dir)) {
      std::ifstream in(entry.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto header = text.find("ipusim-trace ");
      if (header == std::string::npos) continue;
      const char version = text[header + 13];
      if (version != '1' && version != '2') continue;
      Trace old;
      try {
        old = parse(text, entry.path().string());
      } catch (const TraceError&) {
        continue;  // the corpus also holds invalid inputs
      }
      std::string as_v3 = text;
      as_v3[header + 13] = '3';
      const Trace literal = parse(as_v3, entry.path().string());
      ++files;
      EXPECT_EQ(old, literal) << entry.path();
      // Coalesced, it is still the same program.
      Trace runs = old;
      coalesce(runs);
      for (std::size_t i = 0; i < old.ipus.size(); ++i)
        for (std::size_t e = 0; e < old.ipus[i].exchanges.size(); ++e)
          EXPECT_EQ(expanded(runs.ipus[i].exchanges[e]), old.ipus[i].exchanges[e]) << entry.path();
      // Written in the current version and read back: the same program.
      EXPECT_EQ(parse(to_text(old)), old);
      EXPECT_EQ(from_binary(to_binary(old), 0), old);
    }
  }
  EXPECT_GE(files, 10);
}

// Version 1 and 2 binary files (the fuzz corpus seeds) read as the program their text twin
// spells, and write back as version 3 files that read as the same program.
TEST(TraceRuns, OldBinaryFilesReadToTheSameProgram) {
  const std::string root = std::string(IPUSIM_SOURCE_DIR) + "/tests/fuzz/";
  int files = 0, twins = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root + "binary_trace/corpus")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() < 12 || bytes.compare(0, 8, "IPUTRACE") != 0 ||
        (bytes[8] != 1 && bytes[8] != 2))
      continue;
    Trace old;
    try {
      old = from_binary(bytes, bytes.size());
    } catch (const TraceError&) {
      continue;  // the corpus also holds invalid inputs
    }
    ++files;
    const std::string current = to_binary(old);
    EXPECT_EQ(current.substr(8, 4), std::string("\x06\x00\x00\x00", 4));
    EXPECT_EQ(from_binary(current, current.size()), old) << entry.path();
    EXPECT_EQ(parse(to_text(old)), old) << entry.path();
    auto twin = entry.path();
    twin.replace_extension(".txt");
    const auto text_path = root + "text_trace/corpus/" + twin.filename().string();
    if (std::filesystem::exists(text_path)) {
      std::ifstream tin(text_path);
      const std::string text((std::istreambuf_iterator<char>(tin)),
                             std::istreambuf_iterator<char>());
      try {
        EXPECT_EQ(parse(text, text_path), old) << text_path;
        ++twins;
      } catch (const TraceError&) {
      }
    }
  }
  EXPECT_GE(files, 8);
  EXPECT_GE(twins, 3);
}

TEST(TraceRuns, InvalidRunsAreRejected) {
  const std::string head = "ipusim-trace 3\nipu 0\nexchange e\n";
  EXPECT_TRUE(contains(text_error(head + "  transfer src=0 dst=1 bytes=1 count=0\nend\n"),
                       "t.trace:4: expected count= in 1..4294967295, found '0'"));
  EXPECT_TRUE(contains(text_error(head + "  transfer src=0 dst=1 bytes=1 src_step=2\nend\n"),
                       "t.trace:4: expected no steps for a single record"));
  EXPECT_TRUE(
      contains(text_error(head + "  transfer src=5 dst=1 bytes=1 count=7 src_step=-1\nend\n"),
               "steps tile range 5..5 by -1 over 7 copies"));
  EXPECT_TRUE(
      contains(text_error(head + "  transfer src=0 dst=1 bytes=4 count=9 bytes_step=-1\nend\n"),
               "steps bytes 4 by -1 over 9 transfers"));
  EXPECT_TRUE(contains(
      text_error(
          "ipusim-trace 2\nipu 0\nexchange e\n  transfer src=0 dst=1 bytes=1 count=2\nend\n"),
      "t.trace:4: 'count=' needs trace format version 3"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 2\nipu 0\ncomputeset c\n  vertex tiles=0 count=2 "
                                  "step=1 copy bytes=1\nend\n"),
                       "t.trace:4: 'count=' needs trace format version 3"));
  // A run past the chip's last tile names the item.
  const Trace t = parse(
      "ipusim-trace 3\nipu 0\ncomputeset c\n  vertex tiles=0 count=5 step=400 copy bytes=1\nend\n");
  EXPECT_EQ(error_of([&] { check_tiles(t, 1472, "k.trace"); }),
            "k.trace: compute set 'c' vertex 0 uses tile 1600 but the chip has 1472 tiles");
  // The binary form has one encoding per value: a padded varint or a repeated "new bytes" is
  // an error, not another spelling.
  Trace one;
  Exchange& ex = one.ipus.emplace_back().exchanges.emplace_back();
  ex.name = "e";
  const TileRange d{1, 1};
  ex.add_run({0, 0}, {&d, 1}, 0, TransferMode::kMulticast, 1, 0, 0, 0);
  const std::string bytes = to_binary(one);
  // The transfer record is at the end, before the move count, the reduce-scatter count and
  // the step count (4 bytes each): flags, src delta 0, dst delta 2 (zigzag of 1), dst span 0.
  const std::size_t rec = bytes.size() - 4 - 4 - 4 - 4;
  ASSERT_EQ(bytes.substr(rec), std::string("\x00\x00\x02\x00", 4) + std::string(12, '\0'));
  std::string padded = bytes;
  padded.replace(rec + 1, 1, std::string("\x80\x00", 2));
  EXPECT_TRUE(contains(error_of([&] { from_binary(padded, 0); }), "shortest varint form"));
  std::string same_bytes = bytes;
  same_bytes[rec] = 0x10;
  same_bytes.insert(rec + 2, 1, '\0');  // "new bytes" 0, equal to the previous (0)
  EXPECT_TRUE(
      contains(error_of([&] { from_binary(same_bytes, 0); }), "expected new transfer bytes"));
}

// docs/trace-format.md §6, "v3 example".
TEST(TraceRuns, BinaryRecordIsAsDocumented) {
  Trace t;
  Exchange& ex = t.ipus.emplace_back().exchanges.emplace_back();
  ex.name = "e";
  const TileRange d{0, 0};
  ex.add_run({2, 2}, {&d, 1}, 14, TransferMode::kMulticast, 712, 2, 0, 0);
  const std::string bytes = to_binary(t);
  // ... exchange name, transfer count 1, the record, then the move count (v5), the
  // reduce-scatter count (v6) and the step count (4 bytes each).
  EXPECT_EQ(bytes.substr(bytes.size() - 4 - 4 - 4 - 8, 8),
            std::string("\x32\x04\x0e\x00\x00\xc6\x05\x04", 8));
  EXPECT_EQ(from_binary(bytes, bytes.size()), t);
}

// --- provenance (v3)
// ------------------------------------------------------------------------------

TEST(TraceProvenance, RoundTripsAndIsChecked) {
  const Trace ir = parse(kEveryFeature);
  const ComputeSet& convs = ir.ipus[0].compute_sets[0];
  EXPECT_EQ(convs.provenance.layers, (std::vector<std::string>{"b1/conv1", "b2/conv1"}));
  EXPECT_EQ(convs.provenance.pass, Pass::kForward);
  EXPECT_EQ(convs.provenance.op, OpKind::kConv);
  EXPECT_TRUE(ir.ipus[0].compute_sets[1].provenance.empty());
  EXPECT_EQ(ir.ipus[0].exchanges[0].provenance.pass, Pass::kWeightGradient);
  EXPECT_EQ(ir.ipus[0].exchanges[0].provenance.op, OpKind::kNone);
  EXPECT_EQ(ir.global_exchanges[0].provenance.pass, Pass::kPipelineCopy);
  EXPECT_EQ(ir.ipus[0].steps[0].provenance.op, OpKind::kCopy);
  // A compute step's own pass (v4): IPU 3 runs `only` as a recomputation; IPU 0's `convs`
  // step has none, so it runs in its compute set's pass.
  const Step& only = ir.ipus[1].steps[0];
  EXPECT_EQ(only.provenance.pass, Pass::kRecompute);
  EXPECT_EQ(only.pass_of(ir.ipus[1].compute_sets[0].provenance), Pass::kRecompute);
  const Step& convs_step = ir.ipus[0].steps[1].body[2];
  EXPECT_EQ(convs_step.provenance.pass, Pass::kNone);
  EXPECT_EQ(convs_step.pass_of(convs.provenance), Pass::kForward);
  // Text, binary and IR agree (TraceRoundTrip covers the bytes); provenance is part of the
  // identity.
  Trace other = ir;
  other.ipus[0].compute_sets[0].provenance.layers.pop_back();
  EXPECT_NE(identity(other), identity(ir));
  EXPECT_EQ(from_binary(to_binary(other), 0), other);
  EXPECT_EQ(parse(to_text(other)), other);
  // Errors: fields of version 3 in an older file, unknown values, repeated layers, provenance
  // on a step kind that takes none.
  EXPECT_TRUE(contains(text_error("ipusim-trace 2\nipu 0\ncomputeset c layer=a\nend\n"),
                       "t.trace:3: 'layer=' needs trace format version 3"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 0\nexchange e pass=forwards\nend\n"),
                       "t.trace:3: unknown pass 'forwards' (did you mean 'forward'?)"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 0\ncomputeset c op=conv2d\nend\n"),
                       "t.trace:3: unknown op kind 'conv2d'"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 0\ncomputeset c layer=a,b,a\nend\n"),
                       "t.trace:3: expected each layer once in layer=, found 'a' twice"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 0\ncomputeset c layer=a,\nend\n"),
                       "t.trace:3: expected a layer name"));
  // A step's pass is version 4's; a step takes a pass and nothing else.
  EXPECT_TRUE(contains(
      text_error("ipusim-trace 3\nipu 0\ncomputeset c\nend\nprogram\n  compute c pass=recompute\n"
                 "end\n"),
      "t.trace:6: 'pass=' needs trace format version 4, but the header says version 3"));
  EXPECT_TRUE(contains(
      text_error("ipusim-trace 5\nipu 0\nexchange e\nend\nprogram\n  exchange e layer=a\nend\n"),
      "t.trace:6: unknown key 'layer' for exchange step (expected one of: pass)"));
  Trace bad = ir;
  bad.ipus[1].steps[0].provenance.op = OpKind::kConv;
  EXPECT_TRUE(contains(error_of([&] { check_structure(bad, "x"); }),
                       "sets fields that its kind does not use"));
  bad = ir;
  bad.ipus[0].steps[1].provenance.pass = Pass::kForward;  // a repeat step
  EXPECT_TRUE(contains(error_of([&] { check_structure(bad, "x"); }),
                       "program step 1 (repeat) sets fields that its kind does not use"));
  bad = ir;
  bad.ipus[0].compute_sets[0].provenance.layers.push_back("b1/conv1");
  EXPECT_TRUE(
      contains(error_of([&] { check_structure(bad, "x"); }), "names layer 'b1/conv1' twice"));
}

TEST(TraceLifetime, RoundTripsAndIsChecked) {
  const Trace ir = parse(kEveryFeature);
  const IpuProgram& p = ir.ipus[0];
  // Positions by hand: host 0, repeat 1 (fetch 2, sync 3, convs 4, repeat 5 (elementwise 6,
  // sync 7, repeat 8 (empty 9)), stage copies 10), host 11, sync 12, four collectives 13..16.
  EXPECT_EQ(program_positions(p.steps), 17u);
  EXPECT_EQ(program_positions(ir.ipus[1].steps), 1u);
  EXPECT_EQ(program_positions(ir.ipus[2].steps), 0u);
  EXPECT_FALSE(p.tensors[0].live.has_value());
  EXPECT_EQ(p.tensors[1].live, (Lifetime{2, 10}));
  EXPECT_EQ(p.tensors[2].live, (Lifetime{16, 16}));
  // A lifetime is part of the identity, and survives both forms.
  Trace other = ir;
  other.ipus[0].tensors[1].live->last = 9;
  EXPECT_NE(identity(other), identity(ir));
  EXPECT_EQ(from_binary(to_binary(other), 0), other);
  EXPECT_EQ(parse(to_text(other)), other);
  // Errors: a version-2 file, first > last, not a number, beyond the program's last position.
  EXPECT_TRUE(contains(text_error("ipusim-trace 2\nipu 0\ntensor t tiles=0 bytes=4 live=0\n"),
                       "t.trace:3: 'live=' needs trace format version 3"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 0\ntensor t tiles=0 bytes=4 live=3..2\n"),
                       "t.trace:3: expected program positions with first <= last for live=, "
                       "found '3..2'"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 0\ntensor t tiles=0 bytes=4 live=-1\n"),
                       "t.trace:3: expected program positions like 5 or 0..120"));
  EXPECT_TRUE(contains(
      text_error("ipusim-trace 3\nipu 0\ntensor t tiles=0 bytes=4 live=1..2\nprogram\n  sync\n"
                 "  sync\nend\n"),
      "t.trace:3: tensor 't' is live at positions 1..2, but the program of ipu 0 has 2 "
      "position(s) (0..1)"));
  EXPECT_TRUE(contains(text_error("ipusim-trace 3\nipu 5\n\ntensor t tiles=0 bytes=4 live=0\n"),
                       "t.trace:4: tensor 't' is live at positions 0..0, but the program of ipu "
                       "5 has 0 position(s)"));
  Trace bad = ir;
  bad.ipus[0].tensors[1].live = Lifetime{5, 4};
  EXPECT_TRUE(contains(error_of([&] { check_structure(bad, "x"); }),
                       "tensor 'acts' is live at positions 5..4, expected first <= last"));
  bad.ipus[0].tensors[1].live = Lifetime{5, 17};
  EXPECT_TRUE(contains(error_of([&] { check_structure(bad, "x"); }),
                       "tensor 'acts' is live at positions 5..17, but the program has 17 "
                       "position(s) (0..16)"));
  // The binary reader names the offending bytes: the last position of 'acts'.
  std::string beyond = to_binary(ir);
  const std::size_t acts = beyond.find("acts");
  ASSERT_NE(acts, std::string::npos);
  const std::size_t last_at = acts + 4 + 1 + 1 + 8 + 8 + 8;  // kind, dtype, tiles, bytes, first
  beyond[last_at] = 17;
  EXPECT_EQ(error_of([&] { from_binary(beyond, 0); }),
            fmt::format("t.itb@{}: expected a last live position below the program's 17 "
                        "position(s), found 17",
                        last_at));
  beyond[last_at] = 1;
  EXPECT_EQ(
      error_of([&] { from_binary(beyond, 0); }),
      fmt::format("t.itb@{}: expected a last live position >= the first (2), found 1", last_at));
  // A version-2 binary file has no lifetime bit.
  Trace v2 =
      parse("ipusim-trace 3\nipu 0\ntensor t tiles=0 bytes=4 live=0\nprogram\n  sync\nend\n");
  std::string bytes = to_binary(v2);
  ASSERT_NE(bytes.find(static_cast<char>(0x81)), std::string::npos);
  bytes[8] = 2;
  EXPECT_TRUE(
      contains(error_of([&] { from_binary(bytes, 0); }), "expected a tensor kind 0..7, found 129"));
}

// Seeded byte mutations: every outcome is a valid trace or a TraceError, never a crash or
// another exception.
TEST(TraceBinaryErrors, RandomCorruptionNeverCrashes) {
  const std::string bytes = to_binary(parse(kEveryFeature));
  std::mt19937 rng(12345);
  std::uniform_int_distribution<std::size_t> pos(0, bytes.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 3000; ++i) {
    std::string m = bytes;
    for (int k = 0; k < 1 + i % 3; ++k) m[pos(rng)] = static_cast<char>(byte(rng));
    try {
      from_binary(m, i % 2 ? m.size() : 0);
    } catch (const TraceError& e) {
      EXPECT_TRUE(contains(e.what(), "t.itb@"));
    }
  }
}

TEST(TraceTextErrors, RandomCorruptionNeverCrashes) {
  const std::string text = kEveryFeature;
  std::mt19937 rng(54321);
  std::uniform_int_distribution<std::size_t> pos(0, text.size() - 1);
  const std::string alphabet = "0123456789.=,#_ \nabcdefghijklmnopqrstuvwxyz";
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  for (int i = 0; i < 3000; ++i) {
    std::string m = text;
    for (int k = 0; k < 1 + i % 3; ++k) m[pos(rng)] = alphabet[pick(rng)];
    try {
      parse(m);
    } catch (const TraceError& e) {
      EXPECT_TRUE(contains(e.what(), "t.trace:"));
    }
  }
}

// A seeded linear congruential generator: next(n) is in 0..n-1, the same on every platform.
class Random {
 public:
  explicit Random(std::uint64_t seed) : seed_(seed) {}
  std::uint64_t operator()(std::uint64_t below) {
    seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull;
    return (seed_ >> 33) % below;
  }

 private:
  std::uint64_t seed_;
};

// The coalescing rule written out as §4.2 states it, over the expanded list: a run starts only
// where three consecutive vertices are affine, then extends while the next continues it.
std::vector<Vertex> reference_runs(const std::vector<Vertex>& items) {
  const auto same = [](const Vertex& a, const Vertex& b) {
    return a.codelet == b.codelet && a.params == b.params && a.tiles.size() == b.tiles.size();
  };
  const auto at = [](const Vertex& a, std::int64_t step, std::uint64_t k) {
    return std::int64_t{a.tiles.first} + step * static_cast<std::int64_t>(k);
  };
  std::vector<Vertex> out;
  for (std::size_t i = 0; i < items.size();) {
    std::size_t len = 1;
    const std::int64_t step =
        i + 1 < items.size() ? std::int64_t{items[i + 1].tiles.first} - items[i].tiles.first : 0;
    if (i + 2 < items.size() && same(items[i], items[i + 1]) && same(items[i], items[i + 2]) &&
        items[i + 2].tiles.first == at(items[i], step, 2)) {
      len = 3;
      while (i + len < items.size() && same(items[i], items[i + len]) &&
             items[i + len].tiles.first == at(items[i], step, len))
        ++len;
    }
    Vertex v = items[i];
    if (len > 1) {
      v.count = static_cast<std::uint32_t>(len);
      v.step = step;
    }
    out.push_back(v);
    i += len;
  }
  return out;
}

// ComputeSet::add (vertices one by one) and coalesce (of runs, of singles) build the records the
// rule builds, on random sequences of short and long affine stretches of a few kinds of vertex.
TEST(TraceRuns, VerticesAddedOneByOneOrCoalescedAreTheRulesRuns) {
  Random next(99);
  for (int round = 0; round < 300; ++round) {
    std::vector<Vertex> flat;
    for (std::uint64_t pieces = 1 + next(6); pieces > 0; --pieces) {
      Vertex v{next(2) == 0 ? Codelet::kCopy : Codelet::kBinary, {}, {}};
      v.params[0] = static_cast<std::int64_t>(next(2));
      const auto first = static_cast<std::uint32_t>(next(100)),
                 size = static_cast<std::uint32_t>(next(3));
      const std::int64_t step = static_cast<std::int64_t>(next(7)) - 3;
      for (std::uint64_t k = 0, n = 1 + next(6); k < n; ++k) {
        const auto shift = static_cast<std::uint32_t>(200 + step * static_cast<std::int64_t>(k));
        v.tiles = {first + shift, first + shift + size};
        flat.push_back(v);
      }
    }
    const std::vector<Vertex> want = reference_runs(flat);
    ComputeSet added;
    for (const Vertex& v : flat) added.add(v);
    EXPECT_EQ(added.vertices, want) << round;
    ComputeSet singles{"c", flat, {}};
    coalesce(singles);
    EXPECT_EQ(singles.vertices, want) << round;
    // Coalescing records that are already runs (split at random) gives the same runs.
    ComputeSet split;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const Vertex& r = want[i];
      const std::uint32_t cut = r.count > 1 ? static_cast<std::uint32_t>(next(r.count)) : 0;
      Vertex head = r, tail = r;
      if (cut > 0) {
        head.count = cut;
        if (cut == 1) head.step = 0;
        tail.tiles = r.tiles_at(cut);
        tail.count = r.count - cut;
        if (tail.count == 1) tail.step = 0;
        split.vertices.push_back(head);
      }
      split.vertices.push_back(tail);
    }
    coalesce(split);
    EXPECT_EQ(split.vertices, want) << round;
  }
}

// docs/trace-format.md §4.4: the example move is the two transfers the text names, in order.
TEST(TraceMoves, DocumentedExampleIsTwoTransfers) {
  const Trace t = parse(
      "ipusim-trace 5\nipu 0\nexchange e\n"
      "  move positions=8 channels=8 element_bytes=2 from=0/1/4x8 to=0/1/8x4\nend\n");
  const Exchange& ex = t.ipus[0].exchanges[0];
  ASSERT_EQ(ex.moves.size(), 1u);
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>> seen;
  ex.for_each([&](const TransferView& v) {
    ASSERT_EQ(v.dst.size(), 1u);
    EXPECT_EQ(v.src.first, v.src.last);
    EXPECT_EQ(v.mode, TransferMode::kMulticast);
    seen.emplace_back(v.src.first, v.dst[0].first, v.bytes);
  });
  EXPECT_EQ(seen, (std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>>{
                      {1, 0, 32}, {0, 1, 32}}));
  EXPECT_EQ(ex.transfer_count(), 2u);
  EXPECT_EQ(ex.moves[0].cells(), 4u);  // two of the four pieces stay on their tile
  // expanded() writes them out as transfer records; coalesce() keeps the move.
  const Exchange flat = expanded(ex);
  EXPECT_TRUE(flat.moves.empty());
  EXPECT_EQ(flat.transfers.size(), 2u);
  Exchange same = ex;
  coalesce(same);
  EXPECT_EQ(same, ex);
}

// A move of up to `size` x `size` elements of 1 to 4 bytes between two random grids on tiles
// from 0..7 on, with strides 1 to 3, in either block order (so the grids often share tiles).
Move random_move(Random& next, std::uint64_t size) {
  Move m;
  m.positions = 1 + next(size);
  m.channels = 1 + next(size);
  m.element_bytes = 1 + static_cast<std::uint32_t>(next(4));
  for (BlockGrid* g : {&m.from, &m.to}) {
    g->positions_per_tile = 1 + next(m.positions);
    g->chans_per_tile = 1 + next(m.channels);
    g->first_tile = static_cast<std::uint32_t>(next(8));
    g->tile_stride = 1 + static_cast<std::uint32_t>(next(3));
    g->channels_outer = next(2) == 0;
  }
  return m;
}

// Move::cells (closed form: the common refinement of the two grids' cuts) against the distinct
// (from block, to block) pairs of a tensor's elements, on random grids.
TEST(TraceMoves, CellsCountEveryPieceInClosedForm) {
  Random next(99);
  for (int round = 0; round < 500; ++round) {
    Move m = random_move(next, 60);
    std::set<std::array<std::uint64_t, 4>> pairs;
    for (std::uint64_t p = 0; p < m.positions; ++p)
      for (std::uint64_t c = 0; c < m.channels; ++c)
        pairs.insert({p / m.from.positions_per_tile, c / m.from.chans_per_tile,
                      p / m.to.positions_per_tile, c / m.to.chans_per_tile});
    EXPECT_EQ(m.cells(), pairs.size()) << round;
    // On tiles apart (`to` from tile 2^20, past every tile of `from`) every piece is a
    // transfer.
    m.to.first_tile = 1u << 20;
    std::uint64_t transfers = 0;
    m.for_each_piece([&](std::uint32_t, std::uint32_t, std::uint64_t) { ++transfers; });
    EXPECT_EQ(transfers, pairs.size()) << round;
  }
}

// Each tile's share of a structured record's transfers (a move's or a reduce-scatter's), as
// the record's for_each_piece lists them (`pieces`) and as its for_each_tile gives them
// (`tiles`); receive() and send() take the latter and check a receiver's sender span.
struct TileShare {
  std::uint64_t in = 0, out = 0, received = 0, sent = 0;
  std::uint32_t lowest = ~0u, highest = 0;
  bool operator==(const TileShare&) const = default;
};
struct TileShares {
  std::map<std::uint32_t, TileShare> pieces, tiles;
  void piece(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
    pieces[dst].received += bytes;
    ++pieces[dst].in;
    pieces[src].sent += bytes;
    ++pieces[src].out;
    pieces[dst].lowest = std::min(pieces[dst].lowest, src);
    pieces[dst].highest = std::max(pieces[dst].highest, src);
  }
  // The span given may include the tile itself (its own block or stage-group member, which
  // sends it nothing).
  void receive(std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers, std::uint32_t lowest,
               std::uint32_t highest) {
    tiles[t].received += bytes;
    tiles[t].in += transfers;
    EXPECT_LE(lowest, pieces[t].lowest);
    EXPECT_GE(highest, pieces[t].highest);
    EXPECT_TRUE(lowest == pieces[t].lowest || lowest == t);
    EXPECT_TRUE(highest == pieces[t].highest || highest == t);
    tiles[t].lowest = pieces[t].lowest;
    tiles[t].highest = pieces[t].highest;
  }
  void send(std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers) {
    tiles[t].sent += bytes;
    tiles[t].out += transfers;
  }
};

// Move::for_each_tile (each tile's sums in time linear in the blocks) gives what adding up
// for_each_piece's transfers gives, on random grids that share tiles, in either block order.
TEST(TraceMoves, TileSumsAreThoseOfTheTransfers) {
  Random next(2024);
  for (int round = 0; round < 500; ++round) {
    const Move m = random_move(next, 50);
    TileShares s;
    m.for_each_piece([&](std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
      s.piece(src, dst, bytes);
    });
    m.for_each_tile(
        [&](std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers, std::uint32_t lowest,
            std::uint32_t highest) {
          if (transfers != 0) s.receive(t, bytes, transfers, lowest, highest);
        },
        [&](std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers) {
          if (transfers != 0) s.send(t, bytes, transfers);
        });
    EXPECT_EQ(s.tiles, s.pieces) << round;
  }
}

TEST(TraceMoves, BadMovesAreRejectedWhereTheyAre) {
  const std::string head = "ipusim-trace 5\nipu 0\nexchange e\n";
  const auto move_error = [&](const std::string& line) {
    return text_error(head + "  move " + line + "\nend\n");
  };
  EXPECT_EQ(move_error("positions=4 channels=4 element_bytes=2 from=0/1/4x4 to=0/1/2"),
            "t.trace:4: expected a block grid like 0/1/64x128 or 4/2/1x64/channels_outer "
            "(first tile/tile stride/positions x channels per block[/channels_outer]) for to=, "
            "found '0/1/2'");
  EXPECT_EQ(move_error("positions=4 channels=4 element_bytes=2 from=0/0/4x4 to=0/1/2x2"),
            "t.trace:4: this move has from tile stride 0, expected at least 1");
  EXPECT_EQ(move_error("positions=4 channels=4 element_bytes=2 from=0/1/5x4 to=0/1/2x2"),
            "t.trace:4: this move has from blocks of 5 x 4 elements, expected 1..4 x 1..4");
  EXPECT_EQ(move_error("positions=4 channels=4 element_bytes=9 from=0/1/4x4 to=0/1/2x2"),
            "t.trace:4: this move has element_bytes = 9, expected 1..8");
  EXPECT_EQ(move_error("positions=4 channels=4 element_bytes=2 from=4294967295/1/2x4 to=0/1/2x2"),
            "t.trace:4: this move places blocks on tile 4294967296, past 2^32 - 1");
  EXPECT_EQ(move_error("positions=4194304 channels=2 element_bytes=2 from=0/1/1x2 to=0/1/1x1"),
            "t.trace:4: this move cuts the tensor into 8388608 pieces, expected at most 4194304");
  EXPECT_TRUE(
      contains(move_error("positions=4 channels=4 from=0/1/4x4 to=0/1/2x2"), "element_bytes"));
  EXPECT_EQ(text_error("ipusim-trace 4\nipu 0\nexchange e\n  move positions=4 channels=4 "
                       "element_bytes=2 from=0/1/4x4 to=0/1/2x2\nend\n"),
            "t.trace:4: 'move' needs trace format version 5, but the header says version 4");
  EXPECT_EQ(
      text_error(head + "  move positions=4 channels=4 element_bytes=2 from=0/1/4x4 to=0/1/2x2\n"
                        "  transfer src=0 dst=1 bytes=4\nend\n"),
      "t.trace:5: expected 'move' or 'end' after a move, found 'transfer' (an exchange "
      "lists its transfers, then its moves, then its reduce-scatters)");
  // Past the chip's tiles: named by check_tiles.
  const Trace wide = parse(head +
                           "  move positions=4 channels=4 element_bytes=2 from=0/1/1x4 "
                           "to=1470/1/2x4\nend\n");
  EXPECT_EQ(error_of([&] { check_tiles(wide, 1471, "w.trace"); }),
            "w.trace: exchange 'e' move 0 sends to tiles 1470..1471 but the chip has 1471 tiles");
  // Binary: the offset of the field, or of the move when the move as a whole is invalid.
  const Trace ok = parse(head +
                         "  move positions=4 channels=4 element_bytes=2 from=0/1/4x4 "
                         "to=0/1/2x2\nend\n");
  const std::string bytes = to_binary(ok);
  // The move is the last record before the reduce-scatter count and the step count: 4, 4, 2,
  // then two grids of five bytes.
  const std::size_t move_at = bytes.size() - 4 - 4 - 13;
  ASSERT_EQ(bytes.substr(move_at, 13),
            std::string("\x04\x04\x02\x00\x01\x04\x04\x00\x00\x01\x02\x02\x00", 13));
  std::string bad_order = bytes;
  bad_order[move_at + 12] = 2;
  EXPECT_EQ(error_of([&] { from_binary(bad_order, 0); }),
            fmt::format("t.itb@{}: expected a move block order 0 (positions outer) or 1 (channels "
                        "outer), found 2",
                        move_at + 12));
  std::string bad_block = bytes;
  bad_block[move_at + 10] = 5;  // to: 5 positions per block of 4
  EXPECT_EQ(error_of([&] { from_binary(bad_block, 0); }),
            fmt::format("t.itb@{}: expected a valid move, found one that has to blocks of 5 x 2 "
                        "elements, expected 1..4 x 1..4",
                        move_at));
  EXPECT_EQ(from_binary(bytes, bytes.size()), ok);
}

// --- reduce-scatters (v6)

// docs/trace-format.md §4.5: the example is the eight transfers the text names, in order.
TEST(TraceReduceScatters, DocumentedExampleIsFourTransfers) {
  const Trace t = parse(
      "ipusim-trace 6\nipu 0\nexchange e\n"
      "  reduce_scatter members=4 member_step=1 fan_in=2 stride=1 element_bytes=2 groups=0:8\n"
      "end\n");
  const Exchange& ex = t.ipus[0].exchanges[0];
  ASSERT_EQ(ex.reduce_scatters.size(), 1u);
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>> seen;
  ex.for_each([&](const TransferView& v) {
    ASSERT_EQ(v.dst.size(), 1u);
    seen.emplace_back(v.src.first, v.dst[0].first, v.bytes);
  });
  const std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>> want{
      {1, 0, 8}, {0, 1, 8}, {3, 2, 8}, {2, 3, 8}};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(ex.transfer_count(), 4u);
}

// A random valid reduce-scatter of up to `members` members per group, on tiles below 2^12.
ReduceScatter random_reduce_scatter(Random& next, std::uint32_t members) {
  ReduceScatter r;
  r.members = 2 + static_cast<std::uint32_t>(next(members - 1));
  r.member_step = 1 + static_cast<std::uint32_t>(next(4));
  r.fan_in = 2 + static_cast<std::uint32_t>(next(r.members + 1));
  r.stride = 1 + static_cast<std::uint32_t>(next(r.members));
  r.element_bytes = 1 + static_cast<std::uint32_t>(next(8));
  for (std::uint64_t runs = 1 + next(3); runs > 0; --runs)
    r.groups.push_back({static_cast<std::uint32_t>(next(1024)),
                        static_cast<std::uint32_t>(next(64)),
                        1 + static_cast<std::uint32_t>(next(4)), 1 + next(200)});
  return r;
}

// Staged as poplin stages it (stride f^t for stage t of reduction_stages), the records are a
// reduce-scatter: following which members' partials each member holds of each chunk through
// the stages' transfers (BSP: all of a stage's sends read the state before it), member k ends
// with every member's partials of chunk k, and each transfer carries exactly the chunks its
// receiver owns. Splits of two or more stages that are not a multiple of the fan-in leave
// some partials out (a known gap of the staging, docs/kernels.md): they are skipped.
TEST(TraceReduceScatters, PoplinsStagesEndWithEveryChunkReduced) {
  int checked = 0;
  for (std::uint32_t members = 2; members <= 40; ++members) {
    // (Not a structured binding: the lambda below uses the fan-in, which clang cannot capture.)
    const std::pair<int, std::uint64_t> plan_stages = plan::reduction_stages(members);
    const int stages = plan_stages.first;
    const std::uint64_t fan_in = plan_stages.second;
    if (stages > 1 && members % fan_in != 0) continue;
    ++checked;
    for (const std::uint64_t elements : {std::uint64_t{1}, std::uint64_t{members - 1},
                                         std::uint64_t{members} * 3 + 1, std::uint64_t{1000}}) {
      const std::uint64_t size = (elements + members - 1) / members;
      const auto chunk = [&](std::uint64_t c) {
        return c * size >= elements ? 0 : std::min(size, elements - c * size);
      };
      // held[k][c]: the members whose partials of chunk c member k holds.
      std::vector<std::vector<std::set<std::uint32_t>>> held(
          members, std::vector<std::set<std::uint32_t>>(members));
      for (std::uint32_t k = 0; k < members; ++k)
        for (std::uint32_t c = 0; c < members; ++c) held[k][c] = {k};
      std::uint64_t stride = 1;
      for (int t = 0; t < stages; ++t, stride *= fan_in) {
        ReduceScatter r;
        r.members = members;
        r.fan_in = static_cast<std::uint32_t>(fan_in);
        r.stride = static_cast<std::uint32_t>(stride);
        r.element_bytes = 1;
        r.groups.push_back({0, 0, 1, elements});
        ASSERT_FALSE(reduce_scatter_problem(r));
        const auto before = held;
        r.for_each_piece([&](std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
          std::uint64_t owned = 0;  // what dst owns in this stage: chunks c = dst mod span
          for (std::uint32_t c = 0; c < members; ++c)
            if (c % (stride * fan_in) == dst % (stride * fan_in)) {
              owned += chunk(c);
              held[dst][c].insert(before[src][c].begin(), before[src][c].end());
            }
          EXPECT_EQ(bytes, owned) << members << " " << elements << " stage " << t;
        });
      }
      for (std::uint32_t k = 0; k < members; ++k)
        if (chunk(k) != 0) {
          EXPECT_EQ(held[k][k].size(), members) << members << " " << k;
        }
    }
  }
  EXPECT_EQ(checked, 19);  // 2 to 16 (one stage), 20, 25, 30 and 36
}

TEST(TraceReduceScatters, TileSumsAreThoseOfTheTransfers) {
  Random next(77);
  for (int round = 0; round < 500; ++round) {
    const ReduceScatter whole = random_reduce_scatter(next, 20);
    ASSERT_FALSE(reduce_scatter_problem(whole)) << round;
    // One group at a time (groups may share tiles, and a stage group's span is per group);
    // ExchangeCost.ReduceScattersCostAsTheirTransfers checks whole records.
    const auto& run = whole.groups[round % whole.groups.size()];
    ReduceScatter r = whole;
    r.groups = {
        {run.first + static_cast<std::uint32_t>(round % run.count) * run.step, 0, 1, run.elements}};
    TileShares s;
    std::uint64_t count = 0;
    r.for_each_piece([&](std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) {
      EXPECT_NE(src, dst);
      s.piece(src, dst, bytes);
      ++count;
    });
    EXPECT_LE(count, r.transfer_bound());
    r.for_each_tile([&](std::uint32_t t, std::uint64_t bytes, std::uint64_t transfers,
                        std::uint32_t lowest, std::uint32_t highest, std::uint64_t sent,
                        std::uint64_t sent_transfers) {
      if (transfers != 0) {
        s.receive(t, bytes, transfers, lowest, highest);
      } else {
        EXPECT_EQ(bytes, 0u);
      }
      if (sent_transfers != 0 || sent != 0) s.send(t, sent, sent_transfers);
    });
    EXPECT_EQ(s.tiles, s.pieces) << round;
  }
}

TEST(TraceReduceScatters, BadRecordsAreRejectedWhereTheyAre) {
  const std::string head = "ipusim-trace 6\nipu 0\nexchange e\n";
  const auto rs_error = [&](const std::string& line) {
    return text_error(head + "  reduce_scatter " + line + "\nend\n");
  };
  const std::string ok = "members=4 member_step=1 fan_in=2 stride=1 element_bytes=2 ";
  EXPECT_EQ(rs_error("members=1 member_step=1 fan_in=2 stride=1 element_bytes=2 groups=0:8"),
            "t.trace:4: expected members= in 2..1099511627776, found 1");
  EXPECT_EQ(rs_error("members=4 member_step=0 fan_in=2 stride=1 element_bytes=2 groups=0:8"),
            "t.trace:4: expected member_step= in 1..1099511627776, found 0");
  EXPECT_EQ(rs_error("members=4 member_step=1 fan_in=2 stride=1 element_bytes=9 groups=0:8"),
            "t.trace:4: this reduce_scatter has element_bytes = 9, expected 1..8");
  EXPECT_EQ(rs_error(ok + "groups=0:0"),
            "t.trace:4: this reduce_scatter has group run 0 of 0 elements of 2 bytes, expected "
            "1..1099511627776 bytes");
  EXPECT_EQ(rs_error(ok + "groups=0/1/0:8"),
            "t.trace:4: this reduce_scatter has group run 0 of 0 groups, expected at least 1");
  EXPECT_EQ(rs_error(ok + "groups=0:8,4/2:8"),
            "t.trace:4: expected groups like 0:1024 or 0/1/7:1536 (first tile[/tile step/groups]:"
            "elements), found '4/2:8' in groups=");
  EXPECT_EQ(rs_error(ok + "groups=4294967294:8"),
            "t.trace:4: this reduce_scatter places members on tile 4294967297, past 2^32 - 1");
  EXPECT_EQ(rs_error("members=4096 member_step=1 fan_in=4096 stride=1 element_bytes=2 "
                     "groups=0:8"),
            "t.trace:4: this reduce_scatter may stand for 16773120 transfers (groups x members x "
            "(fan_in - 1)), expected at most 4194304");
  EXPECT_TRUE(
      contains(rs_error("members=4 member_step=1 fan_in=2 element_bytes=2 groups=0:8"), "stride"));
  EXPECT_EQ(
      text_error("ipusim-trace 5\nipu 0\nexchange e\n  reduce_scatter " + ok + "groups=0:8\nend\n"),
      "t.trace:4: 'reduce_scatter' needs trace format version 6, but the header says "
      "version 5");
  EXPECT_EQ(text_error(head + "  reduce_scatter " + ok + "groups=0:8\n" +
                       "  move positions=4 channels=4 element_bytes=2 from=0/1/4x4 to=0/1/2x2\n"
                       "end\n"),
            "t.trace:5: expected 'reduce_scatter' or 'end' after a reduce_scatter, found 'move' "
            "(an exchange lists its transfers, then its moves, then its reduce-scatters)");
  // Past the chip's tiles: named by check_tiles.
  const Trace wide = parse(head + "  reduce_scatter " + ok + "groups=1468/1/2:8\nend\n");
  EXPECT_EQ(error_of([&] { check_tiles(wide, 1471, "w.trace"); }),
            "w.trace: exchange 'e' reduce_scatter 0 uses tiles 1468..1472 but the chip has 1471 "
            "tiles");
  // Binary: the offset of the field, or of the record when it is invalid as a whole.
  const Trace good = parse(head + "  reduce_scatter " + ok + "groups=0:8\nend\n");
  const std::string bytes = to_binary(good);
  // The record is the last before the step count: 4, 1, 2, 1, 2, the run count 1, then the run
  // 0, 0, 1, 8.
  const std::size_t at = bytes.size() - 4 - 13;
  ASSERT_EQ(bytes.substr(at, 13),
            std::string("\x04\x01\x02\x01\x02\x01\x00\x00\x00\x00\x00\x01\x08", 13));
  std::string bad_bytes = bytes;
  bad_bytes[at + 4] = 0;
  EXPECT_EQ(error_of([&] { from_binary(bad_bytes, 0); }),
            fmt::format("t.itb@{}: expected reduce-scatter element bytes 1..8, found 0", at + 4));
  std::string bad_fan_in = bytes;
  bad_fan_in[at + 2] = 1;
  EXPECT_EQ(error_of([&] { from_binary(bad_fan_in, 0); }),
            fmt::format("t.itb@{}: expected a valid reduce-scatter, found one that has fan_in 1, "
                        "expected at least 2",
                        at));
  EXPECT_EQ(from_binary(bytes, bytes.size()), good);
}

}  // namespace
}  // namespace ipusim::trace
