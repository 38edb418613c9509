"""Benchmark of the reward service: concurrent clients on loopback against `adaptrubric serve` with
the tiny random Qwen3-VL (transformers engine, CPU or GPU), dynamic batching vs batch size 1.

For each side a real server process is started; C client threads send one trajectory per request
(as verl's reward loop and OpenRLHF's rollouts do) until every trajectory of the set has been sent
once. Checked: every request answered exactly once with its own trajectory's verdict. Then an
overload phase against a server with a tiny queue: some requests must get 503, none may crash it.

    python eval/bench_serve.py                       # tiny model built in a temp folder
    python eval/bench_serve.py --n 128 --clients 32 --model runs/tiny

Prints throughput, p50/p99 latency per side; the last line is `ratio=<batched / batch-1 throughput>`.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 600) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {}


def start_server(model: str, max_batch: int, max_queue: int, window_ms: float, new_tokens: int, log: Path):
    port = free_port()
    cmd = [sys.executable, "-m", "adaptrubric_local.cli_serve", "--model", model, "--port", str(port),
           "--max-batch-trajectories", str(max_batch), "--batch-window-ms", str(window_ms), "--max-pending",
           str(max_queue), "--verify-max-new-tokens", str(new_tokens), "--max-batch-size", str(max_batch)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 300:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if json.loads(r.read())["loaded"]:
                    return proc, url, time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not come up in 300 s")


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def run_clients(url: str, trajs: list[dict], clients: int) -> dict:
    """Each trajectory sent once, one per request, from `clients` threads; returns the measurements."""
    answers: dict[str, int] = {}
    wrong, failed, lat = [], [], []
    lock = threading.Lock()
    it = iter(trajs)

    def client():
        while True:
            with lock:
                t = next(it, None)
            if t is None:
                return
            t0 = time.perf_counter()
            status, body = post(url + "/score", {"trajectories": [t]})
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if status != 200:
                    failed.append(status)
                    continue
                vid = body["verdicts"][0]["id"]
                answers[vid] = answers.get(vid, 0) + 1
                if vid != t["id"]:
                    wrong.append((t["id"], vid))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    lat.sort()
    lost = [t["id"] for t in trajs if answers.get(t["id"], 0) == 0]
    twice = [k for k, n in answers.items() if n > 1]
    return {"n": len(trajs), "wall_s": wall, "traj_per_s": len(trajs) / wall,
            "p50_s": statistics.median(lat), "p99_s": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "lost": len(lost), "answered_twice": len(twice), "wrong": len(wrong), "failed": len(failed)}


def overload(url: str, trajs: list[dict], clients: int) -> dict:
    """Many clients at once against a small queue: count 200s and 503s, check nothing else happens."""
    with ThreadPoolExecutor(clients) as ex:
        res = list(ex.map(lambda i: post(url + "/score", {"trajectories": [trajs[i % len(trajs)]]}, 600),
                          range(clients)))
    codes = [s for s, _ in res]
    ok_right = all(b["verdicts"][0]["id"] == trajs[i % len(trajs)]["id"] for i, (s, b) in enumerate(res) if s == 200)
    with urllib.request.urlopen(url + "/health", timeout=10) as r:
        healthy = json.loads(r.read())["status"] == "ok"
    return {"requests": len(codes), "ok": codes.count(200), "busy_503": codes.count(503),
            "other": len(codes) - codes.count(200) - codes.count(503), "right_answers": ok_right,
            "healthy_after": healthy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="Qwen3-VL folder (default: build the tiny random model)")
    ap.add_argument("--n", type=int, default=64, help="trajectories per side (default 64)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--max-batch", type=int, default=16, help="batched side: most trajectories per batch")
    ap.add_argument("--window-ms", type=float, default=50.0, help="batching window (default 50 ms)")
    ap.add_argument("--new-tokens", type=int, default=32, help="verifier output cap (default 32)")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from adaptrubric_local import load_trajectories
    from adaptrubric_local.synth import synthesize

    work = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    model = a.model
    if not model:
        from adaptrubric_local.dry_run import tokenizer_corpus
        from adaptrubric_local.engine.tiny import make_tiny_model

        model = str(make_tiny_model(work / "tiny", corpus=tokenizer_corpus()))
    tasks = max(1, a.n // 4)
    trajs = [t.to_dict() for t in load_trajectories(synthesize(work / "data", n_tasks=tasks, candidates=4,
                                                               size=(180, 400))).trajectories][:a.n]
    results = {}
    for name, batch in (("batch1", 1), ("dynamic", a.max_batch)):
        proc, url, startup = start_server(model, batch, 10_000, a.window_ms if batch > 1 else 0.0, a.new_tokens,
                                          work / f"{name}.log")
        try:
            post(url + "/score", {"trajectories": [trajs[0]]})  # warm-up
            r = run_clients(url, trajs, a.clients)
            with urllib.request.urlopen(url + "/health", timeout=10) as h:
                st = json.loads(h.read())["stats"]
            r["mean_batch"] = st["trajectories"] / max(1, st["batches"])
        finally:
            stop(proc)
        r["startup_s"] = startup
        results[name] = r
        print(f"{name:>8}: {r['traj_per_s']:.2f} traj/s  p50 {r['p50_s']:.2f} s  p99 {r['p99_s']:.2f} s  "
              f"(mean batch {r['mean_batch']:.1f}, n={r['n']}, clients={a.clients}, wall {r['wall_s']:.1f} s, "
              f"startup {startup:.1f} s; lost {r['lost']}, answered twice {r['answered_twice']}, "
              f"wrong {r['wrong']}, failed {r['failed']})",
              flush=True)
    proc, url, _ = start_server(model, a.max_batch, 4, a.window_ms, a.new_tokens, work / "overload.log")
    try:
        results["overload"] = o = overload(url, trajs, 4 * a.clients)
    finally:
        stop(proc)
    print(f"overload: {o['requests']} simultaneous requests, queue 4: {o['ok']} answered, {o['busy_503']} got 503, "
          f"{o['other']} other; answers right: {o['right_answers']}; healthy after: {o['healthy_after']}")
    ratio = results["dynamic"]["traj_per_s"] / results["batch1"]["traj_per_s"]
    results["ratio"] = ratio
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    bad = any(results[k][m] for k in ("batch1", "dynamic") for m in ("lost", "answered_twice", "wrong", "failed"))
    if bad or o["other"] or not o["healthy_after"] or not o["right_answers"] or not o["busy_503"]:
        print("CHECK FAILED: see the lines above", file=sys.stderr)
    print(f"ratio={ratio:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
