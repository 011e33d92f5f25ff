// tools/conform.h — `mroce conform` (the conformance suite, conform/) and
// `mroce conform-agent` (its agent on this implementation, conform/agent/). tools/conform.cc.
#pragma once

#include <CLI/CLI.hpp>

namespace mroce::tools {
void register_conform(CLI::App& app);
}
