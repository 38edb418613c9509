"""The reward service as a real server process on 127.0.0.1 with a scripted (slow) verifier:
dynamic batching, 503 when the queue is full, size limits, OpenRLHF's convention, the client in
RewardModel, and a graceful shutdown that answers the requests in flight."""
import json
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from adaptrubric_local import load_trajectories
from adaptrubric_local.rewards.model import RewardModel

from conftest import free_port, oversized_post_status, wait_until_loaded

ROOT = Path(__file__).resolve().parents[1]
SERVER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from adaptrubric_local import FakeEngine
    from adaptrubric_local.rewards.model import RewardModel
    from adaptrubric_local.rewards.serve import ServeConfig, serve

    class Slow(FakeEngine):
        def generate(self, requests):
            time.sleep(0.3)  # a model call costs the same for 1 or 8 trajectories
            return super().generate(requests)

    rm = RewardModel(engine=Slow(script=lambda r: "SCORE: 0" if r.kind == "verify" and "Wi-Fi" in r.prompt
                                 else FakeEngine().script(r)), max_pending=8, batch_window_ms=50,
                     image_roots=[{images!r}])  # the service reads paths inside its roots only
    serve(rm, ServeConfig(port={port}, max_request_bytes=200_000, max_items=16, graceful_timeout_s=20))
