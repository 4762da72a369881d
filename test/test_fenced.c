/* The fenced lock (Redisson RFencedLock, spec 5), the fenced writes and the
 * guarded commands (issue 16: "Fencing that protects something", "Guarded
 * writes for every kind"). Real server; what Redis holds is asserted.
 *
 * Which test produces each (call, status) pair include/rlock.h documents
 * for the calls of this file ("none": not produced here, and why):
 *
 * rlock_new_fenced
 *   OK          fenced::layout_after_lock_reentry_and_unlock
 *   EINVAL, ENOMEM, ECLOSED
 *               the checks of rlock_new() (rlock__handle_new(), shared): its
 *               tests in test_client.c and test_statuses.c
 * rlock_lock, rlock_try_lock, rlock_unlock, ... on a fenced handle
 *   OK          fenced::layout_after_lock_reentry_and_unlock
 *   EBUSY       fenced::a_hold_in_redissons_format_is_respected
 *   ELOST       fenced::watchdog_renews_and_reports_a_lost_fenced_lock
 *   EKIND       fenced::another_kind_or_type_is_ekind_and_untouched
 *   EREDIS      fenced::another_kind_or_type_is_ekind_and_untouched (a token
 *               key that is not a number)
 *   EPERM       fenced::acl_refusals_change_nothing (INCR denied)
 *   the others  the engine's, shared with the reentrant lock (test_statuses.c)
 * rlock_fence_token
 *   OK          fenced::layout_after_lock_reentry_and_unlock
 *   EINVAL      fenced::token_calls_on_other_kinds_are_einval
 *   ENOTOWNER   fenced::layout_after_lock_reentry_and_unlock
 *   ELOST       fenced::watchdog_renews_and_reports_a_lost_fenced_lock
 *   ECLOSED     fenced::calls_after_the_client_closes_are_eclosed
 * rlock_fence_token_latest
 *   OK          fenced::layout_after_lock_reentry_and_unlock (0: no key)
 *   EINVAL      fenced::token_calls_on_other_kinds_are_einval
 *   EKIND, EPROTO
 *               fenced::latest_token_of_a_key_written_by_hand
 *   EIO, ETIMEDOUT
 *               guarded::transport_statuses
 *   EPERM       fenced::acl_refusals_change_nothing
 *   ECLOSED     fenced::calls_after_the_client_closes_are_eclosed
 *   EREDIS, ENOMEM, EAUTH, EPOOL
 *               none here: one plain command through the runner every
 *               query uses (test_statuses.c produces them for those)
 * rlock_fenced_set, rlock_fenced_hset
 *   OK          fencedwrite::set_and_hset_record_the_token
 *   EINVAL      fenced::token_calls_on_other_kinds_are_einval
 *   ENOTOWNER   fencedwrite::set_and_hset_record_the_token
 *   ELOST       fencedwrite::stale_holder_is_refused_and_the_newer_value_stays
 *   ESTALE      fencedwrite::a_newer_token_written_before_is_estale
 *   EKIND       fencedwrite::wrongtype_is_ekind_and_the_record_is_put_back
 *   EPERM       fenced::acl_refusals_change_nothing
 *   EIO, ETIMEDOUT
 *               guarded::transport_statuses
 *   ECLOSED     fenced::calls_after_the_client_closes_are_eclosed
 *   EREDIS, EPROTO, ENOMEM, EAUTH, EPOOL
 *               none here: the script runner's, as for every script call
 * rlock_guarded
 *   OK          guarded::runs_only_while_held, guarded::replies_of_every_type
 *   EINVAL      guarded::bad_arguments_are_einval
 *   ENOTOWNER   guarded::runs_only_while_held
 *   ELOST       guarded::runs_only_while_held,
 *               guarded::paused_holder_is_refused_where_a_plain_write_overwrites
 *   EKIND       guarded::errors_of_the_command_and_of_the_lock_key
 *   EREDIS      guarded::errors_of_the_command_and_of_the_lock_key
 *   EPERM       fenced::acl_refusals_change_nothing
 *   EIO, ETIMEDOUT
 *               guarded::transport_statuses
 *   ECLOSED     fenced::calls_after_the_client_closes_are_eclosed
 *   EPROTO, ENOMEM, EAUTH, EPOOL
 *               none here: the script runner's, as for every script call
 *
 * Guarded commands on the other kinds (fair, read, write, spin) are for
 * their own tests, once those kinds exist. */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "proxy.h"

TestSuite(fenced, .timeout = 120);
TestSuite(fencedwrite, .timeout = 120);
TestSuite(guarded, .timeout = 120);

/* ---- helpers ------------------------------------------------------------ */

/* prefix(P, name) (spec 0.1), malloc'd. */
static char *derived(const char *prefix, const char *name)
{
    size_t n = rlock_prefixed_name(prefix, name, NULL, 0);
    char *s = malloc(n + 1);
    cr_assert(s);
    rlock_prefixed_name(prefix, name, s, n + 1);
    return s;
}

static char *token_key(const char *name)
{
    return derived("redisson_lock_token", name);
}

static char *record_key(const char *name)
{
    return derived("rlock_fence", name);
}

/* GET key as a number: -1 when the key does not exist. */
static long long get_int(redisContext *r, const char *key)
{
    redisReply *rep = th_cmd(r, "GET %s", key);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : -1;
    freeReplyObject(rep);
    return v;
}

/* GET key into buf ("" when missing). */
static void get_str(redisContext *r, const char *key, char *buf, size_t size)
{
    redisReply *rep = th_cmd(r, "GET %s", key);
    snprintf(buf, size, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

static rlock_client *client_at(int port, int64_t command_ms, int64_t retry_ms, int64_t wd_ms)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    cfg.command_timeout_ms = command_ms;
    cfg.retry_timeout_ms = retry_ms;
    cfg.watchdog_timeout_ms = wd_ms;
    return th_client_cfg(&cfg);
}

/* The fenced lock's token of the calling thread. */
static int64_t token_of(rlock *l)
{
    int64_t t = -1;
    th_ok(rlock_fence_token(l, &t));
    return t;
}

/* The acquire latches of name: how many, and whether one holds want. */
static bool latch_holds(redisContext *r, const char *name, const char *want, long long *count)
{
    redisReply *keys = th_cmd(r, "KEYS rlock_acquire_latch:{%s}:*", name);
    bool found = false;
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *v = th_cmd(r, "GET %s", keys->element[i]->str);
        found = found || (v->type == REDIS_REPLY_STRING && strcmp(v->str, want) == 0);
        freeReplyObject(v);
    }
    *count = (long long)keys->elements;
    freeReplyObject(keys);
    return found;
}

/* rlock_guarded() of a command given as NUL-terminated words. */
static rlock_status guarded_words(rlock *l, rlock_reply **reply, int argc, ...)
{
    const char *argv[16];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++) {
        argv[i] = va_arg(ap, const char *);
    }
    va_end(ap);
    return rlock_guarded(l, argc, argv, NULL, reply);
}

typedef rlock_status (*ctor_fn)(rlock_client *, const char *, rlock **);

/* ---- the fenced lock ------------------------------------------------------ */

/* Spec 5: the reentrant lock's hash, plus the token key (a plain integer,
 * no TTL) that every acquisition INCRs, re-entry included; rlock's fence
 * record keeps the largest token as 'max'. The unlock is the reentrant
 * lock's: the last one deletes the hash and publishes "0". */
