"""The recall study of chapter 12: multi-query associative recall (MQAR) against the size of each mixer's state.

The design is declared before any recorded run, in ``gma_teach.runs.settings.RECALL_STUDY``; its vocabulary,
steps, learning rates, position-embedding scale and the convolution under every mixer were chosen after pilot runs
that are not in the records:

* **Task.** :func:`gma_teach.tasks.mqar` at one sequence length; every model trains on an equal mixture of the
  study's kv-pair counts and is tested on each count separately (Zoology's protocol). Train, validation and test
  examples come from different seeds.
* **Model.** A two-block causal decoder of pre-norm :class:`gma_teach.models.Block` s without FFNs: the first
  block's mixer is a short convolution (:class:`gma_teach.convolution.ShortConvolution`), the second's is the mixer
  under study (one mixer layer; one head, where the hybrid splits two: one window head, one GMA head), scored only
  at the query positions (:meth:`gma_teach.models.DecoderLM.logits_at`). This is the layout Zoology's code gives
  its two-layer attention, Based and sliding-window models in the Based paper's MQAR sweep (a BaseConv layer, then
  the mixer, no MLP); its Mamba models there are two Mamba layers instead, while here Mamba too sits on the
  convolution.
* **Learning rate.** Every arm and width trains seed 0 at each rate of ``learning_rates``; the rate with the best
  mean *validation* accuracy is kept, and the other seeds train at it. The test split never chooses anything.
* **Metric.** Test accuracy over the queries of each kv-pair count, and the decoding state's bytes after
  ``seq_len`` tokens (batch 1, both blocks: the mixer's own state plus the convolution's ``2 d_model`` numbers,
  512 bytes at width 64).
* **Primary comparisons.** Each GMA arm against linear attention and against SDPA, on the mean test accuracy over
  the kv counts, paired on seeds; the family is corrected by Holm's method. Anything else is exploratory.

``python -m gma_teach.runs.recall --arms sdpa linear --widths 64`` trains what is missing and saves each arm's
record (``recall_study_<arm>_d<width>.json``) after every run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .. import records
from ..baselines import mixer_state_bytes
from ..environment import seed_everything
from ..models import DecoderLM
from ..tasks import IGNORE_INDEX, MQARData, mqar
from ..train import lr_at
from .recall_tables import chosen_lr, format_recall_table, recall_table
from .settings import RECALL_STUDY


def split(study: dict, name: str) -> MQARData:
    """The ``train``, ``val`` or ``test`` split: an equal share of examples at each kv-pair count, interleaved."""
    sizes = {"train": study["n_train"], "val": study["n_val"], "test": study["n_test"]}
    if name not in sizes:
        raise ValueError(f"name must be 'train', 'val' or 'test', got {name!r}")
    counts = study["kv_pairs"]
    per_count = max(1, sizes[name] // len(counts))
    parts = [mqar(per_count, study["seq_len"], n, vocab_size=study["vocab_size"],
                  seed=study["data_seeds"][name] + n) for n in counts]
    inputs = torch.stack([p.inputs for p in parts], dim=1).flatten(0, 1)
    labels = torch.stack([p.labels for p in parts], dim=1).flatten(0, 1)
    return MQARData(inputs, labels, study["vocab_size"], max(counts))


def build_model(study: dict, arm: str, width: int) -> DecoderLM:
    """The study's causal decoder of width ``width``: two blocks without FFNs, a short convolution
    (:class:`gma_teach.convolution.ShortConvolution`) then ``arm``'s mixer (one mixer layer).

    The position embeddings start at standard deviation 0.02 like the tokens' (GPT-2's initialization; the
    language model's default of 1 drowns the tokens and stalls recall)."""
    if arm not in study["arms"]:
        raise ValueError(f"arm must be one of {sorted(study['arms'])}, got {arm!r}")
    spec = study["arms"][arm]
    n_heads = spec.get("n_heads", study["n_heads"])
    model = DecoderLM(study["vocab_size"], width, 2, n_heads, mixer=["conv", spec["mixer"]], d_ff=0,
                      max_seq_len=study["seq_len"], mixer_options=[{}, spec.get("options") or {}])
    torch.nn.init.normal_(model.positions.weight, std=0.02)
    return model


