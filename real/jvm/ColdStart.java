/*
 * ColdStart: a small JDK-only HTTP service whose request latency is honestly slow on a fresh JVM
 * and fast once HotSpot has compiled its code, exposing Micrometer-named Prometheus metrics.
 *
 * It exists for epicenter's end-to-end "cold start after deploy" test: a few instances serve
 * load, some are restarted ("deployed"), and the detector must see their start time change and
 * their mean request latency stay far above their warm baseline while the JIT catches up.
 *
 * Why the warm-up is long, without any JIT flag
 * ---------------------------------------------
 * HotSpot compiles each method on its own, once that method's own counters pass a threshold. A
 * method with a hot loop gets compiled by C1 after about 60,000 iterations of that loop and by C2
 * after about 40,000 more (the tiered defaults Tier3BackEdgeThreshold and Tier4BackEdgeThreshold).
 * Until then it is interpreted, which for the loop below is about 40 times slower than C2 code.
 *
 * A /work request prices an order of L = 30,000 lines with ONE pricing rule: the next of M = 250
 * rules in a fixed, shuffled rotation (think of tenants served in turn, each with its own pricing
 * code). Every rule is the same source class, but each is defined by its own class loader, so the
 * JVM sees M distinct classes whose apply() methods are profiled and compiled one by one -- the
 * way a large service's many handlers, mappers and validators are. The arithmetic helpers the rules
 * call are shared, like library code, and are compiled within the first second; what stays slow is
 * each rule's own loop. A pass over the rules takes M / rate seconds (10 s at 25 requests/s).
 * Measured on the 2-core test machine, one instance alone at 25 requests/s:
 *   passes 1-2  every rule interpreted          13-18 ms mean latency, ~14.5 ms CPU per request
 *   pass 3      rules run C1 (profiling) code    3-4.5 ms
 *   passes 4-5  C2 compiles land                 1.3-4 ms (the C2 thread uses 0.2-0.4 of a core)
 *   pass 6 on   everything C2: warm              0.55-0.8 ms mean, ~1.1 ms CPU per request
 * More rules or a lower rate lengthen the cold phase; --lines scales the cost of a request.
 *
 * Allocation: each request builds a 16 KB order and a 4·L-byte array of line amounts (about
 * 140 KB per request), next to a 4 MB price catalogue that lives as long as the process. With a
 * small heap (-Xmx24m) that means a young collection every couple of seconds.
 *
 * Usage:
 *   java -XX:+UseG1GC -Xmx512m -cp DIR ColdStart --port P [--name NAME]
 *        [--rules M] [--lines L] [--threads T] [--prewarm PASSES]
 *   --prewarm PASSES runs at least PASSES × M requests in-process before listening, then more
 *   passes until one compiles nothing: a pre-warmed deploy (--prewarm 5 listens after ~18 s alone).
 *
 * Endpoints (127.0.0.1 only):
 *   GET /work     one priced order (JSON); timed as http_server_requests_seconds{uri="/work"}
 *   GET /metrics  Prometheus text 0.0.4 with Micrometer's names
 *   GET /healthz  200 "ok"
 *
 * Prints "listening on 127.0.0.1:P" on stdout once it serves. SIGTERM (or SIGINT) stops the
 * server from a shutdown hook; the JVM then exits with status 143 (130 for SIGINT), as any JVM does.
 */

import com.sun.management.GarbageCollectionNotificationInfo;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;

public final class ColdStart {

    // ------------------------------------------------------------------------------------------
    // Configuration
    // ------------------------------------------------------------------------------------------

    /** Command-line settings; the defaults are the measured ones described in the header. */
    static final class Settings {
        int port = -1;
        String name = "coldstart";
        int rules = 250;      // M: distinct rule classes, applied in rotation
        int lines = 30_000;   // L: order lines a rule prices per request
        int threads = 8;      // HTTP worker threads
        int prewarm = 0;      // passes over the rules run before listening (a pre-warmed deploy)

