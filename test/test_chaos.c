/* Chaos: a randomized fault test of mutual exclusion. LANES worker
 * processes of THREADS threads each take a few contended locks (watchdog or
 * explicit lease, re-entered up to three deep) through a fault-injecting proxy of
 * their own (test/proxy.c) to a private redis-server, while a seeded
 * injector delays requests or replies, drops and cuts connections, makes a
 * worker's link half-dead (accepted, never answered, reconnects included),
 * stalls
 * the server (DEBUG SLEEP, CLIENT PAUSE), restarts it with its data (SHUTDOWN
 * SAVE, and a data set big enough that clients meet LOADING), and stops
 * (SIGSTOP) or kills (SIGKILL) workers.
 *
 * Every critical section is recorded in memory shared by all processes
 * (MAP_SHARED, made before fork), on CLOCK_MONOTONIC, which every process of
 * the machine shares: from the return of the outermost rlock_try_lock() to
 * the start of the outermost rlock_unlock(), with the time its holder was
 * "told" the hold might be gone. The checks, after the run:
 *
 * 1. Overlap: two sections of one name that overlap, where neither holder
 *    had been told by the time the overlap began. Told means: on_lock_lost
 *    for that name and thread; a re-entry that returned RLOCK_EBUSY or
 *    RLOCK_ELOST (the thread's next lock takes a fresh hold); an inner
 *    unlock that returned RLOCK_ELOST, RLOCK_ENOTOWNER or another
 *    status that made the worker give up; an explicit lease that ran out by
 *    the holder's own clock (last successful lock call's start + lease: the
 *    script ran after that start, so Redis expires the key no earlier); or
 *    the holder's process stopped (SIGSTOP) or was killed during the
 *    section. A stopped process is "paused past its lease": no lease lock
 *    can protect it, so it is excused from the stop on, but check 2 demands
 *    that it learns.
 *    An inner unlock that returned RLOCK_ETIMEDOUT or RLOCK_EIO does not
 *    tell: the header promises that the hold is still counted and that the
 *    next unlock reports RLOCK_ELOST if the release did happen, so the
 *    worker retries it and keeps believing it holds the outer levels.
 * 2. Unlock OK after a loss: a section whose outermost unlock returned
 *    RLOCK_OK although another thread's lock call started after this
 *    section's last successful lock call and returned before that unlock
 *    began. That acquire ran while this thread's field was absent, nothing
 *    of this thread could put it back, so the unlock must not say RLOCK_OK.
 *    Sections with a lock call of unknown outcome in the 10 s before are
 *    left out (a late acquire may legitimately re-create the field).
 * 3. Counter: each section reads "count writer" from a counter key of its
 *    name at its start and, unless told, writes "count+1 self" at its end
 *    with a compare-and-set script, on a direct connection to the server.
 *    Redis runs the script atomically and nothing else writes the key, so
 *    exactly: successful CAS <= final count <= successful + unanswered CAS.
 *    A CAS that finds another value proves, without any clock, that the
 *    last writer's write landed inside this section: that pair must be an
 *    overlapping pair of check 1 (a "counter witness"); otherwise the
 *    recording is wrong and the test fails.
 * 4. Left behind: the run ends with one more restart and a few calm
 *    seconds; once every worker has finished (clients still open), after
 *    the longest lease no lock key may remain: a hold still there is kept
 *    alive by a watchdog for a thread that believes it let go (e.g. an
 *    unlock that met LOADING and returned RLOCK_EREDIS).
 *
 * Two runs, at once (make check runs two tests of a program in parallel):
 * three reentrant locks, and one lock of every other kind (test/kinds.h:
 * fair, fenced, spin, a read/write lock, the non-reentrant forms). On a
 * read/write lock a section takes the read lock (two in three) or the write
 * lock: two readers may overlap (counted: they did share), a writer and
 * anyone may not; a reader does not write the counter but reads it again
 * at its end, and a value another section wrote in between must name a
 * writer whose section overlapped (a "reader witness", as check 3). A
 * non-reentrant lock is asked again in place of a re-entry: RLOCK_EDEADLK
 * changes nothing, RLOCK_OK is a violation ("re-entered"). A fenced lock's
 * sections record their token: a section whose lock call began after
 * another's had returned must have a greater token (check 5, "token
 * order"). RLOCK_CHAOS_KINDS=<kind,...> (fair, fenced, spin, rw,
 * nonreentrant, fair-nonreentrant, reentrant; one name each, repeat a
 * kind for more) sets the second run's locks.
 *
 * The seed is printed first; RLOCK_CHAOS_SEED=<seed> replays its fault
 * schedule and the workers' choices (timing still varies), and
 * RLOCK_CHAOS_SECONDS sets the length (20 s by default; make soak runs
 * longer; 8 s under sanitizers or RLOCK_TEST_WRAPPER), RLOCK_CHAOS_FAULTS
 * a comma-separated subset of the fault kinds (fault_key below), and
 * RLOCK_CHAOS_VERBOSE=1 lists every section that saw an error. Library
 * timeouts, leases and section lengths scale with the test time multiplier
 * (th_time_multiplier()), so instrumented runs keep their proportions. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "kinds.h"
#include "proxy.h"

#define LANES 4      /* worker processes alive at once */
#define THREADS 4    /* threads per worker */
#define MAX_NAMES 16 /* lock names, all contended */
/* Watchdog sections (renewed) and explicit-lease ones, re-entered up to
 * three deep; a re-entry of a watchdog section takes an explicit lease one
 * time in three (longer or shorter than the watchdog's: renewals set the
 * key back to the watchdog's lease, and the holder must be told by that
 * clock). */
#define MAX_PROCS 64 /* process slots, respawns included */
#define MAX_SECS (1 << 17)
#define MAX_FAULTS 16384
#define EVMAX 20
#define NST 19 /* rlock_status values */
#define NEVER INT64_MAX

/* ---- shared record ------------------------------------------------------ */

enum op { OP_LOCK, OP_REENTER, OP_UNLOCK, OP_FINAL, OP_CLEANUP, OP_N };
static const char *const op_name[OP_N] = {"lock", "re-entry", "inner unlock", "outer unlock",
                                          "cleanup unlock"};

enum told { TOLD_NONE, TOLD_CALLBACK, TOLD_BUSY, TOLD_LOST, TOLD_GAVE_UP, TOLD_KILLED, TOLD_N };
static const char *const told_name[TOLD_N] = {"not told",
                                              "on_lock_lost",
                                              "re-entry EBUSY",
                                              "inner unlock ELOST/ENOTOWNER",
                                              "inner unlock failed",
                                              "process killed"};

/* A writer's counter CAS; a reader's second read: the same value, or one
 * a writer wrote during the section. */
enum cas { CAS_NONE, CAS_OK, CAS_CONFLICT, CAS_UNKNOWN, CAS_READ_SAME, CAS_READ_CHANGED, CAS_N };

/* One step of a section: 'L' lock, 'R' re-entry, 'U' inner unlock, 'F'
 * outer unlock, 'X' clean-up unlock, 'C' on_lock_lost, 'G' counter read
 * failed, 'S' CAS, with its status and ms since the section's lock call. */
typedef struct event {
    char what;
    int8_t st;
    int32_t at_ms;
} event;

typedef struct section {
    atomic_int ready; /* set last: the fields below are written */
    int32_t proc, thread, name, depth;
    int32_t kind;         /* th_kinds[] index: TK_READ or TK_WRITE on a read/write lock */
    int64_t token;        /* fenced: the outer lock's token, else -1 */
    int64_t call_ns;      /* outermost lock call started */
    int64_t start_ns;     /* it returned RLOCK_OK */
    int64_t end_ns;       /* outermost unlock call started / gave up / killed */
    int64_t last_lock_ns; /* latest successful lock call returned */
    int64_t lease_until;  /* explicit lease: runs out no earlier; NEVER */
    int64_t unknown_ns;   /* latest lock call of unknown outcome of this thread+name */
    int64_t cas_sent_ns;
    atomic_llong told_ns; /* NEVER: not told */
    atomic_int told_how;
    int32_t final_st; /* outermost unlock's status, -1 if not reached */
    int32_t cas, cas_with;
    int32_t watchdog;
    int32_t explicit_reentries; /* of a watchdog section */
    atomic_int nev;
    event ev[EVMAX];
} section;

typedef struct proc_info {
    pid_t pid;
    int lane;
    atomic_int up;   /* client made */
    atomic_int done; /* threads finished */
    int64_t watchdog_ms;
    char client_id[40];
    atomic_ullong tid[THREADS];
    atomic_int cur[THREADS]; /* open section + 1, 0: none */
} proc_info;

