#!/usr/bin/env python3
"""A second reader of litectl repositories, written from docs/repository.md
and not from litectl's code: it opens a repository of format version 2 or 3
(plain, or encrypted with a key file or a passphrase), checks every object it
reads as the specification says, and rebuilds each snapshot's database.
Tests/LitectlCoreTests/RepositorySpecTests.swift runs it on the fixtures
beside it and compares what it rebuilds with litectl's own restore; what
`example` prints is the worked example in docs/repository.md, word for word.

  spec_reader.py restore REPO OUTDIR [--key-file F | --passphrase-file F]
      rebuilds every snapshot into OUTDIR/<snapshot id>.db; prints one JSON
      line per snapshot
  spec_reader.py lock REPO KEY [--key-file F | --passphrase-file F]
      prints the lock object KEY (locks/<id>) as JSON
  spec_reader.py example FIXTURES
      prints the worked example (Markdown) from the fixtures in FIXTURES

Needs python3's `cryptography` package (AES-256-GCM) and the `zstd` command;
exits 3 when either is missing."""
import hashlib, hmac, json, os, struct, subprocess, sys

try:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:
    AESGCM = None


class Damaged(Exception):
    pass


def sha256(data):
    return hashlib.sha256(data).digest()


# --- keys (spec: "config", "encryption") ----------------------------------------

def hkdf_sha256(ikm, salt, info, length=32):
    """RFC 5869."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def aes_gcm_open(key, sealed, what):
    """nonce (12) ‖ ciphertext ‖ tag (16), no associated data."""
    if len(sealed) < 28:
        raise Damaged(f"{what}: shorter than a nonce and a tag")
    try:
        return AESGCM(key).decrypt(sealed[:12], sealed[12:], None)
    except Exception:
        raise Damaged(f"{what}: AES-GCM authentication failed")


def passphrase_from_file(path):
    """The file's bytes up to its first LF (a CR before it is kept)."""
    data = open(path, "rb").read()
    line = data.split(b"\n", 1)[0]
    if not line:
        raise Damaged(f"{path}: the passphrase file is empty")
    return line


class Keys:
    """What `config` and the secret give: the key-encryption key, the master
    key, and the two working keys (None for a plain repository)."""

    def __init__(self, config, key_file=None, passphrase=None):
        self.kek = self.master = self.object_key = self.page_id_key = None
        enc = config["encryption"]
        if enc is None:
            return
        if enc["cipher"] != "aes-256-gcm":
            raise Damaged(f"unknown cipher {enc['cipher']}")
        salt = bytes.fromhex(enc["salt"])
        if enc["kdf"] == "keyfile":
            secret = open(key_file, "rb").read()
            if len(secret) < 16:
                raise Damaged("a key file holds at least 16 bytes")
            self.kek = hkdf_sha256(secret, salt, b"litectl key file")
        elif enc["kdf"] == "scrypt":
            self.kek = hashlib.scrypt(passphrase, salt=salt, n=enc["n"], r=enc["r"], p=enc["p"],
                                      maxmem=256 * enc["n"] * enc["r"] * enc["p"] + (1 << 20), dklen=32)
        else:
            raise Damaged(f"unknown kdf {enc['kdf']}")
        self.master = aes_gcm_open(self.kek, bytes.fromhex(enc["wrapped_key"]), "wrapped_key (wrong key?)")
        # No salt: HMAC pads an empty key with zeros, so 32 zero bytes (RFC 5869's default) are the same.
        self.object_key = hkdf_sha256(self.master, bytes(32), b"litectl repository encryption")
        self.page_id_key = hkdf_sha256(self.master, b"", b"litectl repository page id")

    def open(self, stored, what):
        return stored if self.object_key is None else aes_gcm_open(self.object_key, stored, what)

    def page_id(self, page):
        if self.page_id_key is None:
            return sha256(page)
        return hmac.new(self.page_id_key, page, hashlib.sha256).digest()


# --- zstd (spec: "Pages, blobs and packs") ---------------------------------------