Test(fenced, layout_after_lock_reentry_and_unlock)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-layout");
    char *tk = token_key(name), *rec = record_key(name), *chan = th_channel(name);
    char *owner = th_owner(c, rlock_thread_id());
    redisContext *r = th_redis(0);
    redisContext *sub = th_subscribe(0, chan);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    cr_assert_str_eq(rlock_kind(l), "fenced");
    int64_t t = 99;
    th_assert_status(rlock_fence_token(l, &t), RLOCK_ENOTOWNER);
    cr_assert_eq(t, 99, "written on a failure");
    th_ok(rlock_fence_token_latest(l, &t));
    cr_assert_eq(t, 0, "getToken() of a name never locked is 0 (spec 11, 26)");

    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(token_of(l), 1);
    redisReply *type = th_cmd(r, "TYPE %s", name);
    cr_assert_str_eq(type->str, "hash");
    freeReplyObject(type);
    cr_assert_eq(th_hlen(r, name), 1);
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    long long pttl = th_pttl(r, name);
    cr_assert(pttl > 0 && pttl <= 30000, "PTTL %lld", pttl);
    cr_assert_eq(get_int(r, tk), 1);
    cr_assert_eq(th_pttl(r, tk), -1, "the token key has no TTL");
    cr_assert_eq(th_hget_int(r, rec, "max"), 1);
    cr_assert_eq(th_hlen(r, rec), 1);
    th_ok(rlock_fence_token_latest(l, &t));
    cr_assert_eq(t, 1);

    /* Re-entry takes a token too (spec 5), and resets the lease. */
    th_ok(rlock_lock(l, 40000));
    cr_assert_eq(token_of(l), 2);
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    cr_assert(th_pttl(r, name) > 30000);
    cr_assert_eq(get_int(r, tk), 2);
    cr_assert_eq(th_hget_int(r, rec, "max"), 2);

    /* A partial unlock keeps the latest acquisition's token. */
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(token_of(l), 2);
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    char *msg = th_next_message(sub, 2000);
    cr_assert(msg && strcmp(msg, "0") == 0, "unlock published %s", msg ? msg : "nothing");
    free(msg);
    cr_assert_eq(get_int(r, tk), 2, "the token key outlives the lock");
    cr_assert_eq(th_pttl(r, tk), -1);
    th_assert_status(rlock_fence_token(l, &t), RLOCK_ENOTOWNER);
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(sub);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(owner);
    free(chan);
    free(rec);
    free(tk);
    free(name);
}

/* Every acquisition of the name gets the next token, whichever client
 * takes it; a failed attempt takes none. */
Test(fenced, tokens_strictly_increase_across_clients)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("fenced-clients");
    rlock *la, *lb;
    th_ok(rlock_new_fenced(a, name, &la));
    th_ok(rlock_new_fenced(b, name, &lb));
    int64_t last = 0;
    for (int i = 0; i < 20; i++) {
        rlock *mine = i % 2 ? lb : la, *other = i % 2 ? la : lb;
        th_ok(rlock_lock(mine, 30000));
        th_assert_status(rlock_try_lock(other, 0, 30000), RLOCK_EBUSY);
        int64_t t = token_of(mine);
        cr_assert_eq(t, last + 1, "round %d: token %lld after %lld", i, (long long)t,
                     (long long)last);
        last = t;
        th_ok(rlock_unlock(mine));
    }
    redisContext *r = th_redis(0);
    char *tk = token_key(name), *rec = record_key(name);
    cr_assert_eq(get_int(r, tk), 20);
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    free(rec);
    free(tk);
    free(name);
}

typedef struct proc_arg {
    const char *name;
    const char *list;
    int rounds;
} proc_arg;

/* A process of its own: each round takes the lock, re-enters it, and
 * appends both tokens to the list while it holds the lock. */
static int fenced_rounds(void *arg)
{
    proc_arg *p = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    rlock_client *c;
    rlock *l;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK || rlock_new_fenced(c, p->name, &l) != RLOCK_OK) {
        return 10;
    }
    redisContext *r = redisConnect("127.0.0.1", th_port());
    if (!r || r->err) {
        return 11;
    }
    for (int i = 0; i < p->rounds; i++) {
        int64_t t1 = 0, t2 = 0;
        if (rlock_lock(l, 30000) != RLOCK_OK || rlock_fence_token(l, &t1) != RLOCK_OK ||
            rlock_lock(l, 30000) != RLOCK_OK || rlock_fence_token(l, &t2) != RLOCK_OK) {
            return 12;
        }
        redisReply *rep = redisCommand(r, "RPUSH %s %lld %lld", p->list, (long long)t1,
                                       (long long)t2);
        if (!rep) {
            return 13;
        }
        freeReplyObject(rep);
        if (rlock_unlock(l) != RLOCK_OK || rlock_unlock(l) != RLOCK_OK) {
            return 14;
        }
    }
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

/* Four processes, each re-entering in every round: the tokens, written
 * while held (so in the order the holds came), strictly increase with
 * no gap and no repeat. */
Test(fenced, tokens_strictly_increase_across_processes_and_reentries)
{
    char *name = th_name("fenced-procs");
    char *list = th_name("fenced-procs-list");
    enum { PROCS = 4, ROUNDS = 15 };
    proc_arg p = {name, list, ROUNDS};
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = th_fork(fenced_rounds, &p);
    }
    for (int i = 0; i < PROCS; i++) {
        cr_assert_eq(th_wait_bounded(pids[i], 60000), 0, "process %d failed", i);
    }
    redisContext *r = th_redis(0);
    redisReply *rep = th_cmd(r, "LRANGE %s 0 -1", list);
    cr_assert_eq(rep->elements, (size_t)PROCS * ROUNDS * 2);
    for (size_t i = 0; i < rep->elements; i++) {
        cr_assert_eq(atoll(rep->element[i]->str), (long long)i + 1, "token %zu is %s", i,
                     rep->element[i]->str);
    }
    freeReplyObject(rep);
    char *tk = token_key(name), *rec = record_key(name);
    cr_assert_eq(get_int(r, tk), PROCS * ROUNDS * 2);
    th_run(r, "DEL %s %s %s", tk, rec, list);
    redisFree(r);
    free(rec);
    free(tk);
    free(list);
    free(name);
}

/* rlock_fence_token() and the fenced writes make sense for the fenced lock
 * only. */
Test(fenced, token_calls_on_other_kinds_are_einval)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-einval");
    rlock *plain, *fl;
    th_ok(rlock_new(c, name, &plain));
    th_ok(rlock_new_fenced(c, name, &fl));
    th_ok(rlock_lock(plain, 30000));
    int64_t t = 7;
    th_assert_status(rlock_fence_token(plain, &t), RLOCK_EINVAL);
    th_assert_status(rlock_fence_token_latest(plain, &t), RLOCK_EINVAL);
    cr_assert_eq(t, 7);
    th_assert_status(rlock_fenced_set(plain, "k", "v", 1), RLOCK_EINVAL);
    th_assert_status(rlock_fenced_hset(plain, "k", "f", "v", 1), RLOCK_EINVAL);
    th_ok(rlock_unlock(plain));
    th_assert_status(rlock_fence_token(NULL, &t), RLOCK_EINVAL);
    th_assert_status(rlock_fence_token(fl, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_fence_token_latest(NULL, &t), RLOCK_EINVAL);
    th_assert_status(rlock_fence_token_latest(fl, NULL), RLOCK_EINVAL);
    th_assert_status(rlock_fenced_set(NULL, "k", "v", 1), RLOCK_EINVAL);
    th_assert_status(rlock_fenced_set(fl, NULL, "v", 1), RLOCK_EINVAL);
    th_assert_status(rlock_fenced_set(fl, "k", NULL, 1), RLOCK_EINVAL);
    th_assert_status(rlock_fenced_hset(fl, "k", NULL, "v", 1), RLOCK_EINVAL);
    cr_assert_neq(rlock_last_error()[0], '\0');
    rlock_free(plain);
    rlock_free(fl);
    rlock_client_free(c);
    free(name);
}

/* getToken() reads the token key as Redisson does; one written by hand
 * that is no number, or of another type, is said so. */
Test(fenced, latest_token_of_a_key_written_by_hand)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-latest");
    char *tk = token_key(name);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    int64_t t = 0;
    th_run(r, "SET %s 41", tk);
    th_ok(rlock_fence_token_latest(l, &t));
    cr_assert_eq(t, 41);
    th_run(r, "SET %s twelve", tk);
    th_assert_status(rlock_fence_token_latest(l, &t), RLOCK_EPROTO);
    th_run(r, "DEL %s", tk);
    th_run(r, "HSET %s a b", tk);
    th_assert_status(rlock_fence_token_latest(l, &t), RLOCK_EKIND);
    cr_assert_eq(t, 41);
    th_run(r, "DEL %s", tk);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(tk);
    free(name);
}

