package rlock.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.Set;
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
 * NAME is a lock name, or KIND:NAME for another kind of Redisson lock on
 * NAME: KIND is lock (getLock, the same as a bare name), fair
 * (getFairLock), read and write (getReadWriteLock(NAME).readLock() /
 * .writeLock()), fenced (getFencedLock), spin (getSpinLock),
 * nonreentrant and fairnonreentrant (getNonReentrantLock /
 * getNonReentrantFairLock, Redisson 4.4+, looked up by reflection so the
 * agent builds against every version; an older Redisson answers
 * "err Unsupported ..."). A bare name whose first word is not a KIND is a
 * plain lock, as before.
 *
 * Commands (LEASE_MS < 0: no lease, the watchdog renews the hold):
 * A WORKER called GROUP.NAME runs on a Redisson client of its own per
 * GROUP (made on first use, same configuration), so a test can keep other
 * tests' watchdog and renewal state away from its locks.
 *
 *   whoami                    -> ok CLIENT_ID:THREAD_ID
 *   shutdown                  -> ok true  (a GROUP.NAME worker: its group's
 *                                client is shut down; the next use makes a new one)
 *   lock NAME LEASE_MS        -> ok T_CALLED T_RETURNED
 *   trylock NAME WAIT_MS LEASE_MS -> ok true|false T_CALLED T_RETURNED
 *                                (WAIT_MS < 0: tryLock() without arguments)
 *   unlock NAME               -> ok T_CALLED T_RETURNED
 *   force NAME                -> ok true|false T_CALLED T_RETURNED
 *   count NAME                -> ok getHoldCount()
 *   ttl NAME                  -> ok remainTimeToLive()
 *   held NAME                 -> ok isHeldByCurrentThread()
 *   locked NAME               -> ok isLocked()
 *   locktoken NAME LEASE_MS   -> ok TOKEN T_CALLED T_RETURNED   (fenced:
 *                                lockAndGetToken(), with a lease
 *                                lockAndGetToken(LEASE_MS, ms))
 *   trytoken NAME WAIT_MS LEASE_MS -> ok TOKEN|null T_CALLED T_RETURNED
 *                                (tryLockAndGetToken(); WAIT_MS < 0: no
 *                                arguments, LEASE_MS < 0: no lease)
 *   gettoken NAME             -> ok getToken() (a number or null)
 *                                (the token commands take a bare NAME as
 *                                fenced:NAME; also spelt ftoken NAME LEASE_MS,
 *                                funlock NAME, and ftrytoken NAME WAIT_MS ->
 *                                ok TOKEN|null alone)
 *   mutex NAME ITERS LEASE_MS KEY -> ok ITERS VIOLATIONS LONGEST_WAIT_US MAX_READERS
 *       ITERS critical sections under NAME: INCR KEY:inside must give 1 and
 *       GET KEY:readers 0, GET KEY:counter, sleep 1 ms, SET KEY:counter +1,
 *       RPUSH KEY:log J, DECR KEY:inside must give 0; then 1-8 ms outside
 *       the lock. A fenced lock takes its token (lockAndGetToken, or
 *       tryLockAndGetToken with a lease) and, inside, requires it to be
 *       above KEY:lasttoken and SETs it there. A read lock is shared
 *       instead: INCR KEY:readers (MAX_READERS is the highest it gave),
 *       GET KEY:inside must give 0, sleep 2 ms, INCR KEY:reads, DECR
 *       KEY:readers.
 *   guide                     -> ok N  (runs the porting guide's snippets;
 *                                err ClassNotFoundException in an agent-only build)
 *   fair.COMMAND NAME ...     -> COMMAND fair:NAME ... (another spelling;
 *                                so are read@NAME and write@NAME)
 */
public final class Agent {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    private static final Map<String, Worker> WORKERS = new ConcurrentHashMap<>();
    // One RLock object per (kind, name), shared by all workers, as an
    // application keeps one: the object remembers the last explicit lease,
    // which Redisson's partial unlock applies.
    private static final Map<String, RLock> LOCKS = new ConcurrentHashMap<>();
    private static RedissonClient redisson;
    // Workers named GROUP.NAME use a Redisson client of their own per GROUP
    // (same configuration, its own id, watchdogs and renewal tasks), so a
    // test can keep other tests' renewal state away from its locks.
    private static final Map<String, RedissonClient> CLIENTS = new ConcurrentHashMap<>();
    private static Config config;

    /** What this Redisson version does not have (reply "err Unsupported ..."). */
    static final class Unsupported extends RuntimeException {
        Unsupported(String what) {
            super(what);
        }
    }

    private static final Set<String> KINDS =
            Set.of("lock", "fair", "read", "write", "fenced", "spin", "nonreentrant", "fairnonreentrant");

