/* Monotonic time and condition-variable waits on it. Every timeout in rlock
 * is measured on CLOCK_MONOTONIC so that a wall-clock step (NTP, an operator
 * setting the date) never shortens or stretches a wait or a lease check.
 * The one wall-clock reading, rlock__wall_ms(), is for dates other clients
 * compare with theirs (the fair lock's queue deadlines). */
#include <errno.h>
#include <time.h>

#include "object.h"

int64_t rlock__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rlock__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rlock__deadline_ts(int64_t deadline_ms, struct timespec *ts)
{
    ts->tv_sec = (time_t)(deadline_ms / 1000);
    ts->tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
}

int rlock__cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc != 0) {
        return rc;
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

bool rlock__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
    if (deadline_ms < 0) {
        pthread_cond_wait(cv, mu);
        return true;
    }
    if (rlock__now_ms() >= deadline_ms) {
        return false;
    }
    struct timespec ts;
    rlock__deadline_ts(deadline_ms, &ts);
    return pthread_cond_timedwait(cv, mu, &ts) != ETIMEDOUT;
}

int64_t rlock__min_deadline(int64_t a, int64_t b)
{
    if (a < 0) {
        return b;
    }
    if (b < 0) {
        return a;
    }
    return a < b ? a : b;
}

void rlock__sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