def zstd_frame_header(frame):
    """(content size, has checksum) from a zstd frame header (RFC 8878 3.1.1.1)."""
    if frame[:4] != b"\x28\xb5\x2f\xfd" or len(frame) < 6:
        raise Damaged("not a zstd frame")
    fhd = frame[4]
    fcs_flag, single_segment, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    at = 5 + (0 if single_segment else 1) + [0, 1, 2, 4][dict_flag]
    size_bytes = [1 if single_segment else 0, 2, 4, 8][fcs_flag]
    if size_bytes == 0:
        raise Damaged("a zstd frame without its content size")
    size = int.from_bytes(frame[at:at + size_bytes], "little") + (256 if size_bytes == 2 else 0)
    return size, bool(checksum)


def zstd_decompress(frame, what):
    size, _ = zstd_frame_header(frame)
    run = subprocess.run(["zstd", "-d", "-c", "-q"], input=frame, capture_output=True)
    if run.returncode != 0 or len(run.stdout) != size:
        raise Damaged(f"{what}: does not decompress to its {size} bytes")
    return run.stdout


# --- binary objects -------------------------------------------------------------

class Reader:
    def __init__(self, data, what):
        self.data, self.at, self.what = data, 0, what

    def take(self, n):
        if self.at + n > len(self.data):
            raise Damaged(f"{self.what}: truncated")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def end(self):
        if self.at != len(self.data):
            raise Damaged(f"{self.what}: bytes after the last entry")


def parse_index(raw, what):
    r = Reader(raw, what)
    if r.take(4) != b"LCIX":
        raise Damaged(f"{what}: not an index object")
    version = r.u32()
    if version != 2:
        raise Damaged(f"{what}: index version {version} (this reader knows 2)")
    packs = [r.take(32) for _ in range(r.u32())]
    blobs = []
    for _ in range(r.u32()):
        pack, offset, length, log2, k = r.u32(), r.u32(), r.u32(), r.u8(), r.u8()
        if pack >= len(packs) or not 9 <= log2 <= 16 or k < 1:
            raise Damaged(f"{what}: a blob out of range")
        blobs.append({"pack": packs[pack], "pack_number": pack, "offset": offset, "length": length,
                      "page_size": 1 << log2, "log2": log2, "ids": [r.take(32) for _ in range(k)]})
    r.end()
    return packs, blobs


def parse_list(raw, what):
    r = Reader(raw, what)
    if r.take(4) != b"LCPL" or r.u32() != 1:
        raise Damaged(f"{what}: not a page list of version 1")
    kind, count = r.u8(), r.u32()
    if kind == 0:
        ids = [r.take(32) for _ in range(count)]
        r.end()
        return {"kind": "full", "count": count, "ids": ids}
    if kind == 1:
        base = r.take(32)
        changes = []
        for _ in range(r.u32()):
            index, page_id = r.u32(), r.take(32)
            if index >= count:
                raise Damaged(f"{what}: page index past the count")
            changes.append((index, page_id))
        r.end()
        return {"kind": "delta", "count": count, "base": base, "changes": changes}
    raise Damaged(f"{what}: unknown kind {kind}")


# --- a repository ---------------------------------------------------------------

