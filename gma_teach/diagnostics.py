"""Reading the routing: what a trained GMA layer's responsibilities say about the tokens (chapter 11).

A GMA layer routes every query token ``t`` through a probability vector over ``K`` components. Averaging it over
the ``H`` heads gives one row :math:`\\bar\\gamma_t \\in \\Delta^{K-1}` per token, and the paper's Table 4 reads
these rows two ways:

* **softly**, as distributions: how broadly the components are used (usage entropy), how spread each token's
  routing is (token entropy, mean maximum responsibility);
* **hardly**, through the assignment :math:`z_t = \\arg\\max_k \\bar\\gamma_{t,k}`, compared with a surface-form
  category :math:`c_t` of the token (:func:`token_categories`): purity, mutual information, normalized MI.

:func:`capture_responsibilities` collects the query responsibilities from any model that contains GMA layers
without changing the model; :func:`routing_metrics` computes Table 4 from them; :func:`permutation_baseline` says
what the hard-assignment numbers would be if components and categories were unrelated.
"""
from __future__ import annotations

import math
import sys
import unicodedata
from collections.abc import Sequence

import torch
from torch import nn

CATEGORIES: tuple[str, ...] = (
    "lower_alpha",
    "function_word",
    "punctuation",
    "capitalized",
    "subword_alpha",
    "numeric",
    "newline_or_space",
    "eos",
    "all_caps",
    "other",
)
"""The paper's ten surface-form token categories, in the order of its Table 6."""

EOS_STRINGS: frozenset[str] = frozenset({"<|endoftext|>", "<eos>", "</s>"})
"""Token strings that count as an end-of-sequence marker."""

FUNCTION_WORDS: frozenset[str] = frozenset(
    """
    a an the this that these those
    i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
    who whom whose which what where when why how there here
    and or but nor so yet if then than because as while although though whether
    of in on at to for from by with without within into onto upon about above below under over between among
    through during before after against toward towards across along around behind beyond near off out up down
    via per since until till like
    is am are was were be been being do does did done have has had having
    will would shall should can could may might must
    not no also only just very too all any each some such both either neither every other another more most
    one
    """.split()
)
"""Lower-case English function words (determiners, pronouns, conjunctions, prepositions, auxiliaries,
negation and quantifiers), matched case-insensitively against a word-start token."""

CLITICS: frozenset[str] = frozenset({"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't"})
"""GPT-2 splits contractions and the possessive into these pieces (``"it's"`` -> ``"it" "'s"``); they are
function words, though they never carry a leading space."""

_WORD_START_MARKERS = ("Ġ", " ")  # GPT-2 byte-level BPE shows a leading space as "Ġ" (or as a real space)
_WHITESPACE_MARKERS = {"Ġ": " ", "Ċ": "\n", "ĉ": "\t", "č": "\r"}


def _is_punctuation_or_symbol(character: str) -> bool:
    return unicodedata.category(character)[0] in "PS"