        static Settings parse(String[] args) {
            Settings s = new Settings();
            for (int i = 0; i < args.length; i++) {
                String flag = args[i];
                if (flag.equals("-h") || flag.equals("--help")) {
                    usage(null);
                }
                if (i + 1 >= args.length) {
                    usage("missing value after " + flag);
                }
                String value = args[++i];
                switch (flag) {
                    case "--port": s.port = number(flag, value, 1, 65535); break;
                    case "--name": s.name = value; break;
                    case "--rules": s.rules = number(flag, value, 1, 100_000); break;
                    case "--lines": s.lines = number(flag, value, 1, 100_000); break;
                    case "--threads": s.threads = number(flag, value, 1, 1024); break;
                    case "--prewarm": s.prewarm = number(flag, value, 0, 1_000); break;
                    default: usage("unknown option " + flag);
                }
            }
            if (s.port < 0) {
                usage("--port is required");
            }
            return s;
        }

        private static int number(String flag, String value, int min, int max) {
            try {
                int n = Integer.parseInt(value);
                if (n >= min && n <= max) {
                    return n;
                }
            } catch (NumberFormatException ignored) {
                // reported below
            }
            usage(flag + " wants an integer in " + min + ".." + max + ", got " + value);
            return 0; // not reached
        }

        private static void usage(String problem) {
            if (problem != null) {
                System.err.println("ColdStart: " + problem);
            }
            System.err.println("usage: java -XX:+UseG1GC -Xmx<heap> -cp <dir> ColdStart --port P [--name NAME]"
                    + " [--rules M] [--lines L] [--threads T] [--prewarm PASSES]");
            System.exit(problem == null ? 0 : 2);
        }
    }

    // ------------------------------------------------------------------------------------------
    // The work: pricing rules, each its own class
    // ------------------------------------------------------------------------------------------

    /** What the handler sees of a rule; loaded once, by the application class loader. */
    public interface Rule {
        /** Derives this rule's parameters (rates, thresholds, catalogue window) from its number. */
        void configure(int id);

        /**
         * Prices {@code net.length} order lines (the order's lines, repeated as needed), writes each
         * line's net amount into {@code net} and returns a checksum of the whole basket.
         */
        long apply(int[] order, int[] catalog, int[] net);
    }

    /**
     * Arithmetic shared by every rule, loaded once: like library code it is called from all
     * rules, so it is compiled within the first second and C2 inlines it into each rule later.
     * Amounts are in cents; percentages in basis points (1/100 of a percent).
     */
    public static final class Calc {
        private Calc() {
        }

        /** Field {@code f} (0..3) of order line {@code line}; the order length is a power of two. */
        public static int field(int[] order, int line, int f) {
            return order[(line * FIELDS + f) & (order.length - 1)];
        }

        /** Unit price of a SKU from the catalogue (power-of-two length). */
        public static int unitPrice(int[] catalog, int sku) {
            return catalog[sku & (catalog.length - 1)];
        }

        public static int clamp(int v, int lo, int hi) {
            return v < lo ? lo : (v > hi ? hi : v);
        }

        /** {@code amount} × {@code bp} basis points, rounded down (a shift instead of a division). */
        public static int bp(int amount, int bp) {
            return (int) (((long) amount * bp * 6871948L) >>> 36); // ≈ amount * bp / 10_000
        }

        /** Rounds cents to a multiple of {@code 1 << bits}. */
        public static int round(int cents, int bits) {
            int half = (1 << bits) >> 1;
            return ((cents + half) >> bits) << bits;
        }

        /** Volume discount in basis points: none below the break, then growing with quantity. */
        public static int volume(int qty, int brk, int step) {
            return qty < brk ? 0 : Math.min(2_500, (qty - brk + 1) * step);
        }

        /** Regional tax rate in basis points. */
        public static int taxRate(int region, int base) {
            return base + ((region & 7) << 6) - ((region >>> 3) & 63);
        }

        public static boolean flag(int flags, int bit) {
            return ((flags >>> bit) & 1) != 0;
        }