typedef struct shared {
    int64_t t0_ns;
    int server_port;
    int nnames;
    int kind[MAX_NAMES]; /* th_kinds[] index; TK_READ: a read/write lock */
    char names[MAX_NAMES][64];
    char counters[MAX_NAMES][64];
    atomic_int stop;    /* workers: take no new locks */
    atomic_int release; /* workers: free the client and exit */
    atomic_int nsec;
    atomic_ullong st[OP_N][NST + 1];
    atomic_ullong depth_hist[4];
    atomic_ullong callbacks, stale_callbacks, cas_n[CAS_N];
    atomic_ullong reentered; /* a non-reentrant lock taken again */
    atomic_ullong edeadlk;   /* ... refused, as it must be */
    proc_info procs[MAX_PROCS];
    section secs[MAX_SECS];
} shared;

static shared *sh;
static uint64_t seed;
static double mult;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ms(int64_t x) /* a library time or section length, scaled */
{
    return (int64_t)((double)x * mult);
}

static double rel_ms(int64_t t)
{
    return t == NEVER ? -1 : (double)(t - sh->t0_ns) / 1e6;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t rnd(uint64_t *s, int64_t lo, int64_t hi) /* in [lo, hi] */
{
    return lo + (int64_t)(splitmix(s) % (uint64_t)(hi - lo + 1));
}

static void stat_st(int op, rlock_status st)
{
    int i = (st >= 0 && st < NST) ? (int)st : NST;
    atomic_fetch_add(&sh->st[op][i], 1);
}

static void ev_add(section *s, char what, rlock_status st)
{
    int i = atomic_fetch_add(&s->nev, 1);
    if (i < EVMAX) {
        s->ev[i] = (event){what, (int8_t)st, (int32_t)((now_ns() - s->call_ns) / 1000000)};
    }
}

static void tell(section *s, int how)
{
    long long want = NEVER, now = now_ns();
    if (atomic_compare_exchange_strong(&s->told_ns, &want, now)) {
        atomic_store(&s->told_how, how);
    }
}

static bool told(section *s)
{
    return atomic_load(&s->told_ns) != NEVER;
}

/* ---- workers (forked children) ------------------------------------------ */

typedef struct worker {
    int slot, thread;
    rlock *(*locks)[2]; /* per name: its handle, and a read/write lock's write half */
    uint64_t rng;
    redisContext *ctr; /* direct to the server, for the counter */
    int64_t unknown_ns[MAX_NAMES];
} worker;

static void on_lost(const char *name, uint64_t tid, void *arg)
{
    proc_info *p = arg;
    atomic_fetch_add(&sh->callbacks, 1);
    for (int t = 0; t < THREADS; t++) {
        int cur = atomic_load(&p->cur[t]);
        if (atomic_load(&p->tid[t]) != tid || cur == 0) {
            continue;
        }
        section *s = &sh->secs[cur - 1];
        if (strcmp(sh->names[s->name], name) == 0) {
            ev_add(s, 'C', RLOCK_ELOST);
            tell(s, TOLD_CALLBACK);
            return;
        }
    }
    atomic_fetch_add(&sh->stale_callbacks, 1);
}

/* Sleeps ms, in slices; false as soon as the section's holder is told. */
static bool hold(section *s, int64_t msec)
{
    int64_t until = now_ns() + msec * 1000000;
    for (;;) {
        if (told(s)) {
            return false;
        }
        int64_t left = (until - now_ns()) / 1000000;
        if (left <= 0) {
            return true;
        }
        th_sleep_ms(left < 20 ? left : 20);
    }
}

/* One unlock, retried while its outcome is unknown (RLOCK_ETIMEDOUT,
 * RLOCK_EIO), as the header says: the hold is still counted, and the next
 * unlock reports RLOCK_ELOST if the release did happen. */
static rlock_status unlock_retry(worker *w, rlock *l, section *s, int op, char what)
{
    int64_t give_up = now_ns() + ms(20000) * 1000000;
    for (;;) {
        rlock_status st = rlock_unlock(l);
        stat_st(op, st);
        ev_add(s, what, st);
        if ((st != RLOCK_ETIMEDOUT && st != RLOCK_EIO) || now_ns() > give_up) {
            return st;
        }
        th_sleep_ms(rnd(&w->rng, 10, 60));
    }
}

static void ctr_drop(worker *w)
{
    if (w->ctr) {
        redisFree(w->ctr);
        w->ctr = NULL;
    }
}

static redisReply *ctr_cmd(worker *w, const char *fmt, ...)
{
    if (!w->ctr) {
        struct timeval tv = {0, 500000};
        w->ctr = redisConnectWithTimeout("127.0.0.1", sh->server_port, tv);
        if (!w->ctr || w->ctr->err) {
            ctr_drop(w);
            return NULL;
        }
        int64_t t = ms(1000);
        struct timeval ct = {t / 1000, (t % 1000) * 1000};
        redisSetTimeout(w->ctr, ct);
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(w->ctr, fmt, ap);
    va_end(ap);
    if (!r) {
        ctr_drop(w); /* a reply may still be on its way: never reuse */
    }
    return r;
}

/* KEYS[1] counter, ARGV[1] the value read ("" for none), ARGV[2] new value:
 * 1 if written, else the value found. */
static const char cas_script[] =
    "local v = redis.call('get', KEYS[1]) or '' "
    "if v == ARGV[1] then redis.call('set', KEYS[1], ARGV[2]) return 1 end "
    "return v";

static void section_body(worker *w, section *s, rlock *l, int idx, int depth, int64_t lease)
{
    /* lease_until covers explicit sections only: a watchdog section stays
     * in watchdog mode through its explicit re-entries (its first level
     * is the watchdog's), so on_lock_lost is what tells it. */
    int held = 1, k = s->name;
    const th_kind *kd = &th_kinds[s->kind];
    bool quit = false;
    char seen[64] = "";
    bool have_seen = false;
    redisReply *g = ctr_cmd(w, "GET %s", sh->counters[k]);
    if (g && (g->type == REDIS_REPLY_STRING || g->type == REDIS_REPLY_NIL)) {
        snprintf(seen, sizeof seen, "%s", g->type == REDIS_REPLY_STRING ? g->str : "");
        have_seen = true;
    } else {
        ev_add(s, 'G', RLOCK_EIO);
        ctr_drop(w);
    }
    if (g) {
        freeReplyObject(g);
    }
    for (int lvl = 2; lvl <= depth && !quit; lvl++) {
        if (!hold(s, rnd(&w->rng, 0, ms(30)))) {
            quit = true;
            break;
        }
        int64_t t = now_ns();
        int64_t lv = lease;
        if (lease == RLOCK_WATCHDOG && rnd(&w->rng, 0, 2) == 0) {
            lv = ms(rnd(&w->rng, 400, 2000));
        }
        rlock_status st = rlock_try_lock(l, 0, lv);
        if (lv != lease) {
            s->explicit_reentries++;
        }
        stat_st(OP_REENTER, st);
        ev_add(s, 'R', st);
        if (st == RLOCK_EDEADLK && !kd->reentrant) {
            /* A non-reentrant lock asked again: refused, nothing changed. */
            atomic_fetch_add(&sh->edeadlk, 1);
        } else if (st == RLOCK_OK) {
            if (!kd->reentrant) {
                atomic_fetch_add(&sh->reentered, 1);
            }
            held++;
            s->last_lock_ns = now_ns();
            if (lease != RLOCK_WATCHDOG && t + lease * 1000000 > s->lease_until) {
                s->lease_until = t + lease * 1000000;
            }
        } else if (st == RLOCK_EBUSY) {
            tell(s, TOLD_BUSY);
            quit = true;
        } else if (st == RLOCK_ELOST) {
            /* A definite answer: the hold is gone (found missing, or its
             * lease over by the client's clock); the thread's next lock
             * takes a fresh hold, so a worker that went on re-entering
             * would count one level more than it has. The levels it took
             * unwind below (each unlock answers RLOCK_ELOST). */
            tell(s, TOLD_LOST);
            quit = true;
        } else {
            w->unknown_ns[k] = s->unknown_ns = now_ns();
        }
    }
    if (held > s->depth) {
        s->depth = held;
    }
    /* Mostly short, sometimes longer than any lease. */
    int64_t r = rnd(&w->rng, 0, 99);
    int64_t len = r < 75   ? rnd(&w->rng, 0, 60)
                  : r < 96 ? rnd(&w->rng, 60, 500)
                           : rnd(&w->rng, 800, 2500);
    if (!quit && !hold(s, ms(len))) {
        quit = true;
    }
    while (!quit && held > 1) {
        if (!hold(s, rnd(&w->rng, 0, ms(30)))) {
            quit = true;
            break;
        }
        rlock_status st = unlock_retry(w, l, s, OP_UNLOCK, 'U');
        if (st == RLOCK_OK) {
            held--;
            /* The outer levels' work goes on after an inner release. */
            if (!hold(s, rnd(&w->rng, 0, ms(150)))) {
                quit = true;
            }
        } else {
            tell(s, st == RLOCK_ELOST || st == RLOCK_ENOTOWNER ? TOLD_LOST : TOLD_GAVE_UP);
            if (st == RLOCK_ELOST || st == RLOCK_ENOTOWNER) {
                held = 0; /* the hold is forgotten */
            } else {
                held--; /* gave up on this level; release the rest */
            }
            quit = true;
        }
    }
    if (!quit && told(s)) {
        quit = true;
    }
    if (!quit) {
        if (have_seen && kd->read) {
            /* A reader writes nothing: it reads the counter again, and a
             * new value names a writer that was inside this section. */
            s->cas = CAS_NONE;
            redisReply *c = ctr_cmd(w, "GET %s", sh->counters[k]);
            if (c && (c->type == REDIS_REPLY_STRING || c->type == REDIS_REPLY_NIL)) {
                const char *now = c->type == REDIS_REPLY_STRING ? c->str : "";
                if (strcmp(now, seen) == 0) {
                    s->cas = CAS_READ_SAME;
                } else {
                    int with = -1;
                    long long cnt;
                    if (sscanf(now, "%lld %d", &cnt, &with) != 2) {
                        with = -1;
                    }
                    s->cas = CAS_READ_CHANGED;
                    s->cas_with = with;
                }
                ev_add(s, 'S', s->cas == CAS_READ_SAME ? RLOCK_OK : RLOCK_EBUSY);
            } else {
                ev_add(s, 'S', RLOCK_EIO);
                ctr_drop(w);
            }
            if (c) {
                freeReplyObject(c);
            }
        } else if (have_seen) {
            long long count = 0;
            sscanf(seen, "%lld", &count);
            char next[64];
            snprintf(next, sizeof next, "%lld %d", count + 1, idx);
            s->cas_sent_ns = now_ns();
            s->cas = CAS_UNKNOWN;
            redisReply *c =
                ctr_cmd(w, "EVAL %s 1 %s %s %s", cas_script, sh->counters[k], seen, next);
            if (c && c->type == REDIS_REPLY_INTEGER && c->integer == 1) {
                s->cas = CAS_OK;
                ev_add(s, 'S', RLOCK_OK);
            } else if (c && c->type == REDIS_REPLY_STRING) {
                int with = -1;
                long long cnt;
                if (sscanf(c->str, "%lld %d", &cnt, &with) != 2) {
                    with = -1;
                }
                s->cas = CAS_CONFLICT;
                s->cas_with = with;
                ev_add(s, 'S', RLOCK_EBUSY);
            } else {
                ev_add(s, 'S', RLOCK_EIO);
                if (c && c->type != REDIS_REPLY_ERROR) {
                    ctr_drop(w);
                }
            }
            if (c) {
                freeReplyObject(c);
            }
        }
        atomic_fetch_add(&sh->cas_n[s->cas], 1);
        s->end_ns = now_ns();
        rlock_status st = unlock_retry(w, l, s, OP_FINAL, 'F');
        /* Whatever it says, a user has nothing more to try: RLOCK_EREDIS
         * and RLOCK_EPROTO are not "outcome unknown". */
        s->final_st = (int32_t)st;
        return;
    }
    atomic_fetch_add(&sh->cas_n[CAS_NONE], 1);
    s->end_ns = now_ns();
    /* Told: release whatever this thread may still hold. RLOCK_ELOST or
     * RLOCK_ENOTOWNER means nothing is left. */
    for (; held > 0; held--) {
        rlock_status st = unlock_retry(w, l, s, OP_CLEANUP, 'X');
        if (st != RLOCK_OK) {
            break;
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    proc_info *me = &sh->procs[w->slot];
    atomic_store(&me->tid[w->thread], rlock_thread_id());
    for (int k = 0; k < sh->nnames; k++) {
        w->unknown_ns[k] = -NEVER;
    }
    while (!atomic_load(&sh->stop)) {
        int k = (int)rnd(&w->rng, 0, sh->nnames - 1);
        /* A read/write lock: the write lock one time in three. */
        int kind = sh->kind[k];
        bool write = kind == TK_READ && rnd(&w->rng, 0, 2) == 0;
        if (write) {
            kind = TK_WRITE;
        }
        rlock *l = w->locks[k][write];
        bool wd = rnd(&w->rng, 0, 1) == 0;
        int64_t lease = wd ? RLOCK_WATCHDOG : ms(rnd(&w->rng, 400, 2000));
        int64_t r = rnd(&w->rng, 0, 99);
        int depth = r < 35 ? 1 : r < 70 ? 2 : 3;
        int64_t wait = rnd(&w->rng, 0, 9) == 0 ? 0 : ms(rnd(&w->rng, 200, 3000));
        int64_t call = now_ns();
        rlock_status st = rlock_try_lock(l, wait, lease);
        stat_st(OP_LOCK, st);
        if (st != RLOCK_OK) {
            if (st != RLOCK_EBUSY) {
                w->unknown_ns[k] = now_ns(); /* the acquire may still run */
                th_sleep_ms(rnd(&w->rng, 10, 100));
            }
            continue;
        }
        int idx = atomic_fetch_add(&sh->nsec, 1);
        if (idx >= MAX_SECS) {
            atomic_store(&sh->stop, 1);
            rlock_unlock(l);
            break;
        }
        section *s = &sh->secs[idx];
        s->proc = w->slot;
        s->thread = w->thread;
        s->name = k;
        s->kind = kind;
        s->token = -1;
        if (th_kinds[kind].fenced) {
            int64_t tok = -1;
            if (rlock_fence_token(l, &tok) == RLOCK_OK) {
                s->token = tok;
            }
        }
        s->depth = 1;
        s->call_ns = call;
        s->start_ns = s->last_lock_ns = now_ns();
        s->lease_until = wd ? NEVER : call + lease * 1000000;
        s->unknown_ns = w->unknown_ns[k];
        s->end_ns = 0;
        s->final_st = -1;
        s->cas_with = -1;
        s->watchdog = wd;
        s->explicit_reentries = 0;
        atomic_store(&s->told_ns, NEVER);
        ev_add(s, 'L', RLOCK_OK);
        atomic_store(&s->ready, 1);
        atomic_store(&me->cur[w->thread], idx + 1);
        section_body(w, s, l, idx, depth, lease);
        atomic_store(&me->cur[w->thread], 0);
        atomic_fetch_add(&sh->depth_hist[s->depth], 1);
        th_sleep_ms(rnd(&w->rng, 0, 30));
    }
    ctr_drop(w);
    return NULL;
}

static int worker_proc(int slot, int port, tp_proxy **proxies, pid_t parent)
{
    /* Never outlive a test that failed half-way (stopped ones included). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        return 6;
    }
    for (int i = 0; i < LANES; i++) {
        close(tp_listen_fd(proxies[i]));
    }
    proc_info *me = &sh->procs[slot];
    uint64_t rng = seed ^ (0x1234567ULL * (uint64_t)(slot + 1));
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = me->watchdog_ms = ms(rnd(&rng, 8, 15) * 100);
    /* A command timeout from under a third of the watchdog's lease to over
     * it (Redisson users run 3 s with 15-30 s): a renewal round that must
     * reconnect into a half-dead link has to end by the report deadline,
     * not by its own timeouts. */
    cfg.command_timeout_ms = ms(rnd(&rng, 3, 9) * 100);
    cfg.connect_timeout_ms = ms(300);
    cfg.retry_timeout_ms = ms(4000);
    cfg.subscribe_timeout_ms = ms(1000);
    cfg.on_lock_lost = on_lost;
    cfg.on_lock_lost_arg = me;
    rlock_client *c = NULL;
    for (int64_t until = now_ns() + ms(15000) * 1000000LL; now_ns() < until;) {
        if (rlock_client_new(&cfg, &c) == RLOCK_OK) {
            break;
        }
        th_sleep_ms(100); /* the server may be restarting */
    }
    if (!c) {
        return 3;
    }
    snprintf(me->client_id, sizeof me->client_id, "%s", rlock_client_id(c));
    rlock *locks[MAX_NAMES][2] = {{NULL}};
    for (int k = 0; k < sh->nnames; k++) {
        const th_kind *kd = &th_kinds[sh->kind[k]];
        if (kd->make(c, sh->names[k], &locks[k][0]) != RLOCK_OK ||
            (kd->read && rlock_new_write(c, sh->names[k], &locks[k][1]) != RLOCK_OK)) {
            return 4;
        }
    }
    atomic_store(&me->up, 1);
    worker w[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){.slot = slot, .thread = t, .locks = locks};
        w[t].rng = splitmix(&rng);
        if (pthread_create(&th[t], NULL, worker_main, &w[t]) != 0) {
            return 5;
        }
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
    }
    atomic_store(&me->done, 1);
    /* Keep the client (and its watchdog) alive until the parent has looked
     * for holds left behind. */
    for (int64_t until = now_ns() + ms(120000) * 1000000LL;
         !atomic_load(&sh->release) && now_ns() < until;) {
        th_sleep_ms(20);
    }
    for (int k = 0; k < sh->nnames; k++) {
        rlock_free(locks[k][0]);
        rlock_free(locks[k][1]);
    }
    rlock_client_free(c);
    return 0;
}

/* ---- the injector (the test process) ------------------------------------- */

enum fault_kind {
    F_REPLY_DELAY,
    F_REQUEST_DELAY,
    F_DROP,
    F_CUT,
    F_SLEEP,
    F_PAUSE,
    F_RESTART,
    F_STOP,
    F_KILL,
    F_HALFDEAD,
    F_N
};
static const char *const fault_name[F_N] = {
    "proxy reply delay", "proxy request delay", "proxy drop", "proxy reply cut", "DEBUG SLEEP",
    "CLIENT PAUSE",      "server restart",      "SIGSTOP",    "SIGKILL",         "proxy half-dead"};
/* Names for RLOCK_CHAOS_FAULTS, a comma-separated subset to inject (all by
 * default), for narrowing a failure down. */
static const char *const fault_key[F_N] = {"reply-delay", "request-delay", "drop",    "cut",
                                           "sleep",       "pause",         "restart", "stop",
                                           "kill",        "half-dead"};
static int fault_weight[F_N] = {30, 14, 8, 10, 10, 8, 5, 13, 8, 8};

static void fault_select(void)
{
    const char *sel = getenv("RLOCK_CHAOS_FAULTS");
    if (!sel || !*sel) {
        return;
    }
    for (int k = 0; k < F_N; k++) {
        const char *p = strstr(sel, fault_key[k]);
        size_t n = strlen(fault_key[k]);
        bool on = p && (p == sel || p[-1] == ',') && (p[n] == '\0' || p[n] == ',');
        if (!on) {
            fault_weight[k] = 0;
        }
    }
}

typedef struct fault {
    int kind, lane, slot;
    int64_t t0, t1; /* t1: end of a stop, a stall or a delay window */
    int64_t arg;    /* ms */
} fault;

typedef struct chaos {
    th_server srv;
    tp_proxy *px[LANES];
    int lane_slot[LANES]; /* process slot of each lane, -1: none */
    int nslots;
    int stop_fault[LANES]; /* open SIGSTOP fault, -1: none */
    int64_t cont_at[LANES];
    int64_t unmute_at[LANES]; /* end of a half-dead window, 0: none */
    int64_t server_busy_until;
    fault faults[MAX_FAULTS];
    int nfaults;
    int count[F_N];
    int worker_failures, hung;
    pthread_t sleepers[1024];
    int nsleepers;
    uint64_t rng;
} chaos;

static chaos cx;

static fault *fault_add(int kind, int lane, int64_t arg)
{
    if (cx.nfaults == MAX_FAULTS) {
        return NULL;
    }
    fault *f = &cx.faults[cx.nfaults++];
    *f = (fault){kind, lane, lane >= 0 ? cx.lane_slot[lane] : -1, now_ns(), now_ns(), arg};
    cx.count[kind]++;
    return f;
}

static redisContext *admin_connect(int64_t timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", cx.srv.port, tv);
    if (r && !r->err) {
        redisSetTimeout(r, tv);
        return r;
    }
    if (r) {
        redisFree(r);
    }
    return NULL;
}

static void admin_run(const char *fmt, ...)
{
    redisContext *r = admin_connect(2000);
    if (!r) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (rep) {
        freeReplyObject(rep);
    }
    redisFree(r);
}

static void *sleeper_main(void *arg)
{
    int64_t msec = (int64_t)(intptr_t)arg;
    redisContext *r = admin_connect(msec + 5000);
    if (r) {
        redisReply *rep = redisCommand(r, "DEBUG SLEEP %.3f", (double)msec / 1000.0);
        if (rep) {
            freeReplyObject(rep);
        }
        redisFree(r);
    }
    return NULL;
}

static void spawn(int lane)
{
    cx.lane_slot[lane] = -1;
    if (cx.nslots == MAX_PROCS) {
        return;
    }
    int slot = cx.nslots++;
    sh->procs[slot].lane = lane;
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        _exit(worker_proc(slot, tp_port(cx.px[lane]), cx.px, parent));
    }
    sh->procs[slot].pid = pid;
    cx.lane_slot[lane] = slot;
}

/* A killed process holds nothing from its death on. */
static void close_sections(int slot, int64_t t)
{
    int n = atomic_load(&sh->nsec);
    for (int i = 0; i < n && i < MAX_SECS; i++) {
        section *s = &sh->secs[i];
        if (atomic_load(&s->ready) && s->proc == slot && s->end_ns == 0) {
            s->end_ns = t;
            tell(s, TOLD_KILLED);
        }
    }
}

/* Ends a half-dead window; half the time the load balancer in between
 * also resets what it accepted meanwhile (otherwise the client closes the
 * mute connections when they time out: the pub/sub one only then). */
static void unmute_lane(int lane, bool drop)
{
    if (cx.unmute_at[lane] != 0) {
        tp_mute(cx.px[lane], false);
        if (drop) {
            tp_drop(cx.px[lane]);
        }
        cx.unmute_at[lane] = 0;
    }
}

static void cont_lane(int lane)
{
    if (cx.stop_fault[lane] >= 0) {
        kill(sh->procs[cx.lane_slot[lane]].pid, SIGCONT);
        cx.faults[cx.stop_fault[lane]].t1 = now_ns();
        cx.stop_fault[lane] = -1;
    }
}

/* Reaps a lane's process if it exited; one we did not kill is a failure. */
static void reap_lane(int lane, bool respawn)
{
    int slot = cx.lane_slot[lane];
    if (slot < 0) {
        return;
    }
    int st;
    if (waitpid(sh->procs[slot].pid, &st, WNOHANG) == sh->procs[slot].pid) {
        printf("chaos: worker process %d (slot %d) exited unexpectedly: status 0x%x\n",
               (int)sh->procs[slot].pid, slot, st);
        cx.worker_failures++;
        cx.stop_fault[lane] = -1;
        close_sections(slot, now_ns());
        if (respawn) {
            spawn(lane);
        } else {
            cx.lane_slot[lane] = -1;
        }
    }
}

static void inject(void)
{
    int total = 0;
    for (int k = 0; k < F_N; k++) {
        total += fault_weight[k];
    }
    if (total == 0) {
        return;
    }
    int64_t pick = rnd(&cx.rng, 0, total - 1);
    int kind = 0;
    while (pick >= fault_weight[kind]) {
        pick -= fault_weight[kind++];
    }
    int lane = (int)rnd(&cx.rng, 0, LANES - 1);
    int64_t now = now_ns();
    bool server_busy = now < cx.server_busy_until;
    if (cx.lane_slot[lane] < 0 && (kind == F_STOP || kind == F_KILL)) {
        return;
    }
    if (kind == F_KILL && TH_UNDER_SANITIZER) {
        kind = F_STOP; /* a child of a threaded sanitized process cannot make a client */
    }
    if (kind == F_STOP && cx.stop_fault[lane] >= 0) {
        return;
    }
    if (kind == F_HALFDEAD && cx.unmute_at[lane] != 0) {
        return;
    }
    if ((kind == F_RESTART || kind == F_SLEEP || kind == F_PAUSE) && server_busy) {
        return;
    }
    fault *f;
    switch (kind) {
    case F_REPLY_DELAY:
    case F_REQUEST_DELAY: {
        int64_t window = ms(rnd(&cx.rng, 300, 1500)), delay = ms(rnd(&cx.rng, 300, 1500));
        if ((f = fault_add(kind, lane, delay))) {
            f->t1 = f->t0 + (window + delay) * 1000000;
        }
        tp_delay(cx.px[lane], kind == F_REPLY_DELAY ? TP_REPLIES : TP_REQUESTS, window, delay);
        break;
    }
    case F_DROP:
        fault_add(kind, lane, 0);
        tp_drop(cx.px[lane]);
        break;
    case F_CUT: {
        static const char *const needles[3] = {"*11\r\n$7\r\nEVALSHA", "*10\r\n$7\r\nEVALSHA",
                                               "EVALSHA"};
        int which = (int)rnd(&cx.rng, 0, 2);
        fault_add(kind, lane, which);
        tp_cut_next(cx.px[lane], needles[which]);
        break;
    }
    case F_SLEEP:
    case F_PAUSE: {
        int64_t d = ms(rnd(&cx.rng, 200, 1500));
        if ((f = fault_add(kind, -1, d))) {
            f->t1 = f->t0 + d * 1000000;
        }
        cx.server_busy_until = now + d * 1000000;
        if (kind == F_PAUSE) {
            admin_run("CLIENT PAUSE %lld %s", (long long)d, rnd(&cx.rng, 0, 1) ? "ALL" : "WRITE");
        } else if (cx.nsleepers < (int)(sizeof cx.sleepers / sizeof cx.sleepers[0]) &&
                   pthread_create(&cx.sleepers[cx.nsleepers], NULL, sleeper_main,
                                  (void *)(intptr_t)d) == 0) {
            cx.nsleepers++;
        }
        break;
    }
    case F_RESTART: {
        f = fault_add(kind, -1, 0);
        /* SHUTDOWN SAVE writes the RDB file (the "save" point set below
         * makes a plain SIGTERM save too), so locks and counters survive. */
        admin_run("SHUTDOWN SAVE");
        th_server_restart(&cx.srv);
        admin_run("CONFIG SET save \"3600 1\"");
        if (f) {
            f->t1 = now_ns();
        }
        break;
    }
    case F_STOP: {
        int64_t d = ms(rnd(&cx.rng, 300, 2500));
        cx.stop_fault[lane] = cx.nfaults;
        if (!fault_add(kind, lane, d)) {
            cx.stop_fault[lane] = -1;
            break;
        }
        kill(sh->procs[cx.lane_slot[lane]].pid, SIGSTOP);
        cx.cont_at[lane] = now + d * 1000000;
        break;
    }
    case F_HALFDEAD: {
        int64_t d = ms(rnd(&cx.rng, 300, 2500));
        if ((f = fault_add(kind, lane, d))) {
            f->t1 = f->t0 + d * 1000000;
        }
        tp_mute(cx.px[lane], true);
        cx.unmute_at[lane] = now + d * 1000000;
        break;
    }
    case F_KILL: {
        int slot = cx.lane_slot[lane];
        f = fault_add(kind, lane, 0);
        int64_t t = now_ns();
        kill(sh->procs[slot].pid, SIGKILL);
        waitpid(sh->procs[slot].pid, NULL, 0);
        if (cx.stop_fault[lane] >= 0) {
            cx.faults[cx.stop_fault[lane]].t1 = t;
            cx.stop_fault[lane] = -1;
        }
        close_sections(slot, t);
        spawn(lane);
        break;
    }
    }
}

static void run_injector(int64_t seconds)
{
    int64_t end = now_ns() + seconds * 1000000000LL;
    int64_t next = now_ns() + ms(500) * 1000000;
    while (now_ns() < end && atomic_load(&sh->nsec) < MAX_SECS) {
        int64_t now = now_ns();
        for (int lane = 0; lane < LANES; lane++) {
            if (cx.stop_fault[lane] >= 0 && now >= cx.cont_at[lane]) {
                cont_lane(lane);
            }
            if (cx.unmute_at[lane] != 0 && now >= cx.unmute_at[lane]) {
                unmute_lane(lane, rnd(&cx.rng, 0, 1) == 0);
            }
            reap_lane(lane, true);
        }
        if (now >= next) {
            inject();
            next = now_ns() + ms(rnd(&cx.rng, 100, 700)) * 1000000;
        }
        th_sleep_ms(5);
    }
    for (int lane = 0; lane < LANES; lane++) {
        cont_lane(lane);
        unmute_lane(lane, true);
    }
    /* A last restart, then calm: unlocks that meet LOADING now leave their
     * fate to the engine alone, and check 4 sees what it made of them. */
    while (now_ns() < cx.server_busy_until) {
        th_sleep_ms(10);
    }
    if (fault_weight[F_RESTART] > 0) {
        fault *f = fault_add(F_RESTART, -1, 0);
        admin_run("SHUTDOWN SAVE");
        th_server_restart(&cx.srv);
        if (f) {
            f->t1 = now_ns();
        }
    }
    th_sleep_ms(ms(3000));
}

/* RLOCK_CHAOS_KINDS's names of the kinds: "rw" is a read/write lock. */
static const struct {
    const char *key;
    int kind;
} kind_key[] = {{"reentrant", TK_REENTRANT},
                {"fair", TK_FAIR},
                {"fenced", TK_FENCED},
                {"spin", TK_SPIN},
                {"rw", TK_READ},
                {"nonreentrant", TK_NONREENTRANT},
                {"fair-nonreentrant", TK_FAIR_NONREENTRANT}};

/* The kinds of a comma-separated list into kinds[] (at most MAX_NAMES);
 * returns how many, or -1 at an unknown one. */
static int parse_kinds(const char *list, int *kinds)
{
    int n = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (size_t i = 0; i < sizeof kind_key / sizeof kind_key[0]; i++) {
            if (strlen(kind_key[i].key) == len && strncmp(p, kind_key[i].key, len) == 0) {
                found = kind_key[i].kind;
            }
        }
        if (found < 0 || n == MAX_NAMES) {
            return -1;
        }
        kinds[n++] = found;
        p += len;
        p += *p == ',';
    }
    return n;
}

static const char *kind_label(int kind)
{
    for (size_t i = 0; i < sizeof kind_key / sizeof kind_key[0]; i++) {
        if (kind_key[i].kind == kind) {
            return kind_key[i].key;
        }
    }
    return "?";
}

/* ---- the checks ----------------------------------------------------------- */

enum verdict_kind { V_OVERLAP, V_UNLOCK_OK, V_TOKEN, V_N };

typedef struct verdict {
    int kind, a, b;
    int64_t at;
} verdict;

typedef struct report {
    int64_t *told; /* per section: when its holder was told, or excused */
    bool *paused;  /* per section: its process was stopped during it */
    verdict v[64];
    int nv, count[V_N];
    int overlaps, excused, witnesses, inconsistent, left_behind, counter_bad;
    int shared, max_readers, reader_witnesses;
    int told_by[TOLD_N], paused_n, lease_ran_out;
} report;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void effective_told(report *rp, int n)
{
    int *stops = malloc(sizeof(int) * (size_t)(cx.nfaults + 1)), nstops = 0;
    cr_assert(stops != NULL);
    for (int f = 0; f < cx.nfaults; f++) {
        if (cx.faults[f].kind == F_STOP) {
            stops[nstops++] = f;
        }
    }
    for (int i = 0; i < n; i++) {
        section *s = &sh->secs[i];
        int64_t t = atomic_load(&s->told_ns);
        rp->told_by[t == NEVER ? TOLD_NONE : atomic_load(&s->told_how)]++;
        if (!s->watchdog && s->lease_until < s->end_ns) {
            rp->lease_ran_out++;
        }
        if (!s->watchdog) {
            t = min64(t, s->lease_until);
        }
        rp->paused[i] = false;
        for (int f = 0; f < nstops; f++) {
            fault *x = &cx.faults[stops[f]];
            if (x->slot == s->proc && x->t0 < s->end_ns && x->t1 > s->call_ns) {
                rp->paused[i] = true;
                t = min64(t, x->t0);
            }
        }
        rp->paused_n += rp->paused[i];
        rp->told[i] = t;
    }
    free(stops);
}

static void verdict_add(report *rp, int kind, int a, int b, int64_t at)
{
    rp->count[kind]++;
    if (rp->nv < (int)(sizeof rp->v / sizeof rp->v[0])) {
        rp->v[rp->nv++] = (verdict){kind, a, b, at};
    }
}

static int by_start(const void *x, const void *y)
{
    int64_t a = sh->secs[*(const int *)x].start_ns, b = sh->secs[*(const int *)y].start_ns;
    return a < b ? -1 : a > b;
}

static bool is_violation_pair(report *rp, int a, int b)
{
    for (int i = 0; i < rp->nv; i++) {
        if (rp->v[i].kind == V_OVERLAP &&
            ((rp->v[i].a == a && rp->v[i].b == b) || (rp->v[i].a == b && rp->v[i].b == a))) {
            return true;
        }
    }
    return false;
}

static bool is_read(const section *s)
{
    return th_kinds[s->kind].read;
}

static void check(report *rp, int n)
{
    int *idx = malloc(sizeof(int) * (size_t)(n + 1));
    cr_assert(idx != NULL);
    for (int k = 0; k < sh->nnames; k++) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (sh->secs[i].name == k) {
                idx[m++] = i;
            }
        }
        qsort(idx, (size_t)m, sizeof idx[0], by_start);
        for (int i = 0; i < m; i++) {
            section *a = &sh->secs[idx[i]];
            for (int j = i + 1; j < m && sh->secs[idx[j]].start_ns < a->end_ns; j++) {
                section *b = &sh->secs[idx[j]];
                int64_t o = b->start_ns;
                if (b->end_ns <= o) {
                    continue;
                }
                if (is_read(a) && is_read(b)) {
                    rp->shared++; /* readers share: no violation */
                    continue;
                }
                rp->overlaps++;
                if (rp->told[idx[i]] <= o || rp->told[idx[j]] <= o) {
                    rp->excused++;
                } else {
                    verdict_add(rp, V_OVERLAP, idx[i], idx[j], o);
                }
            }
        }
        /* 2: an unlock that said RLOCK_OK after another thread took the
         * lock in the middle of the section. */
        for (int i = 0; i < m; i++) {
            section *a = &sh->secs[idx[i]];
            if (a->final_st != RLOCK_OK || a->unknown_ns > a->call_ns - 10000000000LL) {
                continue;
            }
            for (int j = 0; j < m; j++) {
                section *b = &sh->secs[idx[j]];
                if (is_read(a) && is_read(b)) {
                    continue; /* another reader takes nothing from this one */
                }
                if (b != a && b->call_ns > a->last_lock_ns && b->start_ns < a->end_ns) {
                    verdict_add(rp, V_UNLOCK_OK, idx[i], idx[j], b->start_ns);
                    break;
                }
            }
        }
        /* Readers at once, at most: each read section counts those holding
         * when it began. */
        for (int i = 0; i < m; i++) {
            section *a = &sh->secs[idx[i]];
            int at = 1;
            for (int j = 0; j < i && is_read(a); j++) {
                section *b = &sh->secs[idx[j]];
                at += is_read(b) && b->end_ns > a->start_ns;
            }
            if (is_read(a) && at > rp->max_readers) {
                rp->max_readers = at;
            }
        }
        /* 5: a fenced lock's tokens follow the order of the acquisitions:
         * a lock call that began after another had returned took a greater
         * token (the INCR of the first ran before the second was sent). */
        for (int i = 0; i < m; i++) {
            section *a = &sh->secs[idx[i]];
            for (int j = 0; a->token >= 0 && j < m; j++) {
                section *b = &sh->secs[idx[j]];
                if (b->token >= 0 && b->call_ns > a->start_ns && b->token <= a->token) {
                    verdict_add(rp, V_TOKEN, idx[i], idx[j], b->start_ns);
                }
            }
        }
    }
    /* 3: every CAS conflict, and every value a reader saw change, names a
     * writer whose section overlapped. */
    for (int i = 0; i < n; i++) {
        section *a = &sh->secs[i];
        if (a->cas != CAS_CONFLICT && a->cas != CAS_READ_CHANGED) {
            continue;
        }
        int w = a->cas_with;
        section *b = (w >= 0 && w < n) ? &sh->secs[w] : NULL;
        if (!b || b->name != a->name || is_read(b) ||
            !(b->start_ns < a->end_ns && a->start_ns < b->end_ns)) {
            rp->inconsistent++;
            printf("chaos: counter %s of section %d names writer %d, whose section did "
                   "not overlap: the recording is wrong\n",
                   a->cas == CAS_CONFLICT ? "conflict" : "change seen by a reader", i, w);
        } else if (is_violation_pair(rp, i, w)) {
            rp->witnesses++;
            rp->reader_witnesses += a->cas == CAS_READ_CHANGED;
        }
    }
    free(idx);
}

