"""What `--model` names (engine/model_path.py), as a user meets it through `score`: a folder that is not a
saved model, a bare name that is no folder here, a LoRA adapter, weights without their processor: each one
line saying what was found and what was expected (the hub is never asked: HF_HUB_OFFLINE)."""
import json

from conftest import canonical_record, write_jsonl


def test_model_errors_say_what_was_found_and_what_was_expected(tiny_model, tmp_path, monkeypatch, capsys):
    import shutil

    from adaptrubric_local.cli import main

    data = write_jsonl(tmp_path / "d.jsonl", [canonical_record(tmp_path, "t1", 2)])
    shutil.copytree(tiny_model, tmp_path / "runs" / "tiny")
    (tmp_path / "runs" / "verdicts.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no test reads the network

    def error(model):
        assert main(["score", str(data), "--model", model, "--out", str(tmp_path / "v.jsonl"), "--router", "rules",
                     "--no-fine", "--quiet"]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines  # one line, no traceback
        return lines[0]

    # an existing folder that is not a model: what it holds, what a model folder holds, where the model is
    msg = error("runs")
    assert ("--model runs: a folder, but not a saved model: no config.json (it holds 2 entries: tiny/, "
            "verdicts.jsonl)") in msg
    assert "save_pretrained" in msg and "the model folder(s) inside it: runs/tiny" in msg
    assert "Unrecognized processing class" not in msg
    # a bare name that is no folder here: not advice to download it
    (tmp_path / "runs" / "tiny").rename(tmp_path / "tiny")
    msg = error("tinyy")
    assert f"--model tinyy: no folder named tinyy in {tmp_path} (did you mean tiny?)" in msg
    assert "hub ids look like Org/Name" in msg and "hf download" not in msg
    # a mistyped folder with a slash: the same "did you mean" as with ./, not a hub id to download
    (tmp_path / "models").mkdir()
    (tmp_path / "tiny").rename(tmp_path / "models" / "tiny")
    for typo in ("models/tinyy", "./models/tinyy"):
        msg = error(typo)
        assert f"model folder not found: {typo} (did you mean models/tiny?)" in msg, msg
        assert "hf download" not in msg
    (tmp_path / "models" / "tiny").rename(tmp_path / "tiny")
    # a LoRA adapter given as the model
    (tmp_path / "lora").mkdir()
    base = {"base_model_name_or_path": "Qwen/Qwen3-VL-4B-Instruct"}
    (tmp_path / "lora" / "adapter_config.json").write_text(json.dumps(base))
    assert "pass --adapter lora --model Qwen/Qwen3-VL-4B-Instruct" in error("lora")
    # weights without their processor (a bare training checkpoint)
    shutil.copytree(tmp_path / "tiny", tmp_path / "ckpt", ignore=shutil.ignore_patterns("processor_config.json"))
    assert "not its processor (no processor_config.json or preprocessor_config.json)" in error("ckpt")
    assert main(["score", str(data), "--model", "tiny", "--out", str(tmp_path / "v.jsonl"), "--router", "rules",
                 "--no-fine", "--quiet", "--verify-max-new-tokens", "2"]) == 0  # the folder itself loads