def _loss(model: DecoderLM, inputs: torch.Tensor, labels: torch.Tensor):
    where = labels != IGNORE_INDEX
    logits = model.logits_at(inputs, where)
    return F.cross_entropy(logits.float(), labels[where]), logits, labels[where]


@torch.no_grad()
def accuracy_by_count(model: DecoderLM, data: MQARData, batch_size: int = 250) -> dict:
    """Query accuracy of ``model`` on ``data``, ``{n_pairs: accuracy}`` (a query's count is its example's)."""
    model.eval()
    right, total = {}, {}
    for start in range(0, len(data), batch_size):
        inputs, labels = data.inputs[start:start + batch_size], data.labels[start:start + batch_size]
        _, logits, targets = _loss(model, inputs, labels)
        counts = (labels != IGNORE_INDEX).sum(1).repeat_interleave((labels != IGNORE_INDEX).sum(1))
        hits = logits.argmax(-1) == targets
        for n in counts.unique().tolist():
            chosen = counts == n
            right[n] = right.get(n, 0) + int(hits[chosen].sum())
            total[n] = total.get(n, 0) + int(chosen.sum())
    model.train()
    return {n: right[n] / total[n] for n in sorted(total)}


def state_bytes(model: DecoderLM, n_tokens: int) -> int:
    """Bytes of every layer's decoding state after ``n_tokens`` tokens (batch 1), by
    :func:`gma_teach.baselines.mixer_state_bytes` (which equals each state's ``nbytes()``, tested): the mixer's
    own state plus the short convolution's (``2 d_model`` float32 numbers, 512 bytes at width 64)."""
    return sum(mixer_state_bytes(block.mixer, n_tokens) for block in model.blocks)


def train_run(study: dict, arm: str, width: int, lr: float, seed: int, data: dict, *, progress=False,
              return_model=False):
    """Train one model and measure it: validation and test accuracy per kv count, state bytes, time.

    Returns the run's record (a dict of numbers), or ``(record, model)`` with ``return_model=True`` (the trained
    model, to read its routing)."""
    seed_everything(seed)
    model = build_model(study, arm, width)
    decay = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": [p for p in params if id(p) in decay],
                                    "weight_decay": study["weight_decay"]},
                                   {"params": [p for p in params if id(p) not in decay], "weight_decay": 0.0}], lr=lr)
    train = data["train"]
    order = torch.Generator().manual_seed(seed)
    steps, batch = study["steps"], study["batch_size"]
    started, cpu_started = time.perf_counter(), time.process_time()
    losses = []
    permutation = torch.randperm(len(train), generator=order)
    cursor = 0
    for step in tqdm(range(steps), desc=f"{arm} d={width} lr={lr:g} seed {seed}", disable=not progress):
        if cursor + batch > len(train):
            permutation, cursor = torch.randperm(len(train), generator=order), 0
        index = permutation[cursor:cursor + batch]
        cursor += batch
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, total_steps=steps, warmup=study["warmup"], base_lr=lr)
        loss, _, _ = _loss(model, train.inputs[index], train.labels[index])
        extra = model.auxiliary_loss()
        optimizer.zero_grad(set_to_none=True)
        (loss + extra).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    val, test = accuracy_by_count(model, data["val"]), accuracy_by_count(model, data["test"])
    run = {"arm": arm, "width": width, "lr": lr, "seed": seed, "steps": steps,
           "final_train_loss": sum(losses[-50:]) / len(losses[-50:]),
           "val_accuracy": val, "val_mean": sum(val.values()) / len(val),
           "test_accuracy": test, "test_mean": sum(test.values()) / len(test),
           "state_bytes": state_bytes(model, study["seq_len"]),
           "parameters": sum(p.numel() for p in model.parameters()),
           "train_seconds": seconds, "cpu_seconds": cpu_seconds}
    return (run, model) if return_model else run