static void print_events(section *s)
{
    int ne = atomic_load(&s->nev);
    for (int e = 0; e < ne && e < EVMAX; e++) {
        const char *nm = rlock_status_name((rlock_status)s->ev[e].st);
        printf(" %c:%s@%d", s->ev[e].what, strncmp(nm, "RLOCK_", 6) ? nm : nm + 6, s->ev[e].at_ms);
    }
    printf("\n");
}

static void print_section(report *rp, int i)
{
    section *s = &sh->secs[i];
    int how = atomic_load(&s->told_how);
    printf("    section %d: process slot %d (lane %d) thread %d, %s lock, %s, depth %d, "
           "[%.1f, %.1f] ms, told %s%s at %.1f ms, outer unlock %s, CAS %d\n      events:",
           i, s->proc, sh->procs[s->proc].lane, s->thread, th_kinds[s->kind].id,
           !s->watchdog                ? "explicit lease"
           : s->explicit_reentries > 0 ? "watchdog, re-entered with an explicit lease"
                                       : "watchdog",
           s->depth, rel_ms(s->start_ns), rel_ms(s->end_ns),
           atomic_load(&s->told_ns) == NEVER ? "never" : told_name[how],
           rp->paused[i] ? " (process stopped)" : "", rel_ms(rp->told[i]),
           s->final_st < 0 ? "not reached" : rlock_status_name((rlock_status)s->final_st), s->cas);
    print_events(s);
}

