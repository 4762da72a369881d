# rlock — build, test, install, demo, bench, sanitizers.
# SPDX-License-Identifier: BSD-3-Clause
# User CFLAGS/LDFLAGS/CPPFLAGS are appended to ours, never replaced.

# `make` with no target builds everything (the first rule below is FORCE).
.DEFAULT_GOAL := all

PREFIX   ?= /usr/local
DESTDIR  ?=
LIBDIR   ?= $(PREFIX)/lib
INCDIR   ?= $(PREFIX)/include
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
PCDIR    ?= $(LIBDIR)/pkgconfig

CC       ?= cc
B        ?= build

# ---- version and ABI (packaging) -----------------------------------------
# The one version is RLOCK_VERSION_MAJOR/MINOR/PATCH in include/rlock.h;
# the library's file name, rlock.pc, the CMake package, the man pages and
# debian/changelog's check all take it from there.
hdr_ver   = $(shell sed -n 's/^\#define RLOCK_VERSION_$(1) \([0-9][0-9]*\).*/\1/p' include/rlock.h)
VERSION  := $(call hdr_ver,MAJOR).$(call hdr_ver,MINOR).$(call hdr_ver,PATCH)
# SOMAJOR is the ABI number, not a version: bump it on every incompatible
# change of the ABI (make abi-check finds them), and rename the Debian
# runtime package (debian/control, librlockN) with it.
SOMAJOR  := 1
SONAME   := librlock.so.$(SOMAJOR)
DATADIR      ?= $(PREFIX)/share
CMAKEDIR     ?= $(LIBDIR)/cmake/rlock
BASHCOMPDIR  ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR   ?= $(DATADIR)/zsh/site-functions
# ---- end version and ABI --------------------------------------------------

RL_CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wvla -Werror -fPIC \
              -fvisibility=hidden -pthread -Iinclude -Isrc -I$(B)