def token_category(token: str) -> str:
    """The surface-form category of one BPE token string; see :func:`token_categories` for the rules."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str, got {type(token).__name__}")
    if token in EOS_STRINGS:
        return "eos"
    surface = "".join(_WHITESPACE_MARKERS.get(character, character) for character in token)
    if surface.strip() == "":
        return "newline_or_space"
    word_start = token.startswith(_WORD_START_MARKERS)
    word = surface.strip()
    if any(character.isdigit() for character in word) and all(
        character.isdigit() or character in ".," for character in word
    ):
        return "numeric"
    if "\ufffd" in word:
        return "other"
    if all(_is_punctuation_or_symbol(character) for character in word):
        return "punctuation"
    lowered = word.lower()
    if lowered in CLITICS or (word_start and word.isalpha() and lowered in FUNCTION_WORDS):
        return "function_word"
    if not word.isalpha():
        return "other"
    if not word_start:
        return "subword_alpha"
    if len(word) >= 2 and word.isupper():
        return "all_caps"
    if word[0].isupper():
        return "capitalized"
    if word[0].islower():
        return "lower_alpha"
    return "other"


def token_categories(tokens: Sequence[str]) -> list[str]:
    """The surface-form category of each GPT-2 BPE token string, one of :data:`CATEGORIES`.

    A token is given as its BPE surface string, either byte-level (``"Ġthe"``, ``"Ċ"``) or decoded (``" the"``,
    ``"\\n"``). A leading ``"Ġ"`` or space marks the start of a word; the *word* is the token with its whitespace
    stripped. The first rule that matches wins:

    1. ``eos``: the token is an end-of-sequence marker (:data:`EOS_STRINGS`, e.g. ``"<|endoftext|>"``);
    2. ``newline_or_space``: the token is only whitespace (spaces, newlines, tabs);
    3. ``numeric``: the word has a digit and only digits, ``.`` and ``,`` (``" 1997"``, ``"000"``, ``"3.5"``);
    4. ``other``: the token holds U+FFFD, i.e. it is a fragment of a multi-byte UTF-8 character that decodes to
       the replacement character;
    5. ``punctuation``: every character of the word is Unicode punctuation or a symbol (``","``, ``" @-@"``,
       ``" ="``, ``"("``);
    6. ``function_word``: a clitic (:data:`CLITICS`, ``"'s"``) or a word-start alphabetic token whose lower-cased
       word is in :data:`FUNCTION_WORDS` (``" the"``, ``" The"``, ``" I"``);
    7. ``other``: the word mixes letters with digits or punctuation (``"1st"``, ``" U.S"``);
    8. ``subword_alpha``: an alphabetic token without a leading space, i.e. the continuation of a word
       (``"ing"``, ``"Sh"`` in the middle of a word);
    9. ``all_caps``: a word-start alphabetic word of two or more letters, all upper-case (``" NASA"``);
    10. ``capitalized``: a word-start alphabetic word with an upper-case first letter (``" Paris"``, ``" M"``);
    11. ``lower_alpha``: a word-start alphabetic word with a lower-case first letter (``" city"``, ``" iPhone"``);
    12. ``other``: anything left (letters without case, e.g. CJK).

    Args:
        tokens: a sequence of ``T`` token strings.

    Returns:
        A list of ``T`` category names.
    """
    if isinstance(tokens, str):
        raise TypeError("tokens must be a sequence of token strings, got a single str")
    return [token_category(token) for token in tokens]


# ----------------------------------------------------------------------------------------------- capture


def _is_gma_layer(module: nn.Module) -> bool:
    from .layer import GaussianMixtureAttention

    return isinstance(module, GaussianMixtureAttention)


def gma_layers(model: nn.Module) -> list[nn.Module]:
    """The :class:`~gma_teach.GaussianMixtureAttention` layers inside ``model``, in ``model.modules()`` order.

    Their positions in this list are the layer indices used by :func:`capture_responsibilities`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [module for module in model.modules() if _is_gma_layer(module)]


