# rlock — build, test, install, demo, bench, sanitizers.
# User CFLAGS/LDFLAGS/CPPFLAGS are appended to ours, never replaced.

PREFIX   ?= /usr/local
DESTDIR  ?=
LIBDIR   ?= $(PREFIX)/lib
INCDIR   ?= $(PREFIX)/include
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
PCDIR    ?= $(LIBDIR)/pkgconfig

CC       ?= cc
B        ?= build
VERSION  := 0.1.0
SOMAJOR  := 0
SONAME   := librlock.so.$(SOMAJOR)

RL_CFLAGS  := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fPIC \
              -fvisibility=hidden -pthread -Iinclude -Isrc -I$(B)
RL_LDLIBS  := -lhiredis -luuid -pthread
SAN_FLAGS  ?=
ALL_CFLAGS  = $(RL_CFLAGS) $(SAN_FLAGS) $(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(SAN_FLAGS) $(LDFLAGS)

LIB_SRC  := $(wildcard src/*.c)
LIB_OBJ  := $(patsubst src/%.c,$(B)/obj/%.o,$(LIB_SRC)) $(B)/obj/lua_scripts.o
LUA      := $(wildcard lua/*.lua)
EX_SRC   := $(wildcard examples/*.c)
EX_BIN   := $(patsubst examples/%.c,$(B)/examples/%,$(EX_SRC))
TEST_SRC := $(filter-out test/harness.c,$(wildcard test/test_*.c))
TEST_BIN := $(patsubst test/%.c,$(B)/test/%,$(TEST_SRC))
TOOL_SRC := $(wildcard tools/*.c)
BENCH_SRC:= $(wildcard bench/*.c)

FORCE:

.PHONY: FORCE docs-check all lib check test demo bench install uninstall clean asan tsan \
        valgrind symbols format deps soak fuzz

all: lib $(B)/rlock $(B)/rlock-bench $(EX_BIN)

lib: $(B)/librlock.a $(B)/librlock.so $(B)/rlock.pc

$(B)/lua_scripts.c: $(LUA) scripts/embed-lua.sh
	@mkdir -p $(B)
	sh scripts/embed-lua.sh $(LUA) > $@.tmp && mv $@.tmp $@

$(B)/obj/%.o: src/%.c src/internal.h include/rlock.h
	@mkdir -p $(B)/obj
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/obj/lua_scripts.o: $(B)/lua_scripts.c src/internal.h
	@mkdir -p $(B)/obj
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/librlock.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(B)/librlock.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(ALL_LDFLAGS) -o $@.$(VERSION) $^ $(RL_LDLIBS)
	ln -sf librlock.so.$(VERSION) $(B)/$(SONAME)
	ln -sf librlock.so.$(VERSION) $@

# Regenerated on every run so that it carries the PREFIX of this make.
$(B)/rlock.pc: FORCE
	@mkdir -p $(B)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCDIR)' '' \
	  'Name: rlock' 'Description: Redisson-compatible distributed locks on Redis' \
	  'Version: $(VERSION)' 'Requires.private: hiredis' \
	  'Libs: -L$${libdir} -lrlock' 'Libs.private: -luuid -pthread' \
	  'Cflags: -I$${includedir}' > $@

# Programs link the static library so they run from the tree without
# LD_LIBRARY_PATH.
$(B)/rlock: $(TOOL_SRC) $(B)/librlock.a include/rlock.h
	$(CC) $(ALL_CFLAGS) -o $@ $(TOOL_SRC) $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

$(B)/rlock-bench: $(BENCH_SRC) $(B)/librlock.a include/rlock.h
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

$(B)/test/%: test/%.c test/harness.c test/harness.h $(B)/librlock.a $(CRIT_DEPS)
	@mkdir -p $(B)/test
	$(CC) $(ALL_CFLAGS) $(CRIT_CFLAGS) -Itest -o $@ $< test/harness.c $(B)/librlock.a \
	  $(ALL_LDFLAGS) $(RL_LDLIBS) $(CRIT_LIBS)

# test_chaos also links the fault-injecting TCP proxy (test/proxy.c).
$(B)/test/test_chaos: test/test_chaos.c test/proxy.c test/proxy.h test/harness.c test/harness.h \
  $(B)/librlock.a $(CRIT_DEPS)
	@mkdir -p $(B)/test
	$(CC) $(ALL_CFLAGS) $(CRIT_CFLAGS) -Itest -o $@ $< test/proxy.c test/harness.c \
	  $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS) $(CRIT_LIBS)

# Everything below installs missing Debian packages first.
deps:
	@sh scripts/deps.sh

check: deps
	$(MAKE) all $(TEST_BIN) symbols docs-check
	sh scripts/run-tests.sh $(B) $(TEST_BIN)

test: check

demo: deps
	$(MAKE) all
	sh scripts/with-redis.sh $(B)/examples/demo

bench: deps
	$(MAKE) $(B)/rlock-bench
	sh scripts/with-redis.sh $(B)/rlock-bench --all

# The porting guide's C blocks are excerpts of the compiled examples.
docs-check:
	@if command -v python3 >/dev/null; then python3 scripts/check-doc-excerpts.py; \
	else echo "docs-check: python3 not found, skipped"; fi

# The exported symbols of the shared library must all be rlock_*.
symbols: $(B)/librlock.so
	@bad=$$(nm -D --defined-only $(B)/librlock.so | awk '$$2 ~ /[TDBR]/ {print $$3}' \
	  | grep -v '^rlock_' || true); \
	if [ -n "$$bad" ]; then echo "exported non-rlock_ symbols: $$bad"; exit 1; fi; \
	echo "symbols: only rlock_* exported"

asan: deps
	$(MAKE) B=build-asan CC=gcc SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" check

# Criterion cannot start under ThreadSanitizer (its sandbox maps a shared
# arena at random addresses that TSan reserves), so the TSan suite is built
# with CRIT=lite (test/lite); test/race.c and the demo run as well.
# die_after_fork=0: tests fork children of a threaded process that make
# clients of their own.
TSAN_RUN := TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 die_after_fork=0"
tsan: deps
	$(MAKE) B=build-tsan CRIT=lite CC=gcc SAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  all build-tsan/race $(patsubst $(B)/%,build-tsan/%,$(TEST_BIN))
	$(TSAN_RUN) sh scripts/run-tests.sh build-tsan $(patsubst $(B)/%,build-tsan/%,$(TEST_BIN))
	$(TSAN_RUN) sh scripts/with-redis.sh sh -c \
	  'RLOCK_TEST_URL=$$RLOCK_URL build-tsan/race && build-tsan/examples/demo'

$(B)/race: test/race.c $(B)/librlock.a
	$(CC) $(ALL_CFLAGS) -o $@ test/race.c $(B)/librlock.a $(ALL_LDFLAGS) $(RL_LDLIBS)

# valgrind cannot judge Criterion's own workers (their exit codes and the
# framework's memory), so the memcheck suite is built with CRIT=lite into
# build-vg; each test's process is checked at its exit, as are the threaded
# driver and every example. Children the tests exec (the rlock command) run
# unchecked.
VG := valgrind --leak-check=full --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --quiet
VG_BIN := $(patsubst $(B)/%,build-vg/%,$(TEST_BIN))
valgrind: deps
	@sh scripts/deps.sh valgrind
	$(MAKE) B=build-vg CRIT=lite all build-vg/race $(VG_BIN)
	RLOCK_TEST_WRAPPER="$(VG)" sh scripts/run-tests.sh build-vg $(VG_BIN)
	sh scripts/with-redis.sh sh -c 'set -e; \
	  RLOCK_TEST_URL=$$RLOCK_URL $(VG) build-vg/race; \
	  for e in build-vg/examples/port_*; do echo "=== $$e"; $(VG) $$e "$$RLOCK_URL" >/dev/null; done; \
	  echo "valgrind: no errors, no leaks"'

install: lib $(B)/rlock
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(PCDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 644 include/rlock.h $(DESTDIR)$(INCDIR)/rlock.h
	install -m 644 $(B)/librlock.a $(DESTDIR)$(LIBDIR)/librlock.a
	install -m 755 $(B)/librlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librlock.so.$(VERSION)
	ln -sf librlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf librlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librlock.so
	install -m 644 $(B)/rlock.pc $(DESTDIR)$(PCDIR)/rlock.pc
	install -m 755 $(B)/rlock $(DESTDIR)$(BINDIR)/rlock
	if [ -f docs/rlock.1 ]; then install -m 644 docs/rlock.1 $(DESTDIR)$(MANDIR)/man1/rlock.1; fi

uninstall:
	rm -f $(DESTDIR)$(INCDIR)/rlock.h $(DESTDIR)$(LIBDIR)/librlock.* \
	  $(DESTDIR)$(PCDIR)/rlock.pc $(DESTDIR)$(BINDIR)/rlock $(DESTDIR)$(MANDIR)/man1/rlock.1

format:
	clang-format -i include/*.h src/*.c src/*.h test/*.c test/*.h test/lite/*.c test/lite/criterion/*.h examples/*.c tools/*.c bench/*.c

clean:
	rm -rf build build-asan build-tsan build-vg

# ---- soak and fuzz ------------------------------------------------------
# make soak: the stress tests for RLOCK_STRESS_SECONDS each (default 300)
# and the fault tests SOAK_ROUNDS times, against a throwaway server; then
# the randomized fault test for RLOCK_CHAOS_SECONDS (default 300) on its
# own private server (RLOCK_CHAOS_SEED=<seed> replays a failure's seed).
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

$(B)/fuzz/fuzz_url: fuzz/fuzz_url.c $(LIB_SRC) $(B)/lua_scripts.c src/internal.h include/rlock.h
	@mkdir -p $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_url.c $(LIB_SRC) $(B)/lua_scripts.c $(RL_LDLIBS)

$(B)/fuzz/fuzz_name: fuzz/fuzz_name.c $(LIB_SRC) $(B)/lua_scripts.c src/internal.h include/rlock.h
	@mkdir -p $(B)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_name.c $(filter-out src/lock.c,$(LIB_SRC)) \
	  $(B)/lua_scripts.c $(RL_LDLIBS)

fuzz: deps
	@sh scripts/deps.sh clang libclang-rt-14-dev
	$(MAKE) $(B)/fuzz/fuzz_url $(B)/fuzz/fuzz_name
	@for f in url name; do \
	  mkdir -p $(B)/fuzz/corpus-$$f; \
	  echo "=== fuzz_$$f for $(FUZZ_TIME) s"; \
	  $(B)/fuzz/fuzz_$$f -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=4096 -dict=fuzz/$$f.dict -print_final_stats=1 \
	    -artifact_prefix=$(B)/fuzz/crash-$$f- \
	    $(B)/fuzz/corpus-$$f fuzz/corpus/$$f || exit 1; \
	done
