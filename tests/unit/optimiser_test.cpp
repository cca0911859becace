// SPDX-License-Identifier: Apache-2.0
// The weight-update pass (src/compiler/optimiser.cpp) over hand-made weight tensors: the
// gradient collectives, each optimiser's per-tensor ops, loops of equal tensors, sharding and
// the state's bytes. Each expectation follows from the pass's rules by hand. No SystemC.
#include "compiler/optimiser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_chips.hpp"

namespace ipusim::compiler {
namespace {

using trace::CollectiveOp;
using trace::StepKind;

constexpr trace::DType kHalf = trace::DType::kHalf;

struct Update {
  trace::IpuProgram program;
  const ChipSpec chip = testing::gc200_by_hand();
  IpuBuilder b{chip, program, 0.6, kHalf, /*fuse_elementwise=*/true};
  RunConfig run;
  Steps out;

  // Two weight tensors of 128 x 128 in one loop, one 128 x 256 kernel, one vector of 256.
  WeightUpdate three_layouts() {
    WeightUpdate u;
    u.weights = {{b.linear(kHalf, 128, 128), 128 * 128, 2, true},
                 {b.linear(kHalf, 128, 256), 128 * 256, 1, true},
                 {b.linear(kHalf, 1, 256), 256, 1, false}};
    u.parameters = 2 * 128 * 128 + 128 * 256 + 256;
    return u;
  }
  std::uint64_t lower(const WeightUpdate& u) { return lower_weight_update(b, out, run, u); }