#define FENCED_ACQUIRE_PREFIX "*12\r\n$7\r\nEVALSHA"

/* The first copy of an acquire runs and its reply is lost: the same
 * request sent again learns that it ran and answers its token (the token
 * key was INCRed once), for a first acquisition and for a re-entry; the
 * resend's latch keeps "count:token". */
Test(fenced, resend_after_a_lost_reply_answers_the_first_copys_token)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *c = client_at(tp_port(px), 1000, 10000, 0);
    char *name = th_name("fenced-resend");
    char *tk = token_key(name), *rec = record_key(name);
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    th_ok(rlock_lock(l, 30000)); /* scripts cached, connection made: token 1 */
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(0);

    tp_cut_next_request(px, FENCED_ACQUIRE_PREFIX, name);
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(tp_cuts(px), 1, "the proxy did not cut the acquire");
    cr_assert_eq(th_hget_int(r, name, owner), 1);
    cr_assert_eq(get_int(r, tk), 2, "the token key was INCRed %lld times", get_int(r, tk) - 1);
    cr_assert_eq(token_of(l), 2, "the resend answered another token than the first copy's");
    long long latches = 0;
    cr_assert(latch_holds(r, name, "1:2", &latches), "no latch says 1:2 (%lld latches)", latches);

    tp_cut_next_request(px, FENCED_ACQUIRE_PREFIX, name);
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(tp_cuts(px), 2, "the proxy did not cut the re-entry");
    cr_assert_eq(th_hget_int(r, name, owner), 2);
    cr_assert_eq(get_int(r, tk), 3);
    cr_assert_eq(token_of(l), 3);
    cr_assert(latch_holds(r, name, "2:3", &latches), "no latch says 2:3 (%lld latches)", latches);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(rec);
    free(tk);
    free(name);
}

/* The body of lua/<file> (the tests run from the tree's root), malloc'd. */
static char *script_body(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "lua/%s", file);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot read %s (run from the tree's root)", path);
    char *buf = malloc(65536);
    cr_assert(buf);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The first copy is held back (and dropped with its connection); the
 * resend takes the lock and its latch keeps "1:token". A copy of that
 * request reaching Redis later (sent here by hand, as the client sent
 * it: same id, a first send) finds the latch, takes no hold and no
 * token. */
Test(fenced, late_copy_of_an_answered_acquire_takes_no_token)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *c = client_at(tp_port(px), 300, 10000, 0);
    char *name = th_name("fenced-late");
    char *tk = token_key(name), *rec = record_key(name);
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    th_ok(rlock_lock(l, 60000)); /* token 1 */
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(0);
    tp_delay(px, TP_REQUESTS, 100, th_ms(1500));
    th_ok(rlock_lock(l, 60000));
    cr_assert_eq(token_of(l), 2);
    redisReply *keys = th_cmd(r, "KEYS rlock_acquire_latch:{%s}:*", name);
    cr_assert_eq(keys->elements, 1, "%zu latches", keys->elements);
    char latch[512];
    snprintf(latch, sizeof latch, "%s", keys->element[0]->str);
    freeReplyObject(keys);
    char v[32];
    get_str(r, latch, v, sizeof v);
    cr_assert_str_eq(v, "1:2");
    char *body = script_body("fenced_acquire.lua");
    redisReply *late = th_cmd(r, "EVAL %s 4 %s %s %s %s 60000 %s 0 60000 0", body, name, latch,
                              tk, rec, owner);
    cr_assert(late->type == REDIS_REPLY_ARRAY && late->elements == 2 &&
                  late->element[0]->integer == 3,
              "the late copy was not told it was settled");
    freeReplyObject(late);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the late copy counted a second hold");
    cr_assert_eq(get_int(r, tk), 2, "the late copy took a token");
    th_ok(rlock_unlock(l));
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s %s", tk, rec);
    free(body);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(rec);
    free(tk);
    free(name);
}

/* Every send of a zero-wait acquire is held back: RLOCK_ETIMEDOUT; the
 * thread's next call abandons the request (the reentrant lock's abandon:
 * latch "0"), and a copy of it reaching Redis afterwards takes no hold and
 * no token. */
Test(fenced, abandoned_acquire_takes_no_token_when_a_copy_arrives)
{
    tp_proxy *px = tp_new(th_port());
    cr_assert(px && tp_start(px) == 0);
    rlock_client *c = client_at(tp_port(px), 300, 10000, 0);
    char *name = th_name("fenced-abandon");
    char *tk = token_key(name), *rec = record_key(name);
    char *owner = th_owner(c, rlock_thread_id());
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    th_ok(rlock_lock(l, 60000)); /* token 1 */
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(0);
    int64_t t0 = th_now_ms();
    tp_delay(px, TP_REQUESTS, th_ms(900), th_ms(2000));
    th_assert_status(rlock_try_lock(l, 0, 60000), RLOCK_ETIMEDOUT);
    while (th_now_ms() - t0 < th_ms(1000)) {
        th_sleep_ms(20); /* past the window: the next call goes through */
    }
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    redisReply *keys = th_cmd(r, "KEYS rlock_acquire_latch:{%s}:*", name);
    cr_assert_eq(keys->elements, 1, "%zu latches", keys->elements);
    char latch[512];
    snprintf(latch, sizeof latch, "%s", keys->element[0]->str);
    freeReplyObject(keys);
    char v[32];
    get_str(r, latch, v, sizeof v);
    cr_assert_str_eq(v, "0", "the abandoned request's latch");
    char *body = script_body("fenced_acquire.lua");
    redisReply *late = th_cmd(r, "EVAL %s 4 %s %s %s %s 60000 %s 0 60000 0", body, name, latch,
                              tk, rec, owner);
    cr_assert(late->type == REDIS_REPLY_ARRAY && late->elements == 2 &&
                  late->element[0]->integer == 3,
              "the copy of the abandoned request was not told it was settled");
    freeReplyObject(late);
    cr_assert_eq(th_exists(r, name), 0, "a copy of the abandoned acquire took the lock");
    cr_assert_eq(get_int(r, tk), 1, "a copy of the abandoned acquire took a token");
    th_ok(rlock_try_lock(l, 0, 60000));
    cr_assert_eq(token_of(l), 2);
    th_ok(rlock_unlock(l));
    th_run(r, "DEL %s %s", tk, rec);
    free(body);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    tp_free(px);
    free(owner);
    free(rec);
    free(tk);
    free(name);
}

/* The token key lost (DEL, eviction) while rlock's fence record stays:
 * the next acquisition goes on from the record's 'max' and repairs the
 * key, also after Redisson's acquire has INCRed the lost key from 0. Both
 * lost (everything of the name gone): tokens start over at 1, as
 * Redisson's would. */
Test(fenced, token_key_lost_tokens_go_on_from_the_record)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-lost-key");
    char *tk = token_key(name), *rec = record_key(name);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    for (int i = 1; i <= 3; i++) {
        th_ok(rlock_lock(l, 30000));
        cr_assert_eq(token_of(l), i);
        th_ok(rlock_unlock(l));
    }
    th_run(r, "DEL %s", tk);
    int64_t t = -1;
    th_ok(rlock_fence_token_latest(l, &t));
    cr_assert_eq(t, 0, "getToken() of a lost token key");
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(token_of(l), 4, "a token went back after the token key was lost");
    cr_assert_eq(get_int(r, tk), 4, "the token key was not repaired");
    cr_assert_eq(th_hget_int(r, rec, "max"), 4);
    th_ok(rlock_unlock(l));

    /* Lost while held, then Redisson's acquire INCRs it from nothing. */
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(token_of(l), 5);
    th_run(r, "DEL %s", tk);
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(token_of(l), 6);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    th_run(r, "DEL %s", tk);
    th_run(r, "INCR %s", tk);
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(token_of(l), 7);
    cr_assert_eq(get_int(r, tk), 7);
    th_ok(rlock_unlock(l));

    th_run(r, "DEL %s %s", tk, rec);
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(token_of(l), 1, "with the key and the record gone, tokens start over");
    th_ok(rlock_unlock(l));
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(name);
}