class Repository:
    ADDRESSED = ("index/", "lists/", "snapshots/")

    def __init__(self, root, key_file=None, passphrase_file=None):
        self.root = root
        self.config_bytes = open(os.path.join(root, "config"), "rb").read()
        self.config = json.loads(self.config_bytes)
        if self.config.get("format") != "litectl-repository" or self.config.get("version") not in (2, 3):
            raise Damaged("config: not a litectl repository of version 2 or 3")
        if self.config["compression"] != "zstd":
            raise Damaged("config: compression is not zstd")
        passphrase = passphrase_from_file(passphrase_file) if passphrase_file else None
        self.keys = Keys(self.config, key_file, passphrase)
        self.index = {}
        self.index_objects = []
        for key in self.keys_under("index"):
            packs, blobs = parse_index(self.read_object(key), key)
            self.index_objects.append((key, packs, blobs))
            for blob in blobs:
                for slot, page_id in enumerate(blob["ids"]):
                    self.index.setdefault(page_id, (blob, slot))   # the first object listed wins

    def keys_under(self, prefix):
        folder = os.path.join(self.root, prefix)
        if not os.path.isdir(folder):
            return []
        return sorted(prefix + "/" + n for n in os.listdir(folder) if not n.startswith("."))

    def stored(self, key):
        return open(os.path.join(self.root, key), "rb").read()

    def read_object(self, key, compressed=True):
        """An object opened: its name checked (index, lists, snapshots), unsealed, decompressed."""
        data = self.stored(key)
        if key.startswith(self.ADDRESSED) and sha256(data).hex() != key.rsplit("/", 1)[1]:
            raise Damaged(f"{key}: its SHA-256 is not its name")
        data = self.keys.open(data, key)
        return zstd_decompress(data, key) if compressed else data

    def pack(self, pack_id):
        hexid = pack_id.hex()
        data = self.stored(f"packs/{hexid[:2]}/{hexid}")
        if sha256(data).hex() != hexid:
            raise Damaged(f"pack {hexid}: its SHA-256 is not its name")
        return data

    def snapshots(self):
        out = []
        for key in self.keys_under("snapshots"):
            raw = self.read_object(key, compressed=False)
            snapshot = json.loads(raw)
            if snapshot.get("format") != "litectl-snapshot" or snapshot.get("version") not in (1, 2):
                raise Damaged(f"{key}: not a litectl snapshot")
            compact = json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False).encode()
            if compact != raw:
                raise Damaged(f"{key}: not compact JSON in the documented key order")
            out.append((key.split("/", 1)[1], snapshot, raw))
        return sorted(out, key=lambda s: (s[1]["time_unix"], s[0]))

    def page_ids(self, list_id):
        top = parse_list(self.read_object("lists/" + list_id), "lists/" + list_id)
        if top["kind"] == "full":
            return top["ids"]
        base = parse_list(self.read_object("lists/" + top["base"].hex()), "lists/" + top["base"].hex())
        if base["kind"] != "full":
            raise Damaged(f"lists/{list_id}: its base is not a full list")
        count = top["count"]
        ids = base["ids"][:count] + [None] * max(0, count - len(base["ids"]))
        for index, page_id in top["changes"]:
            ids[index] = page_id
        if any(i is None for i in ids):
            raise Damaged(f"lists/{list_id}: pages past its base's end are missing")
        return ids

    def rebuild(self, snapshot, target):
        ids = self.page_ids(snapshot["list"])
        if len(ids) != snapshot["page_count"]:
            raise Damaged("the page list's length is not the snapshot's page count")
        page_size = snapshot["page_size"]
        blobs = {}
        with open(target, "wb") as out:
            for n, page_id in enumerate(ids):
                if page_id not in self.index:
                    raise Damaged(f"page {n + 1} ({page_id.hex()[:12]}) is in no index object")
                blob, slot = self.index[page_id]
                if blob["page_size"] != page_size:
                    raise Damaged(f"page {n + 1}: a blob of another page size")
                where = (blob["pack"], blob["offset"])
                if where not in blobs:
                    stored = self.pack(blob["pack"])[blob["offset"]:blob["offset"] + blob["length"]]
                    frame = self.keys.open(stored, f"blob at {blob['offset']} of pack {blob['pack'].hex()[:12]}")
                    pages = zstd_decompress(frame, "blob")
                    if len(pages) != len(blob["ids"]) * page_size:
                        raise Damaged("a blob of the wrong size")
                    blobs[where] = pages
                page = blobs[where][slot * page_size:(slot + 1) * page_size]
                if self.keys.page_id(page) != page_id:
                    raise Damaged(f"page {n + 1}: its content does not match its id")
                out.write(page)
        if snapshot["version"] == 2:
            if sha256(b"".join(ids)).hex() != snapshot["pages_sha256"]:
                raise Damaged("the SHA-256 of the page ids is not pages_sha256")
        elif sha256(open(target, "rb").read()).hex() != snapshot["database_sha256"]:
            raise Damaged("the file's SHA-256 is not database_sha256")
        return ids

    def lock(self, key):
        """A lock: JSON, a space, then letters (sealed when encrypted)."""
        raw = self.keys.open(self.stored(key), key)
        text = raw.decode("utf-8")
        body, end = json.JSONDecoder().raw_decode(text)
        tail = text[end:]
        if not (tail.startswith(" ") and tail[1:].isalpha() and tail[1:].islower()):
            raise Damaged(f"{key}: the JSON is not followed by a space and letters")
        if list(body) != ["hostname", "pid", "time_unix", "exclusive", "command"]:
            raise Damaged(f"{key}: fields {list(body)}")
        return body, raw


# --- the worked example ---------------------------------------------------------

def hexbytes(data):
    return " ".join(f"{b:02x}" for b in data)


