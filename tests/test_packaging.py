"""What `pip install .` puts in site-packages: the package (with its data files), and no top-level
`training` package (a name that would collide with any other distribution's `training` module)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pip_install_puts_only_the_package_in_site_packages(tmp_path):
    target = tmp_path / "site-packages"
    # the build backend of this environment (no network), the project's own dependencies left out
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-cache-dir", "--target", str(target), str(ROOT)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    top = {p.name for p in target.iterdir() if not p.name.endswith((".dist-info", ".egg-info")) and p.name != "bin"}
    assert top == {"adaptrubric_local"}, top
    assert not (target / "training").exists()
    pkg = target / "adaptrubric_local"
    for data in ("py.typed", "prompts/default.yaml", "data/router_lexicon.yaml", "evaluation/review_assets/review.js"):
        assert (pkg / data).is_file(), data  # the package data ships with it
    assert (pkg / "distill" / "train.py").is_file()  # the training code is inside the package
