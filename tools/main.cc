// tools/main.cc — the single `mroce` command line tool.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "tools/conform.h"
#include "tools/demo.h"
#include "tools/perf.h"
#include "tools/sim.h"
#include "tools/stat.h"
#include "util/version.h"
#include "wire/header.h"

int main(int argc, char** argv) {
    CLI::App app{"mroce — MetaRoCE transport tools"};
    bool version = false;
    app.add_flag("--version", version, "print the library and wire protocol versions");
    mroce::tools::register_conform(app);
    mroce::tools::register_demo(app);
    mroce::tools::register_perf(app);
    mroce::tools::register_sim(app);
    mroce::tools::register_stat(app);
    app.require_subcommand(0, 1);
    // Bad arguments: one line naming the problem (CLI11 adds a second, "Run with --help").
    app.failure_message([](const CLI::App*, const CLI::Error& e) {
        return std::string("mroce: ") + e.what() + " (see --help)\n";
    });
    // Exit status (tools/README.md): 0 success, 1 a run that failed, 2 a usage error
    // (CLI11's own codes, 105-109, are folded into 2).
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? 0 : 2;  // --help exits 0
    }
    if (version) {
        fmt::print("mroce {} (wire protocol version {})\n", MROCE_VERSION_STRING,
                   mroce::wire::kProtocolVersion);
        return 0;
    }
    if (app.get_subcommands().empty()) {  // a bare `mroce`: what it can do
        fmt::print("{}", app.help());
        return 2;
    }
    return 0;
}