    /** The kind of a KIND:NAME argument ("lock" for a bare name). */
    static String kindOf(String qname) {
        int i = qname.indexOf(':');
        return i > 0 && KINDS.contains(qname.substring(0, i)) ? qname.substring(0, i) : "lock";
    }

    /** Whether the argument names its kind (KIND:NAME). */
    static boolean qualified(String qname) {
        int i = qname.indexOf(':');
        return i > 0 && KINDS.contains(qname.substring(0, i));
    }

    /** The Redis name of a KIND:NAME argument (a bare name is itself). */
    static String nameOf(String qname) {
        int i = qname.indexOf(':');
        return i > 0 && KINDS.contains(qname.substring(0, i)) ? qname.substring(i + 1) : qname;
    }

    /** A RedissonClient method some versions lack (the 4.4+ non-reentrant locks). */
    /** The worker's group ("" for the main client). */
    static String group() {
        String w = Thread.currentThread().getName().substring("agent-".length());
        int i = w.indexOf('.');
        return i > 0 ? w.substring(0, i) : "";
    }

    /** The Redisson client of the calling worker. */
    static RedissonClient client() {
        String g = group();
        return g.isEmpty() ? redisson : CLIENTS.computeIfAbsent(g, x -> Redisson.create(config));
    }

    private static RLock byReflection(String method, String name) {
        Method m;
        try {
            m = RedissonClient.class.getMethod(method, String.class);
        } catch (NoSuchMethodException e) {
            throw new Unsupported("Redisson " + VERSION + " has no " + method);
        }
        try {
            return (RLock) m.invoke(client(), name);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        } catch (InvocationTargetException e) {
            throw new IllegalStateException(e.getCause());
        }
    }

    private static RLock newLock(String qname) {
        String name = nameOf(qname);
        switch (kindOf(qname)) {
        case "fair":
            return client().getFairLock(name);
        case "read":
            return client().getReadWriteLock(name).readLock();
        case "write":
            return client().getReadWriteLock(name).writeLock();
        case "fenced":
            return client().getFencedLock(name);
        case "spin":
            return client().getSpinLock(name);
        case "nonreentrant":
            return byReflection("getNonReentrantLock", name);
        case "fairnonreentrant":
            return byReflection("getNonReentrantFairLock", name);
        default:
            return client().getLock(name);
        }
    }

    static RLock lockOf(String qname) {
        return LOCKS.computeIfAbsent(group() + " " + qname, k -> newLock(qname));
    }

    private static RFencedLock fenced(RLock lock, String qname) {
        if (!(lock instanceof RFencedLock)) {
            throw new IllegalArgumentException(qname + " is not a fenced lock (fenced:NAME)");
        }
        return (RFencedLock) lock;
    }

    private static String VERSION = "?";

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

