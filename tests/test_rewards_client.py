"""The service's client (service_client.py): the key from the environment as a bearer token, one replica
per instruction (a GRPO group keeps one replica's route/cue cache), paths made absolute for a service
elsewhere, and a screenshot missing here an error verdict of its own."""
import zlib

import pytest

from adaptrubric_local import load_trajectories
from adaptrubric_local.rewards.client import ServiceClient
from adaptrubric_local.rewards.config import RewardConfig
from adaptrubric_local.types import Verdict


def test_key_replicas_and_payloads(synth_set, monkeypatch, tmp_path):
    monkeypatch.setenv("ADAPTRUBRIC_API_KEY", "k-123")
    cfg = RewardConfig(service_url="http://a:1, http://b:2/", data_root=str(tmp_path))
    client = ServiceClient(cfg)
    assert client.urls == ["http://a:1", "http://b:2"] and client._headers["Authorization"] == "Bearer k-123"
    sent = []
    monkeypatch.setattr(client, "post", lambda url, body: sent.append((url, body)) or {
        "verdicts": [Verdict(id=t["id"], score=1).to_dict() for t in body["trajectories"]]})
    trajs = [t.to_dict() for t in load_trajectories(synth_set).trajectories[:6]]
    missing = {**trajs[0], "id": "gone", "steps": [{"screenshot": "shots/none.png", "action": "a"}]}
    out = client.score([*trajs, missing], cfg)
    assert [v.id for v in out] == [t["id"] for t in trajs] + ["gone"]
    for url, body in sent:
        for t in body["trajectories"]:
            assert url.startswith(client.urls[zlib.crc32(t["instruction"].encode()) % 2])
    gone = next(t for _, b in sent for t in b["trajectories"] if t["id"] == "gone")
    assert gone["steps"][0]["screenshot"] == str(tmp_path / "shots" / "none.png")  # absolute, for the service
    inline = RewardConfig(service_url="http://a:1", data_root=str(tmp_path), inline_images=True)
    client = ServiceClient(inline)
    monkeypatch.setattr(client, "post", lambda url, body: {
        "verdicts": [Verdict(id=t["id"], score=1).to_dict() for t in body["trajectories"]]})
    out = client.score([trajs[0], missing], inline)
    assert out[0].status == "ok" and out[1].status == "error" and "none.png" in out[1].error
    with pytest.raises(ValueError, match="service_url is empty"):
        ServiceClient(RewardConfig(service_url=" , "))