def capture_responsibilities(
    model: nn.Module, input_ids: torch.Tensor, *, layers: Sequence[int] | None = None
) -> dict[int, torch.Tensor]:
    """Query responsibilities of the model's GMA layers on one forward pass, with the model left as it was.

    The model runs once in evaluation mode under ``torch.no_grad()``. Each chosen layer's
    ``store_responsibilities`` flag is switched on for that pass and a forward hook copies
    ``layer.last_responsibilities["query"]``; afterwards the flags, the stored responsibilities, the train/eval
    mode of every submodule and the hooks are all restored, even if the forward raises.

    Args:
        model: any ``nn.Module`` containing :class:`~gma_teach.GaussianMixtureAttention` layers, called as
            ``model(input_ids)``.
        input_ids: the model's input, e.g. token ids ``(B, N)``.
        layers: indices into :func:`gma_layers` (negative counts from the end, ``-1`` is the last layer);
            ``None`` means every GMA layer.

    Returns:
        ``{layer_index: gamma_q}`` with ``gamma_q`` of shape ``(B, H, N, K)`` (float32 on the CPU, rows sum
        to 1), keyed by the non-negative layer index.
    """
    found = gma_layers(model)
    if not found:
        raise ValueError(f"model contains no GaussianMixtureAttention layer ({type(model).__name__})")
    if layers is None:
        chosen = list(range(len(found)))
    else:
        if isinstance(layers, int) or not all(isinstance(index, int) for index in layers):
            raise TypeError(f"layers must be a sequence of ints or None, got {layers!r}")
        chosen = []
        for index in layers:
            if not -len(found) <= index < len(found):
                raise ValueError(f"layers: index {index} out of range for a model with {len(found)} GMA layers")
            chosen.append(index % len(found))
        chosen = sorted(set(chosen))

    captured: dict[int, list[torch.Tensor]] = {index: [] for index in chosen}

    def hook_for(index: int):
        def hook(module, inputs, output):
            captured[index].append(module.last_responsibilities["query"].detach().float().cpu())

        return hook

    saved_modes = {module: module.training for module in model.modules()}
    saved_layer_state = []
    handles = []
    try:
        for index in chosen:
            layer = found[index]
            saved_layer_state.append(
                (layer, getattr(layer, "store_responsibilities", False), getattr(layer, "last_responsibilities", None))
            )
            layer.store_responsibilities = True
            handles.append(layer.register_forward_hook(hook_for(index)))
        model.eval()
        with torch.no_grad():
            model(input_ids)
    finally:
        for handle in handles:
            handle.remove()
        for layer, flag, last in saved_layer_state:
            layer.store_responsibilities = flag
            layer.last_responsibilities = last
        for module, mode in saved_modes.items():
            module.training = mode

    result = {}
    for index, calls in captured.items():
        if len(calls) != 1:
            raise RuntimeError(
                f"GMA layer {index} ran {len(calls)} times in one forward pass; capture needs exactly one call"
            )
        result[index] = calls[0]
    return result


def head_averaged_tokens(gamma_q: torch.Tensor) -> torch.Tensor:
    """Average over heads and flatten batch and position: ``(B, H, N, K)`` -> ``(B * N, K)``.

    Row ``b * N + n`` belongs to token ``input_ids[b, n]``, i.e. the order of ``input_ids.reshape(-1)``.
    This is the paper's :math:`\\bar\\gamma^Q_{t,k} = \\frac1H \\sum_h \\gamma^Q_{t,h,k}`.
    """
    if not isinstance(gamma_q, torch.Tensor):
        raise TypeError(f"gamma_q must be a torch.Tensor, got {type(gamma_q).__name__}")
    if gamma_q.dim() != 4:
        raise ValueError(f"gamma_q must have shape (B, H, N, K), got {tuple(gamma_q.shape)}")
    return gamma_q.mean(dim=1).reshape(-1, gamma_q.shape[-1])


# ----------------------------------------------------------------------------------------------- metrics


def _as_resp(resp) -> torch.Tensor:
    """Check ``resp`` and return it head-averaged as a ``(T, K)`` float64 CPU tensor."""
    if not isinstance(resp, torch.Tensor):
        try:
            resp = torch.as_tensor(resp)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"resp must be a tensor or array of responsibilities, got {type(resp).__name__}") from error
    if not resp.is_floating_point():
        raise TypeError(f"resp must be floating point, got dtype {resp.dtype}")
    if resp.dim() not in (2, 3):
        raise ValueError(f"resp must have shape (T, K) or (T, H, K), got {tuple(resp.shape)}")
    resp = resp.detach().to(device="cpu", dtype=torch.float64)
    if resp.dim() == 3:
        resp = resp.mean(dim=1)
    n_tokens, n_components = resp.shape
    if n_tokens < 1:
        raise ValueError(f"resp must hold at least one token, got shape {tuple(resp.shape)}")
    if n_components < 2:
        raise ValueError(f"resp must have K >= 2 components (entropies are normalized by ln K), got K={n_components}")
    if not torch.isfinite(resp).all():
        bad = ~torch.isfinite(resp)
        raise ValueError(f"resp must be finite, got {int(bad.sum())} NaN or infinite values "
                         f"(first at index {bad.nonzero()[0].tolist()})")
    if (resp < 0).any():
        raise ValueError(f"resp must be non-negative, got a minimum of {resp.min().item():.3g}")
    row_error = (resp.sum(dim=-1) - 1).abs()
    if (row_error > 1e-4).any():
        worst = int(row_error.argmax())
        raise ValueError(
            f"resp rows must sum to 1 (tolerance 1e-4); row {worst} sums to {resp[worst].sum().item():.6f}"
        )
    return resp


