"""The model against measurement: :func:`compare_with_record` sets the model's prediction beside each measurement
of a recorded result file (a profiling sweep, an experiment's runs, an arm of the recall study).
"""
from __future__ import annotations

from types import SimpleNamespace

from ..designs import Arm
from ..layer import DEFAULT_COMPONENTS
from ._chapters import classification_points, lm_points
from ._devices import PROFILES, DeviceProfile, profile
from ._recall import recall_run_point
from ._work import Point, block_work, point_seconds


def _result_mixer(result: dict, device: DeviceProfile) -> tuple[str, bool]:
    """The mixer of a profiling result and whether to cost it as on a CUDA device: a sweep row names its
    ``"mixer"``; a row of the equal-state block record names only its ``"label"`` (``"gma"``, the path GMA runs
    on that device; ``"gma (operators)"``, the operator form, costed with the entry every device but a CPU runs)."""
    label = result.get("mixer") or result["label"]
    on_cuda = str(result.get("device", "cuda" if device.is_cuda else "cpu")).startswith("cuda")
    if label.startswith("gma"):
        return "gma", on_cuda or "operators" in label
    return label, on_cuda


def compare_with_record(record: dict, device_profile=None) -> list[dict]:
    """The model beside a recorded result file, one row per measurement.

    Args:
        record: a loaded record of :func:`gma_teach.measure.results_folder`: a profiling sweep (``"results"`` rows
            of chapter 8's protocol, the sweep's or the equal-state block record's), an experiment (``"experiment"``,
            ``"config"``, ``"runs"``) or an arm of the
            recall study (``"spec"`` and ``"config"``, or ``"design"``, with ``"width"`` and ``"runs"``: each run's
            training on one core, its
            ``cpu_seconds``, against the model's single-threaded time; the mixer needs a cost-model entry).
        device_profile: the profile to predict with; default: ``"cpu-2core"`` for a CPU record, else the GPU
            profile whose name appears in the record's GPU name (``"t4"``, ``"a100"``, ...), else ``"h200"``.

    Returns:
        rows ``{"label", "measured_seconds", "predicted_seconds", "measured_bytes", "predicted_bytes"}``
        (bytes ``None`` where the record has none).
    """
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict (a loaded result file), got {type(record).__name__}")
    device = profile(device_profile) if device_profile is not None else _record_profile(record)
    if "results" in record:
        rows = []
        config = record.get("config", {})
        for r in record["results"]:
            mixer, on_cuda = _result_mixer(r, device)
            work = block_work(mixer, d_model=r["d_model"], n_heads=r["n_heads"], seq_len=r["seq_len"],
                              batch_size=r["batch_size"], n_components=r.get("n_components") or
                              config.get("n_components", DEFAULT_COMPONENTS), on_cuda=on_cuda,
                              **{k: config[k] for k in ("n_features", "linformer_k") if k in config},
                              **({"n_features": config["features_per_head"]} if "features_per_head" in config
                                 else {}))
            causal = " causal" if r.get("causal") else ""
            rows.append({"label": f"{r['label']}{causal} N={r['seq_len']}", "measured_seconds": r["seconds"],
                         "predicted_seconds": point_seconds(Point("", work, single_thread=True), device),
                         "measured_bytes": r.get("peak_memory_bytes"), "predicted_bytes": work.peak})
        return rows
    recall = "arm" in record.get("design", {}) or record.get("experiment") == "recall"
    if recall and "runs" in record:
        design = record.get("design") or record["config"]  # a recall record of either form
        point = recall_run_point(design, design.get("arm") or record["spec"], record["width"], evaluate=False)
        predicted = point_seconds(point, device)
        return [{"label": f"{record.get('study', 'recall')} {record['arm']} d={record['width']} lr={run['lr']:g} "
                          f"seed {run['seed']}", "measured_seconds": run["cpu_seconds"],
                 "predicted_seconds": predicted, "measured_bytes": None, "predicted_bytes": point.work.peak}
                for run in record["runs"]]
    if "experiment" in record and "runs" in record:
        config = SimpleNamespace(**record["config"])
        for old, new in (("steps", "n_steps"), ("block_size", "seq_len")):  # records made before the key rename
            if not hasattr(config, new) and hasattr(config, old):
                setattr(config, new, getattr(config, old))
        name, (mixer, k) = record["experiment"], _mixer_and_k(record)
        if name == "lm":
            k = k or config.n_components
            point = lm_points(config, [(f"lm {mixer}", mixer, k)], device.is_cuda)[-1]
        else:
            point = classification_points(name, config, [mixer], [0], device.is_cuda,
                                          10 if name == "listops" else 4)[-1]
        predicted = point_seconds(point, device)
        return [{"label": f"{name} {mixer} seed {run['seed']}", "measured_seconds": run["train_seconds"],
                 "predicted_seconds": predicted, "measured_bytes": None, "predicted_bytes": point.work.peak}
                for run in record["runs"]]
    raise ValueError("record must be a profiling sweep (with 'results'), an experiment record (with 'experiment' "
                     f"and 'runs') or a recall study record (with 'design' and 'runs'); got keys {sorted(record)}")


def _mixer_and_k(record: dict) -> tuple[str, int | None]:
    """The mixer and K (``None`` where the record leaves it to its config) of an experiment's record, in either form:
    one of ``python -m gma_teach.experiments`` from before it ran studies (``"mixer"``, ``"n_components"``), or a
    study arm's (``"spec"``)."""
    if "mixer" in record:
        return record["mixer"], record.get("n_components")
    arm = Arm.from_spec(record["spec"])
    return arm.mixer, arm.n_components


def _record_profile(record: dict) -> DeviceProfile:
    hardware = record.get("hardware")
    text = str(hardware).lower()
    if (isinstance(hardware, dict) and hardware.get("device", "cpu") == "cpu") or text.startswith("cpu"):
        return PROFILES["cpu-2core"]
    for name in ("t4", "a100", "h100", "h200"):
        if name in text:
            return PROFILES[name]
    return PROFILES["h200"]
