"""`adaptrubric bank induce|refine` (cli_bank.py): the teacher options. The induction and refinement
themselves are tested in test_bank_induction.py, over HTTP in test_bank_induction_openai.py."""


def bank_cli(monkeypatch):
    """`adaptrubric` with the `bank` commands registered (cli.py loads cli_bank once it is in its list)."""
    from adaptrubric_local import cli
    from adaptrubric_local.cli import bank as cli_bank

    build = cli.build_parser

    def build_with_bank():
        ap = build()
        sub = ap._subparsers._group_actions[0]
        if "bank" not in sub.choices:
            cli_bank.add_subcommands(sub)
        return ap

    monkeypatch.setattr(cli, "build_parser", build_with_bank)
    return cli.main


def test_cli_bank_induce_and_refine_need_one_teacher(domain, tmp_path, capsys, monkeypatch):
    path, _ = domain
    run = bank_cli(monkeypatch)
    assert run(["bank", "induce", str(path), "--out", str(tmp_path / "b.yaml")]) == 2
    assert "exactly one teacher" in capsys.readouterr().err
    assert run(["bank", "induce", str(path), "--out", str(tmp_path / "b.yaml"), "--teacher-url", "http://x/v1"]) == 2
    assert "--teacher-name" in capsys.readouterr().err
    assert run(["bank", "refine", str(path), "--out", str(tmp_path / "r"), "--teacher-url", "http://x/v1",
                "--teacher-name", "t"]) == 2
    assert "--model" in capsys.readouterr().err
    for cmd in (["induce", str(path), "--out", str(tmp_path / "b.yaml")],
                ["refine", str(path), "--out", str(tmp_path / "r"), "--model", "m"]):
        assert run(["bank", *cmd, "--teacher-url", "http://127.0.0.1:9/v1", "--teacher-name", "t"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "http://127.0.0.1:9/v1 did not answer" in err[0], err  # one line, before any record
