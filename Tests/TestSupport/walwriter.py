#!/usr/bin/env python3
"""The application of the replicate tests and benchmark: commits into WAL
databases every few milliseconds and runs its own checkpoints (PASSIVE, FULL,
RESTART, TRUNCATE), as an application does. After each commit it logs the
commit's counter, its time, and a digest of the content it wrote, kept from
its own bookkeeping (never read back from the database): the oracle a
restored database is compared with. Standard library only.

usage:
  walwriter.py write DB LOG [DB LOG ...] [--seconds S | --commits N] [--every-ms M]
               [--seed N] [--checkpoint-every K] [--truncate-every K] [--big-every K]
               [--vacuum-every K] [--busy-timeout-ms T] [--initial-rows N] [--positions]
               [--payload-bytes B]
      Several DB LOG pairs get the same transactions in lockstep (each commit goes
      to each database in turn). --payload-bytes makes every row it inserts or
      updates B bytes (else 50-400). Log lines, flushed as written:
        commit C TIME COUNT:SUM BEFORE [SALT1 SALT2 FRAME]
            TIME: when COMMIT returned; BEFORE: when it was issued (the commit became
            visible to readers in between); --positions: the -wal position after it
        checkpoint MODE BUSY LOG CHECKPOINTED SECONDS
        vacuum C TIME
        wal PEAK LAST
            the -wal's largest size in bytes after a commit, and its size after the last
            (SQLite's automatic checkpoints, or the lack of them, set it)
        done COMMITS SECONDS
      A commit or checkpoint that fails logs "error ..." and exits 1. SIGTERM or SIGINT
      stops it between two commits.
  walwriter.py digest DB
      Prints "C COUNT:SUM" of a database (its counter and the digest of its rows).
"""
import argparse, hashlib, mmap, os, random, signal, sqlite3, struct, sys, time

MASK = (1 << 64) - 1


def row_hash(rowid, k, payload):
    return int.from_bytes(hashlib.sha256(struct.pack(">qq", rowid, k) + payload).digest()[:8], "big")


def digest_of(conn):
    count, total = 0, 0
    for rowid, k, payload in conn.execute("SELECT id, k, payload FROM items"):
        count += 1
        total = (total + row_hash(rowid, k, bytes(payload))) & MASK
    c = conn.execute("SELECT c FROM counter WHERE id = 1").fetchone()[0]
    return c, f"{count}:{total}"


class Database:
    def __init__(self, path, log, args):
        self.path, self.args = path, args
        self.log = open(log, "a", buffering=1)
        self.conn = sqlite3.connect(path, timeout=args.busy_timeout_ms / 1000, isolation_level=None)
        self.conn.execute(f"PRAGMA busy_timeout={args.busy_timeout_ms}")
        if self.conn.execute("PRAGMA journal_mode=wal").fetchone()[0] != "wal":
            sys.exit(f"walwriter: {path}: cannot switch to WAL mode")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.shm = None
        self.wal_peak = self.wal_last = 0

    def note_wal_size(self):
        try:
            self.wal_last = os.stat(self.path + "-wal").st_size
        except OSError:
            self.wal_last = 0
        self.wal_peak = max(self.wal_peak, self.wal_last)

    def position(self):
        """The -wal position after the last commit, from the wal-index header in the -shm."""
        try:
            if self.shm is None:
                # The descriptor stays open: closing any descriptor of the -shm
                # would drop every POSIX lock this process holds on it, SQLite's
                # own included, and let another process reset the -shm under us.
                self.shm_fd = os.open(self.path + "-shm", os.O_RDONLY)
                self.shm = mmap.mmap(self.shm_fd, 136, prot=mmap.PROT_READ)
            header = self.shm[0:48]
            return struct.unpack(">II", header[32:40]) + (struct.unpack("=I", header[16:20])[0],)
        except (OSError, ValueError):
            return None


