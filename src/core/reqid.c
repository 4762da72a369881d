/* Request ids of unlocks (spec 1): 16 random bytes as 32 hex digits. A
 * per-thread xorshift generator seeded from the kernel, so an unlock costs
 * no system call. A fork()ed child inherits the generator's state of the
 * thread that forked: without care, a parent and its children (or two
 * children) would produce the same ids, hit each other's unlock latch, and
 * be told RLOCK_OK for a release that never ran. So every fork() bumps a
 * generation (pthread_atfork), and a thread whose seed belongs to another
 * generation seeds itself again. */
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

#include "object.h"

static atomic_uint_fast64_t fork_generation = 1;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void in_child(void)
{
    atomic_fetch_add(&fork_generation, 1);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

uint64_t rlock__fork_generation(void)
{
    pthread_once(&atfork_once, register_atfork);
    return atomic_load_explicit(&fork_generation, memory_order_relaxed);
}

void rlock__request_id(char out[33])
{
    static __thread uint64_t s[2];
    static __thread uint64_t seeded_gen;
    uint64_t gen = atomic_load_explicit(&fork_generation, memory_order_relaxed);
    if (seeded_gen != gen) {
        pthread_once(&atfork_once, register_atfork);
        gen = atomic_load(&fork_generation);
        if (getrandom(s, sizeof s, 0) != sizeof s) {
            /* No entropy: the pid and the clock still differ per child. */
            s[0] = ((uint64_t)getpid() << 32) ^ (uint64_t)rlock__now_ms();
            s[1] = (uint64_t)(uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
        }
        s[0] |= 1;
        seeded_gen = gen;
    }
    for (int k = 0; k < 2; k++) {
        uint64_t x = s[0], y = s[1];
        s[0] = y;
        x ^= x << 23;
        s[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
        uint64_t v = s[1] + y;
        rlock__fmt_hex16(out + 16 * k, v);
    }
}
