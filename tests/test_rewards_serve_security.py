"""The reward service for other machines, on 127.0.0.1: an API key checked on every request (401 and
nothing scored without it), no open address without a key, screenshots that arrive inside the request
(with the decoded-image limits), and a 400 for every malformed body, however deeply nested.

The server is a real `adaptrubric serve` process whose scripted verifier reads the pixels of the frames
it is given (SCORE 1 when the final frame is green), so a verdict shows which images arrived."""
import base64
import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from PIL import Image

from adaptrubric_local import FakeEngine, cli, rewards
from adaptrubric_local.rewards.images import ImageStore, check_image, data_url
from adaptrubric_local.rewards.model import RewardModel
from adaptrubric_local.rewards.serve import ServeConfig, authorized, is_loopback

from conftest import free_port, oversized_post_status, wait_until_loaded

ROOT = Path(__file__).resolve().parents[1]
KEY = "s3cret-key-for-tests"
SERVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from PIL import Image
    from adaptrubric_local import FakeEngine
    from adaptrubric_local.engine.fake import default_script
    from adaptrubric_local.rewards.model import RewardModel
    from adaptrubric_local.rewards.serve import ServeConfig, serve

    def script(req):  # SCORE 1 when the final frame is green: the verdict shows which pixels arrived
        if req.kind != "verify":
            return default_script(req)
        with Image.open(req.images[-1]) as im:
            r, g, b = im.convert("RGB").getpixel((0, 0))
        return f"Looked.\\nSCORE: {{int(g > r)}}\\nEVIDENCE_SUFFICIENT: yes\\nMISSING_EVIDENCE: none"

    serve(RewardModel(engine=FakeEngine(script=script), batch_window_ms=10),
          ServeConfig(port={port}, api_key={key!r}, max_request_bytes=2_000_000))
