"""What each number in README's "Measured results" is: one value in ``book/results/`` (read by
``tests/test_readme_numbers.py``).

:data:`BINDINGS` maps the start of each item of that section (``"**Core forms**"``) to its :class:`Binding` s. A
binding is a *template*, a piece of the item's text with ``{}`` where each number stands, and one *source* per
``{}``:

* ``Key(file, "a/b/0/c")``: the value at that key path of a record (``/`` between keys, list indices may be
  negative; ``*`` takes every element; ``[seed=3]`` picks the one list element whose ``seed`` is 3, and
  ``[label=sdpa,seq_len=512]`` the one matching both). A path that reaches several values needs ``reduce``:
  ``"min"``, ``"max"``, ``"count"`` or ``"unique"`` (all equal; that value). With several files (a tuple, or a glob
  such as ``"*.json"``), each file gives its value and all must agree;
* ``Computed(description, function, files)``: a named computation over the records, for what no single key holds
  (the seeds every arm has, the runs that left a plateau);
* ``100 * source`` for a percentage, ``-1 * source`` where README writes a signed difference the other way round
  ("lower by 0.0141" for a difference of -0.0141; its interval "0.0005 to 0.0276" is then ``-1 *`` the upper and
  the lower end).

Rewording a sentence of README breaks only its templates: the test names the template that no longer matches and
the numbers left without a binding; copy the new wording into the template.
"""
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from gma_teach import capacity, experiments, make_mixer, measure, stats, study
from gma_teach.baselines import mixer_state_bytes
from gma_teach.data import listops

NUMBER = re.compile(r"\d+(?:\.\d+)?")


class Records:
    """The JSON records of ``folder`` (default :func:`gma_teach.measure.results_folder`), each read once, as
    the book reads them: an arm's record merged with the run files of its run folder
    (:func:`gma_teach.study.read_record`)."""

    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder) if folder is not None else measure.results_folder()
        self._read: dict[str, dict] = {}
        self.memo: dict[str, object] = {}  # what a slow computation found, kept for the next number

    def __getitem__(self, name: str) -> dict:
        if name not in self._read:
            record = study.read_record(self.folder / name)
            if record is None:
                raise FileNotFoundError(f"no record {name!r} in {self.folder}, as a file or a run folder")
            self._read[name] = record
        return self._read[name]

    def names(self, files: str | tuple[str, ...]) -> list[str]:
        """The record names ``files`` stands for: itself, a tuple of names, or a glob pattern."""
        if isinstance(files, tuple):
            return list(files)
        if any(c in files for c in "*?["):
            found = sorted(p.name for p in self.folder.glob(files))
            if not found:
                raise FileNotFoundError(f"no record matches {files!r} in {self.folder}")
            return found
        return [files]


class Source:
    """One value a quoted number is bound to."""

    files: tuple[str, ...] = ()
    slow = False  # True: builds a data set (seconds), so only the slow test compares it

    def value(self, records: Records) -> float:
        raise NotImplementedError

    def __rmul__(self, factor: float) -> "Scaled":
        return Scaled(factor, self)


@dataclass(frozen=True)
class Scaled(Source):
    factor: float
    source: Source

    @property
    def files(self):
        return self.source.files

    @property
    def slow(self):
        return self.source.slow

    def value(self, records):
        return self.factor * self.source.value(records)

    def __str__(self):
        return f"{self.factor:g} x {self.source}"


REDUCERS: dict[str, Callable[[list], float]] = {"min": min, "max": max, "count": len}


def _unique(values: list, what: str):
    distinct = [v for i, v in enumerate(values) if v not in values[:i]]
    if len(distinct) != 1:
        raise ValueError(f"{what} holds {len(distinct)} different values where one was expected: {distinct[:6]}")
    return distinct[0]


def _resolve(value, parts: list[str]) -> list:
    if not parts:
        return [value]
    head, rest = parts[0], parts[1:]
    if head == "*":
        elements = value.values() if isinstance(value, dict) else value
        return [x for element in elements for x in _resolve(element, rest)]
    if head.startswith("[") and head.endswith("]"):
        wanted = dict(condition.split("=", 1) for condition in head[1:-1].split(","))
        found = [x for x in value if all(str(x.get(k)) == v for k, v in wanted.items())]
        if len(found) != 1:
            raise KeyError(f"{head} picks {len(found)} elements instead of 1")
        return _resolve(found[0], rest)
    return _resolve(value[int(head)] if isinstance(value, list) else value[head], rest)


@dataclass(frozen=True)
class Key(Source):
    file: str | tuple[str, ...]
    path: str
    reduce: str | None = None

    @property
    def files(self):
        return self.file if isinstance(self.file, tuple) else (self.file,)

    def raw(self, records: Records):
        """The value at :attr:`path` (any JSON value), reduced per file, the same in every file."""
        per_file = []
        for name in records.names(self.file):
            values = _resolve(records[name], self.path.split("/"))
            if self.reduce == "unique":
                per_file.append(_unique(values, f"{name}: {self.path}"))
            elif self.reduce is not None:
                per_file.append(REDUCERS[self.reduce](values))
            elif len(values) != 1:
                raise ValueError(f"{name}: {self.path} reaches {len(values)} values; give reduce")
            else:
                per_file.append(values[0])
        return _unique(per_file, f"{self.path} across {self.file}")

    def value(self, records):
        return _number(self.raw(records), self)

    def __str__(self):
        return f"{self.file}: {self.path}" + (f" ({self.reduce})" if self.reduce else "")


def _number(value, source) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{source} is {value!r}, not a number")
    return value


@dataclass(frozen=True)
class HalfWidth(Source):
    """The half-width of the 95% Student-t interval of a mean over ``n`` seeds whose standard deviation is ``std``:
    ``t_{0.975, n-1} std / sqrt(n)`` -- README's ``+-``, as the chapters print it."""

    std: Source
    n: Source

    @property
    def files(self):
        return tuple(dict.fromkeys((*self.std.files, *self.n.files)))

    @property
    def slow(self):
        return False

    def value(self, records):
        return stats.half_width(self.std.value(records), int(self.n.value(records)))

    def __str__(self):
        return f"95% half-width from {self.std} over {self.n} seeds"


def _mean_half_width(file, prefix, scale=1.0):
    """The mean and the 95% half-width of a ``{"mean", "std", "n"}`` summary at ``prefix``."""
    return [scale * Key(file, f"{prefix}/mean"),
            scale * HalfWidth(Key(file, f"{prefix}/std"), Key(file, f"{prefix}/n"))]


@dataclass(frozen=True)
class NumberIn(Source):
    """The ``index``-th number written in a string value (a record's ``target``, say ``'>= 5x and <= 1/10'``)."""

    key: Key
    index: int

    @property
    def files(self):
        return self.key.files

    def value(self, records):
        return float(NUMBER.findall(self.key.raw(records))[self.index])

    def __str__(self):
        return f"number {self.index} written in {self.key}"


@dataclass(frozen=True)
class Computed(Source):
    description: str
    function: Callable[[Records], float]
    files: tuple[str, ...] = ()
    slow: bool = False

    def value(self, records):
        return _number(self.function(records), self)

    def __str__(self):
        return f"{self.description} (from {', '.join(self.files) or 'the data'})"


@dataclass(frozen=True)
class Binding:
    template: str
    sources: tuple[Source, ...]

    def __init__(self, template: str, *sources: Source):
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "sources", sources)


