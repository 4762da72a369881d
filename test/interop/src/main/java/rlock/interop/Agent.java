package rlock.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RBucket;
import org.redisson.api.RFencedLock;
import org.redisson.api.RList;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * The Java side of rlock's interop tests: one Redisson client, driven by
 * line commands on stdin, run on named worker threads (a Redisson hold
 * belongs to the thread that took it, so the driver picks the thread).
 *
 * Usage: Agent REDIS_ADDRESS WATCHDOG_MS REDISSON_VERSION
 *
 * Request:  TAG WORKER COMMAND ARGS...       (one line; WORKER is any word)
 * Reply:    TAG ok RESULT...   or   TAG err EXCEPTION_CLASS MESSAGE
 * First line, once connected: 0 ok ready REDISSON_VERSION CLIENT_ID
 *
 * Each worker runs its commands in order on its own thread, so a blocked
 * "lock" on w1 does not stop w2; replies come back in completion order.
 * Times are microseconds since the epoch (CLOCK_REALTIME on Linux), so the
 * C driver can subtract its own clock_gettime(CLOCK_REALTIME) readings.
 *
 * NAME is a lock name for getLock(NAME), or read@NAME / write@NAME for the
 * read and write halves of getReadWriteLock(NAME).
 *
 * Commands (LEASE_MS < 0: no lease, the watchdog renews the hold):
 *   whoami                    -> ok CLIENT_ID:THREAD_ID
 *   lock NAME LEASE_MS        -> ok T_CALLED T_RETURNED
 *   trylock NAME WAIT_MS LEASE_MS -> ok true|false T_CALLED T_RETURNED
 *   unlock NAME               -> ok T_CALLED T_RETURNED
 *   force NAME                -> ok true|false T_CALLED T_RETURNED
 *   count NAME                -> ok getHoldCount()
 *   ttl NAME                  -> ok remainTimeToLive()
 *   held NAME                 -> ok isHeldByCurrentThread()
 *   locked NAME               -> ok isLocked()
 *   mutex NAME ITERS LEASE_MS KEY -> ok ITERS VIOLATIONS LONGEST_WAIT_US
 *       ITERS critical sections under NAME: INCR KEY:inside must give 1,
 *       GET KEY:counter, sleep 1 ms, SET KEY:counter +1, RPUSH KEY:log J,
 *       DECR KEY:inside must give 0; then 1-8 ms outside the lock.
 *   ftoken NAME LEASE_MS      -> ok TOKEN T_CALLED T_RETURNED  (RFencedLock
 *                                lockAndGetToken(), with a lease when >= 0)
 *   ftrytoken NAME WAIT_MS    -> ok TOKEN|null  (tryLockAndGetToken(wait))
 *   funlock NAME              -> ok T_CALLED T_RETURNED  (the fenced lock's unlock)
 *   gettoken NAME             -> ok getToken()
 *   guide                     -> ok N  (runs the porting guide's snippets;
 *                                err ClassNotFoundException in an agent-only build)
 *   fair.COMMAND NAME ...     -> the same on getFairLock(NAME) (lock, trylock,
 *                                unlock, force, count, ttl, held, locked)
 */
public final class Agent {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final Map<String, Worker> WORKERS = new ConcurrentHashMap<>();
    // One RLock object per name, shared by all workers, as an application
    // keeps one: the object remembers the last explicit lease, which
    // Redisson's partial unlock applies.
    private static final Map<String, RLock> LOCKS = new ConcurrentHashMap<>();
    private static final Map<String, RFencedLock> FENCED = new ConcurrentHashMap<>();
    private static final Map<String, RLock> FAIR_LOCKS = new ConcurrentHashMap<>();
    private static RedissonClient redisson;

    private Agent() {
    }

    static long nowUs() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    static void reply(String tag, String text) {
        synchronized (OUT) {
            OUT.println(tag + " " + text);
        }
    }

    private static final class Worker extends Thread {
        final BlockingQueue<String[]> queue = new LinkedBlockingQueue<>();

        Worker(String name) {
            super("agent-" + name);
            setDaemon(true);
        }

        @Override
        public void run() {
            for (;;) {
                String[] req;
                try {
                    req = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                String tag = req[0];
                try {
                    reply(tag, "ok " + execute(req));
                } catch (Throwable e) {
                    Throwable c = e;
                    while (c.getCause() != null && !(c instanceof IllegalMonitorStateException)) {
                        c = c.getCause();
                    }
                    String msg = String.valueOf(c.getMessage()).replace('\n', ' ');
                    reply(tag, "err " + c.getClass().getSimpleName() + " " + msg);
                }
            }
        }
    }

    // NAME: getLock(NAME); read@NAME and write@NAME: the halves of
    // getReadWriteLock(NAME).
    private static RLock lockOf(String name) {
        if (name.startsWith("read@")) {
            return redisson.getReadWriteLock(name.substring(5)).readLock();
        }
        if (name.startsWith("write@")) {
            return redisson.getReadWriteLock(name.substring(6)).writeLock();
        }
        return redisson.getLock(name);
    }

    private static String execute(String[] r) throws Exception {
        String cmd = r[2];
        Map<String, RLock> locks = LOCKS;
        java.util.function.Function<String, RLock> make = Agent::lockOf;
        if (cmd.startsWith("fair.")) {
            cmd = cmd.substring(5);
            locks = FAIR_LOCKS;
            make = redisson::getFairLock;
        }
        RLock lock = r.length > 3 ? locks.computeIfAbsent(r[3], make) : null;
        long t0 = nowUs();
        switch (cmd) {
        case "whoami":
            return redisson.getId() + ":" + Thread.currentThread().getId();
        case "lock": {
            long lease = Long.parseLong(r[4]);
            if (lease < 0) {
                lock.lock();
            } else {
                lock.lock(lease, TimeUnit.MILLISECONDS);
            }
            return t0 + " " + nowUs();
        }
        case "trylock": {
            long wait = Long.parseLong(r[4]);
            long lease = Long.parseLong(r[5]);
            boolean got = lease < 0 ? lock.tryLock(wait, TimeUnit.MILLISECONDS)
                                    : lock.tryLock(wait, lease, TimeUnit.MILLISECONDS);
            return got + " " + t0 + " " + nowUs();
        }
        case "unlock":
            lock.unlock();
            return t0 + " " + nowUs();
        case "force": {
            boolean was = lock.forceUnlock();
            return was + " " + t0 + " " + nowUs();
        }
        case "count":
            return Integer.toString(lock.getHoldCount());
        case "ttl":
            return Long.toString(lock.remainTimeToLive());
        case "held":
            return Boolean.toString(lock.isHeldByCurrentThread());
        case "locked":
            return Boolean.toString(lock.isLocked());
        case "mutex":
            return mutex(lock, Integer.parseInt(r[4]), Long.parseLong(r[5]), r[6]);
        case "ftoken": {
            RFencedLock f = FENCED.computeIfAbsent(r[3], redisson::getFencedLock);
            long lease = Long.parseLong(r[4]);
            Long t = lease < 0 ? f.lockAndGetToken() : f.lockAndGetToken(lease, TimeUnit.MILLISECONDS);
            return t + " " + t0 + " " + nowUs();
        }
        case "ftrytoken": {
            RFencedLock f = FENCED.computeIfAbsent(r[3], redisson::getFencedLock);
            Long t = f.tryLockAndGetToken(Long.parseLong(r[4]), TimeUnit.MILLISECONDS);
            return String.valueOf(t);
        }
        case "funlock":
            FENCED.computeIfAbsent(r[3], redisson::getFencedLock).unlock();
            return t0 + " " + nowUs();
        case "gettoken":
            return String.valueOf(FENCED.computeIfAbsent(r[3], redisson::getFencedLock).getToken());
        case "guide": {
            // By name: agent-only builds (older Redisson) leave it out.
            Class<?> guide = Class.forName("rlock.interop.PortingGuide");
            Object n = guide.getDeclaredMethod("runAll", RedissonClient.class).invoke(null, redisson);
            return n.toString();
        }
        default:
            throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    private static String mutex(RLock lock, int iters, long lease, String key) throws Exception {
        RAtomicLong inside = redisson.getAtomicLong(key + ":inside");
        RBucket<String> counter = redisson.getBucket(key + ":counter", StringCodec.INSTANCE);
        RList<String> log = redisson.getList(key + ":log", StringCodec.INSTANCE);
        int violations = 0;
        long maxWait = 0;
        for (int i = 0; i < iters; i++) {
            long t0 = nowUs();
            if (lease < 0) {
                lock.lock();
            } else {
                lock.lock(lease, TimeUnit.MILLISECONDS);
            }
            maxWait = Math.max(maxWait, nowUs() - t0);
            try {
                if (inside.incrementAndGet() != 1) {
                    violations++;
                }
                String v = counter.get();
                long n = v == null ? 0 : Long.parseLong(v);
                Thread.sleep(1);
                counter.set(Long.toString(n + 1));
                log.add("J");
                if (inside.decrementAndGet() != 0) {
                    violations++;
                }
            } finally {
                lock.unlock();
            }
            // 1-8 ms of work outside the lock: others (both languages) get turns
            Thread.sleep(1 + ThreadLocalRandom.current().nextInt(8));
        }
        return iters + " " + violations + " " + maxWait;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Agent REDIS_ADDRESS WATCHDOG_MS REDISSON_VERSION");
            System.exit(2);
        }
        // Anything else that prints (the guide's snippets, library warnings)
        // goes to stderr; stdout carries only replies.
        System.setOut(System.err);
        Config config = new Config();
        config.setLockWatchdogTimeout(Long.parseLong(args[1]));
        config.useSingleServer().setAddress(args[0]);
        redisson = Redisson.create(config);
        reply("0", "ok ready " + args[2] + " " + redisson.getId());

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] req = line.trim().split(" +");
            if (req.length < 3) {
                reply(req[0], "err IllegalArgumentException need TAG WORKER COMMAND");
                continue;
            }
            WORKERS.computeIfAbsent(req[1], name -> {
                Worker w = new Worker(name);
                w.start();
                return w;
            }).queue.add(req);
        }
        redisson.shutdown();
        System.exit(0);
    }
}
