// tools/sim.h — `mroce sim SCENARIO.toml [--set k=v ...] [--seed N] [--out DIR]`: runs a
// scenario file (every [sweep] point) on the packet-level simulator and writes the output
// contract of docs/sim.md (summary.json, per run fct.txt and time-series CSVs).
#pragma once

#include <CLI/CLI.hpp>

namespace mroce::tools {
void register_sim(CLI::App& app);
}