/* FLUSHALL (a private server): the lock, its token key and record and the
 * data are gone together; tokens start over at 1, and the holder from
 * before the flush can no longer write: its hold is gone. */
Test(fenced, flush_starts_tokens_over_and_the_old_holder_cannot_write)
{
    th_server srv;
    th_server_start(&srv);
    rlock_client *a = client_at(srv.port, 2000, 5000, 0);
    rlock_client *b = client_at(srv.port, 2000, 5000, 0);
    char *name = th_name("fenced-flush");
    rlock *la, *lb;
    th_ok(rlock_new_fenced(a, name, &la));
    th_ok(rlock_new_fenced(b, name, &lb));
    for (int i = 0; i < 3; i++) {
        th_ok(rlock_lock(la, 30000));
        th_ok(rlock_unlock(la));
    }
    th_ok(rlock_lock(la, 30000));
    cr_assert_eq(token_of(la), 4);
    th_ok(rlock_fenced_set(la, "fenced-flush-data", "a", 1));
    redisContext *r = th_redis(srv.port);
    th_run(r, "FLUSHALL");
    th_ok(rlock_lock(lb, 30000));
    cr_assert_eq(token_of(lb), 1);
    th_assert_status(rlock_fenced_set(la, "fenced-flush-data", "stale", 5), RLOCK_ELOST);
    th_ok(rlock_fenced_set(lb, "fenced-flush-data", "b", 1));
    char v[16];
    get_str(r, "fenced-flush-data", v, sizeof v);
    cr_assert_str_eq(v, "b");
    th_assert_status(rlock_unlock(la), RLOCK_ELOST);
    th_ok(rlock_unlock(lb));
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    free(name);
    th_server_stop(&srv);
}

/* The watchdog renews a fenced lock as the reentrant one; when the hold
 * vanishes the loss is reported, the token is no longer given out, and
 * the levels unwind with RLOCK_ELOST. */
Test(fenced, watchdog_renews_and_reports_a_lost_fenced_lock)
{
    th_lost_count k = {PTHREAD_MUTEX_INITIALIZER, 0};
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1500;
    cfg.on_lock_lost = th_count_lost;
    cfg.on_lock_lost_arg = &k;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("fenced-watchdog");
    char *tk = token_key(name), *rec = record_key(name);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    int64_t t = token_of(l);
    th_wait_renewal(r, name, 3000);
    th_wait_renewal(r, name, 3000);
    cr_assert_eq(token_of(l), t, "a renewal is no acquisition: no new token");
    cr_assert_eq(get_int(r, tk), t);
    th_run(r, "DEL %s", name);
    cr_assert(TH_POLL(th_lost_calls(&k) == 1, 5000), "on_lock_lost called %d times",
              th_lost_calls(&k));
    th_assert_status(rlock_fence_token(l, &t), RLOCK_ELOST);
    th_assert_status(rlock_fenced_set(l, "never-written", "x", 1), RLOCK_ELOST);
    th_assert_status(rlock_unlock(l), RLOCK_ELOST);
    th_assert_status(rlock_fence_token(l, &t), RLOCK_ENOTOWNER);
    cr_assert_eq(th_exists(r, "never-written"), 0);
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(name);
}

typedef struct waiter {
    rlock *l;
    int64_t wait_ms;
    rlock_status st;
    int64_t token;
    int64_t at;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    w->st = rlock_try_lock(w->l, w->wait_ms, 30000);
    w->at = th_now_ms();
    if (w->st == RLOCK_OK) {
        rlock_fence_token(w->l, &w->token);
        rlock_unlock(w->l);
    }
    return NULL;
}

/* A hold written by hand in Redisson's format is respected, and a failed
 * attempt takes no token; Redisson's release (by hand: DEL and "0" on the
 * channel) wakes a waiter of ours, which takes the next token after
 * Redisson's. */
Test(fenced, a_hold_in_redissons_format_is_respected)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-java");
    char *tk = token_key(name), *rec = record_key(name), *chan = th_channel(name);
    rlock *l, *w_l;
    th_ok(rlock_new_fenced(c, name, &l));
    th_ok(rlock_new_fenced(c, name, &w_l));
    redisContext *r = th_redis(0);
    th_run(r, "SET %s 10", tk);
    th_run(r, "HSET %s 1b0d3c7e-0000-4000-8000-00000000java:1 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    int64_t ttl = 0;
    th_assert_status(rlock_lock_ex(l, 0, 30000, NULL, &ttl), RLOCK_EBUSY);
    cr_assert(ttl > 0 && ttl <= 30000, "holder's TTL %lld", (long long)ttl);
    cr_assert_eq(get_int(r, tk), 10, "a failed attempt took a token");
    th_assert_status(rlock_unlock(l), RLOCK_ENOTOWNER);
    cr_assert_eq(th_hlen(r, name), 1);
    waiter w = {w_l, th_ms(20000), -1, -1, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    th_wait_waiters(0, name, 1, 3000);
    int64_t t0 = th_now_ms();
    th_run(r, "DEL %s", name);
    th_run(r, "PUBLISH %s 0", chan);
    pthread_join(th, NULL);
    th_ok(w.st);
    cr_assert(w.at - t0 < th_ms(1000), "woken %lld ms after the release", (long long)(w.at - t0));
    cr_assert_eq(w.token, 11, "the token after Redisson's 10");
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(l);
    rlock_free(w_l);
    rlock_client_free(c);
    free(chan);
    free(rec);
    free(tk);
    free(name);
}

/* A waiter on a fenced lock sleeps on the lock's channel and is woken by
 * the release, with the next token. */
Test(fenced, waiter_is_woken_by_the_release_with_the_next_token)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("fenced-wake");
    rlock *la, *lb;
    th_ok(rlock_new_fenced(a, name, &la));
    th_ok(rlock_new_fenced(b, name, &lb));
    th_ok(rlock_lock(la, 30000));
    int64_t ta = token_of(la);
    waiter w = {lb, th_ms(20000), -1, -1, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    th_wait_waiters(0, name, 1, 3000);
    int64_t t0 = th_now_ms();
    th_ok(rlock_unlock(la));
    pthread_join(th, NULL);
    th_ok(w.st);
    cr_assert(w.at - t0 < th_ms(1000), "woken %lld ms after the release", (long long)(w.at - t0));
    cr_assert_eq(w.token, ta + 1);
    redisContext *r = th_redis(0);
    char *tk = token_key(name), *rec = record_key(name);
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    free(rec);
    free(tk);
    free(name);
}

/* A read/write lock's hash, a key of another type at the name or at the
 * token key: RLOCK_EKIND, and nothing changes (no token taken, no record
 * made). A token key that is no number is refused before any write. */
Test(fenced, another_kind_or_type_is_ekind_and_untouched)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-kind");
    char *tk = token_key(name), *rec = record_key(name);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    th_run(r, "HSET %s mode read 1b0d3c7e-0000-4000-8000-00000000java:1 1", name);
    th_run(r, "PEXPIRE %s 30000", name);
    th_assert_status(rlock_try_lock(l, 0, 30000), RLOCK_EKIND);
    th_assert_status(rlock_lock(l, 30000), RLOCK_EKIND);
    cr_assert_eq(th_hlen(r, name), 2);
    cr_assert_eq(th_exists(r, tk), 0, "the token key was made");
    cr_assert_eq(th_exists(r, rec), 0, "the fence record was made");
    th_run(r, "DEL %s", name);
    th_run(r, "SET %s somestring", name);
    th_assert_status(rlock_try_lock(l, 0, 30000), RLOCK_EKIND);
    char v[32];
    get_str(r, name, v, sizeof v);
    cr_assert_str_eq(v, "somestring");
    cr_assert_eq(th_exists(r, tk), 0);
    th_run(r, "DEL %s", name);
    th_run(r, "HSET %s a b", tk);
    th_assert_status(rlock_try_lock(l, 0, 30000), RLOCK_EKIND);
    cr_assert_eq(th_exists(r, name), 0, "the lock was taken with a token key of another type");
    th_run(r, "DEL %s", tk);
    th_run(r, "SET %s notanumber", tk);
    th_assert_status(rlock_try_lock(l, 0, 30000), RLOCK_EREDIS);
    cr_assert_eq(th_exists(r, name), 0, "the lock was taken with a token key that is no number");
    get_str(r, tk, v, sizeof v);
    cr_assert_str_eq(v, "notanumber");
    cr_assert_eq(th_exists(r, rec), 0);
    th_run(r, "DEL %s", tk);
    th_ok(rlock_try_lock(l, 0, 30000));
    cr_assert_eq(token_of(l), 1);
    th_ok(rlock_unlock(l));
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(name);
}

