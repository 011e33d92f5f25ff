#!/usr/bin/env bash
# scripts/fuzz.sh — run every libFuzzer target in build-fuzz/fuzz/ (fuzz_<name>) for
# FUZZ_SECONDS (default 60) each, seeded from the committed corpus fuzz/corpus/<name>/.
# New inputs go to build-fuzz/corpus-new/<name>/ and crashes to build-fuzz/artifacts/<name>/.
# FUZZ_MERGE=1 afterwards merges the new inputs (minimised) into the committed corpus.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${FUZZ_SECONDS:-60}
shopt -s nullglob

targets=()
for bin in build-fuzz/fuzz/fuzz_*; do
    [[ -f $bin && -x $bin ]] && targets+=("$bin")
done
if [ ${#targets[@]} -eq 0 ]; then
    echo "fuzz: no targets in build-fuzz/fuzz/ yet"
    exit 0
fi

for bin in "${targets[@]}"; do
    name=$(basename "$bin")
    name=${name#fuzz_}
    corpus=fuzz/corpus/$name
    scratch=build-fuzz/corpus-new/$name
    artifacts=build-fuzz/artifacts/$name
    mkdir -p "$corpus" "$scratch" "$artifacts"
    echo "fuzz: $name for ${seconds}s (corpus $corpus, new inputs in $scratch)"
    # libFuzzer writes new inputs into the first directory only.
    "$bin" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$scratch" "$corpus"
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        "$bin" -merge=1 "$corpus" "$scratch"
    fi
done
