#!/usr/bin/env python3
"""Times the phases of a litectl command from its progress bar.

litectl draws its progress bar (`\\r<label> [###...] N% done/total pages`) only when stderr is
a terminal, so this runs the command with stderr on a pseudo-terminal, notes when each label
is first and last drawn, and writes them as JSON to OUT: {"phases": [{"label", "start", "end"}],
"exit": seconds}, in seconds since the command started. stdout is passed through untouched;
whatever else the command writes to stderr (error messages) is copied to this script's stderr.
The exit status is the command's.
Usage: phases.py OUT.json COMMAND [ARG...]
"""
import json
import os
import pty
import re
import sys
import termios
import time

BAR = re.compile(rb"\r([^\r]*?) \[[#.]*\] \d+% \d+/\d+ pages")
CLEAR = b"\r\x1b[K"


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out, command = argv[0], argv[1:]
    start = time.monotonic()
    pid, fd = fork_with_stderr_on_pty(command)
    phases, text = {}, b""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:  # EIO: the command closed its end
            break
        if not data:
            break
        now = time.monotonic() - start
        text += data
        for match in BAR.finditer(text):
            label = match.group(1).decode(errors="replace")
            phases.setdefault(label, [now, now])[1] = now
        # Keep only what may be the start of a bar split across reads; pass the rest through.
        text = BAR.sub(b"", text).replace(CLEAR, b"")
        cut = text.rfind(b"\r")
        rest, text = (text[:cut], text[cut:]) if cut >= 0 else (text, b"")
        if rest:
            sys.stderr.buffer.write(rest)
            sys.stderr.flush()
    _, status = os.waitpid(pid, 0)
    end = time.monotonic() - start
    if text:
        sys.stderr.buffer.write(text)
    with open(out, "w") as f:
        json.dump({"phases": [{"label": k, "start": round(a, 3), "end": round(b, 3)} for k, (a, b) in phases.items()],
                   "exit": round(end, 3)}, f)
    sys.exit(os.waitstatus_to_exitcode(status))


def fork_with_stderr_on_pty(command):
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # keep "\n" as it is (a terminal would turn it into "\r\n")
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    pid = os.fork()
    if pid == 0:
        os.close(master)
        os.dup2(slave, 2)
        os.close(slave)
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    os.close(slave)
    return pid, master


if __name__ == "__main__":
    main(sys.argv[1:])
