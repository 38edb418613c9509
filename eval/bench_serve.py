"""Benchmark of the reward service: concurrent clients on loopback against `adaptrubric serve` with
the tiny random Qwen3-VL (transformers engine, CPU or GPU), dynamic batching vs batch size 1.

For each side a real server process is started, with the data folder as its data root (the service
reads only screenshots inside its data_root or image_roots; `--inline` sends them inside the requests
instead); C client threads send one trajectory per request (as verl's reward loop and OpenRLHF's
rollouts do) until every trajectory of the set has been sent once. Checked: every request answered
exactly once with its own trajectory's verdict, none an error. Then an overload phase against a server
with a tiny queue: some requests must get 503, the others their own verdicts, and the server must stay
healthy.

    python eval/bench_serve.py                       # the figure in docs/benchmarks.md; tiny model built here
    python eval/bench_serve.py --n 128 --clients 32 --model runs/tiny
    python eval/bench_serve.py --smoke               # seconds: the same checks at a small size (CI)

Prints throughput, p50/p99 latency per side; the last line is `ratio=<batched / batch-1 throughput>`.
Exits 1 when a check fails (an answer lost, given twice, another request's, an error verdict, no 503
under overload, an unhealthy server) or the ratio cannot be computed.
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
    """(status, JSON body); a request that fails on the way is status 0."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {}
    except (OSError, ValueError):  # refused, reset, timed out, or a body that is not JSON
        return 0, {}