static void print_faults_near(int64_t from, int64_t to)
{
    for (int f = 0; f < cx.nfaults; f++) {
        fault *x = &cx.faults[f];
        if (x->t1 >= from && x->t0 <= to) {
            printf("      fault at %.1f..%.1f ms: %s", rel_ms(x->t0), rel_ms(x->t1),
                   fault_name[x->kind]);
            if (x->lane >= 0) {
                printf(" lane %d (slot %d)", x->lane, x->slot);
            }
            if (x->arg) {
                printf(" %lld", (long long)x->arg);
            }
            printf("\n");
        }
    }
}

/* What the first holder saw before the overlap began, in a few words. */
static const char *hint(const section *s, int64_t at)
{
    bool unlock_unknown = false, reentry_unknown = false, error = false;
    int ne = atomic_load(&((section *)s)->nev);
    for (int e = 0; e < ne && e < EVMAX; e++) {
        const event *x = &s->ev[e];
        if (s->call_ns + (int64_t)x->at_ms * 1000000 > at || x->st == RLOCK_OK || x->what == 'G' ||
            x->what == 'S') {
            continue;
        }
        error = true;
        unlock_unknown |= x->what == 'U' && (x->st == RLOCK_ETIMEDOUT || x->st == RLOCK_EIO);
        reentry_unknown |= x->what == 'R';
    }
    if (unlock_unknown) {
        return "an inner unlock of unknown outcome (ETIMEDOUT/EIO) was retried as the header "
               "says, and the lock was free before the holder heard of it";
    }
    if (reentry_unknown) {
        return "a re-entry of unknown outcome (ETIMEDOUT/EIO) came before the overlap";
    }
    if (!error) {
        return "no error at all before the overlap: the hold vanished from Redis (lease ran "
               "out while renewals could not get through?) and nobody told the holder";
    }
    return "other errors preceded the overlap";
}

