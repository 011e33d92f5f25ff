# Entry points for people and CI. The build itself is CMake (CMakePresets.json); this file
# only strings the steps together. Everything runs with -j2.
.PHONY: deps build run test tsan fuzz lint clean
.NOTPARALLEL:  # steps run in order; each build step already uses -j2

# The ASan pass sweeps 40 seeds and checks leaks where ptrace allows it (scripts/lsan-probe.sh).
ASAN_ENV = MROCE_SEEDS=40 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
           ASAN_OPTIONS=detect_leaks=$$(scripts/lsan-probe.sh)
FUZZ_SECONDS ?= 60

deps:
	scripts/install-deps.sh

build: deps
	cmake --preset release
	cmake --build build -j2

run: build
	scripts/run-demo.sh build/mroce

# All tests, then unit/sim/fuzz-corpus tests again under ASan+UBSan. The ASan build runs its
# own binaries (gtest discovery), so it gets ASAN_ENV too.
test: build
	ctest --test-dir build --output-on-failure -j2
	cmake --preset asan
	export $(ASAN_ENV) && cmake --build build-asan -j2 && \
	ctest --test-dir build-asan -L 'unit|sim|fuzz' --output-on-failure -j2
	$(MAKE) tsan

# The multi-threaded device (docs/design.md §12) under ThreadSanitizer: its shards must
# share nothing on the packet path; and a posting thread's pass beside the sleeping
# progress thread (send_on_post); a control call waiting for a pass that sends payloads
# from the application's memory. Only those tests are built. (The stand-by tests time
# their threads too tightly for TSan's slowdown: one failed once in a few dozen runs.)
tsan: deps
	cmake --preset tsan
	cmake --build build-tsan -j2 --target api_shards_test api_test
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan \
	    -R '^(Shards\.|Steering\.|Driver\.(ASendPostedWhileTheThreadSleeps|WaitPayloadsSent|PayloadsOfABatch))' \
	    --output-on-failure -j2

fuzz: deps
	cmake --preset fuzz
	cmake --build build-fuzz -j2
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# Not part of `make test`. Needs only the compile database, so configure but do not build.
lint: deps
	cmake --preset release
	run-clang-tidy -quiet -p build -j 2

clean:
	rm -rf build build-asan build-fuzz build-tsan build-dev
