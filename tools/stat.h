// tools/stat.h — `mroce stat`: reads the counters, per-connection and per-path state of
// running mroce processes through their stat sockets (obs/server.h). tools/stat.cc.
#pragma once

#include <CLI/CLI.hpp>

namespace mroce::tools {
void register_stat(CLI::App& app);
}
