// tools/perf.h — `mroce perf`: perftest-style bandwidth and latency between two processes
// or hosts over MetaRoCE (or, with --raw, plain UDP as the baseline). tools/perf.cc.
#pragma once

#include <CLI/CLI.hpp>

namespace mroce::tools {
void register_perf(CLI::App& app);
}
