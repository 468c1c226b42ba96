# Thin front for CMake. `make demo` builds and runs the demo model shipped in
# models/shakespeare; `make test` builds and runs the whole suite. Both first
# check the packages of scripts/deps.txt and install what is missing
# (DEPS=check: only report). BUILD selects the build folder.
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
DEPS ?= install

.PHONY: all deps build test demo install clean sanitize-test

all: build

deps:
	@bash scripts/deps.sh $(DEPS) build

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

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

demo: build
	bash scripts/demo.sh $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan
