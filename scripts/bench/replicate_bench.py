#!/usr/bin/env python3
"""The driver of bench-replicate.sh: litectl replicate beside Litestream on one
moto S3 server, the same write load (Tests/TestSupport/walwriter.py) driven
into two copies of a generated WAL database in lockstep. Measured:

- lag, commit to durable in the bucket, for every commit of the main phase: the
  writer logs each commit's time and -wal position (from the -shm); a monitor
  lists the bucket every 0.1 s and notes when each object first appears (the
  same for both tools, so both lags carry the same up-to-0.1 s of polling);
  a commit is durable once the first object holding it is listed: for
  litectl the segment whose state covers its -wal frame (the follower's
  --json events say which states a segment holds), for Litestream the level-0
  LTX file whose header's -wal range covers it;
- the recovery point after a SIGKILL of litectl's follower: how old the oldest
  commit not yet durable was at the kill;
- the bucket's bytes under each tool's prefix after the run;
- restore time of the latest state and of a moment halfway through the main
  phase (medians of alternated runs), each restored database checked against
  the writer's own digest of that commit;
- each follower's CPU seconds during the main phase, and its peak memory;
- the writer's commits per second alone on a database with no follower, with
  litectl's (on its defaults) and with Litestream's (medians of rounds alternated);
- the application's -wal (its largest size after a commit, and its size after the
  last) under a writer of 2 KB rows every 2 ms that relies on SQLite's automatic
  checkpoint, with no follower, with litectl's on its defaults and with
  Litestream's (one run each, one after the other).
Prints one JSON object (the report) on stdout; progress on stderr.
"""
import argparse, datetime, json, os, random, shutil, signal, statistics, struct, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3server  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def peak_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None


