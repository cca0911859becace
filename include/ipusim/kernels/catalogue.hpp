// SPDX-License-Identifier: Apache-2.0
// The names `ipusim kernel` accepts: its kernels and its options. Shared by the kernel command
// (src/cli/kernel_command.cpp, which defines the options; keep both lists in step) and the
// sweep spec check, which rejects an unknown kernel or kernel option before any point runs
// (issue 16, defect K).
#pragma once

#include <array>
#include <string_view>

namespace ipusim::kernels {

inline constexpr std::array<std::string_view, 11> kKernelNames{"matmul",
                                                               "conv2d",
                                                               "reduce",
                                                               "elementwise",
                                                               "exchange-all-to-all",
                                                               "exchange-broadcast",
                                                               "sync-loop",
                                                               "link-p2p",
                                                               "allreduce",
                                                               "collective",
                                                               "sync"};

// Every kernel option except --out, --chip, --set and --format (which a sweep supplies) and
// --help.
inline constexpr std::array<std::string_view, 28> kKernelOptions{
    "log-level", "dtype",   "pass",   "partials",  "available-memory", "m",
    "n",         "k",       "groups", "batch",     "channels",         "height",
    "width",     "filters", "kernel", "stride",    "outputs",          "inputs",
    "op",        "bytes",   "tiles",  "src",       "iterations",       "src-ipu",
    "dst-ipu",   "group",   "method", "collective"};

}  // namespace ipusim::kernels