def _as_labels(categories, n_tokens: int) -> list:
    """Check that ``categories`` is a sequence of ``n_tokens`` labels and return it as a list."""
    if isinstance(categories, (str, bytes)):
        raise TypeError("categories must be a sequence of labels, got a single string")
    if isinstance(categories, torch.Tensor):
        categories = categories.tolist()
    try:
        labels = list(categories)
    except TypeError as error:
        raise TypeError(f"categories must be a sequence of labels, got {type(categories).__name__}") from error
    if len(labels) != n_tokens:
        raise ValueError(f"categories has {len(labels)} labels but resp has {n_tokens} tokens (rows)")
    return labels


def _validate(resp, categories) -> tuple[torch.Tensor, list]:
    resp = _as_resp(resp)
    return resp, _as_labels(categories, resp.shape[0])


def _encode(labels: list) -> tuple[torch.Tensor, list]:
    """Integer codes for ``labels`` and the list of distinct labels (in :data:`CATEGORIES` order when possible)."""
    distinct = set(labels)
    order = {name: rank for rank, name in enumerate(CATEGORIES)}
    names = sorted(distinct, key=lambda name: (order.get(name, len(order)), str(name)))
    code_of = {name: code for code, name in enumerate(names)}
    return torch.tensor([code_of[label] for label in labels], dtype=torch.long), names