class Bench:
    def __init__(self, a):
        self.a = a
        self.t = a.tmp
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
        # Litestream's aws-sdk client refuses a custom CA bundle: none for it.
        self.lsenv = {k: v for k, v in self.env.items() if k != "AWS_CA_BUNDLE"}
        self.report = {}

    # -- the S3 server ---------------------------------------------------------
    def start_moto(self):
        self.server = s3server.Moto(self.env)
        self.endpoint, self.s3, self.moto = self.server.endpoint, self.server.s3, self.server.process

    def objects(self, prefix):
        return self.server.objects(prefix)

    # -- databases and followers -----------------------------------------------
    def make_base(self):
        base = f"{self.t}/base.db"
        subprocess.run([sys.executable, self.a.generate, base, "--rows", str(self.a.rows), "--journal", "wal"], check=True,
                       stdout=subprocess.DEVNULL)
        # The writer's own tables and first rows, in the copy both tools get.
        subprocess.run(["/usr/bin/python3", self.a.writer, "write", base, f"{self.t}/base.log", "--commits", "1",
                        "--initial-rows", "2000"], check=True, stdout=subprocess.DEVNULL)
        for f in ("-wal", "-shm"):
            assert not os.path.exists(base + f)
        self.base = base
        self.report["database_bytes"] = os.path.getsize(base)

    def copy(self, name):
        path = f"{self.t}/{name}"
        for f in (path, path + "-wal", path + "-shm"):
            if os.path.exists(f):
                os.unlink(f)
        shutil.copyfile(self.base, path)
        return path

    def start_litectl(self, db, prefix, events, extra=()):
        url = f"s3://bench/{prefix}"
        subprocess.run([self.a.litectl, "repo", "init", url, "--endpoint", self.endpoint], check=True, env=self.env)
        out = open(events, "a")
        p = subprocess.Popen([self.a.litectl, "replicate", db, "--repo", url, "--endpoint", self.endpoint, "--json", *extra],
                             stdout=out, stderr=out, env=self.env)
        self.wait_for(lambda: '"event":"started"' in open(events).read(), "litectl's first state")
        return p

    def litestream_config(self, db, prefix):
        path = f"{self.t}/{prefix}.yml"
        with open(path, "w") as f:
            f.write(f"""dbs:
  - path: {db}
    replicas:
      - type: s3
        bucket: bench
        path: {prefix}
        endpoint: {self.endpoint}
        region: us-east-1
        force-path-style: true
        sync-interval: 1s
""")
        return path

    def start_litestream(self, db, prefix, logfile):
        config = self.litestream_config(db, prefix)
        out = open(logfile, "a")
        p = subprocess.Popen(["litestream", "replicate", "-config", config], stdout=out, stderr=out, env=self.lsenv)
        self.wait_for(lambda: any(True for _ in self.objects(prefix + "/0000/")), "Litestream's first LTX file")
        return p, config

    def wait_for(self, ready, what, timeout=180):
        end = time.time() + timeout
        while time.time() < end:
            if ready():
                return
            time.sleep(0.2)
        sys.exit(f"bench-replicate: {what} did not come within {timeout} s")

    @staticmethod
    def stop(p, sig=signal.SIGTERM, timeout=120):
        p.send_signal(sig)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            return p.wait()

    # -- the monitor -------------------------------------------------------------
    def monitor(self, stop):
        """Notes when each litectl segment and each Litestream level-0 LTX file first appears."""
        self.seen = {}       # key -> first time listed
        self.ltx = []        # (first seen, salt1, salt2, first frame, last frame)
        last_ltx = ""
        while not stop.is_set():
            now = time.time()
            for o in self.objects("litectl/segments/"):
                self.seen.setdefault(o["Key"], now)
            r = self.s3.list_objects_v2(Bucket="bench", Prefix="litestream/0000/", StartAfter=last_ltx)
            for o in r.get("Contents", []):
                key = o["Key"]
                last_ltx = max(last_ltx, key)
                if key in self.seen:
                    continue
                self.seen[key] = now
                try:
                    h = self.s3.get_object(Bucket="bench", Key=key, Range="bytes=0-99")["Body"].read()
                except Exception:
                    continue
                # LTX header: magic, flags, page size, commit, min/max TXID, timestamp,
                # pre-apply checksum, then the -wal offset and size it was read from and the salts.
                magic, flags, page_size, commit, lo, hi, ts, pre, wal_offset, wal_size, s1, s2 = struct.unpack(">4sIIIQQqQqqII", h[:72])
                if magic != b"LTX1" or wal_size <= 0:
                    continue
                frame = 24 + page_size
                first = (wal_offset - 32) // frame + 1
                last = (wal_offset + wal_size - 32) // frame
                self.ltx.append((now, s1, s2, first, last))
            time.sleep(max(0, 0.1 - (time.time() - now)))

    # -- the writer ----------------------------------------------------------------
    def write(self, pairs, seconds, every_ms, positions=True):
        cmd = ["/usr/bin/python3", self.a.writer, "write", *pairs, "--seconds", str(seconds), "--every-ms", str(every_ms)]
        if positions:
            cmd.append("--positions")
        r = subprocess.run(cmd, check=True, capture_output=True, text=True)
        return float(r.stdout.split(":")[-1].split()[0])  # commits/s

    @staticmethod
    def commits(path):
        out = {}
        for line in open(path):
            p = line.split()
            if p[0] == "commit":
                c = int(p[1])
                out[c] = dict(time=float(p[2]), digest=p[3], before=float(p[4]),
                              pos=(int(p[5]), int(p[6]), int(p[7])) if len(p) >= 8 else None)
        return out

    # -- the main phase --------------------------------------------------------------
    def main_phase(self):
        a_db, b_db = self.copy("a.db"), self.copy("b.db")
        self.a_db, self.b_db = a_db, b_db
        self.events = f"{self.t}/litectl-events.jsonl"
        log("starting the followers (first copies)")
        t = time.time()
        self.lc = self.start_litectl(a_db, "litectl", self.events, extra=self.a.litectl_args.split())
        self.report["litectl_first_copy_seconds"] = time.time() - t
        t = time.time()
        self.ls, self.ls_config = self.start_litestream(b_db, "litestream", f"{self.t}/litestream.log")
        self.report["litestream_first_copy_seconds"] = time.time() - t
        time.sleep(3)
        self.report["first_copy_bytes"] = {"litectl": sum(o["Size"] for o in self.objects("litectl/")),
                                           "litestream": sum(o["Size"] for o in self.objects("litestream/"))}
        stop = threading.Event()
        mon = threading.Thread(target=self.monitor, args=(stop,), daemon=True)
        mon.start()
        self.stop_monitor = (stop, mon)
        cpu0 = (cpu_seconds(self.lc.pid), cpu_seconds(self.ls.pid))
        log(f"main phase: {self.a.seconds} s of lockstep writes")
        self.t0 = time.time()
        rate = self.write([a_db, f"{self.t}/a.log", b_db, f"{self.t}/b.log"], self.a.seconds, self.a.every_ms)
        self.t1 = time.time()
        cpu1 = (cpu_seconds(self.lc.pid), cpu_seconds(self.ls.pid))
        self.report["main_phase"] = {"seconds": self.t1 - self.t0, "commits_per_second_each": rate}
        self.report["follower_cpu_seconds"] = {"litectl": cpu1[0] - cpu0[0], "litestream": cpu1[1] - cpu0[1]}
        self.report["follower_peak_kib"] = {"litectl": peak_kib(self.lc.pid), "litestream": peak_kib(self.ls.pid)}
        size = lambda f: os.path.getsize(f) if os.path.exists(f) else 0
        self.report["wal_bytes_after_main"] = {"litectl": size(a_db + "-wal"), "litestream": size(b_db + "-wal")}

    def kill_phase(self):
        """litectl's follower killed with SIGKILL while the writer goes on, then started again."""
        log("kill phase: SIGKILL of litectl's follower mid-run")
        done = threading.Event()
        result = {}

        def writer():
            result["rate"] = self.write([self.a_db, f"{self.t}/a.log", self.b_db, f"{self.t}/b.log"], self.a.kill_seconds, self.a.every_ms)
            done.set()
        th = threading.Thread(target=writer)
        th.start()
        time.sleep(self.a.kill_seconds / 2 + random.Random(7).uniform(0, 1))
        self.t_kill = time.time()
        self.lc.kill()
        self.lc.wait()
        out = open(self.events, "a")
        self.lc = subprocess.Popen([self.a.litectl, "replicate", self.a_db, "--repo", "s3://bench/litectl", "--endpoint", self.endpoint,
                                    "--json", *self.a.litectl_args.split()], stdout=out, stderr=out, env=self.env)
        th.join()
        time.sleep(4)
        self.t_end = time.time()
        stop, mon = self.stop_monitor
        stop.set()
        mon.join()
        self.report["litectl_exit_status"] = self.stop(self.lc)
        self.report["litestream_exit_status"] = self.stop(self.ls)

    # -- lag ---------------------------------------------------------------------------
    def litectl_states(self):
        """(salt1, salt2, frame, observed, first listed) of every state shipped."""
        states = []
        for line in open(self.events):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "shipped" and e.get("kind") == "segment":
                seen = self.seen.get("litectl/" + e["segment"], e["durable_unix"])
                for s in e["states"]:
                    states.append((s["salt1"], s["salt2"], s["frame"], s["observed_unix"], seen))
        return states

    @staticmethod
    def durable_times(commits, covers):
        """For each commit (with its -wal position), the first time an object holding it was listed."""
        out = {}
        for c, v in commits.items():
            if v["pos"] is None:
                continue
            s1, s2, frame = v["pos"]
            times = covers(s1, s2, frame, v["before"])
            if times:
                out[c] = min(times)
        return out

    def lags(self):
        a, b = self.commits(f"{self.t}/a.log"), self.commits(f"{self.t}/b.log")
        states = self.litectl_states()
        by_gen = {}
        for s1, s2, frame, observed, seen in states:
            by_gen.setdefault((s1, s2), []).append((frame, seen))
        for g in by_gen.values():
            g.sort()
        by_time = sorted((observed, seen) for _, _, _, observed, seen in states)

        def litectl_covers(s1, s2, frame, time_):
            # The first state at or past the commit's frame in its generation; else (a
            # resync after the -wal restarted) the first state observed after the commit.
            g = by_gen.get((s1, s2), [])
            found = [seen for f, seen in g if f >= frame][:1]
            return found or [seen for observed, seen in by_time if observed >= time_][:1]

        def litestream_covers(s1, s2, frame, time_):
            return [seen for seen, l1, l2, lo, hi in self.ltx if (l1, l2) == (s1, s2) and lo <= frame <= hi]

        da, db = self.durable_times(a, litectl_covers), self.durable_times(b, litestream_covers)
        main = lambda c, log_: self.t0 <= log_[c]["time"] <= self.t1
        la = sorted(da[c] - a[c]["time"] for c in da if main(c, a))
        lb = sorted(db[c] - b[c]["time"] for c in db if main(c, b))
        na, nb = sum(1 for c in a if main(c, a)), sum(1 for c in b if main(c, b))
        q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None
        self.report["lag_seconds"] = {
            "litectl": {"p50": q(la, 0.5), "p99": q(la, 0.99), "max": la[-1] if la else None, "commits": na, "matched": len(la)},
            "litestream": {"p50": q(lb, 0.5), "p99": q(lb, 0.99), "max": lb[-1] if lb else None, "commits": nb, "matched": len(lb)},
        }
        # The recovery point at the kill: the oldest commit made before it and not yet durable.
        lost = [a[c]["time"] for c in a if a[c]["time"] <= self.t_kill and da.get(c, float("inf")) > self.t_kill]
        self.report["rpo_after_sigkill_seconds"] = self.t_kill - min(lost) if lost else 0.0
        self.report["commits_not_durable_at_kill"] = len(lost)
        # Every commit of the run ended up durable (after the restart too).
        self.report["commits_never_durable"] = {"litectl": sum(1 for c in a if a[c]["pos"] and c not in da and a[c]["time"] < self.t_end - 5),
                                                "litestream": sum(1 for c in b if b[c]["pos"] and c not in db and b[c]["time"] < self.t_end - 5)}
        self.a_commits, self.b_commits = a, b

    # -- restores ----------------------------------------------------------------------
    def digest(self, path):
        r = subprocess.run(["/usr/bin/python3", self.a.writer, "digest", path], capture_output=True, text=True, check=True)
        c, d = r.stdout.split()
        return int(c), d

    def restores(self):
        half = self.t0 + (self.t1 - self.t0) / 2
        self.report["halfway_moment"] = iso(half)
        jobs = {
            ("litectl", "latest"): [self.a.litectl, "restore", "--repo", "s3://bench/litectl", "--endpoint", self.endpoint, "latest", "--db", "a.db"],
            ("litectl", "halfway"): [self.a.litectl, "restore", "--repo", "s3://bench/litectl", "--endpoint", self.endpoint, "latest", "--db", "a.db", "--at", iso(half)],
            ("litestream", "latest"): ["litestream", "restore", "-config", self.ls_config, "-o"],
            ("litestream", "halfway"): ["litestream", "restore", "-config", self.ls_config, "-timestamp", iso(half), "-o"],
        }
        times = {k: [] for k in jobs}
        order = list(jobs)
        rng = random.Random(3)
        for r in range(self.a.restore_runs + 1):
            rng.shuffle(order)
            for key in order:
                out = f"{self.t}/restore-{key[0]}-{key[1]}.db"
                for f in (out, out + "-wal", out + "-shm"):
                    if os.path.exists(f):
                        os.unlink(f)
                cmd = jobs[key] + ([out, self.b_db] if key[0] == "litestream" else [out])
                start = time.time()
                p = subprocess.run(cmd, capture_output=True, text=True, env=self.lsenv if key[0] == "litestream" else self.env)
                took = time.time() - start
                if p.returncode != 0:
                    sys.exit(f"bench-replicate: FAILED: {' '.join(cmd)}: {p.stderr.strip()[-500:]}")
                c, d = self.digest(out)
                log_ = self.a_commits if key[0] == "litectl" else self.b_commits
                ok = c in log_ and log_[c]["digest"] == d and (key[1] == "latest" or log_[c]["before"] <= half + 0.001)
                if not ok:
                    sys.exit(f"bench-replicate: {key[0]} restored ({key[1]}) a state that is no commit of the writer's: counter {c}")
                if key[1] == "latest" and c != max(log_):
                    sys.exit(f"bench-replicate: {key[0]} restored counter {c} as latest, the last commit is {max(log_)}")
                if r > 0:  # the first round is a warm-up
                    times[key].append(took)
                if key[1] == "halfway":
                    self.report.setdefault("halfway_counters", {})[key[0]] = c
        self.report["restore_seconds"] = {f"{k[0]} {k[1]}": statistics.median(v) for k, v in times.items()}
        self.report["restore_runs"] = {f"{k[0]} {k[1]}": v for k, v in times.items()}
        self.report["bucket_bytes"] = {"litectl": sum(o["Size"] for o in self.objects("litectl/")),
                                       "litestream": sum(o["Size"] for o in self.objects("litestream/"))}
        self.report["bucket_objects"] = {"litectl": len(self.objects("litectl/")), "litestream": len(self.objects("litestream/"))}

    # -- the writer's throughput -----------------------------------------------------------
    def throughput(self):
        configs = ["none", "litectl", "litestream"]
        rates = {c: [] for c in configs}
        rng = random.Random(5)
        for r in range(self.a.throughput_rounds):
            order = configs[:]
            rng.shuffle(order)
            for config in order:
                db = self.copy("tp.db")
                prefix = f"tp{r}-{configs.index(config)}"
                follower = None
                if config == "litectl":
                    follower = self.start_litectl(db, prefix, f"{self.t}/{prefix}.jsonl")
                elif config == "litestream":
                    follower, _ = self.start_litestream(db, prefix, f"{self.t}/{prefix}.log")
                time.sleep(2)
                rate = self.write([db, f"{self.t}/{prefix}.log"], self.a.throughput_seconds, 0, positions=False)
                if follower:
                    self.stop(follower)
                rates[config].append(rate)
                log(f"throughput round {r + 1}: {config}: {rate:.0f} commits/s")
        med = {c: statistics.median(v) for c, v in rates.items()}
        self.report["writer_commits_per_second"] = med
        self.report["writer_commits_per_second_runs"] = rates

    # -- the application's -wal ---------------------------------------------------------
    def wal_sizes(self):
        """The -wal's peak and last size under a writer of 2 KB rows every 2 ms (SQLite's
        automatic checkpoint only), alone, beside litectl's follower, beside Litestream's."""
        out = {}
        for config in ("none", "litectl", "litestream"):
            db = self.copy(f"wal-{config}.db")
            prefix = f"wal-{config}"
            follower = None
            if config == "litectl":
                follower = self.start_litectl(db, prefix, f"{self.t}/{prefix}.jsonl")
            elif config == "litestream":
                follower, _ = self.start_litestream(db, prefix, f"{self.t}/{prefix}.log")
            time.sleep(2)
            log_ = f"{self.t}/{prefix}.writer"
            cmd = ["/usr/bin/python3", self.a.writer, "write", db, log_, "--seconds", str(self.a.wal_seconds),
                   "--every-ms", str(self.a.wal_every_ms), "--payload-bytes", str(self.a.wal_payload_bytes)]
            r = subprocess.run(cmd, check=True, capture_output=True, text=True)
            status = self.stop(follower) if follower else 0
            peak = last = None
            for line in open(log_):
                p = line.split()
                if p[0] == "wal":
                    peak, last = int(p[1]), int(p[2])
            out[config] = {"peak": peak, "last": last, "commits_per_second": float(r.stdout.split(":")[-1].split()[0]),
                           "follower_exit_status": status}
            log(f"-wal with {config}: peak {peak / 1e6:.1f} MB, at the end {last / 1e6:.1f} MB")
        self.report["application_wal_bytes"] = out

    def run(self):
        try:
            self.start_moto()
            log("generating the database")
            self.make_base()
            self.main_phase()
            self.kill_phase()
            self.lags()
            log("restores")
            self.restores()
            if self.a.throughput_rounds > 0:
                log("writer throughput")
                self.throughput()
            if self.a.wal_seconds > 0:
                log("the application's -wal")
                self.wal_sizes()
        finally:
            for p in ("lc", "ls"):
                if hasattr(self, p) and getattr(self, p).poll() is None:
                    getattr(self, p).kill()
            if hasattr(self, "server"):
                self.server.stop()
        print(json.dumps(self.report, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--litectl", required=True)
    p.add_argument("--tmp", required=True)
    p.add_argument("--writer", required=True)
    p.add_argument("--generate", required=True)
    p.add_argument("--rows", type=int, default=130000)
    p.add_argument("--seconds", type=float, default=240)
    p.add_argument("--every-ms", type=float, default=5)
    p.add_argument("--kill-seconds", type=float, default=24)
    p.add_argument("--restore-runs", type=int, default=3)
    p.add_argument("--throughput-seconds", type=float, default=20)
    p.add_argument("--throughput-rounds", type=int, default=3)
    p.add_argument("--litectl-args", default="", help="more options for litectl replicate (e.g. --gather-every 600)")
    p.add_argument("--wal-seconds", type=float, default=60)
    p.add_argument("--wal-every-ms", type=float, default=2)
    p.add_argument("--wal-payload-bytes", type=int, default=2048)
    Bench(p.parse_args()).run()


if __name__ == "__main__":
    main()
