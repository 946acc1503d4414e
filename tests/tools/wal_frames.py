#!/usr/bin/env python3
"""Which B-trees a running central's SQLite writes go to.

    python3 tests/tools/wal_frames.py /path/to/central.db SECONDS

Reads `central.db-wal` every 0.25 s for SECONDS and counts the frames it holds (each a page a
commit wrote), each frame once per WAL generation (a checkpoint starts the WAL again with new
salts; frames of a generation seen before are not counted twice). Then names each page's
B-tree (table or index) with SQLite's `dbstat` on a copy of the database file. At 100,000
monitors the WAL restarts about ten times a second, so this is a sample of the frames, not all
of them: the shares are what it tells, not the totals. Used with the scale bench
(docs/benchmarks.md): start it in the steady window, the database is the one named in central's
`CENTRAL_DATABASE_URL` (`/proc/<pid>/environ`).
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile
import time


def frames(wal: bytes):
    """The page numbers of the WAL's frames of its current generation, in order."""
    if len(wal) < 32:
        return []
    page_size = struct.unpack(">I", wal[8:12])[0]
    salts = struct.unpack(">II", wal[16:24])
    pages, offset = [], 32
    while offset + 24 + page_size <= len(wal):
        page, _commit, salt1, salt2 = struct.unpack(">IIII", wal[offset : offset + 16])
        if (salt1, salt2) != salts:
            break
        pages.append(page)
        offset += 24 + page_size
    return pages


def main():
    db, seconds = sys.argv[1], float(sys.argv[2])
    counts, seen, previous = collections.Counter(), 0, []
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(db + "-wal", "rb") as f:
                pages = frames(f.read())
        except FileNotFoundError:
            pages = []
        # The same generation grown since the last read: only its new frames.
        new = pages[len(previous) :] if pages[: len(previous)] == previous else pages
        counts.update(new)
        seen += len(new)
        previous = pages
        time.sleep(0.25)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "copy.db")
        shutil.copy(db, copy)
        owner = dict(
            (page, name)
            for name, page in sqlite3.connect(copy).execute("SELECT name, pageno FROM dbstat")
        )
    frames_by, pages_by = collections.Counter(), collections.Counter()
    for page, n in counts.items():
        name = owner.get(page, "(a page new since the last checkpoint)")
        frames_by[name] += n
        pages_by[name] += 1
    print(f"{seen} frames sampled")
    for name, n in frames_by.most_common(20):
        print(f"{n:8d} frames {100 * n / max(seen, 1):5.1f} %  {pages_by[name]:7d} pages  {name}")


if __name__ == "__main__":
    main()
