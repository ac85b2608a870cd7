"""The initial-routing scan: how near one-hot the untrained language model's routing is, under several routing
widths and initialisations (one record, ``python -m gma_teach.study init-scan``)."""
from __future__ import annotations

import statistics
from collections.abc import Mapping

import torch

from .. import diagnostics
from ..designs import INIT_SCAN, RoutingScan, thawed
from ..environment import device, preset, seed_everything
from ..records import provenance
from ..stats import describe
from .arm_records import health_means
from .language_model import build_lm, lm_data

__all__ = ["scan_initial_routing"]


def scan_initial_routing(scan: RoutingScan | Mapping = INIT_SCAN, *, command: str | None = None) -> dict:
    """Routing health of the *untrained* LM of ``scan["scale"]`` (a :class:`gma_teach.designs.RoutingScan`, or a
    mapping with its fields) (GMA, the preset's K) on the first
    ``scan["n_blocks"]`` validation blocks, for each setting (extra GMA options) and seed: whether the routing is
    near one-hot before any training, and how that scales with ``d_route`` and the initial variances.

    Returns a JSON-ready record: per setting, the health of every seed (per layer and head), the means over
    layers, heads and seeds, and the spread (std) of the routing vectors' coordinates.
    """
    p = preset("lm", scan["scale"])
    origin = provenance(command or "python -m gma_teach.study init-scan", device())
    data = lm_data(p)
    tokens = data.val[:scan["n_blocks"], :-1].to(device())
    settings = {}
    for name, options in scan["settings"].items():
        per_seed = []
        for seed in scan["seeds"]:
            seed_everything(seed)
            model = build_lm(p, "gma", data.tokenizer.n_vocab, gma_options=thawed(options)).to(device()).eval()
            health = _health_means_with_layers(model, tokens)
            per_seed.append({"seed": seed, **health})
        settings[name] = {"options": thawed(options), "seeds": per_seed,
                          **{key: describe([r[key] for r in per_seed])
                             for key in ("active_share", "usage_entropy", "logit_spread", "routing_std")}}
    return {"study": scan["name"], "scale": scan["scale"], "n_components": p.n_components,
            "tokens": int(tokens.numel()), "settings": settings, "tokenizer": data.tokenizer.name, **origin}


@torch.no_grad()
def _health_means_with_layers(model, tokens) -> dict:
    health = diagnostics.routing_health(model, tokens)
    stds = []

    def hook(layer, args):
        stds.append(float(layer.q_proj(args[0]).std()))

    handles = [layer.register_forward_pre_hook(hook) for layer in diagnostics.gma_layers(model)]
    try:
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return {**health_means(health), "routing_std": statistics.fmean(stds), "per_layer_routing_std": stds,
            "health": health}
