# A thin wrapper around Meson: see docs/building.md.
BUILD ?= build
MESON_OPTS ?=

# make fuzz: libFuzzer targets built with clang in their own directory.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
# make check-sanitize: the tests again under ASan and UBSan (gcc).
SANITIZE_BUILD ?= build-sanitize
SANITIZE_SUITES ?= unit cli fuzz-replay

.PHONY: all deps demo check check-sanitize fuzz bench clean

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(BUILD)/build.ninja:
	meson setup $(MESON_OPTS) $(BUILD)

deps:
	@scripts/install-deps.sh

demo: deps
	$(MAKE) all
	scripts/demo.sh $(BUILD)

check: deps
	$(MAKE) all
	meson test -C $(BUILD) --print-errorlogs --num-processes 2

# UBSan only prints unless told to halt; leaks fail a test too.
check-sanitize: deps
	test -f $(SANITIZE_BUILD)/build.ninja || \
	    meson setup -Db_sanitize=address,undefined -Db_lundef=false \
	        $(SANITIZE_BUILD)
	ninja -C $(SANITIZE_BUILD)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	ASAN_OPTIONS=detect_leaks=1 \
	    meson test -C $(SANITIZE_BUILD) --print-errorlogs --num-processes 2 \
	        $(addprefix --suite ,$(SANITIZE_SUITES))

fuzz:
	@scripts/install-deps.sh --fuzz
	test -f $(FUZZ_BUILD)/build.ninja || \
	    CC=clang meson setup -Dfuzzing=true $(FUZZ_BUILD)
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

bench: all
	$(BUILD)/tests/benchmark-crypto-cipher $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD)