static void print_verdicts(report *rp)
{
    for (int i = 0; i < rp->nv && i < 8; i++) {
        verdict *v = &rp->v[i];
        printf("  VIOLATION %d: %s on %s (%s) at %.1f ms\n", i + 1,
               v->kind == V_OVERLAP     ? "two untold holders overlapped"
               : v->kind == V_UNLOCK_OK ? "outer unlock returned RLOCK_OK after another thread "
                                          "took the lock"
                                        : "a later acquisition's fence token is not greater "
                                          "(tokens of the two sections below)",
               sh->names[sh->secs[v->a].name], kind_label(sh->kind[sh->secs[v->a].name]),
               rel_ms(v->at));
        if (v->kind == V_TOKEN) {
            printf("      tokens %lld then %lld\n", (long long)sh->secs[v->a].token,
                   (long long)sh->secs[v->b].token);
        }
        print_section(rp, v->a);
        print_section(rp, v->b);
        if (v->kind == V_OVERLAP) {
            printf("      first holder: %s\n", hint(&sh->secs[v->a], v->at));
        }
        print_faults_near(sh->secs[v->a].call_ns - 3000000000LL, v->at);
    }
}

/* A fair lock's queue and deadlines (ms from now, by this clock) after the
 * run: waiters that gave up, died or were abandoned leave their place only
 * when they can say so or when their deadline passes. */