def _entropy(probabilities: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats along the last axis, with 0 log 0 = 0."""
    return -torch.special.xlogy(probabilities, probabilities).sum(dim=-1)


def _joint_counts(assignments: torch.Tensor, codes: torch.Tensor, n_components: int, n_categories: int):
    flat = assignments * n_categories + codes
    return torch.bincount(flat, minlength=n_components * n_categories).reshape(n_components, n_categories)


def _hard_scores(joint: torch.Tensor) -> dict[str, float]:
    """Purity, MI (nats) and both NMIs from a ``(K, C)`` table of counts (or a batch ``(S, K, C)``)."""
    joint = joint.to(torch.float64)
    total = joint.sum(dim=(-2, -1), keepdim=True)
    p_joint = joint / total
    p_component = p_joint.sum(dim=-1, keepdim=True)
    p_category = p_joint.sum(dim=-2, keepdim=True)
    ratio = torch.where(p_joint > 0, p_joint / (p_component * p_category), torch.ones_like(p_joint))
    mi = (p_joint * torch.log(ratio)).sum(dim=(-2, -1)).clamp_min(0.0)
    h_category = _entropy(p_category.squeeze(-2))
    h_component = _entropy(p_component.squeeze(-1))
    purity = joint.max(dim=-1).values.sum(dim=-1) / total.squeeze(-1).squeeze(-1)
    nmi_category = torch.where(h_category > 0, mi / h_category.clamp_min(1e-300), torch.zeros_like(mi))
    n_used_components = (p_component.squeeze(-1) > 0).sum(dim=-1)
    n_used_categories = (p_category.squeeze(-2) > 0).sum(dim=-1)
    both_single = (n_used_components == 1) & (n_used_categories == 1)
    mean_entropy = (h_category + h_component) / 2
    nmi_arithmetic = torch.where(mi > 0, mi / mean_entropy.clamp_min(1e-300), torch.zeros_like(mi))
    nmi_arithmetic = torch.where(both_single, torch.ones_like(mi), nmi_arithmetic)
    return {
        "purity": purity,
        "mi": mi,
        "nmi_category": nmi_category,
        "nmi_arithmetic": nmi_arithmetic,
        "category_entropy": h_category,
        "assignment_entropy": h_component,
    }


def hard_assignments(resp) -> torch.Tensor:
    """:math:`z_t = \\arg\\max_k \\bar\\gamma_{t,k}` for ``resp`` ``(T, K)`` or ``(T, H, K)`` (heads averaged first).

    Returns a ``(T,)`` long tensor. Ties go to the lowest component index.
    """
    return _as_resp(resp).argmax(dim=-1)


def contingency_table(resp, categories) -> tuple[torch.Tensor, list]:
    """Counts of hard assignments per (component, category).

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)`` (heads are averaged).
        categories: ``T`` labels.

    Returns:
        ``(counts, names)``: ``counts`` is a ``(K, C)`` long tensor whose entry ``[k, c]`` counts the tokens with
        :math:`z_t = k` and category ``names[c]``; ``names`` lists the ``C`` distinct labels, in
        :data:`CATEGORIES` order where they are standard categories.
    """
    resp, labels = _validate(resp, categories)
    codes, names = _encode(labels)
    return _joint_counts(resp.argmax(dim=-1), codes, resp.shape[-1], len(names)), names


def routing_metrics(resp, categories) -> dict:
    """The paper's Table 4 for one set of query responsibilities.

    Args:
        resp: responsibilities ``(T, K)`` (already head-averaged) or ``(T, H, K)`` (averaged over ``H`` here);
            a tensor or array, non-negative, each row summing to 1 (within 1e-4). ``K >= 2``.
        categories: ``T`` labels (e.g. from :func:`token_categories`), any hashable values.

    Returns:
        A dict of Python numbers. With :math:`\\bar\\gamma_t` the row of token ``t``,
        :math:`z_t = \\arg\\max_k \\bar\\gamma_{t,k}` its hard assignment and :math:`c_t` its category:

        * ``n_tokens`` (T) and ``n_components`` (K);
        * ``active``: the number of components that are the argmax of at least one token;
        * ``usage_entropy``: :math:`H(p)/\\ln K` of the mean usage :math:`p_k = \\frac1T\\sum_t \\bar\\gamma_{t,k}`
          (1 = every component used equally, 0 = one component takes everything);
        * ``token_entropy``: :math:`\\frac1T \\sum_t H(\\bar\\gamma_t)/\\ln K` (1 = uniform rows, 0 = one-hot);
        * ``mean_max``: :math:`\\frac1T\\sum_t \\max_k \\bar\\gamma_{t,k}`;
        * ``purity``: :math:`\\frac1T \\sum_k \\max_c n_{k,c}`, the fraction of tokens whose category is the most
          common one of their component (weighted purity);
        * ``mi``: :math:`I(Z;C) = \\sum_{k,c} p(k,c)\\ln\\frac{p(k,c)}{p(k)p(c)}` in nats, from the hard
          assignments;
        * ``nmi_category``: :math:`I(Z;C)/H(C)`, the share of the category entropy that the assignment explains
          (0 when there is a single category). This is the normalization that matches the paper's NMI 0.244
          (= 0.427 / 1.75); it equals scikit-learn's ``average_method="min"`` whenever :math:`H(C) \\le H(Z)`;
        * ``nmi_arithmetic``: :math:`I(Z;C)/\\tfrac12(H(Z)+H(C))`, scikit-learn's default
          ``normalized_mutual_info_score`` (with its conventions: 1 when both labellings are constant, 0 when
          the MI is 0);
        * ``category_entropy`` :math:`H(C)` and ``assignment_entropy`` :math:`H(Z)` in nats;
        * ``majority_fraction``: the share of the most common category (the purity of a single component that
          took every token).
    """
    resp, labels = _validate(resp, categories)
    n_tokens, n_components = resp.shape
    codes, names = _encode(labels)
    assignments = resp.argmax(dim=-1)
    scores = _hard_scores(_joint_counts(assignments, codes, n_components, len(names)))
    log_k = math.log(n_components)
    usage = resp.mean(dim=0)
    category_counts = torch.bincount(codes, minlength=len(names))
    return {
        "n_tokens": n_tokens,
        "n_components": n_components,
        "active": int(torch.unique(assignments).numel()),
        "usage_entropy": float(_entropy(usage) / log_k),
        "token_entropy": float(_entropy(resp).mean() / log_k),
        "mean_max": float(resp.max(dim=-1).values.mean()),
        **{name: float(value) for name, value in scores.items()},
        "majority_fraction": int(category_counts.max()) / n_tokens,
    }


def permutation_baseline(resp, categories, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """The hard-assignment scores when the categories are shuffled and the assignments kept.

    Shuffling keeps both marginals (how often each component wins, how common each category is) and destroys any
    association between them, so it says how much purity and MI the marginals alone produce.

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)``, as in :func:`routing_metrics`.
        categories: ``T`` labels.
        n_shuffles: number of random permutations (>= 2).
        seed: seed of the ``torch.Generator`` that draws them.

    Returns:
        ``{"purity": {"mean", "std"}, "mi": {...}, "nmi_category": {...}, "nmi_arithmetic": {...},
        "n_shuffles": n, "seed": seed}``; ``std`` is the sample standard deviation (``ddof=1``) over shuffles.
    """
    if isinstance(n_shuffles, bool) or not isinstance(n_shuffles, int) or n_shuffles < 2:
        raise ValueError(f"n_shuffles must be an int >= 2, got {n_shuffles!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    resp, labels = _validate(resp, categories)
    n_tokens, n_components = resp.shape
    codes, names = _encode(labels)
    assignments = resp.argmax(dim=-1)
    generator = torch.Generator().manual_seed(seed)
    per_shuffle: dict[str, list[float]] = {"purity": [], "mi": [], "nmi_category": [], "nmi_arithmetic": []}
    for _ in range(n_shuffles):
        shuffled = codes[torch.randperm(n_tokens, generator=generator)]
        scores = _hard_scores(_joint_counts(assignments, shuffled, n_components, len(names)))
        for name in per_shuffle:
            per_shuffle[name].append(float(scores[name]))
    result: dict = {}
    for name, values in per_shuffle.items():
        tensor = torch.tensor(values, dtype=torch.float64)
        result[name] = {"mean": float(tensor.mean()), "std": float(tensor.std(correction=1))}
    result["n_shuffles"] = n_shuffles
    result["seed"] = seed
    return result


def separation(observed: float, baseline: dict) -> float:
    """How many baseline standard deviations ``observed`` lies above the baseline mean.

    ``baseline`` is one entry of :func:`permutation_baseline` (``{"mean": ..., "std": ...}``). A zero standard
    deviation gives ``inf`` (or ``-inf``, or 0 when ``observed`` equals the mean).
    """
    difference = float(observed) - float(baseline["mean"])
    std = float(baseline["std"])
    if std > 0:
        return difference / std
    return 0.0 if difference == 0 else math.copysign(math.inf, difference)


def component_summary(resp, categories, *, tokens: Sequence[str] | None = None, top: int = 10,
                      examples: int = 8) -> list[dict]:
    """The paper's Table 7 for the ``top`` most-assigned components.

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)``.
        categories: ``T`` labels.
        tokens: optional ``T`` token strings, to list each component's most frequent tokens.
        top: number of components (by hard-assignment count).
        examples: number of example tokens per component.

    Returns:
        One dict per component, most assigned first: ``component``, ``hard_fraction`` (share of tokens assigned
        to it), ``purity`` (share of its tokens in its dominant category), ``dominant_category`` and, with
        ``tokens``, ``examples`` (its most frequent tokens, most frequent first).
    """
    counts, names = contingency_table(resp, categories)
    if tokens is not None and len(tokens) != int(counts.sum()):
        raise ValueError(f"tokens has {len(tokens)} entries but resp has {int(counts.sum())} rows")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be an int >= 1, got {top!r}")
    per_component = counts.sum(dim=-1)
    order = torch.argsort(per_component, descending=True, stable=True)[:top]
    assignments = hard_assignments(resp) if tokens is not None else None
    rows = []
    for component in order.tolist():
        if per_component[component] == 0:
            break
        row = {
            "component": component,
            "hard_fraction": int(per_component[component]) / int(per_component.sum()),
            "purity": int(counts[component].max()) / int(per_component[component]),
            "dominant_category": names[int(counts[component].argmax())],
        }
        if tokens is not None:
            frequency: dict[str, int] = {}
            for position in (assignments == component).nonzero().flatten().tolist():
                frequency[tokens[position]] = frequency.get(tokens[position], 0) + 1
            ranked = sorted(frequency.items(), key=lambda item: (-item[1], item[0]))
            row["examples"] = [token for token, _ in ranked[:examples]]
        rows.append(row)
    return rows


def responsibility_pca(resp, n_components: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Project responsibility rows onto their first principal components (exact SVD of the centred rows).

    Args:
        resp: ``(T, K)`` or ``(T, H, K)`` responsibilities (heads averaged).
        n_components: number of principal components (<= min(T, K)).

    Returns:
        ``(scores, explained)``: ``scores`` ``(T, n_components)`` and ``explained`` ``(n_components,)``, the
        fraction of the total variance along each principal direction.
    """
    resp = _as_resp(resp)
    if not 1 <= n_components <= min(resp.shape):
        raise ValueError(f"n_components must be in [1, {min(resp.shape)}], got {n_components}")
    centred = resp - resp.mean(dim=0, keepdim=True)
    _, singular, right = torch.linalg.svd(centred, full_matrices=False)
    variance = singular.square()
    total = variance.sum()
    explained = variance[:n_components] / total if total > 0 else torch.zeros(n_components, dtype=resp.dtype)
    return centred @ right[:n_components].T, explained