RL_LDLIBS  := -lhiredis -lssl -lcrypto -luuid -pthread
SAN_FLAGS  ?=
ALL_CFLAGS  = $(RL_CFLAGS) $(SAN_FLAGS) $(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(SAN_FLAGS) $(LDFLAGS)

LIB_SRC  := $(wildcard src/*.c src/*/*.c)
LIB_HDR  := $(wildcard src/*.h src/*/*.h)
LIB_OBJ  := $(patsubst src/%.c,$(B)/obj/%.o,$(LIB_SRC)) $(B)/obj/lua_scripts.o
LUA      := $(wildcard lua/*.lua)
EX_SRC   := $(wildcard examples/*.c)
EX_BIN   := $(patsubst examples/%.c,$(B)/examples/%,$(EX_SRC))
TEST_SRC := $(filter-out test/harness.c,$(wildcard test/test_*.c))
TEST_BIN := $(patsubst test/%.c,$(B)/test/%,$(TEST_SRC))
# What run-tests.sh runs: every test program, then the fault suite again
# over TLS (a NAME=VALUE word sets the environment of the next program
# only; test_faults reads RLOCK_TEST_FAULTS_TLS). The sanitizer, valgrind
# and coverage targets run the same list, moved to their build dir.
TEST_RUNS := $(TEST_BIN) RLOCK_TEST_FAULTS_TLS=1 $(B)/test/test_faults
TOOL_SRC := $(wildcard tools/*.c)
BENCH_SRC:= $(wildcard bench/*.c)

FORCE:

.PHONY: FORCE docs-check all lib check test test-lists layers demo bench bench-peers clean asan \
        tsan valgrind symbols format deps soak fuzz coverage

all: lib $(B)/rlock $(B)/rlock-bench $(EX_BIN)

lib: $(B)/librlock.a $(B)/librlock.so $(B)/rlock.pc

$(B)/lua_scripts.c: $(LUA) scripts/embed-lua.sh
	@mkdir -p $(B)
	sh scripts/embed-lua.sh $(LUA) > $@.tmp && mv $@.tmp $@

$(B)/obj/%.o: src/%.c $(LIB_HDR) include/rlock.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/obj/lua_scripts.o: $(B)/lua_scripts.c $(LIB_HDR)
	@mkdir -p $(B)/obj
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/librlock.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(B)/librlock.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(ALL_LDFLAGS) -o $@.$(VERSION) $^ $(RL_LDLIBS)
	ln -sf librlock.so.$(VERSION) $(B)/$(SONAME)
	ln -sf librlock.so.$(VERSION) $@

# Programs link the static library so they run from the tree without
# LD_LIBRARY_PATH.
$(B)/rlock: $(TOOL_SRC) tools/cli.h src/tool.h $(B)/librlock.a include/rlock.h
	$(CC) $(ALL_CFLAGS) -o $@ $(TOOL_SRC) $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

$(B)/rlock-bench: $(BENCH_SRC) bench/bench.h $(B)/librlock.a include/rlock.h
	$(CC) $(ALL_CFLAGS) -o $@ $(BENCH_SRC) $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS) -lm

$(B)/examples/%: examples/%.c $(B)/librlock.a include/rlock.h
	@mkdir -p $(B)/examples
	$(CC) $(ALL_CFLAGS) -o $@ $< $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

# CRIT=lite builds the tests against test/lite (a runner with the part of
# Criterion's API the tests use), for sanitizers Criterion cannot run under.
CRIT ?= criterion
ifeq ($(CRIT),lite)
CRIT_CFLAGS := -Itest/lite
CRIT_LIBS   := test/lite/runner.c
CRIT_DEPS   := test/lite/runner.c test/lite/criterion/criterion.h
else
CRIT_LIBS   := -lcriterion
endif

# TEST_FLAGS: extra flags for the test programs only (make coverage).
# test/cli_helpers.h is header-only: the CLI tests include it.
TEST_FLAGS ?=
$(B)/test/%: test/%.c test/harness.c test/harness.h test/cli_helpers.h test/kinds.h test/faultkit.h \
             $(B)/librlock.a $(CRIT_DEPS)
	@mkdir -p $(B)/test
	$(CC) $(ALL_CFLAGS) $(CRIT_CFLAGS) $(TEST_FLAGS) -Itest -o $@ $< test/harness.c \
	  $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS) $(CRIT_LIBS)

# The same tests built with test/lite, for their --list only (make check
# compares it with Criterion's: both runners must know the same tests).
# -O0: built to list, never run here.
LITE_LIST_BIN := $(patsubst $(B)/test/%,$(B)/test-lite/%,$(TEST_BIN))
$(B)/test-lite/%: test/%.c test/harness.c test/harness.h test/cli_helpers.h test/kinds.h \
                  test/faultkit.h $(B)/librlock.a test/lite/runner.c test/lite/criterion/criterion.h
	@mkdir -p $(B)/test-lite
	$(CC) $(ALL_CFLAGS) -O0 -Itest/lite -Itest -o $@ $< test/harness.c test/lite/runner.c \
	  $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

# test_bench runs the benchmark binary (its scenarios, briefly).
$(B)/test/test_bench: $(B)/rlock-bench

# These tests also link the fault-injecting TCP proxy (test/proxy.c).
PROXY_TESTS := test_chaos test_clock test_exact test_faults test_review test_review2 test_statuses \
               test_tls test_revunwind test_spin test_fenced test_fair test_rwlock test_rev16 \
               test_kindfaults test_giveup test_rev16b test_rev15e test_rev15f test_rev15g
$(patsubst %,$(B)/test/%,$(PROXY_TESTS)): $(B)/test/%: test/%.c test/proxy.c test/proxy.h \
  test/harness.c test/harness.h test/kinds.h test/faultkit.h $(B)/librlock.a $(CRIT_DEPS)
	@mkdir -p $(B)/test
	$(CC) $(ALL_CFLAGS) $(CRIT_CFLAGS) $(TEST_FLAGS) -Itest -o $@ $< test/proxy.c test/harness.c \
	  $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS) $(CRIT_LIBS)

$(patsubst %,$(B)/test-lite/%,$(PROXY_TESTS)): $(B)/test-lite/%: test/%.c test/proxy.c \
  test/proxy.h test/harness.c test/harness.h test/kinds.h test/faultkit.h $(B)/librlock.a \
  test/lite/runner.c test/lite/criterion/criterion.h
	@mkdir -p $(B)/test-lite
	$(CC) $(ALL_CFLAGS) -O0 -Itest/lite -Itest -o $@ $< test/proxy.c test/harness.c \
	  test/lite/runner.c $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

# Everything below installs missing Debian packages first.
deps:
	@sh scripts/deps.sh

# Test timing scales with RLOCK_TEST_TIME_MULTIPLIER (test/harness.h): 1
# here, raised below for the slower sanitizer and valgrind builds.
# Builds run on every CPU (JOBS); the checks and the tests after them run
# one at a time (their timing is the tests').
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check: deps
	$(MAKE) -j$(JOBS) all $(TEST_BIN)
	$(MAKE) symbols layers docs-check test-lists
	sh scripts/run-tests.sh $(B) $(TEST_RUNS)

test: check

# Calls between the engine's layers only point down (docs/engine.md).
layers: lib
	sh scripts/check-layers.sh $(B)

# Both runners (Criterion, test/lite) must know the same tests, and
# run-tests.sh must find the tests of a program that died, in any locale.
test-lists: $(TEST_BIN) $(LITE_LIST_BIN)
	sh scripts/check-test-lists.sh $(B)/test-lite $(TEST_BIN)
	sh scripts/check-died.sh $(B) $(B)/test/test_cliflags

# Built quietly first (compiler lines are not part of the demo's output;
# they are shown only if the build fails).
demo: deps
	@mkdir -p $(B)
	@$(MAKE) -s --no-print-directory $(B)/examples/demo >$(B)/demo-build.log 2>&1 || \
	  { cat $(B)/demo-build.log; exit 1; }
	@sh scripts/with-redis.sh $(B)/examples/demo

# make bench BENCH_ARGS=--quick for a short run; see docs/performance.md.
BENCH_ARGS ?=
ANCHORS    ?= ../shared/bench-anchors
bench: deps
	$(MAKE) $(B)/rlock-bench
	sh scripts/with-redis.sh --tls $(B)/rlock-bench --pin $(BENCH_ARGS)

# The shared peer harness with rlock as one more runner (~1.5 min). It runs
# from a copy in $(B)/bench-anchors, where its npm packages are installed and
# results.md is appended to; the shared directory stays untouched. It lives
# outside this repository: without it (ANCHORS=DIR points elsewhere) the
# target says so and succeeds, skipping the run.
ANCHORS_ARGS ?=
bench-peers:
	@if [ -f "$(ANCHORS)/run.sh" ]; then $(MAKE) --no-print-directory bench-peers-run; else \
	  echo "bench-peers: skipped: the peer benchmark harness is not at $(ANCHORS)" \
	    "(no $(ANCHORS)/run.sh; it is not part of this repository: set ANCHORS=DIR to a copy)"; fi

.PHONY: bench-peers-run
bench-peers-run: deps
	$(MAKE) $(B)/rlock-bench
	mkdir -p $(B)/bench-anchors && chmod -R u+w $(B)/bench-anchors
	cp -rf $(ANCHORS)/. $(B)/bench-anchors/ && chmod -R u+w $(B)/bench-anchors
	$(B)/bench-anchors/run.sh --runner "rlock=$(abspath $(B))/rlock-bench" $(ANCHORS_ARGS)

# The porting guide's C blocks are excerpts of the compiled examples;
# README's package list is what scripts/deps.sh installs; the man pages in
# the tree name no version and api.md no test (scripts/check-doc-text.sh).
docs-check:
	@if command -v python3 >/dev/null; then python3 scripts/check-doc-excerpts.py; \
	else echo "docs-check: python3 not found (scripts/deps.sh installs it), skipped"; fi
	@sh scripts/check-readme-deps.sh
	@sh scripts/check-doc-text.sh

# The exported symbols of the shared library must all be rlock_*.
symbols: $(B)/librlock.so
	@bad=$$(nm -D --defined-only $(B)/librlock.so | awk '$$2 ~ /[TDBR]/ {print $$3}' \
	  | grep -v '^rlock_' || true); \
	if [ -n "$$bad" ]; then echo "exported non-rlock_ symbols: $$bad"; exit 1; fi; \
	echo "symbols: only rlock_* exported"

# Criterion's own small allocations are suppressed (test/lsan.supp); any
# leak of rlock's still fails the run.
asan: deps
	LSAN_OPTIONS=suppressions=$(CURDIR)/test/lsan.supp RLOCK_TEST_TIME_MULTIPLIER=2 \
	  $(MAKE) B=build-asan CC=gcc \
	  SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" check

# Criterion cannot start under ThreadSanitizer (its sandbox maps a shared
# arena at random addresses that TSan reserves), so the TSan suite is built
# with CRIT=lite (test/lite); test/race.c and the demo run as well.
# die_after_fork=0: tests fork children of a threaded process that make
# clients of their own.
TSAN_RUN := TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 die_after_fork=0" \
            RLOCK_TEST_TIME_MULTIPLIER=3
tsan: deps
	$(MAKE) -j$(JOBS) B=build-tsan CRIT=lite CC=gcc SAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  all build-tsan/race $(patsubst $(B)/%,build-tsan/%,$(TEST_BIN))
	$(TSAN_RUN) sh scripts/run-tests.sh build-tsan $(patsubst $(B)/%,build-tsan/%,$(TEST_RUNS))
	$(TSAN_RUN) sh scripts/with-redis.sh sh -c \
	  'RLOCK_TEST_URL=$$RLOCK_URL build-tsan/race && build-tsan/examples/demo'

$(B)/race: test/race.c $(B)/librlock.a
	$(CC) $(ALL_CFLAGS) -o $@ test/race.c $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

# valgrind cannot judge Criterion's own workers (their exit codes and the
# framework's memory), so the memcheck suite is built with CRIT=lite into
# build-vg; each test's process is checked at its exit, as are the threaded
# driver and every example. Children the tests exec (the rlock command) run
# unchecked.
# test/valgrind.supp holds the one suppression (OpenSSL's per-thread error
# queues of a parent's threads, in a fork()ed child) and says why.
VG := valgrind --leak-check=full --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --quiet \
      --suppressions=$(CURDIR)/test/valgrind.supp
VG_BIN := $(patsubst $(B)/%,build-vg/%,$(TEST_BIN))
VG_RUNS := $(patsubst $(B)/%,build-vg/%,$(TEST_RUNS))
valgrind: deps
	@sh scripts/deps.sh valgrind
	$(MAKE) -j$(JOBS) B=build-vg CRIT=lite all build-vg/race $(VG_BIN)
	RLOCK_TEST_WRAPPER="$(VG)" RLOCK_TEST_TIME_MULTIPLIER=5 sh scripts/run-tests.sh build-vg $(VG_RUNS)
	sh scripts/with-redis.sh sh -c 'set -e; \
	  RLOCK_TEST_URL=$$RLOCK_URL $(VG) build-vg/race; \
	  for e in build-vg/examples/port_*; do echo "=== $$e"; $(VG) $$e "$$RLOCK_URL" >/dev/null; done; \
	  echo "valgrind: no errors, no leaks"'

format:
	clang-format -i include/*.h src/*.c src/*.h src/*/*.c src/*/*.h test/*.c test/*.h test/lite/*.c test/lite/criterion/*.h examples/*.c tools/*.c bench/*.c

# make coverage: the library, the rlock command and the tests built with
# gcov instrumentation into build-cov, the whole suite run once (the fault
# run with a fixed seed, RLOCK_CHAOS_SEED), then line and branch coverage of
# src/ printed by scripts/coverage.sh. Forked test children count too: they
# end through th_child_exit() (test/harness.h), and the test programs are
# linked with _exit wrapped, so that every child that exits writes its
# counters (only children killed by a signal do not). Old counters are
# deleted first: each run measures the suite once.
COV_SEED  ?= 20250101
COV_BIN   := $(patsubst $(B)/%,build-cov/%,$(TEST_BIN))
COV_RUNS  := $(patsubst $(B)/%,build-cov/%,$(TEST_RUNS))
coverage: deps
	@find build-cov -name '*.gcda' -delete 2>/dev/null || true
	$(MAKE) B=build-cov SAN_FLAGS="--coverage -O0" \
	  TEST_FLAGS="-DTH_COVERAGE=1 -Wl,--wrap=_exit" all $(COV_BIN)
	-RLOCK_CHAOS_SEED=$(COV_SEED) sh scripts/run-tests.sh build-cov $(COV_RUNS)
	sh scripts/coverage.sh build-cov

clean:
	rm -rf build build-asan build-tsan build-vg build-cov

# ---- soak and fuzz ------------------------------------------------------
# make soak: the stress tests for RLOCK_STRESS_SECONDS each (default 300)
# and the fault tests SOAK_ROUNDS times, against a throwaway server; then
# the randomized fault test for RLOCK_CHAOS_SECONDS (default 300) on its
# own private server, the reentrant lock's run and then every other kind's
# (RLOCK_CHAOS_SEED=<seed> replays a failure's seed, RLOCK_CHAOS_KINDS
# chooses the second run's kinds).
RLOCK_STRESS_SECONDS ?= 300
RLOCK_CHAOS_SECONDS ?= 300
SOAK_ROUNDS ?= 5

soak: deps
	$(MAKE) $(B)/test/test_stress $(B)/test/test_faults $(B)/test/test_chaos
	RLOCK_STRESS_SECONDS=$(RLOCK_STRESS_SECONDS) sh scripts/with-redis.sh \
	  $(B)/test/test_stress --jobs 1 --timeout $$(( $(RLOCK_STRESS_SECONDS) * 2 + 120 ))
	i=0; while [ $$i -lt $(SOAK_ROUNDS) ]; do i=$$((i + 1)); echo "=== faults round $$i"; \
	  sh scripts/with-redis.sh $(B)/test/test_faults --jobs 2 --timeout 120 || exit 1; done
	RLOCK_CHAOS_SECONDS=$(RLOCK_CHAOS_SECONDS) $(B)/test/test_chaos --jobs 1 \
	  --timeout $$(( $(RLOCK_CHAOS_SECONDS) + 180 ))

# make fuzz: libFuzzer targets built with clang straight from the sources
# (internal functions are hidden in the library), each run FUZZ_TIME
# seconds. New corpus entries go to $(B)/fuzz, never into fuzz/corpus.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 20
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -pthread \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              -Iinclude -Isrc -I$(B)

FUZZ_TARGETS := url name replies

$(B)/fuzz/fuzz_%: fuzz/fuzz_%.c $(LIB_SRC) $(LIB_HDR) $(B)/lua_scripts.c include/rlock.h
	@mkdir -p $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(LIB_SRC) $(B)/lua_scripts.c $(RL_LDLIBS)

fuzz: deps
	@sh scripts/deps.sh clang libclang-rt-14-dev
	$(MAKE) $(patsubst %,$(B)/fuzz/fuzz_%,$(FUZZ_TARGETS))
	@for f in $(FUZZ_TARGETS); do \
	  mkdir -p $(B)/fuzz/corpus-$$f; \
	  echo "=== fuzz_$$f for $(FUZZ_TIME) s"; \
	  $(B)/fuzz/fuzz_$$f -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=4096 -dict=fuzz/$$f.dict -print_final_stats=1 \
	    -artifact_prefix=$(B)/fuzz/crash-$$f- \
	    $(B)/fuzz/corpus-$$f fuzz/corpus/$$f || exit 1; \
	done

# ---- install, pkg-config, CMake package, man pages (packaging) -----------
.PHONY: install uninstall man man-check completion-check consumer-check abi-check abi-check-ci deb \
        print-version print-somajor

# Paths written into rlock.pc and the CMake package are relative to the
# prefix when they lie under it, so `pkg-config --define-prefix` and a moved
# tree work. $(call under_prefix,DIR,VAR) -> ${VAR}/rest, or DIR itself.
under_prefix = $(if $(filter $(PREFIX)/%,$(1)),$${$(2)}/$(patsubst $(PREFIX)/%,%,$(1)),$(1))
# CMAKEDIR relative to PREFIX, as ../.. steps (empty if not under PREFIX).
cmake_ups = $(subst $(eval) ,/,$(foreach d,$(subst /, ,$(patsubst $(PREFIX)/%,%,$(CMAKEDIR))),..))

# Regenerated on every run so that it carries the PREFIX of this make.
# hiredis, OpenSSL and libuuid are named in Libs.private, not Requires.private:
# pkg-config puts the Cflags of Requires.private packages into every
# `--cflags`, and hiredis's are -I/usr/include/hiredis (its net.h, read.h
# and sds.h would shadow the user's own) and -D_FILE_OFFSET_BITS=64 (which
# changes the size of off_t in the user's program). rlock.h includes neither
# library, so users need only -I${includedir}. Their link flags are asked
# of their own .pc files (hiredis.pc, openssl.pc, uuid.pc) when the .pc is
# written.
PC_PRIVATE_LIBS = $(shell pkg-config --libs hiredis openssl uuid 2>/dev/null || \
                    echo -lhiredis -lssl -lcrypto -luuid)
$(B)/rlock.pc: FORCE
	@mkdir -p $(B)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(call under_prefix,$(LIBDIR),prefix)' \
	  'includedir=$(call under_prefix,$(INCDIR),prefix)' '' \
	  'Name: rlock' 'Description: Redisson-compatible distributed locks on Redis' \
	  'Version: $(VERSION)' \
	  'Libs: -L$${libdir} -lrlock' 'Libs.private: $(strip $(PC_PRIVATE_LIBS)) -pthread' \
	  'Cflags: -I$${includedir}' > $@

$(B)/cmake/rlock-config.cmake: cmake/rlock-config.cmake.in FORCE
	@mkdir -p $(B)/cmake
	@sed -e 's|@PREFIX_FROM_HERE@|$(if $(filter $(PREFIX)/%,$(CMAKEDIR)),$${CMAKE_CURRENT_LIST_DIR}/$(cmake_ups),$(PREFIX))|' \
	  -e 's|@LIBDIR@|$(call under_prefix,$(LIBDIR),_rlock_prefix)|' \
	  -e 's|@INCDIR@|$(call under_prefix,$(INCDIR),_rlock_prefix)|' \
	  -e 's|@VERSION@|$(VERSION)|g' -e 's|@SONAME@|$(SONAME)|g' $< > $@

$(B)/cmake/rlock-config-version.cmake: cmake/rlock-config-version.cmake.in include/rlock.h
	@mkdir -p $(B)/cmake
	@sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@SIZEOF_VOID_P@|$(shell $(CC) -dM -E -x c /dev/null | \
	  sed -n 's/^.define __SIZEOF_POINTER__ //p')|g' $< > $@

# Man pages: section 3 from docs/man3 (one page per family of functions;
# scripts/build-man.sh adds a .so page for every other name on a page's
# NAME line), rlock(1) from docs; each gets the version on its .TH line
# (the tree's pages say just "rlock" there: make docs-check).
MAN3_SRC := $(wildcard docs/man3/*.3)
man: $(MAN3_SRC) docs/rlock.1 scripts/build-man.sh include/rlock.h
	@rm -rf $(B)/man
	@sh scripts/build-man.sh $(VERSION) $(B)/man docs/rlock.1 $(MAN3_SRC)

# Every public function of rlock.h has a man page (a name on some page's
# NAME line), and every page renders without warnings.
man-check: man
	@sh scripts/deps.sh man-db groff-base
	@sh scripts/check-man.sh include/rlock.h $(B)/man

# The bash and zsh completions of the rlock command answer as expected.
completion-check:
	@sh scripts/deps.sh bash-completion zsh
	@sh scripts/check-completion.sh

install: lib $(B)/rlock man $(B)/cmake/rlock-config.cmake $(B)/cmake/rlock-config-version.cmake
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(PCDIR) $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 644 include/rlock.h $(DESTDIR)$(INCDIR)/rlock.h
	install -m 644 $(B)/librlock.a $(DESTDIR)$(LIBDIR)/librlock.a
	install -m 644 $(B)/librlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librlock.so.$(VERSION)
	ln -sf librlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/librlock.so
	install -m 644 $(B)/rlock.pc $(DESTDIR)$(PCDIR)/rlock.pc
	install -m 644 $(B)/cmake/rlock-config.cmake $(B)/cmake/rlock-config-version.cmake \
	  $(DESTDIR)$(CMAKEDIR)/
	install -m 755 $(B)/rlock $(DESTDIR)$(BINDIR)/rlock
	install -m 644 $(B)/man/man1/rlock.1 $(DESTDIR)$(MANDIR)/man1/rlock.1
	install -m 644 $(B)/man/man3/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 completions/rlock.bash $(DESTDIR)$(BASHCOMPDIR)/rlock
	install -m 644 completions/_rlock $(DESTDIR)$(ZSHCOMPDIR)/_rlock

uninstall:
	rm -f $(DESTDIR)$(INCDIR)/rlock.h $(DESTDIR)$(LIBDIR)/librlock.a \
	  $(DESTDIR)$(LIBDIR)/librlock.so $(DESTDIR)$(LIBDIR)/librlock.so.* \
	  $(DESTDIR)$(PCDIR)/rlock.pc $(DESTDIR)$(BINDIR)/rlock $(DESTDIR)$(MANDIR)/man1/rlock.1 \
	  $(DESTDIR)$(CMAKEDIR)/rlock-config.cmake $(DESTDIR)$(CMAKEDIR)/rlock-config-version.cmake \
	  $(DESTDIR)$(BASHCOMPDIR)/rlock $(DESTDIR)$(ZSHCOMPDIR)/_rlock
	for f in $(MAN3_SRC); do sh scripts/build-man.sh --names $$f; done | \
	  while read -r n; do rm -f $(DESTDIR)$(MANDIR)/man3/$$n.3; done
	-rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null

# make consumer-check: install into a temp prefix, then build an example
# against it with pkg-config (shared, rlock static, fully static) and with
# CMake's find_package(rlock CONFIG), move the tree, and run each build
# against a throwaway redis-server.
consumer-check: deps
	@sh scripts/deps.sh cmake
	sh scripts/consumer-check.sh

# make abi-check ABI_BASE=<git rev>: the ABI of the library at ABI_BASE
# against the work tree's, with abidiff; fails on incompatible changes.
# Without ABI_BASE (and in make abi-check-ci, which CI runs) the base is the
# newest v* tag with this SONAME; with none, it says why it skips.
abi-check: deps
	@sh scripts/deps.sh abigail-tools
	sh scripts/abi-check.sh "$(ABI_BASE)"

abi-check-ci: deps
	@sh scripts/deps.sh abigail-tools
	sh scripts/abi-check.sh --ci

# For scripts: the version (from include/rlock.h) and the ABI number.
print-version:
	@echo $(VERSION)
print-somajor:
	@echo $(SOMAJOR)

# make deb: Debian packages (librlock$(SOMAJOR), librlock-dev, rlock) in
# $(B)/deb, built with dpkg-buildpackage from a copy of the tree, then
# checked with lintian.
deb: deps
	@sh scripts/deps.sh debhelper dpkg-dev fakeroot lintian
	sh scripts/build-deb.sh $(B)/deb
# ---- end packaging --------------------------------------------------------

# ---- interop with real Redisson -----------------------------------------
# make interop: the tests of test/interop against real Redisson from Maven
# Central, all on one throwaway redis-server: the newest 4.x and 3.x, 3.43.0
# (last without batched renewal) and 3.23.5 (last without the unlock latch;
# agent-only: older than the porting guide's Java). Needs Java 17+ and
# Maven (it says so and fails when they are missing); make check never runs
# it. docs-check verifies that the porting guide's Java blocks stand in
# test/interop (needs only python3).
REDISSON_VERSIONS ?= 4.7.0 3.52.0 3.43.0 3.23.5:agent-only
INTEROP_SRC := $(wildcard test/interop/*.c)

.PHONY: interop interop-docs-check

$(B)/interop/interop: $(INTEROP_SRC) $(wildcard test/interop/*.h) $(B)/librlock.a include/rlock.h
	@mkdir -p $(B)/interop
	$(CC) $(ALL_CFLAGS) -Itest/interop -o $@ $(INTEROP_SRC) $(B)/librlock.a \
	  $(ALL_LDFLAGS) $(RL_LDLIBS)

interop: deps
	@sh test/interop/run.sh --check-tools
	$(MAKE) $(B)/interop/interop
	sh test/interop/run.sh $(B) $(REDISSON_VERSIONS)

interop-docs-check:
	@if command -v python3 >/dev/null; then python3 test/interop/check-java-excerpts.py; \
	else echo "interop-docs-check: python3 not found (scripts/deps.sh installs it), skipped"; fi

docs-check: interop-docs-check