def write(args):
    pairs = args.targets
    if len(pairs) % 2:
        sys.exit("walwriter: give DB LOG pairs")
    dbs = [Database(pairs[i], pairs[i + 1], args) for i in range(0, len(pairs), 2)]
    # The schema and first rows, once; the model of the rows from the first database.
    for db in dbs:
        c = db.conn
        c.execute("BEGIN IMMEDIATE")
        c.execute("CREATE TABLE IF NOT EXISTS counter(id INTEGER PRIMARY KEY, c INTEGER NOT NULL)")
        c.execute("CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, payload BLOB NOT NULL)")
        c.execute("CREATE INDEX IF NOT EXISTS items_k ON items(k)")
        if c.execute("SELECT count(*) FROM counter").fetchone()[0] == 0:
            c.execute("INSERT INTO counter VALUES (1, 0)")
            rng = random.Random(args.seed)
            for i in range(1, args.initial_rows + 1):
                c.execute("INSERT INTO items VALUES (?, ?, ?)", (i, rng.randrange(1 << 40), rng.randbytes(rng.randrange(50, 600))))
        c.execute("COMMIT")
    model = {rowid: (k, bytes(p)) for rowid, k, p in dbs[0].conn.execute("SELECT id, k, payload FROM items")}
    counter = dbs[0].conn.execute("SELECT c FROM counter WHERE id = 1").fetchone()[0]
    total = 0
    for rowid, (k, p) in model.items():
        total = (total + row_hash(rowid, k, p)) & MASK
    next_id = max(model, default=0) + 1
    modes = ["PASSIVE", "FULL", "RESTART", "TRUNCATE"]

    def payload(rng):
        return args.payload_bytes if args.payload_bytes else rng.randrange(50, 400)
    stop = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.append(1))
    start = time.time()
    commits = 0
    while not stop:
        if args.seconds is not None and time.time() - start >= args.seconds:
            break
        if args.commits is not None and commits >= args.commits:
            break
        counter += 1
        rng = random.Random(args.seed * 1_000_003 + counter)
        # The transaction: a list of operations, the same for every database.
        ops = []
        ids = list(model) if model else []
        for _ in range(rng.randrange(1, 5)):
            kind = rng.random()
            if kind < 0.45 or not ids:
                ops.append(("insert", next_id, rng.randrange(1 << 40), rng.randbytes(payload(rng))))
                ids.append(next_id)
                next_id += 1
            elif kind < 0.85:
                rowid = rng.choice(ids)
                ops.append(("update", rowid, rng.randrange(1 << 40), rng.randbytes(payload(rng))))
            else:
                rowid = rng.choice(ids)
                ops.append(("delete", rowid))
                ids.remove(rowid)
        if args.big_every and counter % args.big_every == 0:
            for _ in range(rng.randrange(200, 500)):
                ops.append(("insert", next_id, rng.randrange(1 << 40), rng.randbytes(rng.randrange(500, 1500))))
                next_id += 1
        before = None
        for db in dbs:
            c = db.conn
            try:
                c.execute("BEGIN IMMEDIATE")
                c.execute("UPDATE counter SET c = ? WHERE id = 1", (counter,))
                for op in ops:
                    if op[0] == "insert":
                        c.execute("INSERT INTO items VALUES (?, ?, ?)", op[1:])
                    elif op[0] == "update":
                        c.execute("UPDATE items SET k = ?, payload = ? WHERE id = ?", (op[2], op[3], op[1]))
                    else:
                        c.execute("DELETE FROM items WHERE id = ?", (op[1],))
                if before is None:
                    before = time.time()
                c.execute("COMMIT")
            except sqlite3.Error as e:
                db.log.write(f"error commit {counter}: {e}\n")
                sys.exit(1)
        # The model follows what was committed.
        for op in ops:
            if op[0] in ("update", "delete"):
                k, p = model.pop(op[1])
                total = (total - row_hash(op[1], k, p)) & MASK
            if op[0] in ("insert", "update"):
                model[op[1]] = (op[2], op[3])
                total = (total + row_hash(op[1], op[2], op[3])) & MASK
        now = time.time()
        for db in dbs:
            db.note_wal_size()
            line = f"commit {counter} {now:.6f} {len(model)}:{total} {before:.6f}"
            if args.positions:
                pos = db.position()
                if pos:
                    line += " %d %d %d" % pos
            db.log.write(line + "\n")
        commits += 1
        if args.vacuum_every and counter % args.vacuum_every == 0:
            for db in dbs:
                try:
                    db.conn.execute("VACUUM")
                except sqlite3.Error as e:
                    db.log.write(f"error vacuum {counter}: {e}\n")
                    sys.exit(1)
                db.log.write(f"vacuum {counter} {time.time():.6f}\n")
        if args.checkpoint_every and counter % args.checkpoint_every == 0:
            mode = "TRUNCATE" if args.truncate_every and counter % args.truncate_every == 0 else modes[(counter // args.checkpoint_every) % 4]
            for db in dbs:
                t0 = time.time()
                try:
                    busy, log, done = db.conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
                except sqlite3.Error as e:
                    db.log.write(f"error checkpoint {mode}: {e}\n")
                    sys.exit(1)
                db.log.write(f"checkpoint {mode} {busy} {log} {done} {time.time() - t0:.4f}\n")
        if args.every_ms:
            time.sleep(args.every_ms / 1000)
    elapsed = time.time() - start
    for db in dbs:
        db.log.write(f"wal {db.wal_peak} {db.wal_last}\n")
        db.log.write(f"done {commits} {elapsed:.3f}\n")
        db.conn.close()
    print(f"{commits} commits in {elapsed:.3f} s: {commits / elapsed:.1f} commits/s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("targets", nargs="+")
    w.add_argument("--seconds", type=float)
    w.add_argument("--commits", type=int)
    w.add_argument("--every-ms", type=float, default=3)
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--checkpoint-every", type=int, default=0)
    w.add_argument("--truncate-every", type=int, default=0)
    w.add_argument("--big-every", type=int, default=0)
    w.add_argument("--vacuum-every", type=int, default=0)
    w.add_argument("--busy-timeout-ms", type=int, default=5000)
    w.add_argument("--initial-rows", type=int, default=500)
    w.add_argument("--positions", action="store_true")
    w.add_argument("--payload-bytes", type=int, default=0)
    d = sub.add_parser("digest")
    d.add_argument("db")
    args = parser.parse_args()
    if args.command == "digest":
        conn = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
        c, digest = digest_of(conn)
        print(c, digest)
    else:
        if args.seconds is None and args.commits is None:
            parser.error("give --seconds or --commits")
        write(args)


if __name__ == "__main__":
    main()