  // The compute sets the steps run (loops as often as they repeat), by name prefix.
  std::size_t computes(const std::string& prefix) const { return computes(out, prefix); }
  std::size_t computes(const Steps& steps, const std::string& prefix) const {
    std::size_t n = 0;
    for (const auto& s : steps) {
      if (s.kind == StepKind::kRepeat) n += s.count * computes(s.body, prefix);
      if (s.kind == StepKind::kCompute && program.compute_sets[s.index].name.starts_with(prefix))
        ++n;
    }
    return n;
  }
  // The collectives, each as (op, bytes, times it runs).
  struct Collective {
    CollectiveOp op;
    std::uint64_t bytes, times;
    bool operator==(const Collective&) const = default;
  };
  std::vector<Collective> collectives() const {
    std::vector<Collective> c;
    for (const auto& s : out) {
      if (s.kind == StepKind::kCollective) c.push_back({s.collective, s.bytes, 1});
      if (s.kind == StepKind::kRepeat && s.body.size() == 1 &&
          s.body[0].kind == StepKind::kCollective)
        c.push_back({s.body[0].collective, s.body[0].bytes, s.count});
    }
    return c;
  }
};

TEST(WeightUpdate, SgdUpdatesEachTensorOnceWithOrWithoutWeightDecay) {
  Update t;
  t.run.optimiser = Optimiser::kSgd;
  WeightUpdate u = t.three_layouts();
  EXPECT_EQ(t.lower(u), 0u);  // no clipping
  // One replica: no collective. Four tensors, one fused update each: with weight decay
  // (v = m v + (g + wd w); w -= lr v) six ops.
  EXPECT_TRUE(t.collectives().empty());
  EXPECT_EQ(t.computes("map_mul_mul_add_add_mul_sub_"), 4u);
  Update plain;
  plain.run.optimiser = Optimiser::kSgd;
  u = plain.three_layouts();
  u.sgd_decay = false;
  (void)plain.lower(u);
  EXPECT_EQ(plain.computes("map_mul_mul_add_sub_"), 4u);
}

TEST(WeightUpdate, LarsTakesTwoNormsOfEachAdaptedTensorOrCombinesThem) {
  Update t;
  t.run.optimiser = Optimiser::kLars;
  (void)t.lower(t.three_layouts());
  // ||w|| and ||g|| of the three adapted tensors (each a reduction of one row, broadcast back:
  // its tile-local set named reduce_chan_1b_1x...), the trust-ratio update of those, the plain
  // momentum of the vector.
  EXPECT_EQ(t.computes("map_mul_add_mul_mul_add_sub_"), 3u);
  EXPECT_EQ(t.computes("map_mul_mul_add_sub_"), 1u);
  std::size_t norms = 0;
  for (const auto& cs : t.program.compute_sets)
    if (cs.name.starts_with("reduce_chan_1b_1x") && cs.name.ends_with("/local")) ++norms;
  EXPECT_EQ(norms, 2u);  // two layouts' norms, their sets cached (the loop runs one twice)
  // Run: two norms of each of the loop's two tensors, two of the other.
  EXPECT_EQ(t.computes("reduce_chan_1b_1x16384_t0s1_b1x64_0/local"), 4u);
  EXPECT_EQ(t.computes("reduce_chan_1b_1x32768_t0s1_b1x64_0/local"), 2u);
  // Combined: 6 norms of 4-byte outputs in ReduceMany ops of at most 16 bytes: 2 ops.
  Update many;
  many.run.optimiser = Optimiser::kLars;
  many.run.reduce_many_buffer = 16;
  (void)many.lower(many.three_layouts());
  EXPECT_EQ(many.computes("reduce_many_lars_norms0/local"), 1u);
  EXPECT_EQ(many.computes("reduce_many_lars_norms1/local"), 1u);
  EXPECT_EQ(many.computes("reduce_many_lars_norms2/local"), 0u);
  EXPECT_EQ(many.computes("map_mul_add_mul_mul_add_sub_"), 3u);
}

TEST(WeightUpdate, PerTensorCollectivesGroupEqualSizesAndShardTheLargeOnes) {
  Update t;
  t.run.optimiser = Optimiser::kLamb;
  t.run.replicas = 4;
  t.run.per_tensor_collectives = true;
  t.run.replicated_tensor_sharding = true;
  (void)t.lower(t.three_layouts());
  using C = Update::Collective;
  // By size: the vector (256 elements, under the 8,192 sharding floor) all-reduced; the two
  // 16,384-element tensors as one loop of 2 and the 32,768-element one reduce-scattered. LAMB's
  // two scalar norms of each of the 3 sharded tensors all-reduced (6 float sums). After the
  // update the sharded ones are all-gathered.
  EXPECT_EQ(t.collectives(), (std::vector<C>{{CollectiveOp::kAllReduce, 512, 1},
                                             {CollectiveOp::kReduceScatter, 32768, 2},
                                             {CollectiveOp::kReduceScatter, 65536, 1},
                                             {CollectiveOp::kAllReduce, 4, 6},
                                             {CollectiveOp::kAllGather, 32768, 2},
                                             {CollectiveOp::kAllGather, 65536, 1}}));
  // LAMB: the moments and two norms of each of the 4 tensors, then the trust-ratio update.
  EXPECT_EQ(t.computes("map_mul_add_mul_mul_add_sqrt_add_div_add_"), 4u);
  EXPECT_EQ(t.computes("map_div_mul_sub_"), 4u);
}

TEST(WeightUpdate, FusedCollectivesCarryEveryParameterAndAdamwTakesNoNorms) {
  Update t;
  t.run.optimiser = Optimiser::kAdamw;
  t.run.replicas = 2;
  t.run.allreduce_buffer = 1ull << 30;  // one buffer for all
  const WeightUpdate u = t.three_layouts();
  (void)t.lower(u);
  using C = Update::Collective;
  EXPECT_EQ(t.collectives(), (std::vector<C>{{CollectiveOp::kAllReduce, u.parameters * 2, 1}}));
  EXPECT_EQ(t.computes("map_mul_add_mul_mul_add_sqrt_add_div_add_"), 4u);
  EXPECT_EQ(t.computes("map_mul_sub_"), 4u);
  EXPECT_EQ(t.computes("reduce"), 0u);
}

TEST(WeightUpdate, ClippingTakesANormOfEachTensorAndScalesIt) {
  Update t;
  t.run.optimiser = Optimiser::kAdamw;
  t.run.clip_gradients = true;
  WeightUpdate u = t.three_layouts();
  u.pipelined = true;
  // 4 tensors' norms of 4 bytes each go to IPU 0, across the pipeline's global exchanges 1 and
  // 2 (norms, factor).
  EXPECT_EQ(t.lower(u), 16u);
  std::size_t global = 0;
  for (const auto& s : t.out) global += s.kind == StepKind::kGlobalExchange ? 1 : 0;
  EXPECT_EQ(global, 2u);
  EXPECT_EQ(t.computes("mul_"), 4u);  // the clip factor, tensor by tensor
}

TEST(WeightUpdate, TheStateIsTheMomentsOfEveryWeightOrOfItsShard) {
  RunConfig run;
  run.optimiser = Optimiser::kLamb;
  EXPECT_EQ(optimiser_state_bytes(run, 1000, kHalf), 2u * 1000 * 2);
  run.optimiser = Optimiser::kSgd;
  EXPECT_EQ(optimiser_state_bytes(run, 1000, kHalf), 1u * 1000 * 2);
  run.replicas = 16;
  run.replicated_tensor_sharding = true;
  EXPECT_EQ(optimiser_state_bytes(run, 1000, trace::DType::kFloat), 1u * 63 * 4);
  EXPECT_EQ(moments_kept(Optimiser::kLars), 1u);
  EXPECT_EQ(moments_kept(Optimiser::kAdamw), 2u);
}

}  // namespace
}  // namespace ipusim::compiler
