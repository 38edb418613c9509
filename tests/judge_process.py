"""The scripted judge of tests/openai_stub.py served by a process of its own, so a test can freeze
it or kill it as an operating system would a real server: `python judge_process.py SCORES.json
SERVED AFTER MODE` prints its /v1 URL on stdout, then after AFTER verifier calls answered, writes the
time to SCORES.json.stopped and stops itself (MODE `freeze`: SIGSTOP, holding its connections open)
or exits (`kill`: the sockets close)."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from openai_stub import Running, Stub


class Stopping(Stub):
    def __init__(self, scores, served, after: int, mode: str, mark: Path):
        super().__init__(scores, served=served)
        self.after, self.mode, self.mark = after, mode, mark

    def reply(self, body, auth):
        out = super().reply(body, auth)
        n = len(self.of_kind("verify"))
        if n == self.after:
            threading.Thread(target=self.stop, daemon=True).start()
        elif n > self.after:  # no answer after the AFTER-th, however fast the client asks
            time.sleep(3600)
        return out

    def stop(self):
        time.sleep(0.2)  # the answer that reached AFTER goes out first
        self.mark.write_text(str(time.time()))
        if self.mode == "freeze":
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            os._exit(0)


if __name__ == "__main__":
    scores_path, served, after, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    scores = json.loads(Path(scores_path).read_text())
    running = Running(Stopping(scores, served, after, mode, Path(scores_path + ".stopped")))
    print(running.url, flush=True)
    while True:
        time.sleep(3600)