def recall_record_path(study: dict, arm: str, width: int, folder=None) -> Path:
    """Where an arm's record at one width lives: ``recall_study_<arm>_d<width>.json``."""
    return Path(folder or records.results_folder()) / f"{study['name']}_study_{arm}_d{width}.json"


def run_recall_arm(study: dict, arm: str, width: int, *, seeds=None, folder=None, command=None, progress=False,
                   data=None) -> dict:
    """Run what is missing of one arm at one width (the sweep first, then the seeds at the kept rate), saving the
    record after every run; returns the record."""
    path = recall_record_path(study, arm, width, folder)
    seeds = tuple(study["seeds"] if seeds is None else seeds)
    design = {key: study[key] for key in ("seq_len", "vocab_size", "kv_pairs", "n_train", "n_val", "n_test",
                                          "data_seeds", "n_heads", "batch_size", "steps", "warmup",
                                          "weight_decay", "learning_rates")}
    design = json.loads(json.dumps({**design, "lr_seed": study["seeds"][0], "arm": study["arms"][arm]}))
    record = json.loads(path.read_text()) if path.exists() else None
    if record is None:
        record = {"study": study["name"], "arm": arm, "width": width, "design": design, "runs": []}
    elif record["design"] != design:
        raise ValueError(f"{path} was recorded with another design; move it away or pass another folder")
    data = data or {name: split(study, name) for name in ("train", "val", "test")}
    plan = [(design["lr_seed"], lr) for lr in design["learning_rates"]]
    for seed, lr in plan + [(s, None) for s in seeds if s != design["lr_seed"]]:
        lr = lr if lr is not None else chosen_lr(record)
        if any(r["seed"] == seed and r["lr"] == lr for r in record["runs"]):
            continue
        origin = records.provenance(command or "python -m gma_teach.study recall " + " ".join(sys.argv[1:]))
        run = train_run(study, arm, width, lr, seed, data, progress=progress)
        run["provenance"] = origin
        record["runs"].append(run)
        record["chosen_lr"] = chosen_lr(record)
        record.update({key: origin[key] for key in records.PROVENANCE_KEYS})
        records.write_record(path, record)
        print(f"recall {arm} d={width} lr={lr:g} seed {seed}: test {run['test_mean']:.3f} "
              f"(val {run['val_mean']:.3f}, {run['train_seconds']:.0f} s)", flush=True)
    return record


def main(argv=None, *, command: str | None = None) -> dict:
    """Command line: run what is missing of the recall study, or (``--summary``) print and save its table."""
    parser = argparse.ArgumentParser(prog="python -m gma_teach.study recall", description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=list(RECALL_STUDY["arms"]), choices=list(RECALL_STUDY["arms"]))
    parser.add_argument("--widths", nargs="+", type=int, default=list(RECALL_STUDY["widths"]))
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out-dir", default=None, help="folder of the records (default: the results folder)")
    parser.add_argument("--summary", action="store_true",
                        help="run nothing: print the recorded table and save it as recall_study_tables.json")
    parser.add_argument("--progress", action="store_true")
    given = list(argv if argv is not None else sys.argv[1:])
    args = parser.parse_args(given)
    command = command or "python -m gma_teach.runs.recall " + " ".join(given)
    if args.summary:
        table = recall_table(args.out_dir)
        for line in format_recall_table(table):
            print(line)
        path = Path(args.out_dir or records.results_folder()) / f"{RECALL_STUDY['name']}_study_tables.json"
        declared = {"comparisons": table["comparisons"], "family_size": table["family_size"],
                    "test": RECALL_STUDY["test"], "metric": RECALL_STUDY["metric"]}
        records.write_record(path, {"study": RECALL_STUDY["name"], "declared": declared, "table": table,
                                    **records.provenance(command)})
        print(f"-> {path}")
        return table
    torch.set_num_threads(args.threads)
    data = {name: split(RECALL_STUDY, name) for name in ("train", "val", "test")}
    return {(arm, width): run_recall_arm(RECALL_STUDY, arm, width, seeds=args.seeds, folder=args.out_dir,
                                         command=command, progress=args.progress, data=data)
            for width in args.widths for arm in args.arms}


if __name__ == "__main__":
    main()