static void print_fair_queue(redisContext *r, int k)
{
    char *q = th_prefixed("redisson_lock_queue", sh->names[k]);
    char *z = th_prefixed("redisson_lock_timeout", sh->names[k]);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long wall = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    redisReply *ql = redisCommand(r, "LRANGE %s 0 -1", q);
    if (ql && ql->type == REDIS_REPLY_ARRAY && ql->elements > 0) {
        printf("  fair queue of %s:", sh->names[k]);
        for (size_t i = 0; i < ql->elements; i++) {
            redisReply *sc = redisCommand(r, "ZSCORE %s %s", z, ql->element[i]->str);
            printf(" %s (deadline %+lld ms)", ql->element[i]->str,
                   sc && sc->type == REDIS_REPLY_STRING ? atoll(sc->str) - wall : 0);
            if (sc) {
                freeReplyObject(sc);
            }
        }
        printf("\n");
    }
    if (ql) {
        freeReplyObject(ql);
    }
    free(q);
    free(z);
}

/* 4: after the longest lease, with every worker done, no hold may remain. */
static int left_behind(void)
{
    int n = 0;
    redisContext *r = admin_connect(3000);
    cr_assert(r != NULL, "seed %llu: cannot reach the server after the run",
              (unsigned long long)seed);
    for (int k = 0; k < sh->nnames; k++) {
        if (th_kinds[sh->kind[k]].fair) {
            print_fair_queue(r, k);
        }
        redisReply *rep = redisCommand(r, "HGETALL %s", sh->names[k]);
        if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0) {
            n++;
            printf("  LEFT BEHIND: %s still held, pttl %lld:", sh->names[k],
                   th_pttl(r, sh->names[k]));
            for (size_t e = 0; e + 1 < rep->elements; e += 2) {
                const char *owner = rep->element[e]->str;
                int slot = -1, thread = -1;
                for (int p = 0; p < cx.nslots; p++) {
                    if (strncmp(owner, sh->procs[p].client_id, 36) == 0) {
                        slot = p;
                    }
                }
                unsigned long long tid = strlen(owner) > 37 ? strtoull(owner + 37, NULL, 10) : 0;
                for (int t = 0; slot >= 0 && t < THREADS; t++) {
                    if (atomic_load(&sh->procs[slot].tid[t]) == tid) {
                        thread = t;
                    }
                }
                printf(" %s=%s (process slot %d thread %d)\n", owner, rep->element[e + 1]->str,
                       slot, thread);
                /* Its last section on the name, and the last one that saw an
                 * error, where the stray hold most likely began. */
                bool last = true;
                for (int i = atomic_load(&sh->nsec) - 1; thread >= 0 && i >= 0; i--) {
                    section *s = &sh->secs[i < MAX_SECS ? i : MAX_SECS - 1];
                    if (s->proc != slot || s->thread != thread || s->name != k) {
                        continue;
                    }
                    bool error = false;
                    int ne = atomic_load(&s->nev);
                    for (int e = 0; e < ne && e < EVMAX; e++) {
                        error |=
                            s->ev[e].st != RLOCK_OK && s->ev[e].what != 'G' && s->ev[e].what != 'S';
                    }
                    if (last || error) {
                        printf("    %s section on the name, %d, at %.1f ms, outer unlock %s:",
                               last ? "its last" : "its last with an error", i, rel_ms(s->start_ns),
                               s->final_st < 0 ? "not reached"
                                               : rlock_status_name((rlock_status)s->final_st));
                        print_events(s);
                    }
                    if (error) {
                        break;
                    }
                    last = false;
                }
            }
        }
        if (rep) {
            freeReplyObject(rep);
        }
    }
    redisFree(r);
    return n;
}