/* A read/write lock's hash whose reader field is this very owner's (the
 * thread reads the name): the fenced acquire looks at 'mode' first, so a
 * resend answers "another kind" ({5, 0}), takes nothing and writes its
 * latch "0"; a copy of the request reaching Redis afterwards (a first
 * send, by hand) finds the latch and changes nothing either. */
Test(fenced, resend_finding_a_read_write_lock_of_its_own_reader_writes_the_latch)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-rwresend");
    char *tk = token_key(name), *rec = record_key(name);
    char *owner = th_owner(c, rlock_thread_id());
    char latch[512];
    snprintf(latch, sizeof latch, "rlock_acquire_latch:{%s}:77", name);
    redisContext *r = th_redis(0);
    th_run(r, "HSET %s mode read %s 1", name, owner);
    th_run(r, "PEXPIRE %s 30000", name);
    char *body = script_body("fenced_acquire.lua");
    redisReply *re = th_cmd(r, "EVAL %s 4 %s %s %s %s 60000 %s 0 60000 1", body, name, latch,
                            tk, rec, owner);
    cr_assert(re->type == REDIS_REPLY_ARRAY && re->elements == 2 && re->element[0]->integer == 5,
              "the resend was not told another kind holds the name");
    freeReplyObject(re);
    char v[32];
    get_str(r, latch, v, sizeof v);
    cr_assert_str_eq(v, "0", "the resend left no latch");
    redisReply *late = th_cmd(r, "EVAL %s 4 %s %s %s %s 60000 %s 0 60000 0", body, name, latch,
                              tk, rec, owner);
    cr_assert(late->type == REDIS_REPLY_ARRAY && late->elements == 2 &&
                  late->element[0]->integer == 3,
              "the late copy was not told it was settled");
    freeReplyObject(late);
    cr_assert_eq(th_hget_int(r, name, owner), 1, "the reader's count was changed");
    cr_assert_eq(th_hlen(r, name), 2);
    cr_assert_eq(th_exists(r, tk), 0, "a token was taken");
    cr_assert_eq(th_exists(r, rec), 0, "the fence record was made");
    th_run(r, "DEL %s %s", name, latch);
    free(body);
    redisFree(r);
    rlock_client_free(c);
    free(owner);
    free(rec);
    free(tk);
    free(name);
}

/* ---- fenced writes -------------------------------------------------------- */

/* The holder's writes go through and leave their token in the record
 * (field "k:" + key); without a hold nothing is written. */
Test(fencedwrite, set_and_hset_record_the_token)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fw-basic");
    char *key = th_name("fw-basic-data"), *hkey = th_name("fw-basic-hash");
    char *tk = token_key(name), *rec = record_key(name);
    char kf[256], hkf[256];
    snprintf(kf, sizeof kf, "k:%s", key);
    snprintf(hkf, sizeof hkf, "k:%s", hkey);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    th_assert_status(rlock_fenced_set(l, key, "x", 1), RLOCK_ENOTOWNER);
    th_assert_status(rlock_fenced_hset(l, hkey, "f", "x", 1), RLOCK_ENOTOWNER);
    cr_assert_eq(th_exists(r, key) + th_exists(r, hkey), 0);

    th_ok(rlock_lock(l, 30000));
    int64_t t = token_of(l);
    th_ok(rlock_fenced_set(l, key, "v\0w", 3)); /* binary safe */
    redisReply *v = th_cmd(r, "GET %s", key);
    cr_assert(v->type == REDIS_REPLY_STRING && v->len == 3 && memcmp(v->str, "v\0w", 3) == 0);
    freeReplyObject(v);
    cr_assert_eq(th_hget_int(r, rec, kf), t);
    th_ok(rlock_fenced_hset(l, hkey, "field", "hv", 2));
    th_ok(rlock_fenced_hset(l, hkey, "empty", NULL, 0));
    v = th_cmd(r, "HGET %s field", hkey);
    cr_assert_str_eq(v->str, "hv");
    freeReplyObject(v);
    v = th_cmd(r, "HGET %s empty", hkey);
    cr_assert(v->type == REDIS_REPLY_STRING && v->len == 0);
    freeReplyObject(v);
    cr_assert_eq(th_hget_int(r, rec, hkf), t);
    /* A re-entry's newer token writes on; the same token writes again. */
    th_ok(rlock_lock(l, 30000));
    th_ok(rlock_fenced_set(l, key, "2", 1));
    th_ok(rlock_fenced_set(l, key, "3", 1));
    cr_assert_eq(th_hget_int(r, rec, kf), t + 1);
    cr_assert_eq(th_hget_int(r, rec, "max"), t + 1);
    th_ok(rlock_unlock(l));
    th_ok(rlock_unlock(l));
    th_assert_status(rlock_fenced_set(l, key, "late", 4), RLOCK_ENOTOWNER);
    char s[16];
    get_str(r, key, s, sizeof s);
    cr_assert_str_eq(s, "3");
    th_run(r, "DEL %s %s %s %s", tk, rec, key, hkey);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(hkey);
    free(key);
    free(name);
}

/* Two holders: A takes token t with a lease that runs out while it does
 * nothing (a pause), B takes t + 1 and writes; A's write is refused,
 * B's value and token stay. A plain SET by A would have overwritten it. */
Test(fencedwrite, stale_holder_is_refused_and_the_newer_value_stays)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("fw-stale");
    char *key = th_name("fw-stale-data");
    char *tk = token_key(name), *rec = record_key(name);
    char kf[256];
    snprintf(kf, sizeof kf, "k:%s", key);
    rlock *la, *lb;
    th_ok(rlock_new_fenced(a, name, &la));
    th_ok(rlock_new_fenced(b, name, &lb));
    redisContext *r = th_redis(0);
    th_ok(rlock_lock(la, th_ms(600)));
    int64_t ta = token_of(la);
    th_ok(rlock_fenced_set(la, key, "A1", 2));
    th_wait_exists(r, name, 0, 3000); /* A's lease ran out: A is "paused" */
    th_ok(rlock_lock(lb, 30000));
    int64_t tb = token_of(lb);
    cr_assert_eq(tb, ta + 1);
    th_ok(rlock_fenced_set(lb, key, "B", 1));
    th_assert_status(rlock_fenced_set(la, key, "A2", 2), RLOCK_ELOST);
    char s[16];
    get_str(r, key, s, sizeof s);
    cr_assert_str_eq(s, "B", "the stale holder overwrote the newer value");
    cr_assert_eq(th_hget_int(r, rec, kf), tb);
    th_assert_status(rlock_unlock(la), RLOCK_ELOST);
    th_ok(rlock_unlock(lb));
    th_run(r, "DEL %s %s %s", tk, rec, key);
    redisFree(r);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    free(rec);
    free(tk);
    free(key);
    free(name);
}

/* The record says a newer token than the caller's has written the key
 * (here by hand: a write made under a later token, e.g. restored from
 * elsewhere): the caller still holds the lock, yet its write is refused
 * with RLOCK_ESTALE, and nothing changes. */
