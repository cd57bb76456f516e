# SPDX-License-Identifier: GPL-2.0-or-later
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
# make check-noaes: the nettle-only build (-Daes_x86=disabled, what every
# non-x86 host gets), warnings as errors, and its unit tests.
NOAES_BUILD ?= build-noaes
# make werror: the default build with warnings as errors, compiled only.
WERROR_BUILD ?= build-werror

.PHONY: all deps demo check check-sanitize check-noaes werror fuzz bench \
	install clean

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

# UBSan only prints unless told to halt; leaks fail a test too. ASan runs
# the tool 2-3 times slower: the timeouts (hang guards) are doubled.
check-sanitize: deps
	test -f $(SANITIZE_BUILD)/build.ninja || \
	    meson setup -Db_sanitize=address,undefined -Db_lundef=false \
	        $(SANITIZE_BUILD)
	ninja -C $(SANITIZE_BUILD)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	ASAN_OPTIONS=detect_leaks=1 \
	    meson test -C $(SANITIZE_BUILD) --print-errorlogs --num-processes 2 \
	        --timeout-multiplier 2 $(addprefix --suite ,$(SANITIZE_SUITES))

# Setup once, then force the options each time: a directory made by hand
# with other options would otherwise test something else.
check-noaes: deps
	if test -f $(NOAES_BUILD)/build.ninja; then \
	    meson configure -Daes_x86=disabled -Dwerror=true $(NOAES_BUILD); \
	else \
	    meson setup -Daes_x86=disabled -Dwerror=true $(NOAES_BUILD); \
	fi
	ninja -C $(NOAES_BUILD)
	meson test -C $(NOAES_BUILD) --print-errorlogs --num-processes 2 \
	    --suite unit

werror: deps
	if test -f $(WERROR_BUILD)/build.ninja; then \
	    meson configure -Dwerror=true $(WERROR_BUILD); \
	else \
	    meson setup -Dwerror=true $(WERROR_BUILD); \
	fi
	ninja -C $(WERROR_BUILD)

fuzz:
	@scripts/install-deps.sh --fuzz
	test -f $(FUZZ_BUILD)/build.ninja || \
	    CC=clang meson setup -Dfuzzing=true $(FUZZ_BUILD)
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# make install [PREFIX=/usr/local] [DESTDIR=...]: the programs, the NBD
# server's plugin, the manual pages and the bash completion (meson install).
PREFIX ?= /usr/local
install: deps
	test -f $(BUILD)/build.ninja || meson setup $(MESON_OPTS) $(BUILD)
	meson configure -Dprefix=$(PREFIX) $(BUILD)
	ninja -C $(BUILD)
	meson install -C $(BUILD) $(if $(DESTDIR),--destdir $(DESTDIR))

bench: all
	$(BUILD)/tests/benchmark-crypto-cipher $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(NOAES_BUILD) $(WERROR_BUILD) \
	    $(FUZZ_BUILD)