        /** Folds an amount into a running checksum. */
        public static int mix(int h, int v) {
            return Integer.rotateLeft(h ^ v, 5) * 0x9E3779B1;
        }

        public static int max(int a, int b) {
            return a >= b ? a : b;
        }
    }

    /** Fields per order line: SKU, quantity, region, flags. */
    static final int FIELDS = 4;

    /** Lines in a generated order (a rule walks them repeatedly); a power of two. */
    static final int ORDER_LINES = 1024;

    /** Catalogue size in prices (4 MB); each rule reads its own window of {@code 1 << WINDOW_BITS}. */
    static final int CATALOG_PRICES = 1 << 20;
    static final int WINDOW_BITS = 16;

    /**
     * One pricing rule. Never used directly: {@link RuleLoader} defines a fresh copy of this class
     * for every rule, so each copy's {@code apply} has its own invocation and loop counters and is
     * interpreted, profiled and compiled on its own schedule.
     */
    public static final class PricingRule implements Rule {
        private int id;
        private int salt;
        private int window;
        private int volumeBreak;
        private int volumeStep;
        private int taxBase;
        private int loyaltyBp;
        private int roundBits;

        public PricingRule() {
        }

        @Override
        public void configure(int id) {
            this.id = id;
            int h = Calc.mix(0x5bd1e995, id);
            this.salt = h;
            this.window = (id << WINDOW_BITS) & (CATALOG_PRICES - 1);
            this.volumeBreak = 4 + (h & 15);
            this.volumeStep = 20 + ((h >>> 4) & 63);
            this.taxBase = 500 + ((h >>> 10) & 1023);
            this.loyaltyBp = 100 + ((h >>> 20) & 255);
            this.roundBits = (h >>> 28) & 3;
        }

        @Override
        public long apply(int[] order, int[] catalog, int[] net) {
            int subtotal = 0;
            int discounts = 0;
            int taxes = 0;
            int shipping = 0;
            int check = salt;
            // The rule's one loop: its back-edge count is what makes HotSpot compile the rule.
            for (int line = 0; line < net.length; line++) {
                int sku = Calc.field(order, line, 0);
                int qty = Calc.clamp(Calc.field(order, line, 1) & 63, 1, 48);
                int region = Calc.field(order, line, 2);
                int flags = Calc.field(order, line, 3);

                // List price, then the best of volume discount, promotion and loyalty discount.
                int unit = Calc.unitPrice(catalog, window | ((sku ^ salt) & ((1 << WINDOW_BITS) - 1)));
                int gross = unit * qty;
                int volume = Calc.bp(gross, Calc.volume(qty, volumeBreak, volumeStep));
                int promo = Calc.flag(flags, 0) ? Calc.bp(gross, 1_000) : 0;
                int loyalty = Calc.flag(flags, 1) ? Calc.bp(gross - volume, loyaltyBp) : 0;
                int best = Calc.max(volume, Calc.max(promo, loyalty));
                int amount = Calc.round(gross - best, roundBits);

                // Tax by region, with exempt lines and a cap on the tax per line.
                int rate = Calc.flag(flags, 2) ? 0 : Calc.taxRate(region, taxBase);
                int tax = Calc.clamp(Calc.bp(amount, rate), 0, Calc.bp(gross, 2_500));

                // Shipping: free above a threshold, by weight class otherwise.
                int weight = Calc.clamp((sku >>> 8) & 31, 1, 30) * qty;
                int ship = amount > 20_000 ? 0 : Calc.round(Calc.clamp(weight * 15, 99, 4_999), 2);

                net[line] = amount;
                subtotal += amount;
                discounts += best;
                taxes += tax;
                shipping = Calc.max(shipping, ship);
                check = Calc.mix(Calc.mix(check, amount), Calc.mix(tax, ship ^ line));
            }
            long total = (long) subtotal + taxes + shipping;
            return (total << 20) ^ ((long) discounts << 4) ^ (check & 0xFFFFFL) ^ id;
        }
    }

