// tools/demo.h — `mroce demo`: a bulk transfer between two real protocol engines over the
// in-process lossy multipath network, printed as a short table.
#pragma once

#include <CLI/CLI.hpp>

namespace mroce::tools {
void register_demo(CLI::App& app);
}
