#!/usr/bin/env python3
"""The driver of bench-moments.sh: moments of a database read straight from
the repository by litectl (`repo:NAME@WHEN`) beside Litestream's VFS
(PyPI litestream-vfs, loaded into the sqlite3 shell), both over one moto S3
server. One generated WAL database, copied twice; one copy followed by
`litectl replicate`, the other by Litestream (sync-interval 1s); one writer
updates the same customers (seeded) in both copies in lockstep for
--write-seconds (about 0.1 % of the rows of `customers` a minute, balance
and notes, the audit trigger firing). Both followers are stopped after the
writes. Then every measured command runs as a fresh process (cold caches:
litectl's are in memory, the VFS's too, its hydration is off), in rounds
(one untimed, then --rounds), each round running every command once in a
shuffled order. Per command: median wall time, peak resident memory (the
child's ru_maxrss: never below the forked Python's own, about 37 MB, before exec), and the requests and bytes it fetched, counted by a
counting proxy (s3proxy.py) in front of moto that every moment reader and
the VFS go through. The baselines that restore (`restore --at`, then `diff`
or `check` of the files) talk to moto directly: the proxy's cost is not
theirs, which favours them. Point lookups and aggregates must print the
same rows through both tools, and the diffs of the moments the same lines
as the diffs of the restored files: else the run fails (exit 1).
Prints one JSON object (the report) on stdout; progress on stderr."""
import argparse, json, os, random, shutil, signal, sqlite3, statistics, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3proxy  # noqa: E402
import s3server  # noqa: E402


def log(*a):
    print("moments-bench:", *a, file=sys.stderr, flush=True)


def fail(message):
    log("FAILED:", message)
    sys.exit(1)


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def run_measured(cmd, env, stdin=None, cwd=None, timeout=None):
    """Runs `cmd`; its wall time, peak resident KiB, stdout, stderr and status
    (None when it ran past `timeout` seconds and was killed)."""
    start = time.time()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def pump(stream, into):
        into.append(stream.read())
    o, e = [], []
    threads = [threading.Thread(target=pump, args=(p.stdout, o)), threading.Thread(target=pump, args=(p.stderr, e))]
    for t in threads:
        t.start()
    if stdin is not None:
        p.stdin.write(stdin.encode())
        p.stdin.close()
    killed = threading.Event()

    def watchdog():
        if not done.wait(timeout):
            killed.set()
            p.kill()
    done = threading.Event()
    if timeout:
        threading.Thread(target=watchdog, daemon=True).start()
    _, status, usage = os.wait4(p.pid, 0)
    done.set()
    took = time.time() - start
    for t in threads:
        t.join()
    p.returncode = None if killed.is_set() else os.waitstatus_to_exitcode(status)
    return took, usage.ru_maxrss, o[0].decode(errors="replace"), e[0].decode(errors="replace"), p.returncode