def arm_files(study: str, arms: str) -> tuple[str, ...]:
    return tuple(f"{study}_{arm}.json" for arm in arms.split())


# ----------------------------------------------------------------------------------------- named computations
LM = "lm_study_tables.json"
LM_ARMS = (arm_files("lm_study", "sdpa gma_k32 gma_k128 gma_k32_var_bal gma_k128_var_bal linear performer none uniform")
           + ("routing_collapse_default.json", "routing_collapse_variance_and_balance.json"))
"""The records of the LM comparison's arms (GMA K=64 is recorded by the routing-collapse study)."""


def _lm_seeds(records) -> dict[str, set]:
    return {arm: set(table["seeds"]) for arm, table in records[LM]["tables"]["val_bits_per_byte"]["arms"].items()}


def lm_common_seeds(records) -> list[int]:
    """The seeds every arm of the LM comparison has."""
    return sorted(set.intersection(*_lm_seeds(records).values()))


def _lm_second(records, against: str, how) -> float:
    """``how`` (min or max) of the mean differences GMA arm - ``against`` at the LM study's second look."""
    return how(c["mean"] for c in records[LM]["second_look"]["comparisons"] if c["against"] == against)


def _lm_needed(records, against: str, how) -> int:
    """``how`` (min or max) of the seeds an arm :func:`gma_teach.study.seeds_needed` plans for the second look's
    comparisons against ``against``, over those that some count would tell apart."""
    planned = study.seeds_needed(records[LM]["second_look"])
    assert planned["alpha"] == records[LM]["second_look"]["alpha"] / records[LM]["second_look"]["family_size"]
    return how(c["seeds"] for c in planned["comparisons"] if c["against"] == against and c["seeds"] is not None)


def _needed(records, table: str, arm: str, same_as: str | None = None) -> int:
    """The seeds an arm :func:`gma_teach.study.seeds_needed` plans for ``arm``'s first-look comparison in ``table``
    (``same_as``: and checks that ``same_as`` needs as many, where README names the two together)."""
    planned = {c["arm"]: c["seeds"] for c in study.seeds_needed(records[table]["declared"])["comparisons"]}
    if same_as is not None and planned[same_as] != planned[arm]:
        raise ValueError(f"{arm} needs {planned[arm]} seeds and {same_as} {planned[same_as]}, not the same")
    return planned[arm]


def _lm_never(records) -> int:
    """The K of the one GMA arm that no seed count would tell apart (the reports name one, with variance and
    balance)."""
    never = [c for c in study.seeds_needed(records[LM]["second_look"])["comparisons"] if c["seeds"] is None]
    (only,) = never
    assert only["arm"].endswith("_var_bal") and only["against"] == "linear", only
    return int(only["arm"].split("_")[1][1:])


RC = "routing_collapse_tables.json"
RC_ARMS = arm_files("routing_collapse", "default variance_d_route kmeans_means balance variance_and_balance")


def rc_commits(records) -> int:
    """How many commits of the code the collapse study's runs were made on (a ``+dirty`` mark is the same commit)."""
    return len({run["provenance"]["commit"].removesuffix("+dirty")
                for name in RC_ARMS for run in records[name]["runs"]})


LRA_ARMS = arm_files("listops_lra", "sdpa gma gma_var_bal linear performer")
LRA = "listops_lra_tables.json"


def lra_accuracies(records, *, left_plateau: bool) -> list[float]:
    """Every ListOps-LRA run's test accuracy above the test set's majority class (``left_plateau``) or not."""
    values = []
    for name in LRA_ARMS:
        majority = records[name]["summary"]["majority_baseline"]
        values += [r["test"]["accuracy"] for r in records[name]["runs"] if (r["test"]["accuracy"] > majority)
                   == left_plateau]
    return values


def lra_labels(records) -> dict:
    """The ListOps-LRA data the study trained on, rebuilt from its records' configuration (cached by
    ``gma_teach.data``): the training set's most frequent label and its share of the test set."""
    if "lra_labels" not in records.memo:
        config = _unique([records[name]["config"] for name in LRA_ARMS], "the ListOps-LRA configuration")
        data = experiments.listops_data(SimpleNamespace(**config), source="generate")
        label = int(listops.label_counts(data["train"][1]).argmax())
        records.memo["lra_labels"] = {"label": label, "share": float((data["test"][1] == label).float().mean())}
    return records.memo["lra_labels"]


TEXT = "text_standin_tables.json"
TEXT_ARMS = arm_files("text_standin", "gma softmax linear gma_variance_d_route gma_balance")


def text_classes(records) -> int:
    """How many packages the Text stand-in's records name as its classes (``... (tkinter, asyncio, ...)``)."""
    source = Key(TEXT_ARMS, "runs/*/data_source", reduce="unique").raw(records)
    return len(re.search(r"\(([^)]*)\)", source).group(1).split(","))


# ----------------------------------------------------------------------------------------------- shorthands
RM = "routing_remedy_tables.json"
RM_ARMS = arm_files("routing_remedy", "default balance variance variance_and_balance information "
                                      "variance_and_information")
"""The remedy study's saved tables and its arms' records."""


def _rm_info(arm):
    return Key(RM, f"tables/routing_information/arms/{arm}/information/mean")


def _rm_mean_max(arm):
    return Key(RM, f"tables/routing_information/arms/{arm}/mean_max_ratio/mean")


def _lm_bits(arm):
    return _mean_half_width(LM, f"tables/val_bits_per_byte/arms/{arm}/val_bits_per_byte")


def _signed(file, prefix, sign=1, scale=1.0):
    """mean and 95% interval ends at ``prefix`` (``.../paired/linear``), times ``sign * scale``; with ``sign=-1``
    the ends swap, so that the interval is written low to high."""
    mean, low, high = (Key(file, f"{prefix}/{part}") for part in ("mean", "ci95/0", "ci95/1"))
    if sign > 0:
        return [scale * mean, scale * low, scale * high]
    return [-scale * mean, -scale * high, -scale * low]


def _second(**conditions):
    """The path prefix of one comparison of the LM study's declared second look (``arm=..., against=...``)."""
    return "second_look/comparisons/[" + ",".join(f"{k}={v}" for k, v in conditions.items()) + "]"


def _declared(file, **conditions):
    """The path prefix of one declared comparison of ``file`` (``arm=..., against=..., metric=...``)."""
    return "declared/comparisons/[" + ",".join(f"{k}={v}" for k, v in conditions.items()) + "]"


def text_last_epoch(records) -> list[float]:
    """GMA's last-epoch test accuracy at each seed of the Text stand-in."""
    return [run["history"]["val_metric"][-1] for run in records["text_standin_gma.json"]["runs"]]


def _lra_seeds(arm):
    return [100 * Key(f"listops_lra_{arm}.json", f"runs/[seed={seed}]/test/accuracy") for seed in range(5)]


def _cpu_seconds(arm):
    return [Key(f"listops_lra_{arm}.json", "runs/*/cpu_seconds", reduce=r) for r in ("min", "max")]


RECALL = "recall_study_tables.json"
RECALL_ARMS = "recall_study_*_d64.json"


def _recall_entry(records, arm, width=64):
    return records[RECALL]["table"]["arms"][arm][str(width)]