def routing_report(resp, categories, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """Table 4, its permutation baseline and the distance between them, in one dict.

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)``.
        categories: ``T`` labels.
        n_shuffles, seed: passed to :func:`permutation_baseline`.

    Returns:
        ``{"metrics": routing_metrics(...), "baseline": permutation_baseline(...), "separation_sd": {name: sd}}``
        where ``sd`` is :func:`separation` of the observed purity, MI and both NMIs from their baselines.
    """
    metrics = routing_metrics(resp, categories)
    baseline = permutation_baseline(resp, categories, n_shuffles=n_shuffles, seed=seed)
    names = ("purity", "mi", "nmi_category", "nmi_arithmetic")
    return {
        "metrics": metrics,
        "baseline": baseline,
        "separation_sd": {name: separation(metrics[name], baseline[name]) for name in names},
    }


# ----------------------------------------------------------------------------------------------- a language model


def lm_routing(model: nn.Module, val_ids: torch.Tensor, tokenizer, *, n_tokens: int, layer: int = -1,
               batch_size: int = 8) -> dict:
    """Read one GMA layer of a language model on the start of a validation stream.

    The stream is cut into rows of the model's context (``model.max_seq_len``) and the first
    ``ceil(n_tokens / context)`` rows are captured, ``batch_size`` rows per forward pass (the logits of a large
    vocabulary are the biggest tensor of the pass).

    Args:
        model: a language model with GMA layers and ``max_seq_len`` (e.g. :class:`~gma_teach.models.DecoderLM`).
        val_ids: the validation token stream ``(T_total,)`` int64.
        tokenizer: has ``token_strings(ids) -> list[str]``.
        n_tokens: how many tokens to analyse (rounded up to whole rows; at most the whole stream).
        layer: which GMA layer (index into :func:`gma_layers`; ``-1`` the last, as in the paper).
        batch_size: rows per forward pass.

    Returns:
        ``{"ids": (B, N), "gamma_q": (B, H, N, K), "resp": (B * N, K) head-averaged, "tokens": list[str],
        "categories": list[str], "layer": non-negative layer index}``.
    """
    if not isinstance(val_ids, torch.Tensor) or val_ids.dim() != 1:
        raise ValueError(f"val_ids must be a 1-D token stream, got {type(val_ids).__name__} "
                         f"{tuple(getattr(val_ids, 'shape', ()))}")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive int, got {n_tokens!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    context = int(model.max_seq_len)
    n_rows = val_ids.numel() // context
    if n_rows < 1:
        raise ValueError(f"val_ids has {val_ids.numel()} tokens, fewer than one context of {context}")
    rows = min(n_rows, math.ceil(n_tokens / context))
    parameter = next(model.parameters())
    ids = val_ids[: rows * context].view(rows, context).to(parameter.device)
    chunks = [capture_responsibilities(model, ids[start:start + batch_size], layers=[layer])
              for start in range(0, rows, batch_size)]
    index = next(iter(chunks[0]))
    gamma_q = torch.cat([chunk[index] for chunk in chunks], dim=0)
    tokens = tokenizer.token_strings(ids.flatten().cpu())
    return {"ids": ids, "gamma_q": gamma_q, "resp": head_averaged_tokens(gamma_q), "tokens": tokens,
            "categories": token_categories(tokens), "layer": index}


PAPER_TABLE4 = {
    "n_components": 128, "active": 104, "usage_entropy": 0.933, "token_entropy": 0.790, "mean_max": 0.103,
    "purity": 0.483, "mi": 0.427, "nmi_category": 0.244,
    "baseline": {"purity": {"mean": 0.293, "std": 0.001}, "mi": {"mean": 0.0067, "std": 0.0003},
                 "nmi_category": {"mean": 0.0038, "std": 0.0002}},
    "majority_fraction": 0.286, "pca_explained": [0.120, 0.079],
}
"""The paper's numbers (Huang & Raza 2026, Table 4, Appendix F.1 and F.3; WikiText-103, last layer, head-averaged,
K = 128, 65,536 validation tokens), typed from the paper for comparison. ``nmi_category`` is the paper's "NMI"."""


def main(argv: Sequence[str] | None = None) -> dict:
    """Command line: record chapter 11's table for chapter 10's language model as a JSON file.

    ``python -m gma_teach.diagnostics --scale small --out gma_teach/results/routing_small.json`` loads (or trains) the
    model with :func:`gma_teach.experiments.load_or_train_lm`, reads its last layer with :func:`lm_routing` on
    ``preset("ch11").n_tokens`` validation tokens, and writes :func:`routing_report` for it and for a freshly
    initialised copy of the same architecture (the untrained control), with hardware, date, commit and command.
    """
    import argparse
    import json
    from types import SimpleNamespace

    from . import experiments  # the command line sits above the experiments; the functions above do not need them
    from .scale import preset, seed_everything

    parser = argparse.ArgumentParser(prog="python -m gma_teach.diagnostics", description=main.__doc__.split("\n")[0])
    parser.add_argument("--scale", default=None, help="tiny | small | full (default: the scale in force)")
    parser.add_argument("--out", default=None, help="JSON file to write (default: print only)")
    args = parser.parse_args(argv)
    p = preset("ch11", args.scale)
    run = experiments.load_or_train_lm(p.scale)
    read = lm_routing(run.model, run.val_ids, run.tokenizer, n_tokens=p.n_tokens)
    report = routing_report(read["resp"], read["categories"], n_shuffles=p.n_shuffles, seed=p.seed)
    seed_everything(run.config["seed"])
    untrained = experiments.build_lm(SimpleNamespace(**run.config), run.config["mixer"], run.config["vocab_size"],
                                     n_components=run.config["n_components"]).to(next(run.model.parameters()).device)
    control = lm_routing(untrained, run.val_ids, run.tokenizer, n_tokens=p.n_tokens)
    _, explained = responsibility_pca(read["resp"], n_components=2)
    record = {
        **experiments.provenance(" ".join(["python -m gma_teach.diagnostics",
                                           *(sys.argv[1:] if argv is None else argv)])),
        "scale": p.scale,
        "lm_config": run.config,
        "checkpoint": str(run.path),
        "layer": read["layer"],
        "shape_BHNK": list(read["gamma_q"].shape),
        "report": report,
        "untrained_control": routing_report(control["resp"], control["categories"], n_shuffles=p.n_shuffles,
                                            seed=p.seed),
        "category_counts": {name: read["categories"].count(name) for name in CATEGORIES},
        "components": component_summary(read["resp"], read["categories"], tokens=read["tokens"], top=8),
        "pca_explained": explained.tolist(),
        "paper": PAPER_TABLE4,
    }
    text = json.dumps(record, indent=2, default=str)
    if args.out:
        from pathlib import Path

        Path(args.out).write_text(text + "\n")
    print(text)
    return record


if __name__ == "__main__":
    main()