Test(fencedwrite, a_newer_token_written_before_is_estale)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fw-estale");
    char *key = th_name("fw-estale-data");
    char *tk = token_key(name), *rec = record_key(name);
    char kf[256];
    snprintf(kf, sizeof kf, "k:%s", key);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    th_ok(rlock_lock(l, 30000));
    int64_t t = token_of(l);
    th_run(r, "SET %s newer", key);
    th_run(r, "HSET %s %s %lld", rec, kf, (long long)t + 5);
    th_assert_status(rlock_fenced_set(l, key, "mine", 4), RLOCK_ESTALE);
    th_assert_status(rlock_fenced_hset(l, key, "f", "mine", 4), RLOCK_ESTALE);
    cr_assert_neq(strstr(rlock_last_error(), "token"), NULL, "detail: %s", rlock_last_error());
    char s[16];
    get_str(r, key, s, sizeof s);
    cr_assert_str_eq(s, "newer");
    cr_assert_eq(th_hget_int(r, rec, kf), t + 5);
    /* Still held: the refusal is about the key, not the lock. */
    bool held = false;
    th_ok(rlock_is_held_by_current_thread(l, &held));
    cr_assert(held);
    th_ok(rlock_unlock(l));
    th_run(r, "DEL %s %s %s", tk, rec, key);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(key);
    free(name);
}

/* An HSET on a key of another type fails: RLOCK_EKIND, and the record is
 * put back as it was (no token left for a write that did not happen). */
Test(fencedwrite, wrongtype_is_ekind_and_the_record_is_put_back)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fw-wrongtype");
    char *key = th_name("fw-wrongtype-data");
    char *tk = token_key(name), *rec = record_key(name);
    char kf[256];
    snprintf(kf, sizeof kf, "k:%s", key);
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    redisContext *r = th_redis(0);
    th_run(r, "SET %s astring", key);
    th_ok(rlock_lock(l, 30000));
    int64_t t = token_of(l);
    th_assert_status(rlock_fenced_hset(l, key, "f", "v", 1), RLOCK_EKIND);
    cr_assert_eq(th_hget_int(r, rec, kf), 0, "a token was recorded for a failed write");
    cr_assert_eq(th_hget_int(r, rec, "max"), t);
    th_ok(rlock_unlock(l));
    /* A second holder's failed write puts the earlier token back. */
    th_ok(rlock_lock(l, 30000));
    th_ok(rlock_fenced_set(l, key, "s", 1));
    cr_assert_eq(th_hget_int(r, rec, kf), t + 1);
    th_ok(rlock_unlock(l));
    th_ok(rlock_lock(l, 30000));
    th_assert_status(rlock_fenced_hset(l, key, "f", "v", 1), RLOCK_EKIND);
    cr_assert_eq(th_hget_int(r, rec, kf), t + 1);
    th_ok(rlock_unlock(l));
    /* The fence record of another type: refused before anything. */
    th_run(r, "DEL %s", rec);
    th_run(r, "SET %s x", rec);
    th_assert_status(rlock_try_lock(l, 0, 30000), RLOCK_EKIND);
    cr_assert_eq(th_exists(r, name), 0);
    th_run(r, "DEL %s %s %s", tk, rec, key);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(key);
    free(name);
}

/* ---- guarded commands ------------------------------------------------------ */

static const ctor_fn guarded_kinds[] = {rlock_new, rlock_new_fenced};
static const char *const guarded_kind_names[] = {"reentrant", "fenced"};

/* The command runs while the thread holds the lock and never otherwise:
 * not held is RLOCK_ENOTOWNER; held and then lost (force-unlocked) is
 * RLOCK_ELOST, and rlock_unlock() says RLOCK_ELOST too. */
Test(guarded, runs_only_while_held)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    for (size_t k = 0; k < sizeof guarded_kinds / sizeof guarded_kinds[0]; k++) {
        char *name = th_name("guarded-held");
        char *key = th_name("guarded-held-data");
        rlock *l;
        th_ok(guarded_kinds[k](c, name, &l));
        cr_assert_str_eq(rlock_kind(l), guarded_kind_names[k]);
        rlock_reply *rep = (rlock_reply *)&rep;
        th_assert_status(guarded_words(l, &rep, 3, "SET", key, "nobody"), RLOCK_ENOTOWNER);
        cr_assert_eq(rep, (rlock_reply *)&rep, "reply written on a failure");
        cr_assert_eq(th_exists(r, key), 0);
        th_ok(rlock_lock(l, 30000));
        th_ok(guarded_words(l, &rep, 3, "SET", key, "holder"));
        cr_assert_eq(rlock_reply_type_of(rep), RLOCK_REPLY_STATUS);
        cr_assert_str_eq(rlock_reply_string(rep, NULL), "OK");
        rlock_reply_free(rep);
        th_ok(guarded_words(l, NULL, 3, "APPEND", key, "!"));
        char s[32];
        get_str(r, key, s, sizeof s);
        cr_assert_str_eq(s, "holder!");
        bool was = false;
        th_ok(rlock_force_unlock(l, &was));
        cr_assert(was);
        th_assert_status(guarded_words(l, NULL, 3, "SET", key, "after"), RLOCK_ELOST);
        get_str(r, key, s, sizeof s);
        cr_assert_str_eq(s, "holder!", "[%s] a guarded write ran after the hold was gone",
                         guarded_kind_names[k]);
        th_assert_status(rlock_unlock(l), RLOCK_ELOST);
        th_assert_status(guarded_words(l, NULL, 3, "SET", key, "after"), RLOCK_ENOTOWNER);
        char *tk = token_key(name), *rec = record_key(name);
        th_run(r, "DEL %s %s %s", key, tk, rec);
        free(rec);
        free(tk);
        rlock_free(l);
        free(key);
        free(name);
    }
    redisFree(r);
    rlock_client_free(c);
}

/* Every reply type comes back, binary safe, through the accessors. */
Test(guarded, replies_of_every_type)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("guarded-replies");
    char *key = th_name("guarded-replies-data"), *list = th_name("guarded-replies-list");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 30000));
    rlock_reply *rep = NULL;
    th_ok(guarded_words(l, &rep, 3, "INCRBY", key, "41"));
    cr_assert_eq(rlock_reply_type_of(rep), RLOCK_REPLY_INTEGER);
    cr_assert_eq(rlock_reply_integer(rep), 41);
    cr_assert_null(rlock_reply_string(rep, NULL));
    cr_assert_eq(rlock_reply_elements(rep), 0);
    rlock_reply_free(rep);
    const char *argv[3] = {"SET", key, "a\0b"};
    size_t lens[3] = {3, strlen(key), 3};
    th_ok(rlock_guarded(l, 3, argv, lens, NULL));
    th_ok(guarded_words(l, &rep, 2, "GET", key));
    size_t n = 0;
    cr_assert_eq(rlock_reply_type_of(rep), RLOCK_REPLY_STRING);
    const char *str = rlock_reply_string(rep, &n);
    cr_assert(n == 3 && memcmp(str, "a\0b", 3) == 0);
    cr_assert_eq(rlock_reply_integer(rep), 0);
    rlock_reply_free(rep);
    th_ok(guarded_words(l, &rep, 2, "GET", "guarded-replies-no-such-key"));
    cr_assert_eq(rlock_reply_type_of(rep), RLOCK_REPLY_NIL);
    cr_assert_null(rlock_reply_string(rep, &n));
    cr_assert_eq(n, 0);
    rlock_reply_free(rep);
    th_ok(guarded_words(l, NULL, 5, "RPUSH", list, "x", "", "z"));
    th_ok(guarded_words(l, &rep, 4, "LRANGE", list, "0", "-1"));
    cr_assert_eq(rlock_reply_type_of(rep), RLOCK_REPLY_ARRAY);
    cr_assert_eq(rlock_reply_elements(rep), 3);
    cr_assert_str_eq(rlock_reply_string(rlock_reply_element(rep, 0), NULL), "x");
    cr_assert_str_eq(rlock_reply_string(rlock_reply_element(rep, 1), &n), "");
    cr_assert_eq(n, 0);
    cr_assert_null(rlock_reply_element(rep, 3));
    rlock_reply_free(rep);
    /* The accessors of nothing. */
    cr_assert_eq(rlock_reply_type_of(NULL), RLOCK_REPLY_NIL);
    cr_assert_eq(rlock_reply_integer(NULL), 0);
    cr_assert_null(rlock_reply_string(NULL, &n));
    cr_assert_eq(rlock_reply_elements(NULL), 0);
    cr_assert_null(rlock_reply_element(NULL, 0));
    rlock_reply_free(NULL);
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(0);
    th_run(r, "DEL %s %s", key, list);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(list);
    free(key);
    free(name);
}