class Bench:
    def __init__(self, a):
        self.a = a
        self.t = a.tmp
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
        # Litestream's aws-sdk client refuses a custom CA bundle: none for it.
        self.lsenv = {k: v for k, v in self.env.items() if k != "AWS_CA_BUNDLE"}
        self.report = {}

    # -- the server and the proxy ------------------------------------------------
    def start_moto(self):
        self.server = s3server.Moto(self.env)
        self.moto_endpoint, self.s3, self.moto = self.server.endpoint, self.server.s3, self.server.process
        self.proxy = s3proxy.start(self.server.port)

    def objects(self, prefix):
        return self.server.objects(prefix)

    # -- the database, the followers and the writer -----------------------------
    def make_databases(self):
        base = f"{self.t}/base.db"
        log(f"generating {self.a.rows:,} rows")
        subprocess.run([sys.executable, self.a.generate, base, "--rows", str(self.a.rows), "--journal", "wal"], check=True,
                       stdout=subprocess.DEVNULL)
        self.report["database_bytes"] = os.path.getsize(base)
        c = sqlite3.connect(base)
        try:
            sizes = c.execute("SELECT name, sum(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_schema WHERE type = 'table') "
                              "GROUP BY name ORDER BY 2 DESC").fetchall()
            self.largest = sizes[0][0]
        except sqlite3.OperationalError:  # no dbstat in this build
            self.largest = "customers"
        columns = c.execute(f'SELECT name, type FROM pragma_table_info(?)', (self.largest,)).fetchall()
        self.columns = [n for n, _ in columns]
        numeric = [n for n, kind in columns if kind.upper() in ("REAL", "INTEGER")]
        self.sum_column = "balance" if self.largest == "customers" else (numeric or [columns[0][0]])[-1]
        self.customers = c.execute("SELECT max(id) FROM customers").fetchone()[0]
        self.report["page_size"] = c.execute("PRAGMA page_size").fetchone()[0]
        c.close()
        self.report["largest_table"] = self.largest
        self.a_db, self.b_db = f"{self.t}/a.db", f"{self.t}/b.db"
        shutil.copyfile(base, self.a_db)
        shutil.copyfile(base, self.b_db)
        os.unlink(base)

    def start_followers(self):
        url = "s3://bench/litectl"
        subprocess.run([self.a.litectl, "repo", "init", url, "--endpoint", self.moto_endpoint], check=True, env=self.env,
                       stdout=subprocess.DEVNULL)
        events = f"{self.t}/litectl-events.jsonl"
        out = open(events, "a")
        log("litectl replicate: first copy")
        self.lc = subprocess.Popen([self.a.litectl, "replicate", self.a_db, "--repo", url, "--endpoint", self.moto_endpoint, "--json"],
                                   stdout=out, stderr=out, env=self.env)
        self.wait_for(lambda: '"event":"started"' in open(events).read(), "litectl's first state", self.lc)
        self.ls_config = f"{self.t}/litestream.yml"
        with open(self.ls_config, "w") as f:
            f.write(f"""dbs:
  - path: {self.b_db}
    replicas:
      - type: s3
        bucket: bench
        path: litestream
        endpoint: {self.moto_endpoint}
        region: us-east-1
        force-path-style: true
        sync-interval: 1s
""")
        log("litestream replicate: first copy")
        lslog = open(f"{self.t}/litestream.log", "a")
        self.ls = subprocess.Popen(["litestream", "replicate", "-config", self.ls_config], stdout=lslog, stderr=lslog, env=self.lsenv)
        self.wait_for(lambda: any(True for _ in self.objects("litestream/0000/")), "Litestream's first LTX file", self.ls)
        time.sleep(3)

    def wait_for(self, ready, what, process, timeout=1800):
        end = time.time() + timeout
        while time.time() < end:
            if ready():
                return
            if process.poll() is not None:
                fail(f"{what}: the follower exited ({process.returncode})")
            time.sleep(0.2)
        fail(f"{what} did not come within {timeout} s")

    def write(self):
        """Lockstep updates of the same customers in both copies, a commit every 0.2 s."""
        per_minute = max(5, self.customers // 1000)  # about 0.1 % of customers a minute
        per_commit = max(1, round(per_minute / 300))
        rng = random.Random(7)
        conns = [sqlite3.connect(p, isolation_level=None, timeout=30) for p in (self.a_db, self.b_db)]
        self.t0 = time.time()
        end = self.t0 + self.a.write_seconds
        commits = 0
        changed = set()
        while time.time() < end:
            ids = [rng.randint(1, self.customers) for _ in range(per_commit)]
            values = [(rng.random() * 1e6, "moment bench %d" % rng.randrange(10**9), i) for i in ids]
            for c in conns:
                c.execute("BEGIN IMMEDIATE")
                c.executemany("UPDATE customers SET balance = ?, notes = ? WHERE id = ?", values)
                c.execute("COMMIT")
            changed.update(ids)
            commits += 1
            time.sleep(max(0, self.t0 + commits * 0.2 - time.time()))
        self.t1 = time.time()
        for c in conns:
            c.close()
        self.report["moments"] = {"30s_back": iso(self.t1 - 30), "T1": iso(self.t0 + 10), "T2": iso(self.t0 + 70)}
        self.report["writes"] = {"seconds": self.t1 - self.t0, "commits": commits, "rows_per_commit": per_commit,
                                 "customers_changed": len(changed)}

    def stop_followers(self):
        time.sleep(5)  # both ship the last commits (sync-interval 1s; litectl's --interval 1)
        for p in (self.lc, self.ls):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.report["bucket_bytes"] = {"litectl": sum(o["Size"] for o in self.objects("litectl/")),
                                       "litestream": sum(o["Size"] for o in self.objects("litestream/"))}

    # -- the measured commands -----------------------------------------------------
    def commands(self):
        L, P, M = self.a.litectl, self.proxy.endpoint, self.moto_endpoint
        viaproxy = ["--repo", "s3://bench/litectl", "--endpoint", P]
        direct = ["--repo", "s3://bench/litectl", "--endpoint", M]
        back, m1, m2 = (self.report["moments"][k] for k in ("30s_back", "T1", "T2"))
        vfs_env = dict(self.lsenv, LITESTREAM_REPLICA_URL=f"s3://bench/litestream?endpoint={P}&region=us-east-1&forcePathStyle=true")
        t = self.t
        q = lambda sql: ["--format", "tsv", "--no-headers", sql]

        def vfs(sql, at=None):
            script = f".load {self.a.vfs}\n.open file:///b.db?vfs=litestream\n"
            if at:
                script += f"PRAGMA litestream_time = '{at}';\n"
            return dict(cmd=["sqlite3", "-batch", "-tabs"], stdin=script + sql + ";\n", env=vfs_env)

        def lc(args):
            return dict(cmd=[L, *args], env=self.env)

        def sh(script):
            return dict(cmd=["bash", "-c", script], env=self.env)

        # Values as hex or quote(): the same text through both shells.
        key = "SELECT id, hex(name), hex(email), quote(balance), hex(notes) FROM customers WHERE id = {id}"
        # Every value of every row read: length() of a bare column would skip
        # a blob's overflow pages, of a CAST does not.
        lengths = " + ".join(f'ifnull(length(CAST("{c}" AS BLOB)), 0)' for c in self.columns)
        agg = f'SELECT count(*), quote(sum("{self.sum_column}")), sum({lengths}) FROM "{self.largest}"'
        rm = f"rm -f {t}/r1.db {t}/r2.db {t}/rc.db"
        groups = {
            "point lookup, latest": {"litectl": lc(["query", *viaproxy, "repo:a.db@latest", *q(key)]), "Litestream VFS": vfs(key)},
            "point lookup, 30 s back": {"litectl": lc(["query", *viaproxy, f"repo:a.db@{back}", *q(key)]),
                                        "Litestream VFS": vfs(key, back)},
            "full-table aggregate": {"litectl": lc(["query", *viaproxy, "repo:a.db@latest", *q(agg)]), "Litestream VFS": vfs(agg)},
            "diff --summary of two moments 60 s apart": {
                "litectl": lc(["diff", "--summary", *viaproxy, f"repo:a.db@{m1}", f"repo:a.db@{m2}"]),
                "restore both + diff": sh(f"{rm}; {L} restore {' '.join(direct)} latest --db a.db --at {m1} {t}/r1.db && "
                                         f"{L} restore {' '.join(direct)} latest --db a.db --at {m2} {t}/r2.db && "
                                         f"{L} diff --summary {t}/r1.db {t}/r2.db; s=$?; {rm}; exit $s")},
            "check of a moment": {
                "litectl": lc(["check", *viaproxy, f"repo:a.db@{m2}"]),
                "restore --at + check": sh(f"{rm}; {L} restore {' '.join(direct)} latest --db a.db --at {m2} {t}/rc.db && "
                                           f"{L} check {t}/rc.db; s=$?; {rm}; exit $s")},
        }
        return groups

    def measure(self):
        groups = self.commands()
        rng = random.Random(11)
        results = {g: {n: [] for n in cmds} for g, cmds in groups.items()}
        flat = [(g, n) for g, cmds in groups.items() for n in cmds]
        for r in range(self.a.rounds + 1):
            rng.shuffle(flat)
            ident = rng.randint(1, self.customers)
            outputs = {}
            timed_out = set()
            for g, n in flat:
                c = groups[g][n]
                cmd = [x.replace("{id}", str(ident)) for x in c["cmd"]]
                stdin = c.get("stdin", "").replace("{id}", str(ident)) if "stdin" in c else None
                self.proxy.counts.reset()
                took, peak, out, err, status = run_measured(cmd, c["env"], stdin=stdin, timeout=self.a.timeout)
                counted = self.proxy.counts.snapshot()
                if status is None:  # past --timeout: its time is a lower bound
                    log(f"round {r}: {g}, {n}: stopped after {took:.0f} s (--timeout)")
                    if r > 0:
                        results[g][n].append({"seconds": took, "peak_kib": peak, "timed_out": True, **counted})
                    timed_out.add(g)
                    continue
                expected = 1 if g.startswith("diff") else 0  # a diff finds the writer's changes; the check, none
                if status != expected:
                    fail(f"{g}, {n}: exit {status}: {err.strip()[-600:]}")
                outputs[(g, n)] = out
                log(f"round {r}: {g}, {n}: {took:.2f} s, {counted['response_bytes'] / 1e6:.2f} MB in {counted['requests']} requests, "
                    f"peak {peak / 1024:.0f} MiB")
                if r > 0:
                    results[g][n].append({"seconds": took, "peak_kib": peak, **counted})
            for g, cmds in groups.items():
                if g in timed_out:
                    continue
                names = list(cmds)
                a, b = outputs[(g, names[0])], outputs[(g, names[1])]
                if g.startswith("diff"):
                    a, b = a.replace(f"repo:a.db@{self.report['moments']['T1']}", "A").replace(f"repo:a.db@{self.report['moments']['T2']}", "B"), \
                        b.replace(f"{self.t}/r1.db", "A").replace(f"{self.t}/r2.db", "B")
                if g.startswith("check"):
                    continue  # each names its own database
                if a != b:
                    fail(f"{g}: litectl printed {a[:300]!r}, the other {b[:300]!r}")
                if not a.strip():
                    fail(f"{g}: no output")
        self.report["runs"] = results
        self.report["rounds"] = self.a.rounds

    def changed_pages(self):
        """The pages that differ between the two restored moments of the diff (pagediff.py)."""
        t, L, M = self.t, self.a.litectl, self.moto_endpoint
        m = self.report["moments"]
        for out, at in ((f"{t}/p1.db", m["T1"]), (f"{t}/p2.db", m["T2"])):
            subprocess.run([L, "restore", "--repo", "s3://bench/litectl", "--endpoint", M, "latest", "--db", "a.db", "--at", at, out],
                           check=True, env=self.env, stdout=subprocess.DEVNULL)
        d = json.loads(subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "pagediff.py"), f"{t}/p1.db", f"{t}/p2.db"],
                                      check=True, capture_output=True, text=True).stdout)
        self.report["pagediff"] = d
        c1, c2 = sqlite3.connect(f"{t}/p1.db"), sqlite3.connect(f"{t}/p2.db")
        self.report["rows"] = sum(c1.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]
                                  for (n,) in c1.execute("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall())
        c1.close(), c2.close()
        for f in ("p1.db", "p2.db"):
            os.unlink(f"{t}/{f}")

    def run(self):
        self.start_moto()
        try:
            self.make_databases()
            self.start_followers()
            log(f"writing for {self.a.write_seconds} s in lockstep")
            self.write()
            self.stop_followers()
            self.changed_pages()
            self.measure()
            self.report["litestream_version"] = subprocess.run(["litestream", "version"], capture_output=True, text=True).stdout.strip()
            self.report["sqlite3_version"] = subprocess.run(["sqlite3", "--version"], capture_output=True, text=True).stdout.split()[0]
        finally:
            self.proxy.stop()
            for p in (getattr(self, "lc", None), getattr(self, "ls", None), self.moto):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
        json.dump(self.report, sys.stdout, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--litectl", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--generate", required=True)
    ap.add_argument("--vfs", required=True, help="the litestream-vfs extension, without its .so")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--write-seconds", type=float, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900, help="seconds a command may run before it is stopped")
    a = ap.parse_args()
    if a.write_seconds < 75:
        sys.exit("moments-bench: --write-seconds must be 75 or more (the diff's moments are 60 s apart, 10 s in)")
    Bench(a).run()


if __name__ == "__main__":
    main()
