"""A fresh virtual environment can install the package and use the API from outside the repository."""
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(tmp_path):
    wheel_dir = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheel_dir), str(ROOT)], check=True, timeout=300)
    env_dir = tmp_path / "env"
    # system site packages provide torch & co.; the package itself must come from the wheel
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = next(wheel_dir.glob("gma_teach-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                    "--ignore-installed", "-q", str(wheel)], check=True, timeout=300)
    script = (
        "import torch, gma_teach, pathlib;"
        "assert 'env' in pathlib.Path(gma_teach.__file__).parts, gma_teach.__file__;"
        "layer = gma_teach.GaussianMixtureAttention(16, 2, 4, causal=True);"
        "print(tuple(layer(torch.randn(1, 9, 16)).shape))"
    )
    done = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 9, 16)"