""")


def post(url, body, raw=None):
    req = urllib.request.Request(url, data=raw if raw is not None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def start(tmp_path, images):
    port = free_port()
    script = tmp_path / "server.py"
    script.write_text(SERVER.format(root=str(ROOT), port=port, images=str(Path(images).parent)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until_loaded(url, proc)
    return url, proc


@pytest.fixture(scope="module")
def server(tmp_path_factory, synth_set):
    url, proc = start(tmp_path_factory.mktemp("serve"), synth_set)
    yield url, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def trajs(synth_set):
    return [t.to_dict() for t in load_trajectories(synth_set).trajectories[:12]]


def test_batches_concurrent_clients_and_limits(server, trajs):
    url, _ = server
    with ThreadPoolExecutor(8) as ex:
        res = list(ex.map(lambda t: post(url + "/score", {"trajectories": [t]}), trajs[:8]))
    assert [s for s, _ in res] == [200] * 8
    assert [b["verdicts"][0]["id"] for _, b in res] == [t["id"] for t in trajs[:8]]  # each answered once, right one
    assert [b["rewards"][0] for _, b in res] == [0.0 if "Wi-Fi" in t["instruction"] else 1.0 for t in trajs[:8]]
    stats = get(url + "/health")["stats"]
    assert stats["batches"] < 8 and stats["trajectories"] == 8  # gathered into shared batches

    status, body = post(url + "/openrlhf", {"query": ["q"], "prompts": ["p"], "labels": [json.dumps(trajs[0])]})
    assert status == 200 and len(body["rewards"]) == 1 and body["extra_logs"]["adaptrubric_error"] == [0.0]
    status, body = post(url + "/score", {"trajectories": [trajs[0], {"id": "x", "instruction": "i", "steps": []}]})
    assert status == 200 and body["verdicts"][1]["status"] == "error" and body["rewards"][1] is None
    assert post(url + "/score", None, raw=b"{not json")[0] == 400
    assert post(url + "/score", {"trajectories": [trajs[0]] * 17})[0] == 413
    assert oversized_post_status(url + "/score", json.dumps({"trajectories": ["x" * 300_000]}).encode()) == 413


def test_full_queue_answers_503_and_recovers(server, trajs):
    url, _ = server
    with ThreadPoolExecutor(24) as ex:
        res = list(ex.map(lambda i: post(url + "/score", {"trajectories": [trajs[i % 12], trajs[(i + 1) % 12]]}),
                          range(24)))
    codes = [s for s, _ in res]
    assert set(codes) <= {200, 503} and 503 in codes and 200 in codes
    for i, (s, b) in enumerate(res):
        if s == 200:
            assert [v["id"] for v in b["verdicts"]] == [trajs[i % 12]["id"], trajs[(i + 1) % 12]["id"]]
    assert get(url + "/health")["status"] == "ok"
    # the client in RewardModel retries 503s with back-off
    rm = RewardModel(service_url=url)
    with ThreadPoolExecutor(12) as ex:
        vals = list(ex.map(lambda t: rm.rewards([t])[0], trajs))
    assert vals == [0.0 if "Wi-Fi" in t["instruction"] else 1.0 for t in trajs]


def test_graceful_shutdown_answers_in_flight(tmp_path, trajs, synth_set):
    url, proc = start(tmp_path, synth_set)
    with ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(post, url + "/score", {"trajectories": [t]}) for t in trajs[:4]]
        time.sleep(0.15)
        proc.send_signal(signal.SIGTERM)
        res = [f.result() for f in futs]
    assert [s for s, _ in res] == [200] * 4
    assert proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after its graceful shutdown


def test_every_bad_item_answers_under_its_own_id(tmp_path, tiny_model):
    """One request holding every way an item can be bad, between good ones, against `adaptrubric serve` on
    the tiny model: one verdict per item, in order, each carrying its trajectory's id (an item that names
    none: its place), the bad ones errors that say why, the good ones scored; the same through the client."""
    import base64
    import io

    from PIL import Image

    from adaptrubric_local.rewards.images import data_url

    from conftest import make_png

    root, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    for i in range(3):
        make_png(root / f"g{i}.png", seed=i)
    make_png(elsewhere / "x.png", seed=9)
    (root / "garbage.png").write_bytes(b"this is not a PNG")
    whole = (root / "g0.png").read_bytes()
    (root / "cut.png").write_bytes(whole[: len(whole) // 2])  # a valid header, the pixels cut off
    big = io.BytesIO()
    Image.new("RGB", (1200, 1200)).save(big, format="PNG")

    def traj(tid, *shots, **extra):
        return {"id": tid, "instruction": "Turn on Wi-Fi.", **extra,
                "steps": [{"screenshot": s, "action": f"tap({k})", "action_type": "tap"} for k, s in enumerate(shots)]}

    items = [
        traj("good-path", "g0.png", "g1.png"),
        traj("outside", str(elsewhere / "x.png")),                      # a path outside data_root and image_roots
        traj("missing", "g0.png", "nowhere.png"),                       # a file that does not exist
        traj("garbage-file", "g1.png", "garbage.png"),                  # a file that is not an image
        traj("cut-file", "cut.png"),                                    # an image whose pixels cannot be decoded
        traj("schema", "g0.png", colour="red"),                         # a key the record schema does not know
        {"id": "no-steps", "instruction": "Turn on Wi-Fi."},            # a required field missing
        traj("inline-big", data_url(big.getvalue())),                   # over max_image_pixels
        traj("inline-corrupt", "data:image/png;base64," + base64.b64encode(whole[:40]).decode()),
        {"instruction": "Turn on Wi-Fi.", "steps": []},                 # no id at all: answered as its place
        '{"id": "broken-json", "instruction": ',                        # JSON cut short: the id it names first
        str(elsewhere / "t.jsonl"),                                     # a trajectory file outside the roots
        traj("good-inline", data_url(root / "g2.png")),
    ]
    expected = ["good-path", "outside", "missing", "garbage-file", "cut-file", "schema", "no-steps", "inline-big",
                "inline-corrupt", "item 9", "broken-json", "item 11", "good-inline"]
    why = {"outside": "lies outside the service's data_root", "missing": "screenshot not found",
           "garbage-file": "garbage.png", "cut-file": "cut.png", "schema": "unknown keys ['colour']",
           "no-steps": "'steps'", "inline-big": "> limit 1,000,000 (max_image_pixels)",
           "inline-corrupt": "not an image PIL can read",
           "item 9": "'id'", "broken-json": "not valid JSON", "item 11": "lies outside the service's data_root"}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "adaptrubric_local.cli", "serve", "--model", str(tiny_model),
                             "--port", str(port), "--data-root", str(root), "--max-image-pixels", "1000000",
                             "--router", "rules", "--no-fine", "--verify-max-new-tokens", "8"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_loaded(url, proc)
        status, body = post(url + "/score", {"trajectories": items})
        assert status == 200 and len(body["verdicts"]) == len(items) == len(body["rewards"])
        by_id = {v["id"]: v for v in body["verdicts"]}
        assert [v["id"] for v in body["verdicts"]] == expected and len(by_id) == len(items)  # each id once
        for tid in expected:
            v = by_id[tid]
            if tid.startswith("good"):
                assert v["status"] in ("ok", "unparsed") and v["n_images"] >= 1, v  # scored (random weights)
            else:
                assert v["status"] == "error" and why[tid] in v["error"], (tid, v["error"])
        # the package's own client matches the same way, whatever the service answered
        verdicts = RewardModel(service_url=url, data_root=str(root)).score(items)
        assert [v.id for v in verdicts] == expected
        assert [v.status == "error" for v in verdicts] == [not t.startswith("good") for t in expected]
    finally:
        proc.terminate()
        proc.wait(30)
