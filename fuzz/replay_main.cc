// fuzz/replay_main.cc — a standalone driver that replays corpus files through a fuzz target,
// so that gcc builds (which have no libFuzzer) run every committed corpus under ctest.
//
// Usage: fuzz_<name> PATH...   where each PATH is a file or a directory of files (not
// recursive; files run in name order). Exits non-zero if a path is missing, nothing ran or
// a generated seed's verdict disagrees with its name; a failing check inside the target
// aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// run_file feeds one file to the target. Returns false if it cannot be read or if it is a
// generated seed whose name (seed-valid-* / seed-bad-*) disagrees with the decoder.
bool run_file(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        return false;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)),
                                  std::istreambuf_iterator<char>());
    // An exactly sized heap copy, so AddressSanitizer catches a read one past the end.
    const std::unique_ptr<uint8_t[]> input(new uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), input.get());
    mroce::fuzz::last_input_accepted = false;
    LLVMFuzzerTestOneInput(input.get(), bytes.size());
    const std::string name = path.filename().string();
    const bool want_valid = name.rfind("seed-valid-", 0) == 0;
    const bool want_bad = name.rfind("seed-bad-", 0) == 0;
    if ((want_valid && !mroce::fuzz::last_input_accepted) ||
        (want_bad && mroce::fuzz::last_input_accepted)) {
        std::fprintf(stderr, "%s: decoder %s it\n", path.c_str(),
                     mroce::fuzz::last_input_accepted ? "accepted" : "rejected");
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    size_t ran = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path arg(argv[i]);
        std::error_code ec;
        if (std::filesystem::is_directory(arg, ec)) {
            std::vector<std::filesystem::path> files;
            for (const auto& entry : std::filesystem::directory_iterator(arg))
                if (entry.is_regular_file()) files.push_back(entry.path());
            std::sort(files.begin(), files.end());
            for (const auto& file : files) {
                if (!run_file(file)) return 1;
                ++ran;
            }
        } else if (std::filesystem::is_regular_file(arg, ec)) {
            if (!run_file(arg)) return 1;
            ++ran;
        } else {
            std::fprintf(stderr, "no such file or directory: %s\n", argv[i]);
            return 1;
        }
    }
    std::printf("replayed %zu inputs\n", ran);
    return ran == 0 ? 1 : 0;
}
