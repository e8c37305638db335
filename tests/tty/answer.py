"""Runs a command on a pseudo-terminal, as a person at a terminal would,
and answers its prompts: each time the output shows PROMPT, the next answer
is typed (with Enter). Prints everything the command wrote, then exits with
its status. Used by host/cli/tests/all/approvals.rs to drive the terminal
approver for real (it reads /dev/tty, so a pipe cannot stand in for it).

Usage: answer.py PROMPT ANSWERS_JSON -- COMMAND [ARG...]
Bounded: the command is killed after 60 s.
"""

import json
import os
import pty
import select
import signal
import sys
import time


def main():
    prompt = sys.argv[1].encode()
    answers = json.loads(sys.argv[2])
    command = sys.argv[sys.argv.index("--") + 1 :]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    output = b""
    typed = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break  # the command ended and the terminal closed
            if not chunk:
                break
            output += chunk
        if output.count(prompt) > typed and typed < len(answers):
            os.write(fd, answers[typed].encode() + b"\r")
            typed += 1
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(output.decode("utf-8", "replace"))
    sys.exit(os.waitstatus_to_exitcode(status))


main()