""")


def request(url, body=None, raw=None, key=KEY, auth=None, method=None):
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    elif key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), dict(e.headers)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A keyed service whose data root and temporary folder are empty folders of its own."""
    home = tmp_path_factory.mktemp("server")
    (home / "tmp").mkdir()
    port = free_port()
    (home / "server.py").write_text(SERVER.format(root=str(ROOT), port=port, key=KEY))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ADAPTRUBRIC_")}, "TMPDIR": str(home / "tmp")}
    proc = subprocess.Popen([sys.executable, "server.py"], cwd=home, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until_loaded(url, proc, KEY)
    yield url, home
    proc.terminate()
    proc.wait(30)


def png(color, size=(64, 128), seed=0) -> bytes:
    """A frame made in memory (never written to a file), filled with `color`."""
    im = Image.new("RGB", size, color)
    im.putpixel((size[0] - 1, size[1] - 1), (seed % 256, 0, 0))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def inline_traj(tid: str, final_color, as_url=True) -> dict:
    shots = [png((200, 200, 200), seed=i) for i in range(2)] + [png(final_color, seed=hash(tid) % 256)]
    return {"id": tid, "instruction": "Turn on Wi-Fi.",
            "steps": [{"screenshot": data_url(s) if as_url else s, "action": f"tap({i})", "action_type": "tap"}
                      for i, s in enumerate(shots)]}


def stats(url) -> dict:
    return request(url + "/health")[1]["stats"]


# ----------------------------------------------------------------------------- the key
def test_no_key_wrong_key_or_wrong_scheme_is_401_and_nothing_is_scored(server):
    url, _ = server
    body = {"trajectories": [inline_traj("a", (0, 200, 0))]}
    before = stats(url)
    for auth in [None, "Bearer wrong", f"Basic {KEY}", f"Bearer {KEY[:-1]}", f"Bearer {KEY}x", "Bearer ", ""]:
        for path in ["/score", "/openrlhf", "/get_reward", "/health"]:
            status, reply, headers = request(url + path, None if path == "/health" else body, key=None, auth=auth)
            assert status == 401, (auth, path)
            assert "API key" in reply["error"] and headers.get("www-authenticate") == "Bearer"
    after = stats(url)
    assert after["trajectories"] == before["trajectories"] and after["requests"] == before["requests"]
    assert after["unauthorized"] - before["unauthorized"] == 7 * 4
    status, reply, _ = request(url + "/score", body)
    assert status == 200 and reply["rewards"] == [1.0]


def test_authorized_compares_the_whole_token():
    assert authorized("Bearer abc", "abc") and authorized("bearer  abc ", "abc")
    assert not any(authorized(h, "abc") for h in [None, "", "abc", "Bearer ab", "Bearer abcd", "Token abc", "Bearer"])


def test_refuses_an_open_address_without_key(monkeypatch, capsys, tmp_path):
    for host in ["0.0.0.0", "::", "192.168.1.5", "myhost.example", ""]:
        assert not is_loopback(host)
        with pytest.raises(ValueError, match="without an API key.*--insecure"):
            ServeConfig(host=host)
        assert ServeConfig(host=host, api_key="k").api_key == "k"
        assert ServeConfig(host=host, insecure=True).api_key is None
    for host in ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost"]:
        assert is_loopback(host) and ServeConfig(host=host).api_key is None
    assert "api_key" not in repr(ServeConfig(api_key="k"))

    # the command refuses before loading anything, and reads the key from the environment or a file
    monkeypatch.delenv("ADAPTRUBRIC_API_KEY", raising=False)
    assert cli.main(["serve", "--fake-engine", "--host", "0.0.0.0"]) == 2
    assert "refusing to serve on '0.0.0.0' without an API key" in capsys.readouterr().err
    served = []
    monkeypatch.setattr("adaptrubric_local.rewards.serve.serve", lambda rm, cfg: served.append(cfg))
    assert cli.main(["serve", "--fake-engine", "--host", "0.0.0.0", "--insecure"]) == 0
    monkeypatch.setenv("ADAPTRUBRIC_API_KEY", "from-env")
    assert cli.main(["serve", "--fake-engine", "--host", "0.0.0.0"]) == 0
    monkeypatch.setenv("OTHER_VAR", "from-other")
    assert cli.main(["serve", "--fake-engine", "--api-key-env", "OTHER_VAR"]) == 0
    (tmp_path / "key").write_text("from-file\n")
    assert cli.main(["serve", "--fake-engine", "--api-key-file", str(tmp_path / "key")]) == 0
    assert [(c.host, c.insecure, c.api_key) for c in served] == [
        ("0.0.0.0", True, None), ("0.0.0.0", False, "from-env"), ("127.0.0.1", False, "from-other"),
        ("127.0.0.1", False, "from-file")]


# ----------------------------------------------------------------------------- inline screenshots
def test_scores_screenshots_that_arrive_inline(server):
    url, home = server
    trajs = [inline_traj("green", (0, 200, 0)), inline_traj("red", (200, 0, 0))]
    status, reply, _ = request(url + "/score", {"trajectories": trajs})
    assert status == 200 and reply["rewards"] == [1.0, 0.0]
    assert [v["n_images"] for v in reply["verdicts"]] == [3, 3]
    # OpenRLHF's convention carries the same records as JSON labels
    status, reply, _ = request(url + "/openrlhf", {"query": ["q"] * 2, "prompts": ["p"] * 2,
                                                  "labels": [json.dumps(t) for t in trajs]})
    assert status == 200 and reply["rewards"] == [1.0, 0.0]
    assert not list((home / "tmp").iterdir())  # the service's copies are gone once answered


def test_client_sends_its_files_inline(server, tmp_path, monkeypatch):
    """RewardModel as a client on another machine: relative paths under its own data root, read there
    and sent inline; the service (whose data root holds no such files) scores them."""
    url, _ = server
    (tmp_path / "shots").mkdir()
    recs = []
    for tid, color in [("g", (0, 220, 0)), ("r", (220, 0, 0))]:
        steps = []
        for i, c in enumerate([(200, 200, 200), color]):
            (tmp_path / "shots" / f"{tid}{i}.png").write_bytes(png(c, seed=i))
            steps.append({"screenshot": f"shots/{tid}{i}.png", "action": f"tap({i})"})
        recs.append({"id": tid, "instruction": "Turn on Wi-Fi.", "steps": steps})
    missing = {"id": "m", "instruction": "x", "steps": [{"screenshot": "shots/none.png", "action": "tap"}]}
    monkeypatch.setenv("ADAPTRUBRIC_API_KEY", KEY)

    rm = RewardModel(service_url=url, data_root=str(tmp_path), inline_images=True)
    verdicts = rm.score([*recs, missing, {**recs[0], "steps": [{"screenshot": png((0, 200, 0)), "action": "t"}]}])
    assert [v.score for v in verdicts] == [1, 0, None, 1]
    assert verdicts[2].status == "error" and "screenshot not found" in verdicts[2].error
    # the RL adapters, with the same option in their configuration (reward.yaml: inline_images: true)
    rewards.configure(service_url=url, data_root=str(tmp_path), inline_images=True)
    try:
        out = rewards.compute_score(data_source="gui", solution_str="", ground_truth=None,
                                    extra_info={"trajectory": recs[0]})
        assert out["score"] == 1.0 and out["status"] == "ok"
        assert rewards.reward_func(["q"], ["p"], [json.dumps(recs[1])])["rewards"].tolist() == [0.0]
    finally:
        rewards.configure(engine=FakeEngine())
    # as paths the service refuses them: outside its data root (on another machine, not on its disk at all)
    by_path = RewardModel(service_url=url, data_root=str(tmp_path)).score(recs[:1])[0]
    assert by_path.status == "error"
    monkeypatch.setenv("ADAPTRUBRIC_API_KEY", "wrong")
    refused = RewardModel(service_url=url, data_root=str(tmp_path), inline_images=True).score(recs[:1])[0]
    assert refused.status == "error" and "401" in refused.error and "api_key_env" in refused.error


def png_header(width: int, height: int, crc_ok=True) -> bytes:
    """A PNG whose header claims width x height (a decompression bomb costs nothing to send)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    crc = zlib.crc32(b"IDAT" + idat) ^ (0 if crc_ok else 1)
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr
            + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
            + struct.pack(">I", len(idat)) + b"IDAT" + idat + struct.pack(">I", crc)
            + struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND")))


def gif() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="GIF")
    return buf.getvalue()


BAD_IMAGES = {
    "giant": (data_url(png_header(8000, 8000)), "64,000,000 pixels > limit 50,000,000"),
    "bomb": (data_url(png_header(30000, 30000)), "decompression bomb"),
    "not an image": ("data:image/png;base64," + base64.b64encode(b"hello").decode(), "not an image"),
    "text type": ("data:text/plain;base64,aGVsbG8=", "expected an image"),
    "not base64": ("data:image/png,rawtext", "not base64-encoded"),
    "bad base64": ("data:image/png;base64,@@@@", "invalid base64"),
    "gif": (data_url(gif()), "GIF format"),
    "corrupt": (data_url(png_header(64, 64, crc_ok=False)), "corrupt"),
}


def test_inline_limits_each_give_an_error_verdict(server):
    url, home = server
    good = inline_traj("ok", (0, 200, 0))
    trajs = [{"id": name, "instruction": "x", "steps": [{"screenshot": value, "action": "tap"}]}
             for name, (value, _) in BAD_IMAGES.items()]
    status, reply, _ = request(url + "/score", {"trajectories": [*trajs, good]})
    assert status == 200 and reply["rewards"] == [None] * len(trajs) + [1.0]
    for (name, (_, message)), v in zip(BAD_IMAGES.items(), reply["verdicts"]):
        assert v["status"] == "error" and message in v["error"] and "item" in v["error"], (name, v["error"])
        assert "steps[0].screenshot" in v["error"]
    big = {"trajectories": [inline_traj("big", (0, 0, 0))] * 2 + [{"id": "x", "instruction": "x", "steps": [
        {"screenshot": "data:image/png;base64," + "A" * 2_100_000}]}]}
    assert oversized_post_status(url + "/score", json.dumps(big).encode(), KEY) == 413
    assert not list((home / "tmp").iterdir())


def test_image_store_checks_and_cleans_up(tmp_path):
    with ImageStore(max_pixels=10_000, parent=str(tmp_path)) as store:
        a = store.put(png((1, 2, 3), size=(50, 50)), "x")
        assert store.put(data_url(png((1, 2, 3), size=(50, 50))), "y") == a  # same content, one file
        assert oct(os.stat(store.folder).st_mode & 0o777) == "0o700" and Path(a).suffix == ".png"
        with pytest.raises(ValueError, match="y: inline image of 200x200"):
            store.put(png((0, 0, 0), size=(200, 200)), "y")
    assert not list(tmp_path.iterdir())
    assert check_image(png((0, 0, 0)), "z") == "PNG"
    rm = RewardModel(engine=FakeEngine(), max_image_pixels=100)
    v = rm.score([inline_traj("x", (0, 200, 0), as_url=False)])[0]
    assert v.status == "error" and "limit 100" in v.error


# ----------------------------------------------------------------------------- malformed bodies
def deep(n, open_="[", close="]", inner="1"):
    return (open_ * n + inner + close * n).encode()


MALFORMED = [
    deep(5000), deep(100_000), b'{"trajectories": ' + deep(5000) + b"}", deep(5000, '{"a":', "}"),
    b'{"trajectories": [{"id": "a", "instruction": "x", "steps": [{"screenshot": "s.png", "action": '
    + deep(900) + b"}]}]}",
    b'{"trajectories": [{"id": "a", "instruction": "x", "steps": [], "label": NaN}]}',
    b'{"trajectories": [{"id": Infinity, "instruction": "x", "steps": []}]}',
    b'{"trajectories": [{"id": "a", "instruction": "x", "steps": [{"screenshot": 12345678901234567890123}]}]}',
    b"\xff\xfe\x00", b"", b"null", b'"text"', b"[]", b'{"trajectories": {}}', b'{"trajectories": [null, 1, "x", []]}',
    b'{"trajectories": [{"id": "a", "instruction": "x", "steps": [{"screenshot": {"nested": [1]}}]}]}',
    b'{"trajectories": [{"id": "a", "instruction": "x", "steps": [{"screenshot": "data:"}]}]}',
    b'{"trajectories": [{"id": "a", "instruction": "x", "steps": [{"screenshot": "../../etc/passwd"}]}]}',
    b'{"labels": ' + deep(3000) + b"}", b'{"labels": [' + b'"{\\"a\\": ' * 50 + b"}",
]


@pytest.mark.parametrize("path", ["/score", "/openrlhf"])
def test_every_malformed_body_is_a_400_or_an_error_verdict(server, path):
    url, _ = server
    for body in MALFORMED:
        status, reply, _ = request(url + path, raw=body)
        assert status in (200, 400), (body[:80], status, reply)
        if status == 200:
            assert all(v["status"] == "error" for v in reply.get("verdicts", [])), body[:80]
            assert all(r in (None, 0.0) for r in reply["rewards"]), body[:80]
    status, reply, _ = request(url + path, raw=deep(5000))
    assert status == 400 and "nested too deeply" in reply["error"]
    assert request(url + "/health")[0] == 200  # still serving