static int counter_check(int n)
{
    int bad = 0;
    redisContext *r = admin_connect(3000);
    cr_assert(r != NULL);
    for (int k = 0; k < sh->nnames; k++) {
        long long ok = 0, unknown = 0, final = 0;
        for (int i = 0; i < n; i++) {
            ok += sh->secs[i].name == k && sh->secs[i].cas == CAS_OK;
            unknown += sh->secs[i].name == k && sh->secs[i].cas == CAS_UNKNOWN;
        }
        redisReply *rep = redisCommand(r, "GET %s", sh->counters[k]);
        if (rep && rep->type == REDIS_REPLY_STRING) {
            final = atoll(rep->str);
        }
        if (rep) {
            freeReplyObject(rep);
        }
        bool fine = ok <= final && final <= ok + unknown;
        printf("  counter %s: %lld, CAS succeeded %lld, unanswered %lld%s\n", sh->names[k], final,
               ok, unknown, fine ? "" : "  <-- WRONG");
        bad += !fine;
    }
    redisFree(r);
    return bad;
}

/* ---- the test ---------------------------------------------------------------- */

static void setup(void)
{
    const char *s = getenv("RLOCK_CHAOS_SEED");
    if (s && *s) {
        seed = strtoull(s, NULL, 0);
    } else if (getrandom(&seed, sizeof seed, 0) != sizeof seed) {
        seed = (uint64_t)now_ns();
    }
    seed &= 0xffffffffffffULL; /* short enough to copy */
    printf("chaos: seed %llu (replay with RLOCK_CHAOS_SEED=%llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    fflush(stdout);
    mult = th_time_multiplier();
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sh != MAP_FAILED);
    th_server_start(&cx.srv);
}

static void teardown(void)
{
    th_server_stop(&cx.srv);
    munmap(sh, sizeof *sh);
}

TestSuite(chaos, .init = setup, .fini = teardown);

static int64_t chaos_seconds(void)
{
    const char *s = getenv("RLOCK_CHAOS_SECONDS");
    int64_t v = s ? atoll(s) : 0;
    /* Shorter where every thread runs many times slower. */
    bool slow = TH_UNDER_SANITIZER || getenv("RLOCK_TEST_WRAPPER") != NULL;
    return v > 0 ? v : slow ? 8 : 20;
}

static void wait_workers(void)
{
    int64_t until = now_ns() + ms(40000) * 1000000LL;
    for (int lane = 0; lane < LANES; lane++) {
        int slot = cx.lane_slot[lane];
        while (slot >= 0 && !atomic_load(&sh->procs[slot].done) && now_ns() < until) {
            reap_lane(lane, false);
            slot = cx.lane_slot[lane];
            th_sleep_ms(20);
        }
        if (slot >= 0 && !atomic_load(&sh->procs[slot].done)) {
            printf("chaos: worker process slot %d did not finish: killed\n", slot);
            cx.hung++;
            kill(sh->procs[slot].pid, SIGKILL);
            waitpid(sh->procs[slot].pid, NULL, 0);
            close_sections(slot, now_ns());
            cx.lane_slot[lane] = -1;
        }
    }
}