def _recall(arm, count=None, width=64):
    """An arm's test accuracy at ``width``, the mean over seeds: of the mean over the kv counts, or at ``count``."""
    if count is None:
        return Computed(f"{arm}'s mean test accuracy at width {width}", lambda r: sum(
            _recall_entry(r, arm, width)["test_mean"]) / len(_recall_entry(r, arm, width)["test_mean"]), (RECALL,))
    return Computed(f"{arm}'s test accuracy at {count} pairs and width {width}",
                    lambda r: sum(_recall_entry(r, arm, width)["by_count"][str(count)]) / len(
                        _recall_entry(r, arm, width)["by_count"][str(count)]), (RECALL,))


def _recall_k(arm, width=64):
    return Key(RECALL, f"table/arms/{arm}/{width}/options/n_components")


RECALL_KS = (8, 16, 32, 64, 128, 256)


def _recall_width(width):
    return Key(RECALL, f"table/design/widths/{(64, 128).index(width)}")


def _bytes(arm, width=64):
    return Key(RECALL, f"table/arms/{arm}/{width}/state_bytes")


def _conv_bytes(width):
    """The short convolution's decoding state in the recall model at ``width`` (its formula, tested elsewhere)."""
    return Computed(f"the short convolution's state bytes at width {width}", lambda r: mixer_state_bytes(
        make_mixer("conv", width, 1, causal=True), r[RECALL]["table"]["design"]["seq_len"]), (RECALL,))


def _default_recalls(records):
    """Every default-routing GMA arm's mean recall, at both widths."""
    return [sum(e["test_mean"]) / len(e["test_mean"]) for arm, widths in records[RECALL]["table"]["arms"].items()
            if re.fullmatch(r"gma_k\d+", arm) for e in widths.values()]


CAPACITY = "capacity_tables.json"
CAPACITY_LINEAR, CAPACITY_GMA = "capacity_linear.json", "capacity_gma_k64_remedy.json"
CAPACITY_DEFAULT, CAPACITY_SDPA = "capacity_gma_k64.json", "capacity_sdpa.json"
CAPACITY_PRIMARY = (80, 120, 160, 200)


def _capacity_accuracy(file, n_pairs):
    """An arm's retrieval accuracy at ``S = n_pairs``, the mean over its seeds."""
    def mean(records):
        values = [run["retrieval_accuracy"][str(n_pairs)] for run in records[file]["runs"]]
        return sum(values) / len(values)
    return Computed(f"the mean retrieval accuracy of {file} at S = {n_pairs}", mean, (file,))


def _capacity_bits(file, how):
    """The least or most (``how``) over the primary sizes of an arm's key routing bits, the mean over seeds."""
    def bits(records):
        curve = capacity.routing_curves({"arm": records[file]})["arm"]
        return how(curve["key_bits"][curve["n_pairs"].index(n)] for n in CAPACITY_PRIMARY)
    return Computed(f"the {how.__name__} key routing bits of {file} at S = 80-200", bits, (file,))


def _capacity_slots(how):
    return Computed(f"2 to the {how.__name__} key routing bits of the primary GMA arm at S = 80-200",
                    lambda r: 2.0 ** _capacity_bits(CAPACITY_GMA, how).function(r), (CAPACITY_GMA,))


def _recall_pair(records, k, width):
    """The declared comparison of GMA K=``k`` with variance and balance against linear attention at ``width``."""
    return next(c for c in records[RECALL]["declared"]["comparisons"]
                if c["arm"] == f"gma_k{k}_var_bal" and c["against"] == "linear" and c["width"] == width)

def recall_cpu_seconds(records, how):
    return how(c for name in records.names(RECALL_ARMS) for c in (r["cpu_seconds"] for r in records[name]["runs"]))


def recall_seeds(records) -> int:
    counts = {len(entry["seeds"]) for widths in records[RECALL]["table"]["arms"].values() for entry in widths.values()}
    return _unique(sorted(counts), "the seed counts of the recall arms")


def recall_told_apart(records) -> int:
    return sum(c["told_apart"] for c in records[RECALL]["declared"]["comparisons"])


def recall_not_run(records) -> int:
    return records[RECALL]["declared"]["family_size"] - len(records[RECALL]["declared"]["comparisons"])


B = "bench_core_cpu.json"
P = "profiling_cpu_small.json"
INIT = "routing_collapse_init.json"
ROUTING = "routing_small.json"
LISTOPS = ("listops_gma_small.json", "listops_softmax_small.json")
_V32 = "settings/d_route=32, init_variance=d_route"
_LM_VS = "gma_against_baselines/pairs"
_RECOVERED = "context_recovered/arms"

