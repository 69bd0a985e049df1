#!/usr/bin/env python3
"""Deterministic generator of SQLite test databases for litectl benchmarks.

Builds a realistic schema at a given scale (same arguments => same logical content),
or copies a database and mutates a deterministic fraction of its rows.
"""
import argparse
import os
import random
import sqlite3
import sys
import time
from itertools import islice
from pathlib import Path

BATCH = 50_000
EPOCH = 1_420_070_400  # 2015-01-01 UTC: fixed base for all timestamps

FIRST = [("Alice", "alice"), ("José", "jose"), ("Zoë", "zoe"), ("François", "francois"),
         ("Björn", "bjorn"), ("Łukasz", "lukasz"), ("Søren", "soren"), ("Ægir", "aegir"),
         ("Chloé", "chloe"), ("Mohammed", "mohammed"), ("Ольга", "olga"), ("Νίκος", "nikos"),
         ("王芳", "wang.fang"), ("さくら", "sakura"), ("민준", "minjun"), ("Priya", "priya"),
         ("Bob", "bob"), ("Carol", "carol"), ("Dave", "dave"), ("Eve", "eve")]
LAST = ["Smith", "O'Brien", "Müller", "García", "Nguyễn", "D'Angelo", "Kowalski", "Dubois",
        "Johansson", "Rossi", "李", "佐藤", "Иванов", "Öztürk", "van der Berg", "Ó Súilleabháin"]
COUNTRIES = ["US", "DE", "FR", "GB", "JP", "CN", "BR", "IN", "ES", "IT", "SE", "PL", "KR", "TR", "NL"]
DOMAINS = ["example.com", "example.org", "mail.test", "corp.example"]
NOTES = ["VIP customer", "prefers e-mail", "said \"call me later\"", "it's complicated",
         "paid with 'voucher'", "café ☕ regular", "多言語のメモ", "semicolon; and, comma",
         "line one\nline two", ""]
KINDS = ["login", "logout", "view", "click", "purchase", "refund", "error"]

SCHEMA = """
CREATE TABLE customers (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, country TEXT,
  balance REAL, created_at TEXT NOT NULL, notes TEXT);
CREATE TABLE order_items (
  order_id INTEGER NOT NULL, line INTEGER NOT NULL, customer_id INTEGER NOT NULL, sku TEXT NOT NULL,
  qty INTEGER NOT NULL, price REAL NOT NULL, PRIMARY KEY (order_id, line)) WITHOUT ROWID;
CREATE TABLE events (ts INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT);
CREATE TABLE attachments (
  id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), data BLOB NOT NULL);
CREATE TABLE audit (
  id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, old_balance REAL, new_balance REAL);
CREATE VIEW customer_totals AS
  SELECT c.id AS customer_id, c.name, count(oi.line) AS items, total(oi.qty * oi.price) AS amount
  FROM customers c LEFT JOIN order_items oi ON oi.customer_id = c.id GROUP BY c.id;
CREATE TRIGGER customers_balance_audit AFTER UPDATE OF balance ON customers
  WHEN old.balance IS NOT new.balance
  BEGIN INSERT INTO audit (customer_id, old_balance, new_balance) VALUES (old.id, old.balance, new.balance); END;
"""
INDEXES = """
CREATE INDEX customers_country ON customers(country);
CREATE INDEX order_items_sku ON order_items(sku);
CREATE INDEX events_ts ON events(ts);
CREATE INDEX attachments_customer ON attachments(customer_id);
"""


# --- row makers: every value comes from the passed-in rng ---------------------------------

def customer(rng, i):
    first, ascii_first = rng.choice(FIRST)
    balance = None if rng.random() < 0.03 else (rng.random() - 0.1) * 1000  # full-precision doubles
    notes = None if rng.random() < 0.4 else rng.choice(NOTES)
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(EPOCH + rng.randrange(300_000_000)))
    return (i, f"{first} {rng.choice(LAST)}", f"{ascii_first}.{i}@{rng.choice(DOMAINS)}",
            rng.choice(COUNTRIES), balance, created, notes)


def order_lines(rng, order_id, cust, n_lines):
    return [(order_id, line, cust, f"SKU-{rng.randrange(5000):05d}", rng.randint(1, 20),
             round(rng.uniform(0.5, 500), 2)) for line in range(1, n_lines + 1)]


def event(rng, ts):
    payload = None if rng.random() < 0.05 else \
        f'{{"user": {rng.randrange(100_000)}, "path": "/p/{rng.randrange(1000)}", "score": {rng.random()!r}}}'
    return (ts, rng.choice(KINDS), payload)


def blob(rng):
    return rng.randbytes(rng.randint(4097, 16384))


# --- generation ---------------------------------------------------------------------------