/* One run on names of the given kinds (one name each). */
static void chaos_run(const int *kinds, int nk)
{
    int64_t seconds = chaos_seconds();
    int64_t t_begin = now_ns();
    cx.rng = seed;
    fault_select();
    for (int lane = 0; lane < LANES; lane++) {
        cx.stop_fault[lane] = -1;
        cx.lane_slot[lane] = -1;
    }
    sh->server_port = cx.srv.port;
    char label[256] = "";
    sh->nnames = nk;
    for (int k = 0; k < nk; k++) {
        sh->kind[k] = kinds[k];
        snprintf(label + strlen(label), sizeof label - strlen(label), "%s%s", k ? "," : "",
                 kind_label(kinds[k]));
        snprintf(sh->names[k], sizeof sh->names[k], "chaos:%llu:%d", (unsigned long long)seed, k);
        snprintf(sh->counters[k], sizeof sh->counters[k], "chaos-counter:%llu:%d",
                 (unsigned long long)seed, k);
    }
    /* A data set that takes the restarted server a while to load, so that
     * clients meet LOADING replies; and a save point, so that even a plain
     * SIGTERM keeps the locks. */
    admin_run("DEBUG POPULATE 150000 chaos-fill 64");
    admin_run("CONFIG SET save \"3600 1\"");
    for (int lane = 0; lane < LANES; lane++) {
        cx.px[lane] = tp_new(cx.srv.port);
        cr_assert(cx.px[lane] != NULL);
    }
    /* Fork before this process has threads of its own. */
    for (int lane = 0; lane < LANES; lane++) {
        spawn(lane);
    }
    for (int lane = 0; lane < LANES; lane++) {
        cr_assert_eq(tp_start(cx.px[lane]), 0);
    }
    int64_t until = now_ns() + ms(15000) * 1000000LL;
    for (int lane = 0; lane < LANES; lane++) {
        while (!atomic_load(&sh->procs[cx.lane_slot[lane]].up) && now_ns() < until) {
            reap_lane(lane, false);
            cr_assert(cx.lane_slot[lane] >= 0, "seed %llu: a worker could not start",
                      (unsigned long long)seed);
            th_sleep_ms(10);
        }
    }
    sh->t0_ns = now_ns();
    printf("chaos: %d processes x %d threads, %d names (%s), %lld s of faults, time multiplier "
           "%.1f\n",
           LANES, THREADS, nk, label, (long long)seconds, mult);
    fflush(stdout);

    run_injector(seconds);
    int64_t t_faults_end = now_ns(); /* workers still take locks until told to stop */
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < cx.nsleepers; i++) {
        pthread_join(cx.sleepers[i], NULL);
    }
    wait_workers();
    /* Longest lease (explicit 2 s, watchdog 1.5 s) plus a margin. */
    th_sleep_ms(ms(2000) + th_ms(700));
    int n = atomic_load(&sh->nsec);
    if (n > MAX_SECS) {
        n = MAX_SECS;
    }
    report rp = {0};
    rp.told = calloc((size_t)n + 1, sizeof *rp.told);
    rp.paused = calloc((size_t)n + 1, sizeof *rp.paused);
    cr_assert(rp.told && rp.paused);
    rp.left_behind = left_behind();
    rp.counter_bad = counter_check(n);
    atomic_store(&sh->release, 1);
    for (int lane = 0; lane < LANES; lane++) {
        int slot = cx.lane_slot[lane];
        pid_t pid = slot >= 0 ? sh->procs[slot].pid : 0;
        int st = 0;
        for (int64_t t = now_ns() + ms(20000) * 1000000LL; pid > 0;) {
            if (waitpid(pid, &st, WNOHANG) == pid) {
                break;
            }
            if (now_ns() > t) {
                printf("chaos: worker slot %d did not exit after the run: killed\n", slot);
                cx.hung++;
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                st = 0;
                break;
            }
            th_sleep_ms(10);
        }
        if (pid > 0 && st != 0) {
            printf("chaos: worker slot %d ended with status 0x%x\n", slot, st);
            cx.worker_failures++;
        }
    }
    for (int lane = 0; lane < LANES; lane++) {
        tp_free(cx.px[lane]);
    }
    effective_told(&rp, n);
    check(&rp, n);

    int mixed = 0;
    for (int i = 0; i < n; i++) {
        mixed += sh->secs[i].watchdog && sh->secs[i].explicit_reentries > 0;
    }
    printf("chaos (%s): seed %llu, %d sections in %.1f s; depth 1: %llu, 2: %llu, 3: %llu; "
           "watchdog sections re-entered with an explicit lease: %d\n",
           label, (unsigned long long)seed, n, (double)(now_ns() - t_begin) / 1e9,
           (unsigned long long)sh->depth_hist[1], (unsigned long long)sh->depth_hist[2],
           (unsigned long long)sh->depth_hist[3], mixed);
    printf("  faults:");
    for (int k = 0; k < F_N; k++) {
        printf(" %s %d%s", fault_name[k], cx.count[k], k + 1 < F_N ? "," : "\n");
    }
    printf("  holders told: ");
    for (int k = 1; k < TOLD_N; k++) {
        printf("%s %d, ", told_name[k], rp.told_by[k]);
    }
    printf("not told %d; stopped during the section %d; explicit lease ran out %d; "
           "on_lock_lost calls %llu (%llu for no open section)\n",
           rp.told_by[TOLD_NONE], rp.paused_n, rp.lease_ran_out, (unsigned long long)sh->callbacks,
           (unsigned long long)sh->stale_callbacks);
    for (int op = 0; op < OP_N; op++) {
        printf("  %s:", op_name[op]);
        for (int st = 0; st <= NST; st++) {
            if (sh->st[op][st]) {
                printf(" %s %llu", st < NST ? rlock_status_name((rlock_status)st) : "other",
                       (unsigned long long)sh->st[op][st]);
            }
        }
        printf("\n");
    }
    int dirty = 0;
    for (int i = 0; i < n; i++) {
        dirty += sh->secs[i].cas == CAS_OK && sh->secs[i].final_st != RLOCK_OK;
    }
    printf("  counter CAS: ok %llu (%d by holders whose outer unlock then failed), conflict %llu, "
           "unanswered %llu, skipped %llu\n",
           (unsigned long long)sh->cas_n[CAS_OK], dirty,
           (unsigned long long)sh->cas_n[CAS_CONFLICT], (unsigned long long)sh->cas_n[CAS_UNKNOWN],
           (unsigned long long)sh->cas_n[CAS_NONE]);
    printf("  overlaps %d (excused: a holder was told first %d); VIOLATIONS: untold overlaps %d "
           "(%d witnessed by the counter), unlock OK after loss %d, left behind %d, "
           "counter wrong %d, recording inconsistent %d, workers failed %d, hung %d\n",
           rp.overlaps, rp.excused, rp.count[V_OVERLAP], rp.witnesses, rp.count[V_UNLOCK_OK],
           rp.left_behind, rp.counter_bad, rp.inconsistent, cx.worker_failures, cx.hung);
    /* Per name: its sections (a read/write lock's reads and writes). */
    int idle = 0;
    printf("  sections per lock:");
    for (int k = 0; k < nk; k++) {
        int per[TK_N] = {0}, all = 0;
        for (int i = 0; i < n; i++) {
            if (sh->secs[i].name == k) {
                per[sh->secs[i].kind]++;
                all++;
            }
        }
        idle += all == 0;
        /* The longest time nobody held it, from its first section to the
         * end of the faults: a lock that stays free while its contenders
         * fail to take it. */
        int *ix = malloc(sizeof(int) * (size_t)(all + 1)), m = 0;
        cr_assert(ix != NULL);
        for (int i = 0; i < n; i++) {
            if (sh->secs[i].name == k) {
                ix[m++] = i;
            }
        }
        qsort(ix, (size_t)m, sizeof ix[0], by_start);
        int64_t covered = m ? sh->secs[ix[0]].end_ns : 0, gap = 0, gap_at = 0;
        for (int i = 1; i < m; i++) {
            section *x = &sh->secs[ix[i]];
            if (x->start_ns - covered > gap) {
                gap = x->start_ns - covered;
                gap_at = covered;
            }
            if (x->end_ns > covered) {
                covered = x->end_ns;
            }
        }
        if (m && t_faults_end - covered > gap) { /* free from its last section on */
            gap = t_faults_end - covered;
            gap_at = covered;
        }
        free(ix);
        if (kinds[k] == TK_READ) {
            printf(" %s %d (read %d, write %d)", kind_label(kinds[k]), all, per[TK_READ],
                   per[TK_WRITE]);
        } else {
            printf(" %s %d", kind_label(kinds[k]), all);
        }
        printf(" (longest free %.0f ms, from %.0f ms)", (double)gap / 1e6,
               gap ? rel_ms(gap_at) : 0);
        printf("%s", k + 1 < nk ? "," : "\n");
    }
    bool any_rw = false, any_nr = false;
    int reads = 0;
    for (int k = 0; k < nk; k++) {
        any_rw |= kinds[k] == TK_READ;
        any_nr |= !th_kinds[kinds[k]].reentrant;
    }
    for (int i = 0; i < n; i++) {
        reads += is_read(&sh->secs[i]);
    }
    if (any_rw) {
        printf("  readers: %d overlapping pairs (shared), at most %d at once; reader second reads "
               "same %llu, changed %llu (%d by untold writers)\n",
               rp.shared, rp.max_readers, (unsigned long long)sh->cas_n[CAS_READ_SAME],
               (unsigned long long)sh->cas_n[CAS_READ_CHANGED], rp.reader_witnesses);
    }
    if (any_nr) {
        printf("  non-reentrant locks asked again: refused (RLOCK_EDEADLK) %llu, re-entered %llu\n",
               (unsigned long long)sh->edeadlk, (unsigned long long)sh->reentered);
    }
    printf("  fence tokens out of order %d; locks without a section %d\n", rp.count[V_TOKEN], idle);
    print_verdicts(&rp);
    if (getenv("RLOCK_CHAOS_VERBOSE")) {
        printf("  sections with a status other than RLOCK_OK:\n");
        for (int i = 0; i < n; i++) {
            section *s = &sh->secs[i];
            int ne = atomic_load(&s->nev);
            for (int e = 0; e < ne && e < EVMAX; e++) {
                if (s->ev[e].st != RLOCK_OK) {
                    print_section(&rp, i);
                    break;
                }
            }
        }
    }
    fflush(stdout);
    int reentered = (int)sh->reentered;
    int bad = rp.count[V_OVERLAP] + rp.count[V_UNLOCK_OK] + rp.count[V_TOKEN] + rp.left_behind +
              rp.counter_bad + rp.inconsistent + cx.worker_failures + cx.hung + reentered;
    free(rp.told);
    free(rp.paused);
    cr_assert(n > 0, "seed %llu: no critical section completed", (unsigned long long)seed);
    /* A lock never taken while the others were, five times each on
     * average: that kind cannot be taken under faults. */
    cr_assert(idle == 0 || n < 5 * nk, "seed %llu: %d lock(s) never taken in the run (%s)",
              (unsigned long long)seed, idle, label);
    /* Runs have had 14 to 120 overlapping pairs of readers: none in 30
     * read sections or more means that readers wait for each other. */
    cr_assert(reads < 30 || rp.shared > 0,
              "seed %llu: %d read sections and no two overlapped: readers do not share",
              (unsigned long long)seed, reads);
    cr_assert(bad == 0,
              "seed %llu (%s): %d untold overlap(s), %d unlock(s) OK after a loss, %d fence "
              "token(s) out of order, %d non-reentrant re-entries, %d hold(s) left behind, %d "
              "wrong counter(s), %d inconsistent record(s), %d failed and %d hung worker(s); "
              "replay with RLOCK_CHAOS_SEED=%llu",
              (unsigned long long)seed, label, rp.count[V_OVERLAP], rp.count[V_UNLOCK_OK],
              rp.count[V_TOKEN], reentered, rp.left_behind, rp.counter_bad, rp.inconsistent,
              cx.worker_failures, cx.hung, (unsigned long long)seed);
}

/* The reentrant lock, as in 0.2: three names. */
Test(chaos, no_overlap_that_no_holder_was_told_of)
{
    static const int kinds[] = {TK_REENTRANT, TK_REENTRANT, TK_REENTRANT};
    chaos_run(kinds, 3);
}

/* Every other kind at once, one name each (RLOCK_CHAOS_KINDS: others),
 * beside the test above (make check runs two at a time). */
Test(chaos, every_kind_no_overlap_that_no_holder_was_told_of)
{
    static const char *const dflt = "fair,fenced,spin,rw,nonreentrant,fair-nonreentrant";
    const char *list = getenv("RLOCK_CHAOS_KINDS");
    int kinds[MAX_NAMES];
    int nk = parse_kinds(list && *list ? list : dflt, kinds);
    cr_assert(nk > 0,
              "RLOCK_CHAOS_KINDS=%s: a comma-separated list of reentrant, fair, fenced, "
              "spin, rw, nonreentrant, fair-nonreentrant",
              list);
    chaos_run(kinds, nk);
}
