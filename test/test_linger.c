/* A waiter whose channel is still subscribed when it attempts (it lingers
 * LINGER_MS after the waiter's last wait) needs no second attempt after
 * joining the channel's queue: a release that runs after the attempt
 * publishes to that subscription, and its message finds the waiter queued.
 * Unless a message came, or the subscription was lost, between the
 * attempt and the join: then it attempts again. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* the channel primitives: rlock__chan_peek, _join */

TestSuite(linger, .timeout = 60);

static uint64_t stat_of(rlock_client *c, rlock_stat which)
{
    uint64_t v = 0;
    th_ok(rlock_client_stat(c, which, &v));
    return v;
}

Test(linger, rewait_on_a_lingering_channel_attempts_once_before_sleeping)
{
    rlock_client *a = th_client(NULL, 0), *b = th_client(NULL, 0);
    char *name = th_name("linger");
    char *chan = th_channel(name);
    rlock *l;
    th_ok(rlock_new(a, name, &l));
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    /* b's first wait subscribes to the lock's channel. */
    th_bg w1 = {.c = b, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .lock = true};
    pthread_t t1;
    pthread_create(&t1, NULL, th_bg_main, &w1);
    th_wait_waiters(0, name, 1, 3000);
    th_wait_blocked(th_bg_tid(&w1), 3000);
    th_ok(rlock_unlock(l));
    pthread_join(t1, NULL);
    th_ok(w1.st);
    /* Its second, while the channel lingers: one attempt, then asleep. */
    th_ok(rlock_lock(l, RLOCK_WATCHDOG));
    cr_assert_eq(th_numsub(0, chan), 1, "still subscribed (lingering)");
    uint64_t cmds0 = stat_of(b, RLOCK_STAT_COMMANDS);
    th_bg w2 = {.c = b, .name = name, .wait_ms = RLOCK_WAIT_FOREVER, .lock = true};
    pthread_t t2;
    pthread_create(&t2, NULL, th_bg_main, &w2);
    th_wait_blocked(th_bg_tid(&w2), 3000);
    uint64_t asleep = stat_of(b, RLOCK_STAT_COMMANDS) - cmds0;
    cr_assert_eq(asleep, 1, "%llu commands before the waiter slept (one attempt)",
                 (unsigned long long)asleep);
    int64_t released = th_now_ms();
    th_ok(rlock_unlock(l));
    pthread_join(t2, NULL);
    th_ok(w2.st);
    cr_assert(w2.returned_at - released < th_ms(1000), "woken by the release");
    rlock_free(l);
    free(chan);
    free(name);
    rlock_client_free(a);
    rlock_client_free(b);
}

/* Joins channel with seen and reports *live, then leaves it again. */
static bool join_live(rlock_client *c, const char *chan, const rlock__chan_seen *seen)
{
    rlock__chan *ch;
    rlock__waiter *w;
    bool behind = false, live = false;
    int64_t hint = -1;
    th_ok(rlock__chan_join(c, chan, strlen(chan), RLOCK__WAKE_ONE, &ch, &w, &behind, &hint, seen,
                           &live));
    th_ok(rlock__chan_wait_subscribed(c, ch, w, th_now_ms() + th_ms(3000)));
    rlock__chan_leave(c, ch, w, false, -1);
    return live;
}

/* Kills c's pub/sub connection on the server (CLIENT KILL ID), found by
 * the connection name rlock:<first 8 characters of the client id>:... */
static void kill_pubsub(redisContext *r, rlock_client *c)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "name=rlock:%.8s:", rlock_client_id(c));
    redisReply *list = th_cmd(r, "CLIENT LIST TYPE pubsub");
    const char *at = strstr(list->str, prefix);
    cr_assert(at != NULL, "the client's pub/sub connection is listed");
    const char *line = at;
    while (line > list->str && line[-1] != '\n') {
        line--;
    }
    long long id = atoll(strstr(line, "id=") + 3);
    freeReplyObject(list);
    th_run(r, "CLIENT KILL ID %lld", id);
}

Test(linger, a_message_or_a_lost_subscription_since_the_attempt_means_attempt_again)
{
    rlock_client *c = th_client(NULL, 0);
    redisContext *r = th_redis(0);
    char *chan = th_name("linger-chan");
    rlock__chan_seen seen;

    /* Never joined: nothing to rely on. */
    rlock__chan_peek(c, chan, strlen(chan), &seen);
    cr_assert_eq(seen.epoch, 0);
    cr_assert(!join_live(c, chan, &seen), "a first subscription is not live before the join");
    cr_assert(!join_live(c, chan, NULL));

    /* Lingering, quiet since the peek: live. */
    rlock__chan_peek(c, chan, strlen(chan), &seen);
    cr_assert(seen.epoch != 0, "subscribed and lingering");
    cr_assert(join_live(c, chan, &seen));

    /* A release's message read between the peek and the join (it may be
     * for a release that ran after the attempt): not live. */
    rlock__chan_peek(c, chan, strlen(chan), &seen);
    uint64_t wakes = stat_of(c, RLOCK_STAT_WAKEUPS);
    th_run(r, "PUBLISH %s 0", chan);
    cr_assert(TH_POLL(stat_of(c, RLOCK_STAT_WAKEUPS) == wakes + 1, 3000));
    cr_assert(!join_live(c, chan, &seen), "a message since the peek was ignored");

    /* The subscription lost and made again since the peek: messages may
     * have been published to nobody meanwhile. Not live, though the entry
     * stayed (another waiter kept it) and is confirmed again, and no
     * message moved its wake sequence. */
    char *quiet = th_name("linger-quiet");
    rlock__chan *kch;
    rlock__waiter *keeper;
    bool behind = false, live = false;
    int64_t hint = -1;
    th_ok(rlock__chan_join(c, quiet, strlen(quiet), RLOCK__WAKE_ONE, &kch, &keeper, &behind, &hint,
                           NULL, &live));
    th_ok(rlock__chan_wait_subscribed(c, kch, keeper, th_now_ms() + th_ms(3000)));
    rlock__chan_peek(c, quiet, strlen(quiet), &seen);
    cr_assert(seen.epoch != 0);
    uint64_t reconnects = stat_of(c, RLOCK_STAT_RECONNECTS);
    kill_pubsub(r, c);
    cr_assert(TH_POLL(stat_of(c, RLOCK_STAT_RECONNECTS) > reconnects, 3000));
    rlock__chan_seen now;
    cr_assert(TH_POLL((rlock__chan_peek(c, quiet, strlen(quiet), &now), now.epoch != 0), 3000),
              "subscribed again");
    cr_assert(!join_live(c, quiet, &seen), "a subscription lost since the peek was trusted");

    /* And quiet again after that: live. */
    rlock__chan_peek(c, quiet, strlen(quiet), &seen);
    cr_assert(seen.epoch != 0);
    cr_assert(join_live(c, quiet, &seen));
    rlock__chan_leave(c, kch, keeper, false, -1);
    free(quiet);
    free(chan);
    redisFree(r);
    rlock_client_free(c);
}