def batched_insert(db, sql, rows):
    """executemany in BATCH-sized transactions from an iterator of rows."""
    rows = iter(rows)
    while batch := list(islice(rows, BATCH)):
        db.execute("BEGIN")
        db.executemany(sql, batch)
        db.execute("COMMIT")


def gen_orders(rng, n_rows, n_customers):
    done, order_id = 0, 0
    while done < n_rows:
        order_id += 1
        lines = order_lines(rng, order_id, rng.randint(1, n_customers), min(rng.randint(1, 5), n_rows - done))
        done += len(lines)
        yield from lines


def gen_events(rng, n):
    ts, prev, dup_every = EPOCH * 1000, None, min(5000, max(2, n // 5))
    for k in range(n):
        if prev is not None and k % dup_every == dup_every - 1:  # a few exact duplicate rows
            yield prev
            continue
        ts += rng.randrange(5000)
        prev = event(rng, ts)
        yield prev


def gen_attachments(rng, n_customers, every):
    for a, start in enumerate(range(1, n_customers + 1, every), 1):
        yield (a, rng.randint(start, min(start + every - 1, n_customers)), blob(rng))


def generate(db, args):
    rng, n = random.Random(args.seed), args.rows
    db.execute(f"PRAGMA page_size = {args.page_size}")
    db.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;" + SCHEMA)
    batched_insert(db, "INSERT INTO customers VALUES (?,?,?,?,?,?,?)", (customer(rng, i) for i in range(1, n + 1)))
    batched_insert(db, "INSERT INTO order_items VALUES (?,?,?,?,?,?)", gen_orders(rng, n, n))
    batched_insert(db, "INSERT INTO events VALUES (?,?,?)", gen_events(rng, n // 2))
    if args.blob_every > 0:
        batched_insert(db, "INSERT INTO attachments VALUES (?,?,?)", gen_attachments(rng, n, args.blob_every))
    db.executescript(INDEXES + "ANALYZE;")
    db.execute(f"PRAGMA journal_mode = {args.journal}")


# --- mutation -----------------------------------------------------------------------------

def split(rng, keys, fraction, in_place=False):
    """Pick ~fraction of keys; return (keys to update, keys to delete, number of inserts).
    A fifth of them are deleted and as many rows inserted, unless in_place (all updated)."""
    k = min(len(keys), max(1, round(len(keys) * fraction))) if keys and fraction > 0 else 0
    chosen = rng.sample(keys, k)
    nd = ni = 0 if in_place else k // 5
    nu = k - nd - ni
    return chosen[:nu], chosen[nu:nu + nd], ni


def column(db, sql):
    return [r[0] for r in db.execute(sql)]


def mutate(db, args):
    rng, f, stats = random.Random(args.seed), args.mutate, {}
    db.execute("BEGIN")

    ids = column(db, "SELECT id FROM customers ORDER BY id")
    upd, dele, ins = split(rng, ids, f, args.in_place)
    top = ids[-1] if ids else 0
    for i in upd:
        new = customer(rng, i)
        col, val = rng.choice([("balance", new[4]), ("country", new[3]), ("notes", new[6]), ("name", new[1])])
        db.execute(f"UPDATE customers SET {col} = ? WHERE id = ?", (val, i))
    for i in dele:
        db.execute("DELETE FROM attachments WHERE customer_id = ?", (i,))
        db.execute("DELETE FROM customers WHERE id = ?", (i,))
    db.executemany("INSERT INTO customers VALUES (?,?,?,?,?,?,?)", [customer(rng, top + j) for j in range(1, ins + 1)])
    stats["customers"] = (len(upd), len(dele), ins)
    live = column(db, "SELECT id FROM customers ORDER BY id")

    keys = list(db.execute("SELECT order_id, line FROM order_items ORDER BY order_id, line"))
    upd, dele, ins = split(rng, keys, f, args.in_place)
    for o, l in upd:
        col, val = rng.choice([("qty", rng.randint(1, 20)), ("price", round(rng.uniform(0.5, 500), 2))])
        db.execute(f"UPDATE order_items SET {col} = ? WHERE order_id = ? AND line = ?", (val, o, l))
    db.executemany("DELETE FROM order_items WHERE order_id = ? AND line = ?", dele)
    top, rows = (keys[-1][0] if keys else 0), []
    while len(rows) < ins:
        top += 1
        rows += order_lines(rng, top, rng.choice(live), min(rng.randint(1, 5), ins - len(rows)))
    db.executemany("INSERT INTO order_items VALUES (?,?,?,?,?,?)", rows)
    stats["order_items"] = (len(upd), len(dele), ins)

    rowids = column(db, "SELECT rowid FROM events ORDER BY rowid")
    upd, dele, ins = split(rng, rowids, f, args.in_place)
    ts = db.execute("SELECT coalesce(max(ts), 0) FROM events").fetchone()[0]
    for r in upd:
        _, kind, payload = event(rng, 0)
        col, val = rng.choice([("kind", kind), ("payload", payload)])
        db.execute(f"UPDATE events SET {col} = ? WHERE rowid = ?", (val, r))
    db.executemany("DELETE FROM events WHERE rowid = ?", [(r,) for r in dele])
    db.executemany("INSERT INTO events VALUES (?,?,?)", [event(rng, ts + j) for j in range(1, ins + 1)])
    stats["events"] = (len(upd), len(dele), ins)

    ids = column(db, "SELECT id FROM attachments ORDER BY id")
    upd, dele, ins = split(rng, ids, f, args.in_place)
    for i in upd:  # single-byte change inside the blob
        data = bytearray(db.execute("SELECT data FROM attachments WHERE id = ?", (i,)).fetchone()[0])
        pos = rng.randrange(len(data))
        data[pos] = (data[pos] + rng.randint(1, 255)) % 256
        db.execute("UPDATE attachments SET data = ? WHERE id = ?", (bytes(data), i))
    db.executemany("DELETE FROM attachments WHERE id = ?", [(i,) for i in dele])
    top = ids[-1] if ids else 0
    db.executemany("INSERT INTO attachments VALUES (?,?,?)",
                   [(top + j, rng.choice(live), blob(rng)) for j in range(1, ins + 1)])
    stats["attachments"] = (len(upd), len(dele), ins)

    db.execute("COMMIT")
    return stats


# --- command line -------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Deterministic SQLite test-database generator for litectl benchmarks.",
        epilog="examples:\n  generate.py big.db --rows 1000000\n  generate.py --mutate 0.01 --from big.db big-1pct.db",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT.db", help="database to create")
    p.add_argument("--rows", type=int, metavar="N", help="number of customers (order_items ~N, events ~N/2)")
    p.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default 1)")
    p.add_argument("--page-size", type=int, default=4096, metavar="P", help="page size in bytes (default 4096)")
    p.add_argument("--journal", choices=["wal", "delete"], default="delete", help="journal mode (default delete)")
    p.add_argument("--blob-every", type=int, default=100, metavar="K",
                   help="one attachment (4-16 KB blob) per K customers; 0 = none (default 100)")
    p.add_argument("--mutate", type=float, metavar="FRACTION", help="copy --from and change ~FRACTION of rows")
    p.add_argument("--from", dest="src", metavar="A.db", help="source database for --mutate")
    p.add_argument("--in-place", action="store_true",
                   help="with --mutate: only update rows (no deletes, no inserts; the audit trigger still adds rows)")
    p.add_argument("--force", action="store_true", help="overwrite OUT.db if it exists")
    p.add_argument("-v", "--verbose", action="store_true", help="print a summary to stderr")
    a = p.parse_args(argv)
    if (a.mutate is None) == (a.rows is None):
        p.error("give either --rows N or --mutate FRACTION --from A.db")
    if a.in_place and a.mutate is None:
        p.error("--in-place applies with --mutate")
    if a.mutate is not None and (a.src is None or not 0 <= a.mutate <= 1):
        p.error("--mutate needs a FRACTION in [0, 1] and --from A.db")
    if a.mutate is not None and not Path(a.src).is_file():
        p.error(f"--from: no such file: {a.src}")
    if a.rows is not None and a.rows < 1:
        p.error("--rows must be >= 1")
    if a.page_size not in [512 << k for k in range(8)]:
        p.error("--page-size must be a power of two between 512 and 65536")
    if a.blob_every < 0:
        p.error("--blob-every must be >= 0")
    if os.path.lexists(a.out) and not a.force:
        p.error(f"{a.out} exists (use --force to overwrite)")
    return a


def main(argv=None):
    args = parse_args(argv)
    tmp, start = f"{args.out}.tmp-{os.getpid()}", time.monotonic()
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        if args.mutate is None:
            generate(db, args)
            stats = None
        else:
            src = sqlite3.connect(args.src)  # read-write so a WAL source is checkpointed on close
            src.backup(db)
            src.close()
            stats = mutate(db, args)
        db.close()
        os.replace(tmp, args.out)
    except BaseException:
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(tmp + suffix).unlink(missing_ok=True)
        raise
    if args.verbose:
        print(f"{args.out}: {os.path.getsize(args.out)} bytes in {time.monotonic() - start:.1f} s", file=sys.stderr)
        for table, (u, d, i) in (stats or {}).items():
            print(f"  {table}: {u} updated, {d} deleted, {i} inserted", file=sys.stderr)


if __name__ == "__main__":
    main()
