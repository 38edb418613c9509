"""Options shared by the subcommands (cli_common.py): every command that scores or shows a prompt takes the
same pipeline and engine flags, the config they describe, and when a model is needed before the verifier."""
import argparse

import pytest

from adaptrubric_local.cli import build_parser
from adaptrubric_local.cli.common import add_scoring_options, needs_engine, pipeline_config
from adaptrubric_local.pipeline import PipelineConfig


def _options(command: str) -> set[str]:
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    return {s for a in sub._actions for s in a.option_strings}


def test_score_prompt_and_ablate_share_the_pipeline_and_engine_flags():
    ap = argparse.ArgumentParser()
    add_scoring_options(ap)
    shared = {s for a in ap._actions for s in a.option_strings} - {"-h", "--help"}
    assert {"--router", "--no-fine", "--manual-cues", "--max-images", "--model", "--format", "--image-root"} <= shared
    for command in ("score", "prompt", "ablate"):
        assert shared <= _options(command), command


def test_the_flags_describe_the_pipeline_config():
    ap = argparse.ArgumentParser()
    add_scoring_options(ap)
    defaults = pipeline_config(ap.parse_args([]))
    paper = PipelineConfig()
    assert (defaults.router, defaults.coarse, defaults.fine, defaults.max_images, defaults.dedupe_frames) == (
        paper.router, paper.coarse, paper.fine, paper.max_images, paper.dedupe_frames)
    cfg = pipeline_config(ap.parse_args(["--router", "rules", "--no-fine", "--max-images", "6", "--dedupe-frames"]))
    assert (cfg.router, cfg.fine, cfg.max_images, cfg.dedupe_frames) == ("rules", False, 6, True)


@pytest.mark.parametrize("flags,needed", [
    ([], True),  # the paper's model router and cue writer
    (["--router", "rules"], True),  # cues still come from the model
    (["--router", "rules", "--no-fine"], False),
    (["--router", "rules", "--manual-cues", "Check the date."], False),
])
def test_needs_engine(flags, needed):
    ap = argparse.ArgumentParser()
    add_scoring_options(ap)
    assert needs_engine(pipeline_config(ap.parse_args(flags))) is needed


def test_the_router_help_points_to_the_measured_accuracy():
    ap = argparse.ArgumentParser()
    add_scoring_options(ap)
    assert "less accurate (accuracy: docs/benchmarks.md)" in " ".join(ap.format_help().split())
