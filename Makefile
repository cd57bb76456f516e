# A thin wrapper around Meson: see docs/building.md.
BUILD ?= build
MESON_OPTS ?=

.PHONY: all deps demo check bench clean

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

bench: all
	$(BUILD)/tests/benchmark-crypto-cipher $(BENCH_ARGS)

clean:
	rm -rf $(BUILD)