def annotated(rows):
    """Rows of (bytes, note) as a hex listing: fields of up to 8 bytes on one
    line, 32-byte ids as one line of 64 hex digits."""
    lines = []
    for data, note in rows:
        shown = data.hex() if len(data) == 32 else hexbytes(data)
        lines.append(f"{shown:<25} {note}" if len(data) < 32 else f"{shown}  {note}")
    return "\n".join(l.rstrip() for l in lines)


def index_rows(raw):
    r = Reader(raw, "index")
    rows = [(r.take(4), '"LCIX"'), (r.take(4), "version 2")]
    p_bytes = r.take(4)
    p = struct.unpack("<I", p_bytes)[0]
    rows.append((p_bytes, f"P = {p} pack{'s' if p != 1 else ''}"))
    for i in range(p):
        rows.append((r.take(32), f"pack {i}"))
    b_bytes = r.take(4)
    b = struct.unpack("<I", b_bytes)[0]
    rows.append((b_bytes, f"B = {b} blob{'s' if b != 1 else ''}"))
    for i in range(b):
        fields = [r.take(4), r.take(4), r.take(4), r.take(1), r.take(1)]
        pack, offset, length = (struct.unpack("<I", f)[0] for f in fields[:3])
        log2, k = fields[3][0], fields[4][0]
        rows += [(fields[0], f"blob {i}: pack number {pack}"), (fields[1], f"  offset {offset}"),
                 (fields[2], f"  length {length}"), (fields[3], f"  page size 2^{log2} = {1 << log2}"),
                 (fields[4], f"  k = {k} page{'s' if k != 1 else ''}")]
        for s in range(k):
            rows.append((r.take(32), f"  slot {s}"))
    return rows


def list_rows(raw):
    r = Reader(raw, "list")
    rows = [(r.take(4), '"LCPL"'), (r.take(4), "version 1")]
    kind = r.take(1)
    count_bytes = r.take(4)
    count = struct.unpack("<I", count_bytes)[0]
    rows += [(kind, "kind 0: full" if kind[0] == 0 else "kind 1: delta"), (count_bytes, f"C = {count} pages")]
    if kind[0] == 0:
        for i in range(count):
            rows.append((r.take(32), f"page {i + 1}"))
    else:
        rows.append((r.take(32), "base: a full list's id"))
        k_bytes = r.take(4)
        k = struct.unpack("<I", k_bytes)[0]
        rows.append((k_bytes, f"K = {k} change{'s' if k != 1 else ''}"))
        for _ in range(k):
            index_bytes = r.take(4)
            index = struct.unpack("<I", index_bytes)[0]
            rows += [(index_bytes, f"page index {index} (page {index + 1})"), (r.take(32), f"  its id")]
    return rows


def code(text, lang=""):
    return f"```{lang}\n{text}\n```"


def frame_header_rows(frame, pages, page_size):
    """The first bytes of a zstd frame, annotated."""
    fhd = frame[4]
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    size_bytes = [1 if single else 0, 2, 4, 8][fcs_flag]
    at = 5 + (0 if single else 1) + [0, 1, 2, 4][dict_flag]
    size, _ = zstd_frame_header(frame)
    rows = [(frame[:4], "zstd's magic number"),
            (frame[4:5], "frame header descriptor: " + ", ".join(
                (["single segment"] if single else []) + [f"{size_bytes}-byte content size"] +
                (["content checksum"] if checksum else ["no checksum"])))]
    if not single:
        rows.append((frame[5:6], "window descriptor"))
    field = frame[at:at + size_bytes]
    plus = f"0x{field[::-1].hex()} + 256 = " if size_bytes == 2 else ""
    rows.append((field, f"content size: {plus}{size} = {pages} pages × {page_size}"))
    return rows