    private static String execute(String[] r) throws Exception {
        String cmd = r[2];
        if (cmd.startsWith("fair.") && r.length > 3) {
            // "fair.COMMAND NAME ...": the same as "COMMAND fair:NAME ..."
            cmd = cmd.substring(5);
            r[3] = "fair:" + r[3];
        }
        if (r.length > 3 && (r[3].startsWith("read@") || r[3].startsWith("write@"))) {
            // "read@NAME", "write@NAME": the same as "read:NAME", "write:NAME"
            r[3] = r[3].replaceFirst("@", ":");
        }
        if (r.length > 3) {
            // The token commands take a bare NAME as a fenced lock's; and
            // the spellings ftoken, ftrytoken, funlock (fenced:NAME)
            String fencedName = qualified(r[3]) ? r[3] : "fenced:" + r[3];
            switch (cmd) {
            case "ftoken":
                cmd = "locktoken";
                r[3] = fencedName;
                break;
            case "funlock":
                cmd = "unlock";
                r[3] = fencedName;
                break;
            case "ftrytoken":
            case "gettoken":
            case "locktoken":
            case "trytoken":
                r[3] = fencedName;
                break;
            default:
                break;
            }
        }
        RLock lock = r.length > 3 && !cmd.equals("whoami") && !cmd.equals("guide")
                && !cmd.equals("shutdown") ? lockOf(r[3]) : null;
        long t0 = nowUs();
        switch (cmd) {
        case "whoami":
            return client().getId() + ":" + Thread.currentThread().getId();
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
            boolean got = wait < 0 ? lock.tryLock()
                    : lease < 0 ? lock.tryLock(wait, TimeUnit.MILLISECONDS)
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
        case "locktoken": {
            RFencedLock f = fenced(lock, r[3]);
            long lease = Long.parseLong(r[4]);
            Long token = lease < 0 ? f.lockAndGetToken() : f.lockAndGetToken(lease, TimeUnit.MILLISECONDS);
            return token + " " + t0 + " " + nowUs();
        }
        case "trytoken": {
            RFencedLock f = fenced(lock, r[3]);
            long wait = Long.parseLong(r[4]);
            long lease = Long.parseLong(r[5]);
            Long token = wait < 0 ? f.tryLockAndGetToken()
                    : lease < 0 ? f.tryLockAndGetToken(wait, TimeUnit.MILLISECONDS)
                                : f.tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS);
            return token + " " + t0 + " " + nowUs();
        }
        case "gettoken":
            return String.valueOf(fenced(lock, r[3]).getToken());
        case "ftrytoken": // the token alone, or null
            return String.valueOf(fenced(lock, r[3]).tryLockAndGetToken(Long.parseLong(r[4]),
                    TimeUnit.MILLISECONDS));
        case "mutex":
            return mutex(lock, kindOf(r[3]), Integer.parseInt(r[4]), Long.parseLong(r[5]), r[6]);
        case "shutdown": { // the worker's group client: shut down, forgotten
            String g = group();
            if (g.isEmpty()) {
                throw new IllegalArgumentException("shutdown: only a GROUP.NAME worker's client");
            }
            RedissonClient c = CLIENTS.remove(g);
            LOCKS.keySet().removeIf(k -> k.startsWith(g + " "));
            if (c != null) {
                c.shutdown();
            }
            return "true";
        }
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

    private static String mutex(RLock lock, String kind, int iters, long lease, String key)
            throws Exception {
        RedissonClient redisson = client();
        RAtomicLong inside = redisson.getAtomicLong(key + ":inside");
        RAtomicLong readers = redisson.getAtomicLong(key + ":readers");
        RAtomicLong reads = redisson.getAtomicLong(key + ":reads");
        RBucket<String> counter = redisson.getBucket(key + ":counter", StringCodec.INSTANCE);
        RBucket<String> lastToken = redisson.getBucket(key + ":lasttoken", StringCodec.INSTANCE);
        RList<String> log = redisson.getList(key + ":log", StringCodec.INSTANCE);
        boolean shared = kind.equals("read");
        RFencedLock fencedLock = kind.equals("fenced") ? fenced(lock, kind) : null;
        int violations = 0;
        long maxWait = 0;
        long maxReaders = 0;
        for (int i = 0; i < iters; i++) {
            long t0 = nowUs();
            long token = 0;
            if (fencedLock != null) {
                Long t = lease < 0 ? fencedLock.lockAndGetToken()
                        : fencedLock.tryLockAndGetToken(60000, lease, TimeUnit.MILLISECONDS);
                if (t == null) {
                    throw new IllegalStateException("tryLockAndGetToken: no token within 60 s");
                }
                token = t;
            } else if (lease < 0) {
                lock.lock();
            } else {
                lock.lock(lease, TimeUnit.MILLISECONDS);
            }
            maxWait = Math.max(maxWait, nowUs() - t0);
            try {
                if (shared) {
                    maxReaders = Math.max(maxReaders, readers.incrementAndGet());
                    if (inside.get() != 0) {
                        violations++;
                    }
                    Thread.sleep(2);
                    reads.incrementAndGet();
                    readers.decrementAndGet();
                } else {
                    if (inside.incrementAndGet() != 1) {
                        violations++;
                    }
                    if (readers.get() != 0) {
                        violations++;
                    }
                    if (fencedLock != null) {
                        String last = lastToken.get();
                        if (last != null && Long.parseLong(last) >= token) {
                            violations++;
                        }
                        lastToken.set(Long.toString(token));
                    }
                    String v = counter.get();
                    long n = v == null ? 0 : Long.parseLong(v);
                    Thread.sleep(1);
                    counter.set(Long.toString(n + 1));
                    log.add("J");
                    if (inside.decrementAndGet() != 0) {
                        violations++;
                    }
                }
            } finally {
                lock.unlock();
            }
            // 1-8 ms of work outside the lock: others (both languages) get turns
            Thread.sleep(1 + ThreadLocalRandom.current().nextInt(8));
        }
        return iters + " " + violations + " " + maxWait + " " + maxReaders;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Agent REDIS_ADDRESS WATCHDOG_MS REDISSON_VERSION");
            System.exit(2);
        }
        // Anything else that prints (the guide's snippets, library warnings)
        // goes to stderr; stdout carries only replies.
        System.setOut(System.err);
        config = new Config();
        config.setLockWatchdogTimeout(Long.parseLong(args[1]));
        config.useSingleServer().setAddress(args[0]);
        VERSION = args[2];
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
