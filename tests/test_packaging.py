"""A fresh virtual environment can install the package's wheel and use the API from outside the repository; the
wheel carries its data files, the version has one source, and the stated floors are the ones the code needs."""
import pathlib
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile

import pytest

import gma_teach

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def running_site_packages() -> list[str]:
    """The site-packages folders the running interpreter imports from: its own environment's, and those it sees
    through ``--system-site-packages`` (a virtual environment on top of another), never the repository itself."""
    folders = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    folders += [entry for entry in sys.path if pathlib.Path(entry).name in ("site-packages", "dist-packages")]
    return [folder for folder in dict.fromkeys(folders) if pathlib.Path(folder).is_dir()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    wheel_dir = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheel_dir), str(ROOT)], check=True, timeout=300)
    return next(wheel_dir.glob("gma_teach-*.whl"))


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(tmp_path, wheel):
    env_dir = tmp_path / "env"
    # A bare environment: gma_teach comes from the wheel only. Its dependencies (torch & co.) come from the running
    # interpreter's environment, whichever it is -- a virtual environment or the system's -- through a .pth file
    # listing the running site-packages *after* the new one. (venv's system_site_packages would point at the base
    # interpreter, which inside a virtual environment has no torch.) Plain folder entries in a .pth file do not run
    # the .pth files inside those folders, so an editable install of gma_teach there stays invisible.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    new_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (pathlib.Path(new_site) / "zz_running_environment.pth").write_text("\n".join(running_site_packages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                    "--ignore-installed", "-q", str(wheel)], check=True, timeout=300)
    script = (
        "import torch, gma_teach, gma_teach.measure, pathlib;"
        "assert 'env' in pathlib.Path(gma_teach.__file__).parts, gma_teach.__file__;"
        "assert any(gma_teach.measure.results_folder().glob('*.json')), 'recorded results missing from the wheel';"
        "layer = gma_teach.GaussianMixtureAttention(16, 2, 4, causal=True);"
        "print(tuple(layer(torch.randn(1, 9, 16)).shape), gma_teach.__version__)"
    )
    done = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(1,", "9,", "16)", gma_teach.__version__]


@pytest.mark.slow
def test_wheel_carries_the_package_data_and_its_version(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "gma_teach/py.typed" in names
    # every module of the package, and every record of book/results/ as gma_teach/results/
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "gma_teach").rglob("*.py")}
    records = {f"gma_teach/results/{path.name}" for path in (ROOT / "book" / "results").glob("*.json")}
    assert records and modules - names == set() and records - names == set(), (modules - names, records - names)
    assert {"gma_teach/data/gpt2.tiktoken", "gma_teach/data/gpt2.tiktoken.LICENSE"} <= names
    assert f"-{gma_teach.__version__}-" in wheel.name, (wheel.name, gma_teach.__version__)


def test_the_listed_packages_are_every_folder_of_the_package():
    setuptools = pyproject()["tool"]["setuptools"]
    folders = {"gma_teach." + path.parent.relative_to(ROOT / "gma_teach").as_posix().replace("/", ".")
               for path in (ROOT / "gma_teach").rglob("__init__.py") if path.parent != ROOT / "gma_teach"}
    assert set(setuptools["packages"]) == {"gma_teach", "gma_teach.results"} | folders
    assert setuptools["package-dir"] == {"gma_teach.results": "book/results"}


def test_version_has_one_source():
    config = pyproject()
    project = config["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gma_teach.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", gma_teach.__version__)


def test_stated_floors_agree_between_pyproject_and_requirements():
    project = pyproject()["project"]
    assert project["requires-python"] == ">=3.10"  # X | None annotations are evaluated at run time
    dependencies = {re.split(r"[<>=;\[ ]", spec)[0]: spec for spec in project["dependencies"]}
    assert dependencies["torch"] == "torch>=2.4"  # torch.library.custom_op
    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    assert "torch>=2.4" in requirements
    for name, spec in dependencies.items():
        assert spec in requirements, f"requirements.txt states {name} differently from pyproject.toml ({spec})"


def test_ci_runs_the_readmes_test_command():
    def test_lines(path):
        return [line.strip().replace("python3 ", "python ") for line in (ROOT / path).read_text().splitlines()
                if "-m pytest tests book" in line]

    readme = test_lines("README.md")
    assert len(readme) == 1, readme
    command = readme[0]
    assert test_lines(".ci/run") == [command]
    assert test_lines(".github/workflows/tests.yml") == [f"run: {command}"]