def example(fixtures):
    plain = Repository(os.path.join(fixtures, "plain"))
    keyed = Repository(os.path.join(fixtures, "keyfile"), key_file=os.path.join(fixtures, "keyfile.key"))
    spoken = Repository(os.path.join(fixtures, "passphrase"), passphrase_file=os.path.join(fixtures, "passphrase.txt"))
    out = []
    say = out.append

    say("### A plain repository (`plain/`)")
    say("")
    say("Two backups of one database of 1024-byte pages, the second after one row changed,")
    say("and the lock of a third that was killed:")
    say("")
    listing = [f"config  ({len(plain.config_bytes)} bytes)"]
    for folder in ("index", "lists", "locks", "packs", "snapshots"):
        for dirpath, _, files in sorted(os.walk(os.path.join(plain.root, folder))):
            for name in sorted(files):
                key = os.path.relpath(os.path.join(dirpath, name), plain.root)
                listing.append(f"{key}  ({os.path.getsize(os.path.join(dirpath, name))} bytes)")
    say(code("\n".join(listing)))
    say("")
    say("`config`, as stored (with a newline at the end):")
    say("")
    say(code(plain.config_bytes.decode().rstrip("\n"), "json"))
    say("")
    snapshots = plain.snapshots()
    first_id, first, first_raw = snapshots[0]
    second_id, second, _ = snapshots[1]
    say(f"The first snapshot, `snapshots/{first_id}`. It is stored compact (no")
    say(f"space or newline, {len(first_raw)} bytes: `{first_raw[:40].decode()}...`), keys in this order:")
    say("")
    say(code(json.dumps(first, indent=2, ensure_ascii=False), "json"))
    say("")
    first_ids = plain.page_ids(first["list"])
    page_of = {page_id: n + 1 for n, page_id in enumerate(first_ids)}
    key, packs, blobs = next(o for o in plain.index_objects if first_ids[1] in
                             [i for b in o[2] for i in b["ids"]])
    raw = plain.read_object(key)
    say(f"The first backup's index object, `{key}`, is {len(plain.stored(key))} bytes")
    say(f"as stored: a zstd frame of these {len(raw)} bytes ({len(packs)} pack, {len(blobs)} blobs):")
    say("")
    say(code(annotated(index_rows(raw))))
    say("")
    pack_bytes = plain.pack(blobs[0]["pack"])
    say(f"Its pack, `packs/{blobs[0]['pack'].hex()[:2]}/{blobs[0]['pack'].hex()}`, is the")
    say(f"{len(blobs)} blobs back to back, {len(pack_bytes)} bytes. Blob 0 is bytes {blobs[0]['offset']} to "
        f"{blobs[0]['offset'] + blobs[0]['length']} (offset and length")
    say("above), one zstd frame, which starts:")
    say("")
    frame = pack_bytes[blobs[0]["offset"]:blobs[0]["offset"] + blobs[0]["length"]]
    page_size = blobs[0]["page_size"]
    say(code(annotated(frame_header_rows(frame, len(blobs[0]["ids"]), page_size))))
    say("")
    pages = zstd_decompress(frame, "blob")
    say("Decompressed, slot s is bytes s × 1024 to (s + 1) × 1024, and each one's SHA-256 is")
    say("its id (the page numbers are where the page list below puts them):")
    say("")
    say(code("\n".join(f"sha256(slot {s}) = {sha256(pages[s * page_size:(s + 1) * page_size]).hex()}  page {page_of.get(i, '?')}"
                       for s, i in enumerate(blobs[0]["ids"]))))
    say("")
    list_raw = plain.read_object("lists/" + first["list"])
    say(f"The first snapshot's page list, `lists/{first['list']}`, full:")
    say("")
    say(code(annotated(list_rows(list_raw))))
    say("")
    say(f"`pages_sha256` is the SHA-256 of those {first['page_count']} ids, 32 bytes each, concatenated:")
    say(f"`{sha256(b''.join(first_ids)).hex()}`.")
    say("")
    delta_raw = plain.read_object("lists/" + second["list"])
    say(f"The second snapshot, `snapshots/{second_id}`, has `\"tags\":{json.dumps(second['tags'])}`,")
    say(f"`\"parent\":\"{second['parent']}\"` (the first), `\"pages_new\":{second['pages_new']}`, and as its `list`")
    say(f"`lists/{second['list']}`, a delta on the first's:")
    say("")
    say(code(annotated(list_rows(delta_raw))))
    say("")
    locks = plain.keys_under("locks")
    body, raw = plain.lock(locks[0])
    say(f"The lock, `{locks[0]}`, as stored ({len(raw)} bytes, no newline):")
    say("")
    say(code(raw.decode()))
    say("")

    say("### Encrypted with a key file (`keyfile/`)")
    say("")
    secret = open(os.path.join(fixtures, "keyfile.key"), "rb").read()
    enc = keyed.config["encryption"]
    wrapped = bytes.fromhex(enc["wrapped_key"])
    say(f"The key file holds {len(secret)} bytes, 00 to 1f, all of which are the key. `config`'s `encryption`:")
    say("")
    say(code(json.dumps(enc, indent=2), "json"))
    say("")
    k = keyed.keys
    say(code("\n".join([
        "key-encryption key = HKDF-SHA256(key file bytes, salt, \"litectl key file\")",
        f"                   = {k.kek.hex()}",
        f"wrapped_key        = nonce       {wrapped[:12].hex()}",
        f"                     ciphertext  {wrapped[12:-16].hex()}",
        f"                     tag         {wrapped[-16:].hex()}",
        "master key         = AES-256-GCM open of wrapped_key under the key-encryption key",
        f"                   = {k.master.hex()}",
        "object key         = HKDF-SHA256(master key, no salt, \"litectl repository encryption\")",
        f"                   = {k.object_key.hex()}",
        "page-id key        = HKDF-SHA256(master key, no salt, \"litectl repository page id\")",
        f"                   = {k.page_id_key.hex()}",
    ])))
    say("")
    snap_id, snapshot, snap_plain = keyed.snapshots()[0]
    stored = keyed.stored("snapshots/" + snap_id)
    say(f"Its snapshot, `snapshots/{snap_id}`, is {len(stored)} bytes: the")
    say(f"nonce `{stored[:12].hex()}`, {len(stored) - 28} bytes of ciphertext, the tag")
    say(f"`{stored[-16:].hex()}`; opened, {len(snap_plain)} bytes of JSON. Page 1's id, the")
    say("HMAC-SHA256 of the page under the page-id key, is the first id of its page list:")
    say(f"`{keyed.page_ids(snapshot['list'])[0].hex()}`.")
    say("")

    say("### Encrypted with a passphrase (`passphrase/`)")
    say("")
    text = open(os.path.join(fixtures, "passphrase.txt"), "rb").read()
    taken = passphrase_from_file(os.path.join(fixtures, "passphrase.txt"))
    enc = spoken.config["encryption"]
    shown = text.decode().replace("\n", "\\n")
    say(f"The passphrase file holds `{shown}`; the passphrase is")
    say(f"its first line, the {len(taken)} bytes `{taken.decode()}`. `config`'s `encryption`:")
    say("")
    say(code(json.dumps(enc, indent=2), "json"))
    say("")
    say(code("\n".join([
        f"key-encryption key = scrypt(passphrase, salt, N = {enc['n']}, r = {enc['r']}, p = {enc['p']}, 32 bytes)",
        f"                   = {spoken.keys.kek.hex()}",
        f"master key         = {spoken.keys.master.hex()}",
    ])))
    return "\n".join(out) + "\n"