def launch(model: str, max_batch: int, max_queue: int, window_ms: float, new_tokens: int, log: Path,
           data_root: Path, timeout_s: float) -> tuple:
    """Start one `adaptrubric serve` process; (process, url, start time). `ready` waits for it."""
    port = free_port()
    cmd = [sys.executable, "-m", "adaptrubric_local.cli.serve", "--model", model, "--port", str(port),
           "--max-batch-trajectories", str(max_batch), "--batch-window-ms", str(window_ms), "--max-pending",
           str(max_queue), "--verify-max-new-tokens", str(new_tokens), "--max-batch-size", str(max_batch),
           "--data-root", str(data_root), "--request-timeout-s", str(timeout_s)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    return proc, f"http://127.0.0.1:{port}", time.perf_counter(), log


def ready(server: tuple) -> float:
    """Wait until the server's verifier is loaded; seconds since it was launched."""
    proc, url, t0, log = server
    while time.perf_counter() - t0 < 300:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if json.loads(r.read())["loaded"]:
                    return time.perf_counter() - t0
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


def run_clients(url: str, trajs: list[dict], clients: int, timeout: float) -> dict:
    """Each trajectory sent once, one per request, from `clients` threads; returns the measurements."""
    answers: dict[str, int] = {}
    wrong, failed, errors, lat = [], [], [], []
    lock = threading.Lock()
    it = iter(trajs)

    def client():
        while True:
            with lock:
                t = next(it, None)
            if t is None:
                return
            t0 = time.perf_counter()
            status, body = post(url + "/score", {"trajectories": [t]}, timeout)
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if status != 200:
                    failed.append(status)
                    continue
                for v in body.get("verdicts") or []:  # exactly one is expected; none is a lost answer
                    answers[v.get("id")] = answers.get(v.get("id"), 0) + 1
                    if v.get("id") != t["id"]:
                        wrong.append((t["id"], v.get("id")))
                    if v.get("status") == "error":
                        errors.append((t["id"], v.get("error")))

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
    if errors:
        print(f"error verdicts, e.g. {errors[0][0]}: {errors[0][1]}", file=sys.stderr)
    return {"n": len(trajs), "wall_s": wall, "traj_per_s": len(trajs) / wall,
            "p50_s": statistics.median(lat), "p99_s": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "lost": len(lost), "answered_twice": len(twice), "wrong": len(wrong), "errors": len(errors),
            "failed": len(failed)}


def overload(url: str, trajs: list[dict], clients: int, timeout: float) -> dict:
    """Many clients at once against a small queue: count 200s and 503s, check nothing else happens."""
    with ThreadPoolExecutor(clients) as ex:
        res = list(ex.map(lambda i: post(url + "/score", {"trajectories": [trajs[i % len(trajs)]]}, timeout),
                          range(clients)))
    codes = [s for s, _ in res]
    ok_right = all([v.get("id") for v in b.get("verdicts") or []] == [trajs[i % len(trajs)]["id"]]
                   for i, (s, b) in enumerate(res) if s == 200)
    with urllib.request.urlopen(url + "/health", timeout=10) as r:
        healthy = json.loads(r.read())["status"] == "ok"
    return {"requests": len(codes), "ok": codes.count(200), "busy_503": codes.count(503),
            "other": len(codes) - codes.count(200) - codes.count(503), "right_answers": ok_right,
            "healthy_after": healthy}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--model", help="Qwen3-VL folder (default: build the tiny random model)")
    ap.add_argument("--n", type=int, default=96, help="trajectories per side (default 96)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    ap.add_argument("--max-batch", type=int, default=16, help="batched side: most trajectories per batch")
    ap.add_argument("--window-ms", type=float, default=50.0, help="batching window (default 50 ms)")
    ap.add_argument("--new-tokens", type=int, default=128, help="verifier output cap (default 128)")
    ap.add_argument("--inline", action="store_true",
                    help="send the screenshots inside the requests (data URLs) instead of as paths in the data root")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a request may take (default 600)")
    ap.add_argument("--smoke", action="store_true",
                    help="a small run with the same checks (8 trajectories, 4 clients, 8 new tokens): seconds, for CI")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args(argv)
    if a.smoke:
        a.n, a.clients, a.max_batch, a.new_tokens, a.timeout = 8, 4, 4, 8, 60.0

    sys.path.insert(0, str(ROOT))
    from adaptrubric_local import load_trajectories
    from adaptrubric_local.rewards.images import data_url
    from adaptrubric_local.synth import synthesize

    work = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    model = a.model
    if not model:
        from adaptrubric_local.dry_run import tokenizer_corpus
        from adaptrubric_local.engine.tiny import make_tiny_model

        model = str(make_tiny_model(work / "tiny", corpus=tokenizer_corpus()))
    tasks = max(1, -(-a.n // 4))
    data = synthesize(work / "data", n_tasks=tasks, candidates=4, size=(180, 400))
    trajs = [t.to_dict() for t in load_trajectories(data).trajectories][:a.n]
    if a.inline:
        trajs = [{**t, "steps": [{**s, "screenshot": data_url(s["screenshot"])} for s in t["steps"]]} for t in trajs]
    sys.path.insert(0, str(ROOT / "eval"))
    from _machine import machine

    print(f"{len(trajs)} trajectories ({'screenshots inline' if a.inline else 'paths inside the data root'}), "
          f"{a.clients} clients, {a.new_tokens} new tokens; machine: {machine()}", flush=True)
    serve = dict(new_tokens=a.new_tokens, data_root=data.parent, timeout_s=a.timeout)
    # all three servers load at once (an idle one takes no CPU), then each phase runs alone
    servers = {name: launch(model, batch, queue, a.window_ms if batch > 1 else 0.0, log=work / f"{name}.log", **serve)
               for name, batch, queue in (("batch1", 1, 10_000), ("dynamic", a.max_batch, 10_000),
                                          ("overload", a.max_batch, 4))}
    results = {}
    try:
        for name in ("batch1", "dynamic"):
            startup = ready(servers[name])
            url = servers[name][1]
            post(url + "/score", {"trajectories": [trajs[0]]}, a.timeout)  # warm-up
            r = run_clients(url, trajs, a.clients, a.timeout)
            with urllib.request.urlopen(url + "/health", timeout=10) as h:
                st = json.loads(h.read())["stats"]
            r["mean_batch"] = st["trajectories"] / max(1, st["batches"])
            stop(servers[name][0])
            r["startup_s"] = startup
            results[name] = r
            print(f"{name:>8}: {r['traj_per_s']:.2f} traj/s  p50 {r['p50_s']:.2f} s  p99 {r['p99_s']:.2f} s  "
                  f"(mean batch {r['mean_batch']:.1f}, n={r['n']}, clients={a.clients}, wall {r['wall_s']:.1f} s, "
                  f"startup {startup:.1f} s; lost {r['lost']}, answered twice {r['answered_twice']}, "
                  f"wrong {r['wrong']}, errors {r['errors']}, failed {r['failed']})",
                  flush=True)
        ready(servers["overload"])
        results["overload"] = o = overload(servers["overload"][1], trajs, 4 * a.clients, a.timeout)
    finally:
        for proc, *_ in servers.values():
            if proc.poll() is None:
                stop(proc)
    print(f"overload: {o['requests']} simultaneous requests, queue 4: {o['ok']} answered, {o['busy_503']} got 503, "
          f"{o['other']} other; answers right: {o['right_answers']}; healthy after: {o['healthy_after']}")
    slow = results["batch1"]["traj_per_s"]
    ratio = results["dynamic"]["traj_per_s"] / slow if slow > 0 else None
    results["ratio"] = ratio
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    failed = [f"{k}: {m} {results[k][m]}" for k in ("batch1", "dynamic")
              for m in ("lost", "answered_twice", "wrong", "errors", "failed") if results[k][m]]
    failed += [f"overload: {what}" for what, bad in (
        (f"{o['other']} answers neither 200 nor 503", o["other"]), ("no 503 from the full queue", not o["busy_503"]),
        ("an answer for another request", not o["right_answers"]), ("unhealthy afterwards", not o["healthy_after"]),
        ("the ratio could not be computed", ratio is None)) if bad]
    if failed:
        print("CHECK FAILED: " + "; ".join(failed), file=sys.stderr)
    print(f"ratio={ratio:.2f}" if ratio is not None else "ratio=none")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
