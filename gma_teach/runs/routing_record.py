"""Chapter 11's recorded table: read the routing of chapter 10's language model and write it as a JSON record.

``python -m gma_teach.routing_record --scale small --out book/results/routing_small.json`` loads (or trains) the
model with :func:`gma_teach.experiments.load_or_train_lm`, reads its last GMA layer with
:func:`gma_teach.diagnostics.lm_routing` on ``preset("ch11").n_tokens`` validation tokens, and writes
:func:`gma_teach.diagnostics.routing_report` for it and for a freshly initialised copy of the same architecture (the
untrained control), with the provenance of :func:`gma_teach.measure.provenance`. It sits beside the experiments,
above :mod:`gma_teach.diagnostics`, which only reads models it is given.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from types import SimpleNamespace

from .. import diagnostics
from ..environment import device, preset, seed_everything
from ..records import provenance, write_record
from . import experiments


def record_routing(scale_name: str | None = None, *, command: str | None = None) -> dict:
    """The routing record of chapter 10's LM at ``scale_name`` (see the module docstring)."""
    p = preset("ch11", scale_name)
    origin = provenance(command or "python -m gma_teach.routing_record", device())
    run = experiments.load_or_train_lm(p.scale)
    read = diagnostics.lm_routing(run.model, run.val_ids, run.tokenizer, n_tokens=p.n_tokens)
    report = diagnostics.routing_report(read["resp"], read["categories"], n_shuffles=p.n_shuffles, seed=p.seed)
    seed_everything(run.config["seed"])
    untrained = experiments.build_lm(SimpleNamespace(**run.config), run.config["mixer"], run.config["vocab_size"],
                                     n_components=run.config["n_components"]).to(next(run.model.parameters()).device)
    control = diagnostics.lm_routing(untrained, run.val_ids, run.tokenizer, n_tokens=p.n_tokens)
    _, explained = diagnostics.responsibility_pca(read["resp"], n_components=2)
    return {
        **origin,
        "scale": p.scale,
        "lm_config": run.config,
        "tokenizer": run.config["tokenizer"],
        "checkpoint": run.path.name,
        "layer": read["layer"],
        "shape_BHNK": list(read["gamma_q"].shape),
        "report": report,
        "untrained_control": diagnostics.routing_report(control["resp"], control["categories"],
                                                        n_shuffles=p.n_shuffles, seed=p.seed),
        "category_counts": {name: read["categories"].count(name) for name in diagnostics.CATEGORIES},
        "components": diagnostics.component_summary(read["resp"], read["categories"], tokens=read["tokens"], top=8),
        "pca_explained": explained.tolist(),
        "paper": diagnostics.PAPER_TABLE4,
    }


def main(argv: Sequence[str] | None = None) -> dict:
    """Command line: write (or print) the routing record."""
    parser = argparse.ArgumentParser(prog="python -m gma_teach.routing_record",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=None, help="tiny | small | full (default: the scale in force)")
    parser.add_argument("--out", default=None, help="JSON file to write (default: print only)")
    args = parser.parse_args(argv)
    shown = sys.argv[1:] if argv is None else list(argv)
    record = record_routing(args.scale, command=" ".join(["python -m gma_teach.routing_record", *shown]))
    if args.out:
        write_record(args.out, record)
    print(json.dumps(record, indent=2, default=str))
    return record


if __name__ == "__main__":
    main()