# --- command line ---------------------------------------------------------------

def secret_options(args):
    key_file = passphrase_file = None
    while args:
        if args[0] == "--key-file":
            key_file = args[1]
        elif args[0] == "--passphrase-file":
            passphrase_file = args[1]
        else:
            sys.exit(f"spec_reader.py: unknown argument {args[0]}")
        args = args[2:]
    return key_file, passphrase_file


def main(argv):
    if AESGCM is None:
        print("spec_reader.py: python3's cryptography package is not installed", file=sys.stderr)
        return 3
    if subprocess.run(["sh", "-c", "command -v zstd"], capture_output=True).returncode != 0:
        print("spec_reader.py: the zstd command is not installed", file=sys.stderr)
        return 3
    try:
        if argv[:1] == ["restore"] and len(argv) >= 3:
            repo = Repository(argv[1], *secret_options(argv[3:]))
            for snapshot_id, snapshot, _ in repo.snapshots():
                target = os.path.join(argv[2], snapshot_id + ".db")
                ids = repo.rebuild(snapshot, target)
                print(json.dumps({"snapshot": snapshot_id, "database": snapshot["database"], "file": target,
                                  "pages": len(ids), "logical_hash": snapshot["logical_hash"]}))
        elif argv[:1] == ["lock"] and len(argv) >= 3:
            repo = Repository(argv[1], *secret_options(argv[3:]))
            body, _ = repo.lock(argv[2])
            print(json.dumps(body))
        elif argv[:1] == ["example"] and len(argv) == 2:
            sys.stdout.write(example(argv[1]))
        else:
            print(__doc__, file=sys.stderr)
            return 64
    except (Damaged, OSError, ValueError, KeyError) as error:
        print(f"spec_reader.py: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
