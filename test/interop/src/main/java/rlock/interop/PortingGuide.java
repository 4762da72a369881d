package rlock.interop;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.LockOptions;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Every ```java block of docs/porting-guide.md stands in this file (the
 * same lines, indentation aside; test/interop/check-java-excerpts.py
 * verifies it), so the build of the harness compiles each snippet against
 * every Redisson version under test. The snippets that need no other
 * server run against the test server through the agent's "guide" command.
 */
final class PortingGuide {
    private final RedissonClient redisson;
    private final ExecutorService executor = Executors.newSingleThreadExecutor();
    private int reports;

    private PortingGuide(RedissonClient redisson) {
        this.redisson = redisson;
    }

    // The application calls the snippets stand for.
    private void updateInventory() {
    }

    private void sendReport() {
        reports++;
    }

    private void skipThisRound() {
        throw new IllegalStateException("tryLock failed on a free lock");
    }

    private void drainQueue() {
    }

    private void readPrices() {
    }

    private void updatePrices() {
    }

    private void debit(RLock lock) {
        lock.lock();
        try {
            check(lock.getHoldCount() == 2, "hold count 2 in debit()");
        } finally {
            lock.unlock();
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("porting guide snippet: " + what);
        }
    }

    // §3: compiled, never run (it names its own server).
    static RedissonClient configSnippet() {
        Config config = new Config();
        config.setLockWatchdogTimeout(10_000);
        config.useSingleServer()
              .setAddress("redis://127.0.0.1:6379")
              .setConnectionPoolSize(8)
              .setConnectTimeout(2_000)
              .setTimeout(3_000)
              .setSubscriptionTimeout(7_500);
        RedissonClient redisson = Redisson.create(config);
        return redisson;
    }

    // §5
    private void basic() {
        RLock lock = redisson.getLock("example:port_basic");
        lock.lock();                       // no lease: the watchdog renews it
        try {
            updateInventory();
        } finally {
            lock.unlock();
        }
        check(!lock.isLocked(), "port_basic unlocked");
    }

    // §6
    private void lease(RLock lock) {
        lock.lock(10, TimeUnit.SECONDS);   // expires after 10 s, no watchdog
        try {
            long ttl = lock.remainTimeToLive();   // <= 10000 ms
        } finally {
            lock.unlock();
        }
        check(!lock.isLocked(), "port_lease unlocked");
    }

    // §7
    private void tryLock() throws InterruptedException {
        RLock lock = redisson.getLock("example:port_trylock");
        if (lock.tryLock(200, 10_000, TimeUnit.MILLISECONDS)) {
            try {
                sendReport();
            } finally {
                lock.unlock();
            }
        } else {
            skipThisRound();               // someone else holds it
        }
        check(reports == 1, "one report sent");
    }

    // §8
    private void interruptible(RLock lock) {
        try {
            lock.lockInterruptibly();
            try { drainQueue(); } finally { lock.unlock(); }
        } catch (InterruptedException e) {
            // another thread called worker.interrupt(): give up waiting
        }
    }

    // §9
    void transfer(RLock lock) {
        lock.lock();
        try {
            debit(lock);                       // takes the same lock again
            System.out.println(lock.getHoldCount());   // 1
        } finally {
            lock.unlock();
        }
    }

    // §10
    private void forceUnlock() {
        RLock holder = redisson.getLock("example:port_forceunlock");
        holder.lock(10, TimeUnit.SECONDS);
        // An admin path: the holder is stuck; free the lock whoever holds it.
        RLock lock = redisson.getLock("example:port_forceunlock");
        boolean wasLocked = lock.forceUnlock();   // DEL + publish "0"
        check(wasLocked && !lock.isLocked(), "forceUnlock freed it");
    }

    // §11
    private void threads(RLock lock) throws InterruptedException, ExecutionException {
        lock.lock();                                   // on thread A
        long a = Thread.currentThread().getId();
        executor.submit(() -> {                        // thread B
            lock.isHeldByCurrentThread();              // false
            lock.isHeldByThread(a);                    // true
            try {
                lock.unlock();
            } catch (IllegalMonitorStateException e) {
                // thread B is not the owner: the hold stays A's
            }
        }).get();
        lock.unlock();                                 // thread A: fine
        check(!lock.isLocked(), "thread A released it");
    }

    // §17
    private void spin() {
        RLock lock = redisson.getSpinLock("example:port_spin");
        lock.lock();
        try {
            updateInventory();
        } finally {
            lock.unlock();                 // no publish: nobody listens
        }
        check(!lock.isLocked(), "port_spin unlocked");
        RLock quick = redisson.getSpinLock("example:port_spin",
                new LockOptions.ExponentialBackOff().initialDelay(2).maxDelay(64));
        check(quick.tryLock(), "the spin lock with its own back-off is free");
        quick.unlock();
    }

    // The storage write the fenced snippet stands for: it refuses tokens
    // older than the newest it has seen.
    private long newestToken;

    private void writeBalance(long token) {
        check(token > newestToken, "tokens increase");
        newestToken = token;
    }

    // §16
    private void fenced() throws InterruptedException {
        RFencedLock lock = redisson.getFencedLock("example:port_fenced");
        Long token = lock.lockAndGetToken();       // watchdog, like lock()
        try {
            writeBalance(token);                    // the store checks the token
        } finally {
            lock.unlock();
        }
        Long next = lock.tryLockAndGetToken(100, 10000, TimeUnit.MILLISECONDS);
        if (next != null) {                         // null: still held elsewhere
            lock.unlock();
        }
        Long latest = lock.getToken();              // 0 if never locked
        check(next == null || (next > token && latest >= next), "fenced tokens");
    }

    // §15
    private void readWrite() {
        RReadWriteLock rw = redisson.getReadWriteLock("example:port_rwlock");
        rw.readLock().lock();              // many readers at once
        try {
            readPrices();
        } finally {
            rw.readLock().unlock();
        }
        rw.writeLock().lock();             // one writer, no reader
        try {
            updatePrices();
        } finally {
            rw.writeLock().unlock();
        }
        check(!rw.writeLock().isLocked(), "port_rwlock unlocked");
    }

    // §12: compiled, never run (it names its own server).
    static RLock mixedSnippet() {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://10.0.0.5:6379").setDatabase(2);
        RLock lock = Redisson.create(config).getLock("billing:run");
        return lock;
    }

    /** Runs the snippets that need only the given client; returns how many. */
    static int runAll(RedissonClient redisson) throws Exception {
        PortingGuide g = new PortingGuide(redisson);
        try {
            g.basic();
            g.lease(redisson.getLock("example:port_lease"));
            g.tryLock();
            g.interruptible(redisson.getLock("example:port_interruptible"));
            RLock reentrant = redisson.getLock("example:port_reentrant");
            g.transfer(reentrant);
            check(!reentrant.isLocked(), "transfer released it");
            g.forceUnlock();
            g.threads(redisson.getLock("example:port_threads"));
            g.spin();
            g.fenced();
            g.readWrite();
            return 10;
        } finally {
            g.executor.shutdown();
        }
    }
}