/* The command's own error: WRONGTYPE is RLOCK_EKIND, others RLOCK_EREDIS
 * with the server's text; the lock's key of another type is RLOCK_EKIND
 * and the command does not run. */
Test(guarded, errors_of_the_command_and_of_the_lock_key)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("guarded-errors");
    char *key = th_name("guarded-errors-data");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    redisContext *r = th_redis(0);
    th_run(r, "SET %s str", key);
    th_ok(rlock_lock(l, 30000));
    rlock_reply *rep = NULL;
    th_assert_status(guarded_words(l, &rep, 2, "LPOP", key), RLOCK_EKIND);
    cr_assert_neq(strstr(rlock_last_error(), "WRONGTYPE"), NULL, "%s", rlock_last_error());
    th_assert_status(guarded_words(l, &rep, 2, "NOSUCHCOMMAND", key), RLOCK_EREDIS);
    cr_assert_neq(rlock_last_error()[0], '\0');
    th_assert_status(guarded_words(l, &rep, 3, "INCRBY", key, "x"), RLOCK_EREDIS);
    th_assert_status(guarded_words(l, &rep, 2, "SUBSCRIBE", key), RLOCK_EREDIS);
    cr_assert_null(rep);
    char s[16];
    get_str(r, key, s, sizeof s);
    cr_assert_str_eq(s, "str");
    /* Still held after the command's failures. */
    th_ok(guarded_words(l, NULL, 3, "SET", key, "ok"));
    th_ok(rlock_unlock(l));
    th_run(r, "SET %s notahash", name);
    th_assert_status(guarded_words(l, NULL, 3, "SET", key, "never"), RLOCK_EKIND);
    get_str(r, key, s, sizeof s);
    cr_assert_str_eq(s, "ok");
    th_run(r, "DEL %s %s", name, key);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(key);
    free(name);
}

Test(guarded, bad_arguments_are_einval)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("guarded-einval");
    rlock *l;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_lock(l, 30000));
    const char *argv[2] = {"GET", NULL};
    rlock_reply *rep = NULL;
    th_assert_status(rlock_guarded(NULL, 1, argv, NULL, &rep), RLOCK_EINVAL);
    th_assert_status(rlock_guarded(l, 0, argv, NULL, &rep), RLOCK_EINVAL);
    th_assert_status(rlock_guarded(l, -1, argv, NULL, &rep), RLOCK_EINVAL);
    th_assert_status(rlock_guarded(l, 1, NULL, NULL, &rep), RLOCK_EINVAL);
    th_assert_status(rlock_guarded(l, 2, argv, NULL, &rep), RLOCK_EINVAL);
    th_assert_status(rlock_guarded(l, RLOCK_GUARDED_ARGS_MAX + 1, argv, NULL, &rep),
                     RLOCK_EINVAL);
    cr_assert_null(rep);
    /* The longest command accepted runs. */
    char *list = th_name("guarded-einval-list");
    const char **big = malloc(RLOCK_GUARDED_ARGS_MAX * sizeof *big);
    cr_assert(big);
    big[0] = "RPUSH";
    big[1] = list;
    for (int i = 2; i < RLOCK_GUARDED_ARGS_MAX; i++) {
        big[i] = "x";
    }
    th_ok(rlock_guarded(l, RLOCK_GUARDED_ARGS_MAX, big, NULL, &rep));
    cr_assert_eq(rlock_reply_integer(rep), RLOCK_GUARDED_ARGS_MAX - 2);
    rlock_reply_free(rep);
    free(big);
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(0);
    th_run(r, "DEL %s", list);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(list);
    free(name);
}

typedef struct paused_arg {
    const char *name;
    const char *guarded_key;
    const char *plain_key;
    int kind;
    int ready_fd;
    int go_fd;
} paused_arg;

/* A holder in a process of its own (watchdog lease 1.5 s): it takes the
 * lock, tells the parent, and waits for the go byte, which the parent
 * sends only after stopping it past its lease and letting another owner
 * take the lock and write. Then it writes both keys as a stale holder:
 * the guarded write must be refused (20 + status otherwise), the plain
 * one goes through. */
static int paused_holder(void *arg)
{
    paused_arg *p = arg;
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = th_url();
    cfg.watchdog_timeout_ms = 1500;
    rlock_client *c;
    rlock *l;
    if (rlock_client_new(&cfg, &c) != RLOCK_OK ||
        guarded_kinds[p->kind](c, p->name, &l) != RLOCK_OK) {
        return 10;
    }
    if (rlock_lock(l, RLOCK_WATCHDOG) != RLOCK_OK) {
        return 11;
    }
    char b = 1;
    if (write(p->ready_fd, &b, 1) != 1) {
        return 12;
    }
    if (read(p->go_fd, &b, 1) != 1) {
        return 13;
    }
    const char *argv[3] = {"SET", p->guarded_key, "A"};
    rlock_status st = rlock_guarded(l, 3, argv, NULL, NULL);
    if (st != RLOCK_ELOST) {
        return 20 + (int)st;
    }
    redisContext *r = redisConnect("127.0.0.1", th_port());
    redisReply *rep = r && !r->err ? redisCommand(r, "SET %s A", p->plain_key) : NULL;
    if (!rep) {
        return 14;
    }
    freeReplyObject(rep);
    redisFree(r);
    if (rlock_unlock(l) != RLOCK_ELOST) {
        return 15;
    }
    rlock_free(l);
    rlock_client_free(c);
    return 0;
}

/* The etcd-transaction pattern against a lost update: a holder stopped
 * (SIGSTOP) past its lease, another process takes the lock and writes two
 * keys, the stopped one continues and writes both again: its guarded write
 * is refused and the new holder's value stays; its plain SET overwrites. */
