// SPDX-License-Identifier: Apache-2.0
// Shared fixtures of the micro-benchmarks: the GC200 chip and POD systems from configs/, and
// reference kernel traces planned for them (built once per process).
#pragma once

#include <string>

#include "ipusim/config/chip.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/kernels/kernels.hpp"

namespace ipusim::bench {

inline const ChipSpec& gc200() {
  static const ChipSpec chip =
      load_chip(std::string(IPUSIM_SOURCE_DIR) + "/configs/chips/gc200.yaml").spec;
  return chip;
}

inline const SystemSpec& pod(const std::string& name) {
  static std::string loaded_name;
  static SystemSpec spec;
  if (loaded_name != name) {
    spec = load_system(std::string(IPUSIM_SOURCE_DIR) + "/configs/systems/" + name + ".yaml").spec;
    loaded_name = name;
  }
  return spec;
}

// A 2048^3 half matmul planned for GC200 (the README's default job).
inline const trace::Trace& matmul_2048() {
  static const trace::Trace t = kernels::matmul(gc200(), 2048, 2048, 2048, trace::DType::kHalf);
  return t;
}

// A ResNet-50 layer-sized convolution: 3x3, 256 -> 256 channels on 14x14, batch 16.
inline const trace::Trace& conv_3x3() {
  static const trace::Trace t = [] {
    plan::ConvArgs a;
    a.batch = 16;
    a.in_chans = 256;
    a.height = 14;
    a.width = 14;
    a.out_chans = 256;
    a.kernel = 3;
    return kernels::conv2d(gc200(), a);
  }();
  return t;
}

}  // namespace ipusim::bench