    /** Binary name of the class copied once per rule. */
    private static final String RULE_CLASS = "ColdStart$PricingRule";

    /**
     * A class loader that defines its own copy of {@link PricingRule} from the class file bytes and
     * delegates every other name (the {@link Rule} interface, {@link Calc}, the JDK) to its parent.
     */
    static final class RuleLoader extends ClassLoader {
        private final byte[] classFile;

        RuleLoader(ClassLoader parent, byte[] classFile) {
            super("rule", parent);
            this.classFile = classFile;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!name.equals(RULE_CLASS)) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> copy = findLoadedClass(name);
                if (copy == null) {
                    copy = defineClass(name, classFile, 0, classFile.length);
                }
                if (resolve) {
                    resolveClass(copy);
                }
                return copy;
            }
        }
    }

    /** Loads {@code count} independent copies of the pricing rule. */
    static Rule[] loadRules(int count) throws Exception {
        byte[] classFile;
        try (InputStream in = ColdStart.class.getResourceAsStream(RULE_CLASS + ".class")) {
            if (in == null) {
                throw new IllegalStateException(RULE_CLASS + ".class not found next to ColdStart.class");
            }
            classFile = in.readAllBytes();
        }
        Rule[] rules = new Rule[count];
        for (int i = 0; i < count; i++) {
            Class<?> copy = new RuleLoader(ColdStart.class.getClassLoader(), classFile).loadClass(RULE_CLASS);
            Rule rule = (Rule) copy.getDeclaredConstructor().newInstance();
            rule.configure(i);
            rules[i] = rule;
        }
        return rules;
    }

    /**
     * The request's work. Requests go to the rules in a fixed shuffled rotation (think of tenants
     * served in turn, each with its own pricing code), so every rule runs once per pass of M
     * requests: all rules stay interpreted for the first passes and then compile within a pass or
     * two of one another.
     */
    static final class Pricing {
        private final Rule[] rules;
        private final int[] rotation;
        private final int lines;
        private final int[] catalog;
        private final AtomicLong sequence = new AtomicLong();

        Pricing(Rule[] rules, int lines) {
            this.rules = rules;
            this.lines = lines;
            this.rotation = new int[rules.length];
            for (int i = 0; i < rotation.length; i++) {
                rotation[i] = i;
            }
            Random shuffle = new Random(42); // the same rotation in every instance
            for (int i = rotation.length - 1; i > 0; i--) {
                int j = shuffle.nextInt(i + 1);
                int swap = rotation[i];
                rotation[i] = rotation[j];
                rotation[j] = swap;
            }
            // A 4 MB price list that lives as long as the process (it ends up in the old generation).
            this.catalog = new int[CATALOG_PRICES];
            for (int i = 0; i < catalog.length; i++) {
                catalog[i] = 99 + (Calc.mix(i, 0x2545F491) & 0x3FFF);
            }
        }

        /** Builds a random order, prices it with the next rule in the rotation, summarises it as JSON. */
        String price() {
            ThreadLocalRandom random = ThreadLocalRandom.current();
            int[] order = new int[ORDER_LINES * FIELDS];
            for (int i = 0; i < order.length; i++) {
                order[i] = random.nextInt();
            }
            int index = rotation[(int) (sequence.getAndIncrement() % rotation.length)];
            int[] net = new int[lines];
            long checksum = rules[index].apply(order, catalog, net);
            int largest = 0;
            for (int amount : net) {
                largest = Math.max(largest, amount);
            }
            return "{\"rule\":" + index + ",\"lines\":" + lines + ",\"largest_line_cents\":" + largest
                    + ",\"checksum\":\"" + Long.toHexString(checksum) + "\"}";
        }
    }

    // ------------------------------------------------------------------------------------------
    // Metrics: timers shaped like Micrometer's, written with Micrometer's Prometheus names
    // ------------------------------------------------------------------------------------------

    /**
     * A maximum over a sliding window, as Micrometer's TimeWindowMax keeps it: a ring of three
     * buckets, all updated on record, one of them cleared every window/3; reads return the bucket
     * cleared longest ago, i.e. the maximum over the last 2/3 to 3/3 of the window (40-60 s for
     * Micrometer's default window, the one-minute registry step).
     */
    static final class WindowMax {
        private static final int BUCKETS = 3;
        private final long rotateNanos;
        private final double[] ring = new double[BUCKETS];
        private int current;
        private long lastRotate = System.nanoTime();

        WindowMax(long windowNanos) {
            this.rotateNanos = windowNanos / BUCKETS;
        }

        synchronized void record(double value) {
            rotate();
            for (int i = 0; i < BUCKETS; i++) {
                if (value > ring[i]) {
                    ring[i] = value;
                }
            }
        }

        synchronized double poll() {
            rotate();
            return ring[current];
        }

        private void rotate() {
            long since = System.nanoTime() - lastRotate;
            if (since < rotateNanos) {
                return;
            }
            if (since >= rotateNanos * BUCKETS) {
                Arrays.fill(ring, 0.0);
                current = 0;
                lastRotate += since - since % rotateNanos;
                return;
            }
            while (since >= rotateNanos) {
                ring[current] = 0.0;
                current = (current + 1) % BUCKETS;
                since -= rotateNanos;
                lastRotate += rotateNanos;
            }
        }
    }

    /** Count, total seconds and windowed maximum of a timer, read consistently. */
    static final class Timer {
        private long count;
        private double totalSeconds;
        private final WindowMax max = new WindowMax(TimeUnit.MINUTES.toNanos(1));

        void record(double seconds) {
            synchronized (this) {
                count++;
                totalSeconds += seconds;
            }
            max.record(seconds);
        }

        /** {count, total seconds, max seconds}. */
        double[] snapshot() {
            synchronized (this) {
                return new double[] {count, totalSeconds, max.poll()};
            }
        }
    }

    /** Timers keyed by their label set (already rendered as {@code {k="v",...}}), sorted. */
    static final class TimerFamily {
        private final Map<String, Timer> timers = new TreeMap<>();

        Timer get(String labels) {
            synchronized (timers) {
                return timers.computeIfAbsent(labels, k -> new Timer());
            }
        }

        Map<String, Timer> copy() {
            synchronized (timers) {
                return new TreeMap<>(timers);
            }
        }
    }

    static final TimerFamily HTTP = new TimerFamily();
    static final TimerFamily GC_PAUSE = new TimerFamily();

    /** Renders labels in the given (alphabetical) order with Prometheus escaping. */
    static String labels(String... keyValues) {
        StringBuilder out = new StringBuilder("{");
        for (int i = 0; i < keyValues.length; i += 2) {
            if (i > 0) {
                out.append(',');
            }
            out.append(keyValues[i]).append("=\"");
            for (char ch : keyValues[i + 1].toCharArray()) {
                switch (ch) {
                    case '\\': out.append("\\\\"); break;
                    case '"': out.append("\\\""); break;
                    case '\n': out.append("\\n"); break;
                    default: out.append(ch);
                }
            }
            out.append('"');
        }
        return out.append('}').toString();
    }

    /** Labels of a /work request, as Spring Boot 2's WebMvcTags would tag it. */
    static String httpLabels(int status, String exception) {
        String outcome = status >= 500 ? "SERVER_ERROR" : status >= 400 ? "CLIENT_ERROR" : "SUCCESS";
        return labels("exception", exception, "method", "GET", "outcome", outcome,
                "status", Integer.toString(status), "uri", "/work");
    }

    /**
     * Subscribes to GC notifications and records stop-the-world pauses the way Micrometer's
     * JvmGcMetrics does: tags action, cause and gc; duration from GcInfo (whole milliseconds).
     * Concurrent phases (cause "No GC", ZGC/Shenandoah cycles) are not pauses and are skipped.
     */
    static void watchGarbageCollection() {
        for (GarbageCollectorMXBean bean : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (!(bean instanceof NotificationEmitter)) {
                continue;
            }
            ((NotificationEmitter) bean).addNotificationListener((notification, handback) -> {
                if (!GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(notification.getType())) {
                    return;
                }
                GarbageCollectionNotificationInfo info =
                        GarbageCollectionNotificationInfo.from((CompositeData) notification.getUserData());
                String cause = info.getGcCause();
                String gc = info.getGcName();
                boolean concurrent = "No GC".equals(cause) || gc.equals("Shenandoah Cycles") || gc.equals("ZGC Cycles")
                        || (gc.startsWith("GPGC") && !gc.endsWith("Pauses"));
                if (concurrent) {
                    return;
                }
                double seconds = info.getGcInfo().getDuration() / 1000.0;
                GC_PAUSE.get(labels("action", info.getGcAction(), "cause", cause, "gc", gc)).record(seconds);
            }, null, null);
        }
    }

    /** Writes families in Prometheus text format 0.0.4. */
    static final class Exposition {
        private final StringBuilder out = new StringBuilder(8192);

        void family(String name, String type, String help) {
            out.append("# HELP ").append(name).append(' ')
                    .append(help.replace("\\", "\\\\").replace("\n", "\\n")).append('\n');
            out.append("# TYPE ").append(name).append(' ').append(type).append('\n');
        }

        void sample(String name, String labels, double value) {
            out.append(name).append(labels).append(' ').append(format(value)).append('\n');
        }

        static String format(double value) {
            if (Double.isNaN(value)) {
                return "NaN";
            }
            if (Double.isInfinite(value)) {
                return value > 0 ? "+Inf" : "-Inf";
            }
            return Double.toString(value);
        }

        /** A Micrometer timer: the summary family (_count, _sum) and the separate _max gauge. */
        void timer(String name, String help, Map<String, Timer> timers) {
            if (timers.isEmpty()) {
                return; // Micrometer registers a timer on its first recording
            }
            List<double[]> values = new ArrayList<>();
            for (Timer timer : timers.values()) {
                values.add(timer.snapshot());
            }
            family(name, "summary", help);
            int i = 0;
            for (String labels : timers.keySet()) {
                sample(name + "_count", labels, values.get(i)[0]);
                sample(name + "_sum", labels, values.get(i)[1]);
                i++;
            }
            family(name + "_max", "gauge", help);
            i = 0;
            for (String labels : timers.keySet()) {
                sample(name + "_max", labels, values.get(i)[2]);
                i++;
            }
        }

        @Override
        public String toString() {
            return out.toString();
        }
    }

    static String scrape() {
        Exposition e = new Exposition();
        e.timer("http_server_requests_seconds", "Duration of HTTP server request handling", HTTP.copy());
        e.timer("jvm_gc_pause_seconds", "Time spent in GC pause", GC_PAUSE.copy());

        var runtime = ManagementFactory.getRuntimeMXBean();
        e.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch.");
        e.sample("process_start_time_seconds", "", runtime.getStartTime() / 1000.0);
        e.family("process_uptime_seconds", "gauge", "The uptime of the Java virtual machine");
        e.sample("process_uptime_seconds", "", runtime.getUptime() / 1000.0);

        var os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            double load = ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuLoad();
            e.family("process_cpu_usage", "gauge", "The \"recent cpu usage\" for the Java Virtual Machine process");
            e.sample("process_cpu_usage", "", load < 0 ? Double.NaN : load);
        }

        List<MemoryPoolMXBean> pools = ManagementFactory.getMemoryPoolMXBeans();
        String[][] memory = {
            {"jvm_memory_used_bytes", "The amount of used memory"},
            {"jvm_memory_committed_bytes", "The amount of memory in bytes that is committed for the Java virtual machine to use"},
            {"jvm_memory_max_bytes", "The maximum amount of memory in bytes that can be used for memory management"},
        };
        List<MemoryUsage> usages = new ArrayList<>();
        for (MemoryPoolMXBean pool : pools) {
            usages.add(pool.getUsage());
        }
        for (int m = 0; m < memory.length; m++) {
            e.family(memory[m][0], "gauge", memory[m][1]);
            for (int p = 0; p < pools.size(); p++) {
                MemoryUsage usage = usages.get(p);
                if (usage == null) {
                    continue; // pool no longer valid
                }
                String area = pools.get(p).getType() == MemoryType.HEAP ? "heap" : "nonheap";
                double value = m == 0 ? usage.getUsed() : m == 1 ? usage.getCommitted() : usage.getMax();
                e.sample(memory[m][0], labels("area", area, "id", pools.get(p).getName()), value);
            }
        }

        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        e.family("jvm_threads_live_threads", "gauge",
                "The current number of live threads including both daemon and non-daemon threads");
        e.sample("jvm_threads_live_threads", "", threads.getThreadCount());
        e.family("jvm_threads_daemon_threads", "gauge", "The current number of live daemon threads");
        e.sample("jvm_threads_daemon_threads", "", threads.getDaemonThreadCount());
        e.family("jvm_threads_peak_threads", "gauge",
                "The peak live thread count since the Java virtual machine started or peak was reset");
        e.sample("jvm_threads_peak_threads", "", threads.getPeakThreadCount());

        e.family("jvm_classes_loaded_classes", "gauge",
                "The number of classes that are currently loaded in the Java virtual machine");
        e.sample("jvm_classes_loaded_classes", "", ManagementFactory.getClassLoadingMXBean().getLoadedClassCount());
        return e.toString();
    }

    // ------------------------------------------------------------------------------------------
    // HTTP
    // ------------------------------------------------------------------------------------------

    static void respond(HttpExchange exchange, int status, String contentType, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", contentType);
        boolean head = exchange.getRequestMethod().equals("HEAD");
        exchange.sendResponseHeaders(status, head ? -1 : bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            if (!head) {
                out.write(bytes);
            }
        }
    }

    /** Drains the request body and answers 404/405 unless the path and method are exactly right. */
    static boolean accept(HttpExchange exchange, String path) throws IOException {
        try (InputStream in = exchange.getRequestBody()) {
            in.transferTo(OutputStream.nullOutputStream());
        }
        if (!exchange.getRequestURI().getPath().equals(path)) {
            respond(exchange, 404, "text/plain; charset=utf-8", "not found\n");
            return false;
        }
        String method = exchange.getRequestMethod();
        if (!method.equals("GET") && !method.equals("HEAD")) {
            exchange.getResponseHeaders().set("Allow", "GET, HEAD");
            respond(exchange, 405, "text/plain; charset=utf-8", "method not allowed\n");
            return false;
        }
        return true;
    }

    /** GET /work, timed from the handler's start until the response is closed. */
    static void work(HttpExchange exchange, Pricing pricing, String name) {
        long start = System.nanoTime();
        int status = 200;
        String exception = "none";
        try {
            if (!accept(exchange, "/work")) {
                return;
            }
            String body = "{\"instance\":\"" + name.replace("\\", "\\\\").replace("\"", "\\\"") + "\",\"result\":"
                    + pricing.price() + "}\n";
            respond(exchange, 200, "application/json", body);
        } catch (IOException e) {
            // The client went away mid-response: keep the status, tag the exception's class name.
            exception = e.getClass().getSimpleName();
        } catch (RuntimeException | Error e) {
            status = 500;
            exception = e.getClass().getSimpleName();
            try {
                respond(exchange, 500, "text/plain; charset=utf-8", "internal error\n");
            } catch (IOException ignored) {
                // nothing more to tell the client
            }
            System.err.println("ColdStart: /work failed: " + e);
        } finally {
            exchange.close();
        }
        HTTP.get(httpLabels(status, exception)).record((System.nanoTime() - start) / 1e9);
    }

    static void metrics(HttpExchange exchange) {
        try (exchange) {
            if (accept(exchange, "/metrics")) {
                respond(exchange, 200, "text/plain; version=0.0.4; charset=utf-8", scrape());
            }
        } catch (IOException ignored) {
            // the scraper went away
        }
    }

    static void health(HttpExchange exchange) {
        try (exchange) {
            if (accept(exchange, "/healthz")) {
                respond(exchange, 200, "text/plain; charset=utf-8", "ok");
            }
        } catch (IOException ignored) {
            // the prober went away
        }
    }

    /**
     * A pre-warmed deploy: runs passes over the rules on one thread before the server starts,
     * at least {@code minPasses} of them and then until a whole pass (and the pause after it)
     * finishes no compilation, for at most a minute. The pause after each pass matters: HotSpot
     * stops queueing compilations while its queue is long, so passes run back to back would
     * outrun the compilers and leave the instance half-compiled. Returns the passes run.
     */
    static int prewarm(Pricing pricing, int minPasses, int rules) throws InterruptedException {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        boolean measurable = jit != null && jit.isCompilationTimeMonitoringSupported();
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
        int passes = 0;
        while (true) {
            long before = measurable ? jit.getTotalCompilationTime() : -1;
            for (int r = 0; r < rules; r++) {
                pricing.price();
            }
            passes++;
            waitForQuietJit(jit);
            boolean quiet = measurable && jit.getTotalCompilationTime() == before;
            if (passes >= minPasses && (quiet || !measurable || System.nanoTime() > deadline)) {
                return passes;
            }
        }
    }

    /** Waits (at most 10 s) until no compilation has finished for 300 ms. */
    static void waitForQuietJit(CompilationMXBean jit) throws InterruptedException {
        if (jit == null || !jit.isCompilationTimeMonitoringSupported()) {
            Thread.sleep(1_000);
            return;
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        long last = jit.getTotalCompilationTime();
        int quietTicks = 0;
        while (quietTicks < 3 && System.nanoTime() < deadline) {
            Thread.sleep(100);
            long now = jit.getTotalCompilationTime();
            quietTicks = now == last ? quietTicks + 1 : 0;
            last = now;
        }
    }

    public static void main(String[] args) throws Exception {
        Settings settings = Settings.parse(args);
        // The JDK server drops keep-alive connections idle for 30 s, so a load generator that pools
        // many connections sees spurious failures when it reuses one. Keep them 5 minutes instead
        // (unless set with -D); the property is read when the first server is created.
        if (System.getProperty("sun.net.httpserver.idleInterval") == null) {
            System.setProperty("sun.net.httpserver.idleInterval", "300");
        }
        Pricing pricing = new Pricing(loadRules(settings.rules), settings.lines);
        watchGarbageCollection();
        if (settings.prewarm > 0) {
            long t0 = System.nanoTime();
            int passes = prewarm(pricing, settings.prewarm, settings.rules);
            System.err.printf("ColdStart %s: prewarmed with %d passes (%d requests) in %.1f s%n",
                    settings.name, passes, passes * settings.rules, (System.nanoTime() - t0) / 1e9);
        }

        AtomicInteger threadNumber = new AtomicInteger();
        ExecutorService workers = Executors.newFixedThreadPool(settings.threads, r -> {
            Thread t = new Thread(r, "http-" + settings.name + "-" + threadNumber.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", settings.port), 256);
        server.setExecutor(workers);
        server.createContext("/work", exchange -> work(exchange, pricing, settings.name));
        server.createContext("/metrics", ColdStart::metrics);
        server.createContext("/healthz", ColdStart::health);
        server.createContext("/", exchange -> {
            try (exchange) {
                respond(exchange, 404, "text/plain; charset=utf-8", "not found\n");
            }
        });

        // SIGTERM/SIGINT run shutdown hooks: close the listening socket, stop the workers.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.stop(0);
            workers.shutdownNow();
        }, "shutdown"));

        server.start();
        System.out.println("listening on 127.0.0.1:" + settings.port);
        System.out.flush();
    }
}