# ---------------------------------------------------------------------------------------------------- bindings
BINDINGS: dict[str, list[Binding]] = {
    "Every number below": [
        Binding("shared {}-core CPU", Key("*.json", "hardware/logical_cores")),
        Binding("the half-width of its {}% Student-t interval, as the chapters print it; a difference between arms is "
                "written with its {}% interval", 100 * Key(LM, "tables/val_bits_per_byte/confidence"),
                100 * Key(LM, "tables/val_bits_per_byte/confidence")),
    ],
    "**Core forms**": [
        Binding("broadcasting `(x - mu)` | {} | {}x | >= {}x |",
                Key(B, "rows/0/n_tokens"), Key(B, "rows/0/speedup"), NumberIn(Key(B, "rows/0/target"), 0)),
        Binding("`cumsum` | {} | {}x, {} of its peak memory | >= {}x, <= {}/{} |",
                Key(B, "rows/1/n_tokens"), Key(B, "rows/1/speedup"), Key(B, "rows/1/memory_ratio"),
                *(NumberIn(Key(B, "rows/1/target"), i) for i in range(3))),
        Binding("`scaled_dot_product_attention` | {} / {} / {} | {}x / {}x / {}x | >= {}x at {} |",
                *(Key(B, f"rows/{row}/n_tokens") for row in (2, 3, 4)),
                *(Key(B, f"rows/{row}/speedup") for row in (2, 3, 4)),
                NumberIn(Key(B, "rows/4/target"), 0), NumberIn(Key(B, "rows/4/target"), 1)),
    ],
    "**One mixing block, the paper's Table 1 protocol**": [
        Binding("slopes GMA {}, eager softmax {};", Key(P, "memory_slopes/gma (K=64)"),
                Key(P, "memory_slopes/softmax")),
        Binding("tokens/s GMA {} and SDPA {} at N={}, GMA {} and SDPA {} at N={}.",
                Key(P, "results/[label=gma (K=64),seq_len=512]/tokens_per_second"),
                Key(P, "results/[label=sdpa,seq_len=512]/tokens_per_second"), Key(P, "config/seq_lens/0"),
                Key(P, "results/[label=gma (K=64),seq_len=8192]/tokens_per_second"),
                Key(P, "results/[label=sdpa,seq_len=8192]/tokens_per_second"), Key(P, "config/seq_lens/-1")),
    ],
    "**ListOps** (": [
        Binding("trees of length {}-{}, majority class {}%, {} seeds",
                Key(LISTOPS, "config/min_length"), Key(LISTOPS, "config/max_length"),
                100 * Key(LISTOPS, "runs/*/majority_baseline", reduce="unique"),
                Key(LISTOPS, "summary/seeds/*", reduce="count")),
        Binding("GMA (K={}) {} +- {}% test accuracy, softmax {} +- {}%",
                Key(LISTOPS[0], "n_components"),
                *(100 * source for name in LISTOPS for source in (
                    Key(name, "summary/mean"),
                    HalfWidth(Key(name, "summary/std"), Key(name, "summary/seeds/*", reduce="count"))))),
    ],
    "**Why GMA's routing collapses at initialization**": [
        Binding("small LM, K={}, {} seeds", Key(INIT, "n_components"),
                Key(INIT, "settings/*/logit_spread/n", reduce="unique")),
        Binding("{} at d_route={} to {} at d_route={} ({} and {} between)",
                Key(INIT, "settings/d_route=8/logit_spread/mean"), Key(INIT, "settings/d_route=8/options/d_route"),
                Key(INIT, "settings/d_route=64/logit_spread/mean"), Key(INIT, "settings/d_route=64/options/d_route"),
                Key(INIT, "settings/d_route=16/logit_spread/mean"), Key(INIT, "settings/d_route=32/logit_spread/mean")),
        Binding("(usage entropy {} at d_route={})", Key(INIT, "settings/d_route=32/usage_entropy/mean"),
                Key(INIT, "settings/d_route=32/options/d_route")),
        Binding("(logit spread {}, usage entropy {})", Key(INIT, f"{_V32}/logit_spread/mean"),
                Key(INIT, f"{_V32}/usage_entropy/mean")),
        Binding("({} of components win a token, against {})", Key(INIT, f"{_V32}/active_share/mean"),
                Key(INIT, "settings/d_route=32/active_share/mean")),
        Binding("the routing vectors, {} of the components",
                Key(INIT, "settings/d_route=32, init_mean_std=0.5/active_share/mean")),
    ],
    "**Routing** (": [
        Binding("default routing, {} steps", Key(ROUTING, "lm_config/n_steps")),
        Binding("purity {} and MI {} nats against a permutation baseline of {} +- {} and {} +- {} (mean +- standard "
                "deviation over the shuffles; {} and {} standard",
                Key(ROUTING, "report/metrics/purity"), Key(ROUTING, "report/metrics/mi"),
                Key(ROUTING, "report/baseline/purity/mean"), Key(ROUTING, "report/baseline/purity/std"),
                Key(ROUTING, "report/baseline/mi/mean"), Key(ROUTING, "report/baseline/mi/std"),
                Key(ROUTING, "report/separation_sd/purity"), Key(ROUTING, "report/separation_sd/mi")),
        Binding("only {} of {} components win tokens", Key(ROUTING, "report/metrics/active"),
                Key(ROUTING, "report/metrics/n_components")),
        Binding("the paper reports {} of {}.", Key(ROUTING, "paper/active"), Key(ROUTING, "paper/n_components")),
    ],
    "**Routing collapse and the routing changes**": [
        Binding("GMA with K={}, {} steps, {} seeds an arm, run on {} commits of the code",
                Key(RC_ARMS, "spec/n_components"),
                Key(RC_ARMS, "config/n_steps"), Key(RC, "tables/val_bits_per_byte/arms/*/val_bits_per_byte/n",
                                                    reduce="unique"),
                Computed("the commits the collapse study's runs were made on", rc_commits, RC_ARMS)),
        Binding("default routing {} of the components win a token by argmax ({} in the second layer);",
                Key(RC, "tables/active_share/arms/default/active_share/mean"),
                Key("routing_collapse_default.json", "summary/per_layer/1/active_share/mean")),
        Binding("d_route give {}, means from k-means {}, the balance loss {}, and variances at d_route with the "
                "balance loss {}.",
                *(Key(RC, f"tables/active_share/arms/{arm}/active_share/mean")
                  for arm in ("variance_d_route", "kmeans_means", "balance", "variance_and_balance"))),
        Binding("At the first look, over seeds {}-{}, the balance loss,", Key(RC, "declared/seeds/0"),
                Key(RC, "declared/seeds/-1")),
        Binding("gave seeds {}-{} to every arm and tests the same eight over seeds {}-{}, each Holm p",
                Key(RC, "design/second_look/seeds/3"), Key(RC, "design/second_look/seeds/-1"),
                Key(RC, "second_look/seeds/0"), Key(RC, "second_look/seeds/-1")),
        Binding("each look tested at {}%", Computed(
            "each look's level: the family's alpha shared by the looks",
            lambda r: 100 * r[RC]["second_look"]["alpha"] / r[RC]["second_look"]["looks"], (RC,))),
        Binding("the balance loss raises the count by {} ({}% interval {} to {}), and by {} ({} to {}) with the "
                "variance change added; means from k-means raise it by {} and the variance change alone by {} (Holm p "
                "{}).",
                *_signed(RC, _second(arm="balance", metric="active_share"))[:1],
                100 * Key(RC, "tables/active_share/confidence"),
                *_signed(RC, _second(arm="balance", metric="active_share"))[1:],
                *_signed(RC, _second(arm="variance_and_balance", metric="active_share")),
                Key(RC, _second(arm="kmeans_means", metric="active_share") + "/mean"),
                Key(RC, _second(arm="variance_d_route", metric="active_share") + "/mean"),
                Key(RC, _second(arm="variance_d_route", metric="active_share") + "/p_holm")),
        Binding("the variance change alone lowers it by {} ({} to {}; Holm p {}), where three seeds left its interval "
                "reaching zero (lower by {}, {} to {}; Holm p {}).",
                *_signed(RC, _second(arm="variance_d_route", metric="val_bits_per_byte"), sign=-1),
                Key(RC, _second(arm="variance_d_route", metric="val_bits_per_byte") + "/p_holm"),
                *_signed(RC, _declared(RC, arm="variance_d_route", metric="val_bits_per_byte"), sign=-1),
                Key(RC, _declared(RC, arm="variance_d_route", metric="val_bits_per_byte") + "/p_holm")),
        Binding("the pair is lower by {} (unadjusted interval {} to {}; Holm p {}).",
                *_signed(RC, _second(arm="variance_and_balance", metric="val_bits_per_byte"), sign=-1),
                Key(RC, _second(arm="variance_and_balance", metric="val_bits_per_byte") + "/p_holm")),
        Binding("within the first {} steps", Key("routing_collapse_cause_default.json", "runs/*/history/steps/0",
                                                 reduce="unique")),
        Binding("its routing logits end with a spread over the components of {}, against {} with the default routing "
                "and {} with the balance loss alone,",
                *(Key(f"routing_collapse_{arm}.json", "summary/logit_spread/mean")
                  for arm in ("variance_and_balance", "default", "balance"))),
    ],
    "**Routing judged by information**": [
        Binding("small LM, GMA with K={}, {} steps, seeds {}-{} for every arm,",
                Key(RM_ARMS, "spec/options/n_components"), Key(RM_ARMS, "config/n_steps"), Key(RM, "declared/seeds/0"),
                Key(RM, "declared/seeds/-1")),
        Binding("is {} bits with the default routing (of log2 {} = {} bits), {} with the balance loss, {} with the "
                "variance change, {} with the variance change and the balance loss, {} with the information loss and "
                "{} with the variance change and the information loss.",
                _rm_info("default"), Key("routing_remedy_default.json", "spec/options/n_components"),
                Computed("log2 K of the remedy study",
                         lambda r: math.log2(r["routing_remedy_default.json"]["spec"]["options"]["n_components"]),
                         ("routing_remedy_default.json",)),
                *(_rm_info(arm) for arm in ("balance", "variance", "variance_and_balance", "information",
                                            "variance_and_information"))),
        Binding("Its mean largest responsibility is {} times its floor, one over K, with the default routing",
                _rm_mean_max("default")),
        Binding("{} with the balance loss, and {} and {} with the variance change alone and with the balance loss "
                "added",
                *(_rm_mean_max(arm) for arm in ("balance", "variance", "variance_and_balance"))),
        Binding("on information and on bits per byte, {} paired t-tests over the {} seeds,",
                Key(RM, "declared/family_size"), Key(RM, "declared/comparisons/*/n", reduce="unique")),
        Binding("the balance loss is ahead by {} bits ({}% interval {} to {}), the information loss by {} and the "
                "variance change with it by {}, and the variance change is behind by {} and the pair by {},",
                *_signed(RM, _declared(RM, arm="balance", metric="routing_information"))[:1],
                100 * Key(RM, "tables/routing_information/confidence"),
                *_signed(RM, _declared(RM, arm="balance", metric="routing_information"))[1:],
                Key(RM, _declared(RM, arm="information", metric="routing_information") + "/mean"),
                Key(RM, _declared(RM, arm="variance_and_information", metric="routing_information") + "/mean"),
                -1 * Key(RM, _declared(RM, arm="variance", metric="routing_information") + "/mean"),
                -1 * Key(RM, _declared(RM, arm="variance_and_balance", metric="routing_information") + "/mean")),
        Binding("the variance change alone is lower by {} ({} to {}, Holm p {}), the information loss higher by {} "
                "({} to {}, Holm p {}) and the variance change with it higher by {} (Holm p {}),",
                *_signed(RM, _declared(RM, arm="variance", metric="val_bits_per_byte"), sign=-1),
                Key(RM, _declared(RM, arm="variance", metric="val_bits_per_byte") + "/p_holm"),
                *_signed(RM, _declared(RM, arm="information", metric="val_bits_per_byte")),
                Key(RM, _declared(RM, arm="information", metric="val_bits_per_byte") + "/p_holm"),
                Key(RM, _declared(RM, arm="variance_and_information", metric="val_bits_per_byte") + "/mean"),
                Key(RM, _declared(RM, arm="variance_and_information", metric="val_bits_per_byte") + "/p_holm")),
        Binding("the balance loss is lower by {} (unadjusted interval {} to {}, Holm p {}), not told apart.",
                *_signed(RM, _declared(RM, arm="balance", metric="val_bits_per_byte"), sign=-1),
                Key(RM, _declared(RM, arm="balance", metric="val_bits_per_byte") + "/p_holm")),
    ],
    "**LM comparison**": [
        Binding("same setting, seeds {}-{} for every arm)",
                Computed("the first seed every LM arm has", lambda r: lm_common_seeds(r)[0], (LM,)),
                Computed("the last seed every LM arm has", lambda r: lm_common_seeds(r)[-1], (LM,))),
        Binding("bits per byte SDPA {} +- {} (mean +- half-width);", *_lm_bits("sdpa")),
        Binding("GMA K={} {} +- {}, K={} {} +- {}, K={} {} +- {};",
                Key("lm_study_gma_k32.json", "spec/n_components"), *_lm_bits("gma_k32"),
                Key("routing_collapse_default.json", "spec/n_components"), *_lm_bits("gma_k64"),
                Key("lm_study_gma_k128.json", "spec/n_components"), *_lm_bits("gma_k128")),
        Binding("a routing that dissolves: chapter 11) K={} {} +- {}, K={} {} +- {}, K={} {} +- {} (their routing "
                "logits end with a spread over the components of {}, {} and {}, every token spread almost evenly over "
                "all K, against {}, {} and {} with the default routing, which collapses);",
                Key("lm_study_gma_k32_var_bal.json", "spec/n_components"), *_lm_bits("gma_k32_var_bal"),
                Key("routing_collapse_variance_and_balance.json", "spec/n_components"), *_lm_bits("gma_k64_var_bal"),
                Key("lm_study_gma_k128_var_bal.json", "spec/n_components"), *_lm_bits("gma_k128_var_bal"),
                *(Key(name, "summary/logit_spread/mean") for name in (
                    "lm_study_gma_k32_var_bal.json", "routing_collapse_variance_and_balance.json",
                    "lm_study_gma_k128_var_bal.json", "lm_study_gma_k32.json", "routing_collapse_default.json",
                    "lm_study_gma_k128.json"))),
        Binding("linear attention {} +- {}; Performer, re-run at every seed with the corrected mixer under a re-run "
                "declared before its runs (its withdrawn records measured key features that underflowed below eps), "
                "{} +- {};", *_lm_bits("linear"), *_lm_bits("performer")),
        Binding("no mixing {} +- {} and a uniform causal average {} +- {}.", *_lm_bits("none"), *_lm_bits("uniform")),
        Binding("GMA heads of K={} with the default routing, which collapses; an arm added after the others, so "
                "exploratory) reaches {} +- {}, higher than SDPA by {} (interval {} to {}): not told apart from it.",
                Key("lm_study_local_gma.json", "config/n_components"), *_lm_bits("local_gma"),
                *_signed(LM, "tables/val_bits_per_byte/paired/local_gma")),
        Binding("with a Holm correction over its {} tests. At the first look, paired over seeds {}-{}, none is told "
                "apart.", Key(LM, "declared/family_size"), Key(LM, "declared/seeds/0"), Key(LM, "declared/seeds/-1")),
        Binding("gave seeds {}-{} to every arm and tests the same {} over seeds {}-{}, each Holm p doubled",
                Key(LM, "design/second_look/seeds/3"), Key(LM, "design/second_look/seeds/-1"),
                Key(LM, "second_look/family_size"), Key(LM, "second_look/seeds/0"), Key(LM, "second_look/seeds/-1")),
        Binding("The one with the smallest adjusted p is GMA K={} behind SDPA by {} (unadjusted {}% interval {} to {}, "
                "Holm p {}, {} before the doubling): a study tested once would have told that pair apart,",
                Key("lm_study_gma_k128.json", "spec/n_components"),
                *_signed(LM, _second(arm="gma_k128", against="sdpa"))[:1],
                100 * Key(LM, "tables/val_bits_per_byte/confidence"),
                *_signed(LM, _second(arm="gma_k128", against="sdpa"))[1:],
                Key(LM, _second(arm="gma_k128", against="sdpa") + "/p_holm"),
                0.5 * Key(LM, _second(arm="gma_k128", against="sdpa") + "/p_holm")),
        Binding("every GMA arm trails SDPA, by {} to {}, and lies within {} to {} of linear attention.",
                Computed("the smallest GMA - SDPA mean difference", lambda r: _lm_second(r, "sdpa", min), (LM,)),
                Computed("the largest GMA - SDPA mean difference", lambda r: _lm_second(r, "sdpa", max), (LM,)),
                Computed("the smallest GMA - linear mean difference", lambda r: _lm_second(r, "linear", min), (LM,)),
                Computed("the largest GMA - linear mean difference", lambda r: _lm_second(r, "linear", max), (LM,))),
        Binding("Seeds {}-{} of GMA K={} with variance and balance, and of linear attention, ran before the others, "
                "after seeds "
                "{}-{} gave that pair an unadjusted interval excluding zero (GMA lower by {}, {} to {}), not told "
                "apart (Holm p {}); over the five seeds GMA is lower by {} (interval {} to {}).",
                Key(LM, "design/exploratory/seeds/0"), Key(LM, "design/exploratory/seeds/-1"),
                Key("lm_study_gma_k32_var_bal.json", "spec/n_components"),
                Key(LM, "declared/seeds/0"), Key(LM, "declared/seeds/-1"),
                *_signed(LM, _declared(LM, arm="gma_k32_var_bal", against="linear"), sign=-1),
                Key(LM, _declared(LM, arm="gma_k32_var_bal", against="linear") + "/p_holm"),
                *_signed(LM, _second(arm="gma_k32_var_bal", against="linear"), sign=-1)),
        Binding("at Holm's strictest step, {} over {}): {} to {} seeds an arm would tell a GMA arm from SDPA, {} to {} "
                "one from linear attention,",
                Key(LM, "second_look/alpha"), Key(LM, "second_look/family_size"),
                Computed("the fewest seeds to tell a GMA arm from SDPA", lambda r: _lm_needed(r, "sdpa", min), (LM,)),
                Computed("the most seeds to tell a GMA arm from SDPA", lambda r: _lm_needed(r, "sdpa", max), (LM,)),
                Computed("the fewest seeds to tell a GMA arm from linear", lambda r: _lm_needed(r, "linear", min),
                         (LM,)),
                Computed("the most seeds to tell a GMA arm from linear", lambda r: _lm_needed(r, "linear", max),
                         (LM,))),
        Binding("no count would for GMA K={} with variance and balance,", Computed(
            "the K of the one GMA arm no seed count tells from linear attention", lambda r: _lm_never(r), (LM,))),
        Binding("GMA K={} is not told apart from the uniform causal average ({} against {} bits per byte).",
                Key("routing_collapse_default.json", "spec/n_components"),
                _lm_bits("gma_k64")[0], _lm_bits("uniform")[0]),
        Binding("SDPA's interval puts it ahead of linear attention by {} ({} to {}), of Performer by {} ({} to {}) and "
                "of no mixing by {} ({} to {}); of all {} pairs of arms, {} unadjusted intervals exclude zero and {} "
                "survive a Holm correction over the {},",
                *_signed(LM, "tables/val_bits_per_byte/paired/linear"),
                *_signed(LM, "tables/val_bits_per_byte/paired/performer"),
                *_signed(LM, "tables/val_bits_per_byte/paired/none"),
                Key(LM, "tables/val_bits_per_byte/ordering/p_holm/*", reduce="count"),
                Key(LM, "tables/val_bits_per_byte/ordering/interval_excludes_zero/*", reduce="count"),
                Key(LM, "tables/val_bits_per_byte/ordering/told_apart/*", reduce="count"),
                Key(LM, "tables/val_bits_per_byte/ordering/p_holm/*", reduce="count")),
        Binding("mean gains over seeds {}-{}, with", Key(LM, f"{_RECOVERED}/gma_k32_var_bal/seeds/0"),
                Key(LM, f"{_RECOVERED}/gma_k32_var_bal/seeds/-1")),
        Binding("with Fieller's paired {}% interval over seeds, Student's t), GMA K={} with variance and balance "
                "recovers {} ({} to {}), linear attention {} ({} to {}), GMA K={} with the default routing, whose "
                "components collapse, {} ({} to {}), the uniform average {} and the hybrid {} ({} to {}).",
                100 * Key(LM, "tables/val_bits_per_byte/confidence"),
                Key("lm_study_gma_k32_var_bal.json", "spec/n_components"),
                *_signed(LM, f"{_RECOVERED}/gma_k32_var_bal"),
                *_signed(LM, f"{_RECOVERED}/linear"), Key("routing_collapse_default.json", "spec/n_components"),
                *_signed(LM, f"{_RECOVERED}/gma_k64"), Key(LM, f"{_RECOVERED}/uniform/mean"),
                *_signed(LM, f"{_RECOVERED}/local_gma")),
        Binding("linear attention and GMA K={} with variance and balance are not told apart, with an interval ({} to "
                "{}) that allows", Key("lm_study_gma_k32_var_bal.json", "spec/n_components"),
                *_signed(LM, _second(arm="gma_k32_var_bal", against="linear"), sign=-1)[1:]),
        Binding("Between steps {} and {}, {} pairs of arms change places, none of them among the {}.",
                Key(LM_ARMS, "runs/*/history/steps/-2", reduce="unique"),
                Key(LM_ARMS, "runs/*/history/steps/-1", reduce="unique"),
                Key(LM, "tables/val_bits_per_byte/ordering/swapped/*", reduce="count"),
                Key(LM, "tables/val_bits_per_byte/ordering/told_apart/*", reduce="count")),
    ],
    "**Text stand-in**": [
        Binding("{} classes, byte-level, {} bytes, {} training texts; majority class {}%)",
                Computed("the classes the Text stand-in's records name", text_classes, TEXT_ARMS),
                Key(TEXT_ARMS, "config/max_length"), Key(TEXT_ARMS, "config/n_train"),
                100 * Key(TEXT_ARMS, "summary/majority_baseline")),
        Binding("test accuracy after the last of {} epochs, GMA {} +- {}%, softmax {} +- {}%, linear attention {} +- "
                "{}% (mean +- half-width, {} seeds each)",
                Key(TEXT_ARMS, "config/epochs"),
                *(source for arm in ("gma", "softmax", "linear") for source in _mean_half_width(
                    TEXT, f"tables/last_epoch_test_accuracy/arms/{arm}/last_epoch_test_accuracy", scale=100)),
                Key(TEXT, "tables/last_epoch_test_accuracy/arms/*/last_epoch_test_accuracy/n", reduce="unique")),
        Binding("paired over the {} seeds, Holm over the {})", Key(TEXT, "declared/seeds/*", reduce="count"),
                Key(TEXT, "declared/family_size")),
        Binding("ahead of softmax by {} points ({}% interval {} to {}, Holm p {}) and of linear attention by {} points "
                "({} to {}),",
                *_signed(TEXT, _declared(TEXT, arm="gma", against="softmax"), scale=100)[:1],
                100 * Key(TEXT, "tables/last_epoch_test_accuracy/confidence"),
                *_signed(TEXT, _declared(TEXT, arm="gma", against="softmax"), scale=100)[1:],
                Key(TEXT, _declared(TEXT, arm="gma", against="softmax") + "/p_holm"),
                *_signed(TEXT, _declared(TEXT, arm="gma", against="linear"), scale=100)),
        Binding("lowers GMA's accuracy by {} points ({} to {});",
                *_signed(TEXT, _declared(TEXT, arm="gma_variance_d_route", against="gma"), sign=-1, scale=100)),
        Binding("the balance loss is not told apart (lower by {} points, interval {} to {}).",
                *_signed(TEXT, _declared(TEXT, arm="gma_balance", against="gma"), sign=-1, scale=100)),
        Binding("reaches {} +- {}% and is lower than GMA by {} points (interval {} to {}): its window heads",
                *_mean_half_width(TEXT, "tables/last_epoch_test_accuracy/arms/local_gma/last_epoch_test_accuracy",
                                  scale=100),
                *_signed(TEXT, "tables/last_epoch_test_accuracy/paired/local_gma", sign=-1, scale=100)),
        Binding("GMA's own seeds range from {} to {}%,",
                Computed("100 x GMA's lowest last-epoch accuracy", lambda r: 100 * min(text_last_epoch(r)),
                         ("text_standin_gma.json",)),
                Computed("100 x GMA's highest last-epoch accuracy", lambda r: 100 * max(text_last_epoch(r)),
                         ("text_standin_gma.json",))),
    ],
    "**ListOps at LRA's lengths**": [
        Binding("depth {}, {}-{} tokens, {} training trees, {} epochs of {}-tree batches, a {}-layer width-{} encoder, "
                "K={}; the test set's majority class is {}%;",
                *(Key(LRA_ARMS, f"config/{key}") for key in ("max_depth", "min_length", "max_length", "n_train",
                                                             "epochs", "batch_size", "n_layers", "d_model",
                                                             "n_components")),
                100 * Key(LRA_ARMS, "summary/majority_baseline")),
        Binding("per seed SDPA {}, {}, {}, {} and {}%; GMA {}, {}, {}, {} and {}%; GMA with variance and balance {}% "
                "at every seed; linear attention {}, {}, {}, {} and {}%; Performer {}, {}, {}, {} and {}%.",
                *_lra_seeds("sdpa"), *_lra_seeds("gma"),
                100 * Key("listops_lra_gma_var_bal.json", "runs/*/test/accuracy", reduce="unique"),
                *_lra_seeds("linear"), *_lra_seeds("performer")),
        Binding("{}% is the share of test trees whose answer is {}, the training set's most frequent label: a run at "
                "{}% gives",
                Computed("100 x the test share of the training set's most frequent label",
                         lambda r: 100 * lra_labels(r)["share"], LRA_ARMS, slow=True),
                Computed("the training set's most frequent label", lambda r: lra_labels(r)["label"], LRA_ARMS,
                         slow=True),
                Computed("100 x the test share of the training set's most frequent label",
                         lambda r: 100 * lra_labels(r)["share"], LRA_ARMS, slow=True)),
        Binding("constant answer ({}-{}%) or at {}-{}%.",
                *(Computed(f"100 x the {how} accuracy of the runs {where} the majority class",
                           lambda r, f=f, left=left: 100 * f(lra_accuracies(r, left_plateau=left)), LRA_ARMS)
                  for left, where in ((False, "at or below"), (True, "above")) for how, f in (("lowest", min),
                                                                                               ("highest", max)))),
        Binding("The study's settings fixed three seeds ({}-{}); its family, each arm against GMA, paired, with Holm "
                "over the {} tests, gives",
                Key(LRA, "declared/seeds/0"), Key(LRA, "declared/seeds/-1"), Key(LRA, "declared/family_size")),
        Binding("(Performer - GMA is {} points, {}% interval {} to {}, Holm p {}).",
                *_signed(LRA, _declared(LRA, arm="performer"), scale=100)[:1],
                100 * Key(LRA, "tables/test_accuracy/confidence"),
                *_signed(LRA, _declared(LRA, arm="performer"), scale=100)[1:],
                Key(LRA, _declared(LRA, arm="performer") + "/p_holm")),
        Binding("Seeds {} and {} were added to every arm", Key(LRA, "design/exploratory/seeds/0"),
                Key(LRA, "design/exploratory/seeds/1")),
        Binding("Performer - GMA is {} points ({} to {}, unadjusted p {}) and SDPA - GMA {} points ({} to {}).",
                *_signed(LRA, "tables/test_accuracy/paired/performer", scale=100),
                Key(LRA, "tables/test_accuracy/paired/performer/p"),
                *_signed(LRA, "tables/test_accuracy/paired/sdpa", scale=100)),
        Binding("on seeds {}-{}, at Holm's strictest step, {} over {}; exploratory, and rough for an outcome this "
                "bimodal): {} an arm to tell Performer from GMA, {} for SDPA and {} for linear attention and for GMA "
                "with variance and balance.",
                Key(LRA, "declared/seeds/0"), Key(LRA, "declared/seeds/-1"),
                Key(LRA, "declared/alpha"), Key(LRA, "declared/family_size"),
                *(Computed(f"the seeds a new ListOps-LRA study would need for {arm} - GMA",
                           lambda r, arm=arm: _needed(r, LRA, arm), (LRA,)) for arm in ("performer", "sdpa")),
                Computed("the seeds a new ListOps-LRA study would need for linear - GMA and for GMA with variance and "
                         "balance - GMA",
                         lambda r: _needed(r, LRA, "linear", same_as="gma_var_bal"), (LRA,))),
        Binding("gives p {}, one of {} such tests against GMA (Holm p {}).",
                Key(LRA, "left_plateau/fisher/performer/p"), Key(LRA, "left_plateau/fisher/*/p", reduce="count"),
                Key(LRA, "left_plateau/fisher/performer/p_holm")),
        Binding("A run took {}-{} CPU-seconds for SDPA, {}-{} for GMA, {}-{} for Performer and {}-{} for linear",
                *_cpu_seconds("sdpa"), *_cpu_seconds("gma"), *_cpu_seconds("performer"), *_cpu_seconds("linear")),
    ],
    "**Recall against state size**": [
        Binding("sequences of {} tokens holding {}, {}, {}, {} or {} key-value pairs, a vocabulary of {};",
                Key(RECALL, "table/design/seq_len"), *(Key(RECALL, f"table/design/kv_pairs/{i}") for i in range(5)),
                Key(RECALL, "table/design/vocab_size")),
        Binding("a two-block decoder of width {}, and of width {} for SDPA,", Key(RECALL_ARMS, "width"),
                Key(RECALL, "table/design/widths/1")),
        Binding("{} steps at the learning rate, {} or {}, with the better validation accuracy on seed {};",
                Key(RECALL_ARMS, "design/steps"), Key(RECALL_ARMS, "design/learning_rates/0"),
                Key(RECALL_ARMS, "design/learning_rates/1"), Key(RECALL_ARMS, "design/lr_seed")),
        Binding("{} seeds an arm, each run at width {} {}-{} CPU-seconds on one thread)",
                Computed("the seeds of every recall arm", recall_seeds, (RECALL,)), Key(RECALL_ARMS, "width"),
                Computed("the fewest CPU-seconds of a recall run", lambda r: recall_cpu_seconds(r, min), ()),
                Computed("the most CPU-seconds of a recall run", lambda r: recall_cpu_seconds(r, max), ())),
        Binding("decoding state after {} tokens: the mixer's own plus the short convolution's {} bytes at width {} ({} "
                "at width {}).", Key(RECALL, "table/design/seq_len"), _conv_bytes(64), _recall_width(64),
                _conv_bytes(128), _recall_width(128)),
        Binding("At width {} SDPA recalls {} ({} bytes), at least {} at every count,", Key(RECALL_ARMS, "width"),
                _recall("sdpa"), _bytes("sdpa"),
                Computed("SDPA's lowest accuracy at any count and seed",
                         lambda r: min(min(v) for v in _recall_entry(r, "sdpa")["by_count"].values()), (RECALL,))),
        Binding("and linear attention {} ({} bytes), falling from {} at {} pairs to {} at {}; at width {} SDPA "
                "recalls {} and linear attention {} ({} bytes):",
                _recall("linear"), _bytes("linear"), _recall("linear", 4), Key(RECALL, "table/design/kv_pairs/0"),
                _recall("linear", 16), Key(RECALL, "table/design/kv_pairs/-1"), Key(RECALL, "table/design/widths/1"),
                _recall("sdpa", width=128), _recall("linear", width=128), _bytes("linear", 128)),
        Binding("at K={} and width {} GMA keeps exactly linear attention's {} bytes and recalls {} against {}, and at "
                "K={} and width {} its {} bytes and recalls {} against {}.",
                _recall_k("gma_k64_var_bal"), Key(RECALL, "table/design/widths/0"), _bytes("gma_k64_var_bal"),
                _recall("gma_k64_var_bal"), _recall("linear"), _recall_k("gma_k128_var_bal", 128),
                Key(RECALL, "table/design/widths/1"), _bytes("gma_k128_var_bal", 128),
                _recall("gma_k128_var_bal", width=128), _recall("linear", width=128)),
        Binding("With the default routing GMA recalls {} to {} at every K and both widths (table below), at or under "
                "the {} that guessing",
                Computed("the lowest default-routing GMA recall", lambda r: min(_default_recalls(r)), (RECALL,)),
                Computed("the highest default-routing GMA recall", lambda r: max(_default_recalls(r)), (RECALL,)),
                Computed("the mean of 1/n over the recall counts", lambda r: capacity.mean_guessing_floor(
                    r[RECALL]["table"]["design"]["kv_pairs"]), (RECALL,))),
        Binding("(Holm p {} each; their intervals allow linear attention ahead by up to {} and {}).",
                Computed("the Holm p of both equal-state comparisons", lambda r: _unique(sorted(
                    {round(_recall_pair(r, k, w)["p_holm"], 12) for k, w in ((64, 64), (128, 128))}),
                    "the equal-state Holm p-values"), (RECALL,)),
                *(Computed(f"the largest difference the K={k} equal-state interval allows", lambda r, k=k, w=w:
                           stats.largest_difference_allowed(_recall_pair(r, k, w)["ci95"]), (RECALL,))
                  for k, w in ((64, 64), (128, 128)))),
        Binding("at each width ({} comparisons, paired t over the {} seeds, Holm). Of these, {} are told apart,",
                Key(RECALL, "declared/family_size"), Computed("the seeds of every recall arm", recall_seeds, (RECALL,)),
                Computed("the recall comparisons told apart", recall_told_apart, (RECALL,))),
        Binding("with variance and balance, K={}, {} and {} behind SDPA at width {}, and K={} behind both and K={} "
                "behind SDPA at width {}. With variance and balance at K of {} or more",
                _recall_k("gma_k8_var_bal"), _recall_k("gma_k16_var_bal"), _recall_k("gma_k32_var_bal"),
                Key(RECALL, "table/design/widths/0"), _recall_k("gma_k8_var_bal", 128),
                _recall_k("gma_k16_var_bal", 128), Key(RECALL, "table/design/widths/1"),
                _recall_k("gma_k64_var_bal")),
        Binding("exploratory and ran at width {}: a window of {} tokens recalls {} ({} bytes); window heads beside GMA "
                "K={} heads recall {} ({} bytes) and GMA K={} with a decay {},", Key(RECALL_ARMS, "width"),
                Key(RECALL, "table/arms/window/64/options/window"), _recall("window"), _bytes("window"),
                Key(RECALL, "table/arms/local_gma/64/options/n_components"), _recall("local_gma"),
                _bytes("local_gma"), _recall_k("decay_gma"), _recall("decay_gma")),
        Binding("against {} for GMA K={} (not told apart, exploratory)", _recall("gma_k32"), _recall_k("gma_k32")),
        Binding("linear attention with a decay recalls {}. Mamba recalls {} ({} bytes), under the {} of guessing",
                _recall("decay_linear"), _recall("mamba"), _bytes("mamba"),
                Computed("the mean of 1/n over the recall counts", lambda r: capacity.mean_guessing_floor(
                    r[RECALL]["table"]["design"]["kv_pairs"]), (RECALL,))),
        Binding("recalls {} ({} bytes), under the same floor", _recall("performer"), _bytes("performer")),
        Binding("| K | {} | {} | {} | {} | {} | {} |", *(_recall_k(f"gma_k{k}") for k in RECALL_KS)),
        Binding(" ".join(f"| width {{}}: {label} | {{}} | {{}} | {{}} | {{}} | {{}} | {{}} |" for _ in (64, 128)
                         for label in ("state bytes", "default routing", "variance and balance")),
                *(source for width in (64, 128) for row in (
                    [_bytes(f"gma_k{k}", width) for k in RECALL_KS],
                    [_recall(f"gma_k{k}", width=width) for k in RECALL_KS],
                    [_recall(f"gma_k{k}_var_bal", width=width) for k in RECALL_KS])
                  for source in (_recall_width(width), *row))),
    ],
    "**Fast-weight capacity**": [
        Binding("one causal layer of key size {} stores", Key(CAPACITY_LINEAR, "config/d_model")),
        Binding("Adam at {}, batch {}, at most {} steps; seeds {}-{} for the primary pair, seed {} for every other arm",
                Key(CAPACITY_LINEAR, "config/lr"), Key(CAPACITY_LINEAR, "config/batch_size"),
                Key(CAPACITY_LINEAR, "config/max_steps"), Key(CAPACITY, "declared/seeds/0"),
                Key(CAPACITY, "declared/seeds/-1"), Key(CAPACITY_SDPA, "runs/0/seed")),
        Binding("At S = {}, {}, {} and {}, linear attention retrieves {}, {}, {} and {} of the pairs, and GMA with K "
                "= {} and the balance remedy {}, {}, {} and {}, both keeping {} bytes of state",
                *(Key(CAPACITY_LINEAR, f"config/n_pairs/{i}") for i in (3, 4, 5, 6)),
                *(_capacity_accuracy(CAPACITY_LINEAR, n) for n in CAPACITY_PRIMARY),
                Key(CAPACITY_GMA, "spec/options/n_components"),
                *(_capacity_accuracy(CAPACITY_GMA, n) for n in CAPACITY_PRIMARY),
                Key((CAPACITY_LINEAR, CAPACITY_GMA), "runs/*/state_bytes/80", reduce="unique")),
        Binding("told apart behind at {} of the {} sizes (paired t over {} seeds, Holm)",
                Computed("the primary capacity comparisons told apart with GMA behind", lambda r: sum(
                    c["told_apart"] and c["mean"] < 0 for c in r[CAPACITY]["declared"]["comparisons"]), (CAPACITY,)),
                Key(CAPACITY, "declared/family_size"), Key(CAPACITY, "declared/seeds/*", reduce="count")),
        Binding("carries {} to {} bits at those sizes, the spread of {} to {} of its {} slots; with the default "
                "routing (seed {}), {} to {} bits.",
                _capacity_bits(CAPACITY_GMA, min), _capacity_bits(CAPACITY_GMA, max), _capacity_slots(min),
                _capacity_slots(max), Key(CAPACITY_GMA, "spec/options/n_components"),
                Key(CAPACITY_DEFAULT, "runs/0/seed"), _capacity_bits(CAPACITY_DEFAULT, min),
                _capacity_bits(CAPACITY_DEFAULT, max)),
    ],
}
"""README's numbers, item by item: the start of the item's text, then its bindings in reading order."""
