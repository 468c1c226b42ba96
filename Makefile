# Thin front for CMake. `make demo` builds the command alone (quietly, one
# progress line) and runs the demo model shipped in models/shakespeare;
# `make test` builds and runs the whole suite. Both first
# check the packages of scripts/deps.txt and install what is missing
# (DEPS=check: only report). BUILD selects the build folder.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
DEPS ?= install

.PHONY: all deps build test demo install uninstall clean sanitize-test

all: build

deps:
	@bash scripts/deps.sh $(DEPS) build

# Configuring prints its findings (the Vulkan backend ON or OFF, the CPU
# kernels) and leaves the rest in $(BUILD)/configure.log.
$(BUILD)/CMakeCache.txt: | deps
	@mkdir -p $(BUILD)
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >$(BUILD)/configure.log 2>&1 || \
	  { rm -f $(BUILD)/CMakeCache.txt; cat $(BUILD)/configure.log; exit 1; }
	@grep -E '^-- cmf:|Warning' $(BUILD)/configure.log || true

# CMF_FIXTURES in the environment wins over the path the build folder was
# configured with.
build: deps $(BUILD)/CMakeCache.txt
	@if [ -n "$$CMF_FIXTURES" ] && ! grep -qxF "CMF_FIXTURES:PATH=$$CMF_FIXTURES" $(BUILD)/CMakeCache.txt; then \
	  cmake -S . -B $(BUILD) -DCMF_FIXTURES="$$CMF_FIXTURES" >/dev/null; fi
	cmake --build $(BUILD) -j $(JOBS)

test: build
	bash scripts/test.sh $(BUILD) $(JOBS)

sanitize-test:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DCMF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

# The demo needs the command only: the tests and fuzz replays come with `make test`.
demo: deps $(BUILD)/CMakeCache.txt
	@bash scripts/build_quiet.sh $(BUILD) $(JOBS) cmf
	@bash scripts/demo.sh $(BUILD)

# install: the command (with its bash completion and man page), libcmf,
# cmf.h, cmf.pc; uninstall removes exactly those files from PREFIX.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
	@if [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall: $(BUILD)/CMakeCache.txt
	bash scripts/uninstall.sh $(BUILD) $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan
