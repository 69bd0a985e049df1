#!/usr/bin/env python3
"""Compares two versions of a SQLite database file page by page.

Prints one JSON object: the page size, the page counts of both files, how many pages of NEW
differ from OLD at the same page number (pages past OLD's end count as changed; pages cut off
NEW's end do not, as there is nothing of them to store), and the compressed size of just the
changed pages, two ways: one gzip -6 stream of them all (`gzip6_bytes`), and each page on its
own with zlib level 6 (`zlib6_per_page_bytes`, the most a store of independently compressed
pages can get, before any per-page framing).
Usage: pagediff.py OLD.db NEW.db
"""
import json
import sys
import zlib

CHUNK_PAGES = 256  # read 1 MiB at a time with 4 KiB pages: flat memory whatever the file size


def page_size(path):
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        sys.exit(f"pagediff: {path}: not a SQLite database")
    size = int.from_bytes(head[16:18], "big")
    return 65536 if size == 1 else size


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    old_path, new_path = argv
    size = page_size(new_path)
    if page_size(old_path) != size:
        sys.exit("pagediff: the two files have different page sizes")
    changed = pages_old = pages_new = per_page = 0
    stream = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: the gzip format, as gzip -6 writes it
    gz = 0
    with open(old_path, "rb") as old, open(new_path, "rb") as new:
        while True:
            a, b = old.read(CHUNK_PAGES * size), new.read(CHUNK_PAGES * size)
            if not b:
                pages_old += len(a) // size + len(old.read()) // size  # the rest of a longer OLD
                break
            pages_old += len(a) // size
            pages_new += len(b) // size
            for k in range(0, len(b), size):
                page = b[k:k + size]
                if a[k:k + size] != page:
                    changed += 1
                    per_page += len(zlib.compress(page, 6))
                    gz += len(stream.compress(page))
    gz += len(stream.flush())
    print(json.dumps({"page_size": size, "pages_old": pages_old, "pages_new": pages_new,
                      "pages_changed": changed, "changed_bytes": changed * size,
                      "gzip6_bytes": gz if changed else 0, "zlib6_per_page_bytes": per_page}))


if __name__ == "__main__":
    main(sys.argv[1:])