Test(guarded, paused_holder_is_refused_where_a_plain_write_overwrites)
{
    for (int k = 0; k < 2; k++) {
        char *name = th_name("guarded-paused");
        char *gkey = th_name("guarded-paused-g"), *pkey = th_name("guarded-paused-p");
        int ready[2], go[2];
        cr_assert_eq(pipe(ready), 0);
        cr_assert_eq(pipe(go), 0);
        paused_arg pa = {name, gkey, pkey, k, ready[1], go[0]};
        pid_t pid = th_fork(paused_holder, &pa);
        struct pollfd pf = {ready[0], POLLIN, 0};
        char b = 0;
        if (poll(&pf, 1, (int)th_ms(10000)) != 1 || read(ready[0], &b, 1) != 1) {
            int code = th_wait_bounded(pid, 100);
            cr_assert_fail("[%s] the holder did not take the lock (exit %d)",
                           guarded_kind_names[k], code);
        }
        cr_assert_eq(kill(pid, SIGSTOP), 0);
        int wst;
        cr_assert_eq(waitpid(pid, &wst, WUNTRACED), pid);
        cr_assert(WIFSTOPPED(wst));

        rlock_client *c = th_client(NULL, 0);
        rlock *l;
        th_ok(guarded_kinds[k](c, name, &l));
        int64_t t0 = th_now_ms();
        th_ok(rlock_try_lock(l, th_ms(8000), 30000));
        cr_log_info("[%s] taken %lld ms after the holder stopped", guarded_kind_names[k],
                    (long long)(th_now_ms() - t0));
        th_ok(guarded_words(l, NULL, 3, "SET", gkey, "B"));
        th_ok(guarded_words(l, NULL, 3, "SET", pkey, "B"));
        cr_assert_eq(write(go[1], &b, 1), 1);
        cr_assert_eq(kill(pid, SIGCONT), 0);
        int code = th_wait_bounded(pid, 15000);
        cr_assert_eq(code, 0,
                     "[%s] holder exit %d (20+s: its guarded write returned s, not "
                     "RLOCK_ELOST; 15: its unlock did not say RLOCK_ELOST)",
                     guarded_kind_names[k], code);
        redisContext *r = th_redis(0);
        char s[8];
        get_str(r, gkey, s, sizeof s);
        cr_assert_str_eq(s, "B", "[%s] the paused holder's guarded write overwrote the new one",
                         guarded_kind_names[k]);
        get_str(r, pkey, s, sizeof s);
        cr_assert_str_eq(s, "A", "[%s] the contrast: a plain write does overwrite",
                         guarded_kind_names[k]);
        bool held = false;
        th_ok(rlock_is_held_by_current_thread(l, &held));
        cr_assert(held, "the new holder lost the lock to the stale one");
        th_ok(rlock_unlock(l));
        char *tk = token_key(name), *rec = record_key(name);
        th_run(r, "DEL %s %s %s %s", gkey, pkey, tk, rec);
        free(rec);
        free(tk);
        redisFree(r);
        rlock_free(l);
        rlock_client_free(c);
        close(ready[0]);
        close(ready[1]);
        close(go[0]);
        close(go[1]);
        free(pkey);
        free(gkey);
        free(name);
    }
}

/* A server that is gone (RLOCK_EIO) or stalled (RLOCK_ETIMEDOUT): the
 * guarded command, the fenced write and getToken() say so (a private
 * server). */
Test(guarded, transport_statuses)
{
    th_server srv;
    th_server_start(&srv);
    rlock_client *c = client_at(srv.port, 300, 1000, 0);
    char *name = th_name("guarded-transport");
    rlock *l, *fl;
    th_ok(rlock_new(c, name, &l));
    th_ok(rlock_new_fenced(c, "guarded-transport-fenced", &fl));
    th_ok(rlock_lock(l, 60000));
    th_ok(rlock_lock(fl, 60000));
    int64_t t = 0;
    th_stall s;
    th_stall_start(&s, srv.port, th_ms(3000));
    th_assert_status(guarded_words(l, NULL, 3, "SET", "k", "v"), RLOCK_ETIMEDOUT);
    th_assert_status(rlock_fenced_set(fl, "k", "v", 1), RLOCK_ETIMEDOUT);
    th_assert_status(rlock_fence_token_latest(fl, &t), RLOCK_ETIMEDOUT);
    th_stall_end(&s);
    th_server_stop(&srv);
    th_assert_status(guarded_words(l, NULL, 3, "SET", "k", "v"), RLOCK_EIO);
    th_assert_status(rlock_fenced_set(fl, "k", "v", 1), RLOCK_EIO);
    th_assert_status(rlock_fence_token_latest(fl, &t), RLOCK_EIO);
    rlock_free(l);
    rlock_free(fl);
    rlock_client_free(c);
    free(name);
}

/* The calls of a closed client's handles: RLOCK_ECLOSED, as every call's
 * (a fork()ed child sees the same). */
static int closed_child(void *arg)
{
    rlock *l = arg;
    int64_t t = 0;
    const char *argv[2] = {"GET", "k"};
    if (rlock_fence_token(l, &t) != RLOCK_ECLOSED ||
        rlock_fence_token_latest(l, &t) != RLOCK_ECLOSED ||
        rlock_fenced_set(l, "k", "v", 1) != RLOCK_ECLOSED ||
        rlock_guarded(l, 2, argv, NULL, NULL) != RLOCK_ECLOSED) {
        return 1;
    }
    return 0;
}

Test(fenced, calls_after_the_client_closes_are_eclosed)
{
    rlock_client *c = th_client(NULL, 0);
    char *name = th_name("fenced-closed");
    rlock *l;
    th_ok(rlock_new_fenced(c, name, &l));
    th_ok(rlock_lock(l, 30000));
    cr_assert_eq(th_wait(th_fork(closed_child, l)), 0, "a forked child's call was not ECLOSED");
    th_ok(rlock_unlock(l));
    redisContext *r = th_redis(0);
    char *tk = token_key(name), *rec = record_key(name);
    th_run(r, "DEL %s %s", tk, rec);
    redisFree(r);
    rlock_free(l);
    rlock_client_free(c);
    free(rec);
    free(tk);
    free(name);
}

/* ---- the ACL ------------------------------------------------------------- */

/* docs/operations.md's ACL for the reentrant lock: */
#define DOC_ACL                                                                              \
    "resetkeys resetchannels -@all ~* &redisson_lock__channel:* +evalsha +eval +hexists "    \
    "+hincrby +hget +exists +pexpire +pttl +get +set +del +publish +subscribe +unsubscribe " \
    "+client|setname +auth +select"

/* A user without INCR cannot take a fenced lock: RLOCK_EPERM, nothing
 * changed; with the fenced lock's commands (+incr +hset +hdel) it can; a
 * data key outside its key patterns is refused for the fenced write (a
 * declared key) and for the guarded command (inside the script). */
Test(fenced, acl_refusals_change_nothing)
{
    char user[64], url[128];
    snprintf(user, sizeof user, "fenced_%d_%lld", (int)getpid(), (long long)th_now_ms() % 100000);
    snprintf(url, sizeof url, "redis://%s:pw@127.0.0.1:%d", user, th_port());
    redisContext *r = th_redis(0);
    th_run(r, "ACL SETUSER %s on >pw " DOC_ACL, user);
    rlock_config cfg;
    rlock_config_init(&cfg);
    cfg.url = url;
    rlock_client *c = th_client_cfg(&cfg);
    char *name = th_name("fenced-acl");
    char *data = th_name("fenced-acl-data"), *plain_name = th_name("fenced-acl-plain");
    char *elsewhere = th_name("elsewhere");
    char *tk = token_key(name), *rec = record_key(name);
    rlock *l, *plain;
    th_ok(rlock_new_fenced(c, name, &l));
    th_assert_status(rlock_try_lock(l, 0, 30000), RLOCK_EPERM);
    cr_assert_eq(th_exists(r, name) + th_exists(r, tk) + th_exists(r, rec), 0,
                 "a refused acquire changed something");
    th_run(r, "ACL SETUSER %s +incr +hset +hdel", user);
    th_ok(rlock_try_lock(l, 0, 30000));
    th_ok(rlock_fenced_set(l, data, "v", 1));
    th_run(r, "ACL SETUSER %s resetkeys ~fenced-acl* ~redisson* ~rlock*", user);
    th_assert_status(rlock_fenced_set(l, elsewhere, "v", 1), RLOCK_EPERM);
    cr_assert_eq(th_exists(r, elsewhere), 0);
    th_ok(rlock_new(c, plain_name, &plain));
    th_ok(rlock_lock(plain, 30000));
    th_assert_status(guarded_words(plain, NULL, 3, "SET", elsewhere, "v"), RLOCK_EPERM);
    cr_assert_eq(th_exists(r, elsewhere), 0);
    th_run(r, "ACL SETUSER %s -get", user);
    int64_t t = 0;
    th_assert_status(rlock_fence_token_latest(l, &t), RLOCK_EPERM);
    th_run(r, "ACL SETUSER %s +get", user);
    th_ok(rlock_unlock(plain));
    th_ok(rlock_unlock(l));
    rlock_free(plain);
    rlock_free(l);
    rlock_client_free(c);
    th_run(r, "ACL DELUSER %s", user);
    th_run(r, "DEL %s %s %s", tk, rec, data);
    redisFree(r);
    free(rec);
    free(tk);
    free(elsewhere);
    free(plain_name);
    free(data);
    free(name);
}
