#!/usr/bin/env python3
"""The fleet benchmark behind bench-fleet.sh: N small WAL databases in two
identical folder trees, one followed by `litectl replicate --dir`, the other
by Litestream's `dir:` configuration, each into its own bucket of one moto
S3 server reached through a counting proxy (every request counted per
bucket). Phases: the start (every database's first copy), an idle phase
(nothing commits), a load phase (5 % of the databases, the same ones in both
trees, each committing a few times a second). Measured per tool and phase:
CPU as % of one core (utime + stime of /proc/PID/stat), resident memory
(VmRSS now and VmHWM peak), threads, requests per hour (per idle database in
the idle phase), and the commit-to-durable lag p99 of the load phase's
commits (litectl: from its --json shipped events, each commit durable with
the first shipment whose last state was observed at or after it;
Litestream: from the LastModified of its level-0 LTX files in the bucket,
each commit durable with the first file written at or after it, which
counts a file begun before the commit as covering it: in Litestream's
favour). Prints a JSON report on stdout; progress on stderr."""
import argparse, http.client, http.server, json, os, random, socket, sqlite3, subprocess, sys, threading, time

def log(*a):
    print("fleet-bench:", *a, file=sys.stderr, flush=True)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def status(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None

class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
    def add(self, bucket):
        with self.lock:
            self.counts[bucket] = self.counts.get(bucket, 0) + 1
    def get(self, bucket):
        with self.lock:
            return self.counts.get(bucket, 0)

def start_proxy(upstream_port, counter):
    """A counting HTTP proxy in front of moto: each request counted by its bucket (path-style URLs)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *a):
            pass
        def relay(self):
            bucket = self.path.lstrip("/").split("/", 1)[0].split("?", 1)[0]
            counter.add(bucket)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = b""
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline(); break
                    chunks += self.rfile.read(size); self.rfile.readline()
                body = chunks
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
            if body is not None:
                headers["Content-Length"] = str(len(body))
            c = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
            c.request(self.command, self.path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            self.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            c.close()
        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return port

def make_tree(root, n):
    os.makedirs(root, exist_ok=True)
    for i in range(n):
        sub = os.path.join(root, "t%02d" % (i % 100))
        os.makedirs(sub, exist_ok=True)
        c = sqlite3.connect(os.path.join(sub, "tenant%05d.db" % i), isolation_level=None)
        c.execute("PRAGMA journal_mode=wal")
        c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, at REAL)")
        c.execute("INSERT INTO t(v, at) VALUES (?, ?)", ("tenant %d" % i, time.time()))
        c.close()

def db_path(root, i):
    return os.path.join(root, "t%02d" % (i % 100), "tenant%05d.db" % i)

class Phase:
    def __init__(self, procs):
        self.procs = procs
        self.t0 = time.time()
        self.cpu0 = {k: cpu_seconds(p.pid) for k, p in procs.items()}
    def end(self, counter, buckets):
        dt = time.time() - self.t0
        out = {}
        for k, p in self.procs.items():
            out[k] = {"cpu_percent": 100 * (cpu_seconds(p.pid) - self.cpu0[k]) / dt, "rss_kib": status(p.pid, "VmRSS"),
                      "peak_kib": status(p.pid, "VmHWM"), "threads": status(p.pid, "Threads"), "seconds": dt}
        return out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--litectl", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--databases", type=int, default=10000)
    ap.add_argument("--active", type=float, default=0.05)
    ap.add_argument("--commits-per-second", type=float, default=3)
    ap.add_argument("--idle-seconds", type=float, default=120)
    ap.add_argument("--load-seconds", type=float, default=120)
    ap.add_argument("--start-timeout", type=float, default=3600)
    a = ap.parse_args()
    t, n = a.tmp, a.databases
    env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
    lsenv = {k: v for k, v in env.items() if k != "AWS_CA_BUNDLE"}
    report = {"databases": n}

    log(f"generating {n} databases twice")
    g0 = time.time()
    make_tree(f"{t}/lc", n)
    make_tree(f"{t}/ls", n)
    log(f"generated in {time.time() - g0:.0f} s")

    moto_port = free_port()
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(moto_port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", moto_port), timeout=0.2).close(); break
        except OSError:
            time.sleep(0.1)
    counter = Counter()
    proxy = start_proxy(moto_port, counter)
    endpoint = f"http://127.0.0.1:{proxy}"
    import boto3
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{moto_port}", region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    for b in ("lcfleet", "lsfleet"):
        s3.create_bucket(Bucket=b)

    subprocess.run([a.litectl, "repo", "init", "s3://lcfleet/fleet", "--endpoint", endpoint], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    version = subprocess.run(["litestream", "version"], capture_output=True, text=True).stdout.strip()
    report["litestream_version"] = version
    config = f"{t}/litestream.yml"
    with open(config, "w") as f:
        f.write(f"""dbs:
  - dir: {t}/ls
    pattern: "*.db"
    recursive: true
    watch: true
    replica:
      type: s3
      bucket: lsfleet
      path: fleet
      endpoint: {endpoint}
      region: us-east-1
      force-path-style: true
      sync-interval: 1s
""")
    events = f"{t}/litectl-events.jsonl"
    lc = subprocess.Popen([a.litectl, "replicate", "--dir", f"{t}/lc", "--watch", "--repo", "s3://lcfleet/fleet", "--endpoint", endpoint,
                           "--json"], stdout=open(events, "w"), stderr=open(f"{t}/litectl.err", "w"), env=env)
    ls = subprocess.Popen(["litestream", "replicate", "-config", config], stdout=open(f"{t}/litestream.log", "w"),
                          stderr=subprocess.STDOUT, env=lsenv)
    procs = {"litectl": lc, "litestream": ls}
    start = Phase(procs)
    # The start: litectl's every database started; then both buckets' requests quiet for 10 s.
    deadline = time.time() + a.start_timeout
    def started():
        with open(events) as f:
            return sum(1 for line in f if '"event":"started"' in line)
    while time.time() < deadline and started() < n:
        if lc.poll() is not None or ls.poll() is not None:
            log("a follower exited during the start"); sys.exit(1)
        time.sleep(1)
    report["litectl_start_seconds"] = time.time() - start.t0
    # Then both quiet: fewer requests in 10 s than one per 50 databases (litectl's folder
    # lease is renewed every 10 s; Litestream's own compactions go on for a while), or 60 s.
    settle_until = time.time() + 60
    while time.time() < min(deadline, settle_until):
        before = (counter.get("lcfleet"), counter.get("lsfleet"))
        time.sleep(10)
        after = (counter.get("lcfleet"), counter.get("lsfleet"))
        if all(b - a <= n / 50 + 5 for a, b in zip(before, after)):
            break
    report["start"] = start.end(counter, None)
    report["start"]["requests"] = {"litectl": counter.get("lcfleet"), "litestream": counter.get("lsfleet")}
    log(f"both started in {time.time() - start.t0:.0f} s (litectl {report['litectl_start_seconds']:.0f} s)")

    log(f"idle phase, {a.idle_seconds:.0f} s")
    r0 = {"litectl": counter.get("lcfleet"), "litestream": counter.get("lsfleet")}
    idle = Phase(procs)
    time.sleep(a.idle_seconds)
    report["idle"] = idle.end(counter, None)
    for k, b in (("litectl", "lcfleet"), ("litestream", "lsfleet")):
        req = counter.get(b) - r0[k]
        report["idle"][k]["requests"] = req
        report["idle"][k]["requests_per_db_hour"] = req * 3600 / report["idle"][k]["seconds"] / n

    active = sorted(random.Random(7).sample(range(n), max(1, int(n * a.active))))
    log(f"load phase, {a.load_seconds:.0f} s: {len(active)} databases at {a.commits_per_second}/s each")
    r0 = {"litectl": counter.get("lcfleet"), "litestream": counter.get("lsfleet")}
    commits = {"litectl": [], "litestream": []}  # (db index, commit time)
    stop = threading.Event()
    def writer(tool, root, shard):
        conns = {i: sqlite3.connect(db_path(root, i), isolation_level=None) for i in shard}
        for c in conns.values():
            c.execute("PRAGMA synchronous=NORMAL")
        period = 1 / a.commits_per_second
        nxt = {i: time.time() + random.random() * period for i in shard}
        while not stop.is_set():
            i = min(nxt, key=nxt.get)
            delay = nxt[i] - time.time()
            if delay > 0:
                time.sleep(min(delay, 0.05)); continue
            conns[i].execute("INSERT INTO t(v, at) VALUES (?, ?)", ("x" * 100, time.time()))
            commits[tool].append((i, time.time()))
            nxt[i] += period
        for c in conns.values():
            c.close()
    load = Phase(procs)
    threads = [threading.Thread(target=writer, args=(tool, f"{t}/{d}", active[k::2]))
               for tool, d in (("litectl", "lc"), ("litestream", "ls")) for k in range(2)]
    for th in threads:
        th.start()
    time.sleep(a.load_seconds)
    stop.set()
    for th in threads:
        th.join()
    time.sleep(5)  # the last commits shipped
    report["load"] = load.end(counter, None)
    for k, b in (("litectl", "lcfleet"), ("litestream", "lsfleet")):
        report["load"][k]["requests"] = counter.get(b) - r0[k]
        report["load"][k]["requests_per_hour"] = report["load"][k]["requests"] * 3600 / report["load"][k]["seconds"]
    report["load"]["commits"] = {k: len(v) for k, v in commits.items()}

    # Lag, litectl: its shipped events.
    shipped = {}
    with open(events) as f:
        for line in f:
            if '"event":"shipped"' not in line:
                continue
            e = json.loads(line)
            if e["states"]:
                shipped.setdefault(e["database"], []).append((e["states"][-1]["observed_unix"], e["durable_unix"]))
    lags = []
    for i, ct in commits["litectl"]:
        p = db_path(f"{t}/lc", i)
        covering = [d for (o, d) in shipped.get(p, []) if o >= ct]
        lags.append(min(covering) - ct if covering else float("inf"))
    # Lag, Litestream: the LastModified of the level-0 LTX files of a sample of the active databases.
    sample = active[:min(40, len(active))]
    lslags = []
    for i in sample:
        rel = os.path.relpath(db_path(f"{t}/ls", i), f"{t}/ls")
        times, token = [], None
        while True:
            kw = dict(Bucket="lsfleet", Prefix=f"fleet/{rel}/")
            if token:
                kw["ContinuationToken"] = token
            r = s3.list_objects_v2(**kw)
            times += [o["LastModified"].timestamp() for o in r.get("Contents", []) if "/0/" in o["Key"] or "/0000/" in o["Key"]]
            if not r.get("IsTruncated"):
                break
            token = r["NextContinuationToken"]
        times.sort()
        for j, ct in commits["litestream"]:
            if j == i:
                later = [x for x in times if x >= ct]
                lslags.append(later[0] - ct if later else float("inf"))
    def p99(xs):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else None
    report["lag_p99"] = {"litectl": p99(lags), "litestream": p99(lslags)}
    report["lag_samples"] = {"litectl": len(lags), "litestream": len(lslags)}

    for p in (lc, ls):
        p.terminate()
    for p in (lc, ls):
        try:
            p.wait(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
    report["litectl_exit_status"] = lc.returncode
    moto.terminate()
    json.dump(report, sys.stdout, indent=1, default=lambda x: None)

if __name__ == "__main__":
    children = []
    _popen = subprocess.Popen
    def tracked(*a, **k):
        p = _popen(*a, **k)
        children.append(p)
        return p
    subprocess.Popen = tracked
    import signal
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    try:
        main()
    finally:
        for p in children:
            if p.poll() is None:
                p.kill()
