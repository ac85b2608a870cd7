"""Every number the study reports quote under "Measured results" (``book/study_reports.md``, the page README's
results table links to) equals, at the precision printed, the one value bound to it.

How the reports and the records are tied (the bindings live in ``tests/readme_bindings.py``):

* the section runs from the heading ``## Measured results`` to the next ``## `` heading or the end of the page, and
  is read as *items*: a
  paragraph, with any table right below it, is one item;
* a quoted number is any number written in an item outside backticks, link targets and names (``chapter 10``,
  ``GPT-2``, ``Table 3``, ``section 4.2``, ``Eq. (7)``); a minus sign right before it (after a space or a bracket)
  is part of it, a dash between two numbers (``0-2``) is not;
* each item is found by the start of its text (``**Core forms**``), and each of its bindings by a *template*: a
  piece of the item's text with ``{}`` where a number stands. A template must match once, and its ``{}`` are bound
  in order to its sources, each one value (a record's key path or a named computation over records, see
  ``readme_bindings``);
* a quoted number passes when it is written exactly as its value is at the number of decimals printed: "2.4434"
  is ``f"{value:.4f}"``, "37.4" ``f"{value:.1f}"``, "1,091" ``f"{value:.0f}"``; a percentage or a sign is the
  binding's (``100 * Key(...)``, ``-1 * Key(...)``), never guessed;
* a number with no binding fails, and so does a binding whose source reads a record its item does not cite. There
  is no allow-list: design constants (seed counts, K, steps, sizes, the cores of the machine) are bound to the
  records that state them too.

So a README number that its record does not hold, a record that changes under a quoted number, and a new number
without a binding all fail here. ``test_every_shifted_number_fails`` proves the check can fail: it shifts every
quoted number by 1% (one unit of its last printed digit where that is more) and expects every one to fail.
"""
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from readme_bindings import BINDINGS, Binding, Key, Records

REPORTS = Path(__file__).resolve().parents[1] / "book" / "study_reports.md"
"""The page that holds the full study reports (moved out of README, which links to it)."""
NAMES = re.compile(r"\b(?:[Cc]hapters?|[Ss]ections?|[Tt]ables?|[Ff]igures?|[Pp]arts?)\s+[\d.,\s\-and]*\d|"
                   r"\bGPT-2\b|\bEqs?\.\s*\(\d+\)")
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w.]\d)")
SIGNED = r"(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?![\d])"
"""A number in a template's ``{}``: what :data:`NUMBER` reads, with its sign when it has one."""


def results_items(text: str) -> list[str]:
    """The items of README's "Measured results" section, each with its whitespace collapsed to single spaces."""
    match = re.search(r"^## Measured results\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    if match is None:
        raise AssertionError(f"{REPORTS.name} has no '## Measured results' section")
    items: list[str] = []
    for block in re.split(r"\n\s*\n", match.group(1).strip()):
        if block.lstrip().startswith("|") and items:
            items[-1] += "\n" + block
        else:
            items.append(block)
    return [" ".join(item.split()) for item in items]


def _blank(match: re.Match) -> str:
    return " " * len(match.group(0))


def quoted_numbers(item: str) -> list[tuple[int, str]]:
    """``(position, text)`` of each number written in ``item`` outside backticks, link targets and names; the
    position is that of the first digit, the text carries a minus sign written right before the number."""
    prose = re.sub(r"`[^`]*`", _blank, item)
    prose = re.sub(r"\]\([^)]*\)", _blank, prose)
    prose = NAMES.sub(_blank, prose)
    found = []
    for match in NUMBER.finditer(prose):
        start, text = match.start(), match.group(0)
        if start >= 1 and prose[start - 1] == "-" and (start == 1 or prose[start - 2] in " ("):
            text = "-" + text
        found.append((start, text))
    return found


def template_pattern(template: str) -> re.Pattern:
    parts = [re.escape(part) for part in " ".join(template.split()).split("{}")]
    return re.compile(SIGNED.join(parts))


def written_as(value: float, quoted: str) -> str:
    """``value`` written as ``quoted`` is: the same number of decimals, no thousands separator."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    written = f"{value:.{decimals}f}"
    return written[1:] if re.fullmatch(r"-0\.?0*", written) else written


@dataclass
class Finding:
    item: str
    position: int
    quoted: str
    problem: str | None  # None: the number is what its binding gives
    slow: bool = False  # bound to a source that builds a data set

    def __str__(self):
        return f"[{self.item}] {self.quoted!r} at {self.position}: {self.problem or 'ok'}"


def check(text: str, bindings: dict[str, list[Binding]], records: Records, *, slow: bool = False) -> list[Finding]:
    """One :class:`Finding` per number quoted in README's results section, and one per broken binding.

    Numbers bound to a slow source (one that builds a data set) are compared only with ``slow=True``; without it
    they are left out of the findings, though still counted as bound. Findings of broken bindings have position -1.
    """
    items = results_items(text)
    findings: list[Finding] = []
    owners = {}
    for key in bindings:
        owning = [i for i, item in enumerate(items) if item.startswith(key)]
        if len(owning) != 1:
            findings.append(Finding(key, -1, "", f"the item key matches {len(owning)} items instead of 1"))
        else:
            owners[owning[0]] = key
    for index, item in enumerate(items):
        key = owners.get(index, item[:40])
        cited = re.findall(r"`([^`\s]*\.json)`", item)
        for pattern in cited:
            if not list(records.folder.glob(Path(pattern).name)):
                findings.append(Finding(key, -1, pattern, f"the item cites `{pattern}`, which matches no record"))
        bound: dict[int, str | None] = {}
        skipped: set[int] = set()
        slow_here: set[int] = set()
        for binding in bindings.get(key, []) if index in owners else []:
            matches = list(template_pattern(binding.template).finditer(item))
            if len(matches) != 1:
                findings.append(Finding(key, -1, "", f"template {binding.template!r} matches {len(matches)} times"))
                continue
            groups = matches[0].groups()
            if len(groups) != len(binding.sources):
                findings.append(Finding(key, -1, "", f"template {binding.template!r} has {len(groups)} numbers "
                                                     f"but {len(binding.sources)} sources"))
                continue
            for number, (quoted, source) in enumerate(zip(groups, binding.sources)):
                position = matches[0].start(number + 1) + quoted.startswith("-")
                if position in bound or position in skipped:
                    findings.append(Finding(key, position, quoted, "bound by two templates"))
                    continue
                uncited = [f for f in source.files if cited and not any(fnmatch.fnmatch(f, c) for c in cited)]
                if uncited:
                    bound[position] = f"{source} reads {uncited}, which the item does not cite"
                elif source.slow and not slow:
                    skipped.add(position)
                else:
                    bound[position] = _compare(quoted, source, records)
                    if source.slow:
                        slow_here.add(position)
        quoted_here = quoted_numbers(item)
        for position, quoted in quoted_here:
            if position in skipped:
                continue
            problem = bound.pop(position) if position in bound else (
                f"no binding in tests/readme_bindings.py for '...{item[max(0, position - 40):position + 20]}...'")
            findings.append(Finding(key, position, quoted, problem, position in slow_here))
        for position in bound:
            findings.append(Finding(key, position, "", "a template binds a number that is not a quoted one"))
    return findings


def _compare(quoted: str, source, records: Records) -> str | None:
    try:
        value = source.value(records)
    except (KeyError, IndexError, ValueError, TypeError, AssertionError, FileNotFoundError) as error:
        return f"{source} cannot be read: {type(error).__name__}: {error}"
    written = written_as(value, quoted)
    if written != quoted.replace(",", ""):
        return f"{source} is {value!r}, written {written!r} at the precision printed"
    return None


def shifted(quoted: str) -> str:
    """``quoted`` plus 1% of itself, or plus one unit of its last printed digit where that is more, written the
    same way (decimals, thousands separators, sign)."""
    number = float(quoted.replace(",", ""))
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    new = number + max(0.01 * abs(number), 10.0 ** -decimals)
    return f"{new:,.{decimals}f}" if "," in quoted else f"{new:.{decimals}f}"


def shift_every_number(text: str) -> str:
    """README with every quoted number of the results section :func:`shifted` (the section rewritten from its items,
    which keeps what :func:`results_items` reads)."""
    start = text.index("## Measured results\n")
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    items = []
    for item in results_items(text):
        for position, quoted in reversed(quoted_numbers(item)):
            begin = position - quoted.startswith("-")
            item = item[:begin] + shifted(quoted) + item[position + len(quoted.lstrip("-")):]
        items.append(item)
    return text[:start] + "## Measured results\n\n" + "\n\n".join(items) + "\n" + text[end:]


@pytest.fixture(scope="module")
def records():
    return Records()


@pytest.fixture(scope="module")
def readme_text():
    return REPORTS.read_text(encoding="utf-8")


def _failures(findings):
    return [str(f) for f in findings if f.problem is not None]


def test_every_quoted_number_is_its_bound_value(readme_text, records):
    findings = check(readme_text, BINDINGS, records)
    assert len(findings) >= 200, f"only {len(findings)} numbers read: is the section still parsed?"
    assert not _failures(findings), "\n".join(_failures(findings))


def test_every_shifted_number_fails(readme_text, records):
    findings = check(shift_every_number(readme_text), BINDINGS, records)
    assert len(findings) == len(check(readme_text, BINDINGS, records))
    passing = [str(f) for f in findings if f.problem is None]
    assert not passing, f"{len(passing)} of {len(findings)} shifted numbers still pass:\n" + "\n".join(passing)
    unread = [str(f) for f in findings if ", written " not in f.problem]  # each fails on its value, not its template
    assert not unread, "\n".join(unread)


@pytest.mark.slow
def test_the_numbers_bound_to_data_are_the_data(readme_text, records):
    findings = [f for f in check(readme_text, BINDINGS, records, slow=True) if f.slow]
    assert findings, "no number is bound to a data set any more: drop this test"
    assert not _failures(findings), "\n".join(_failures(findings))
    shifted_findings = [f for f in check(shift_every_number(readme_text), BINDINGS, records, slow=True) if f.slow]
    assert len(shifted_findings) == len(findings)
    assert all(", written " in (f.problem or "") for f in shifted_findings), [str(f) for f in shifted_findings]


def test_the_checker_catches_a_deleted_binding(readme_text, records):
    for key, bindings in BINDINGS.items():
        for dropped in (0, len(bindings) - 1):
            fewer = {**BINDINGS, key: bindings[:dropped] + bindings[dropped + 1:]}
            unbound = [f for f in check(readme_text, fewer, records) if f.problem and "no binding" in f.problem]
            expected = bindings[dropped].template.count("{}")
            assert len(unbound) == expected, (key, bindings[dropped].template, [str(f) for f in unbound])


def test_the_checker_reads_precision_signs_and_citations(tmp_path):
    (tmp_path / "run.json").write_text('{"val": {"perplexity": 389.93, "accuracy": 0.3741, "gap": -0.01869},'
                                       ' "runs": [{"seed": 0, "s": 1090.6}, {"seed": 1, "s": 1400.2}]}')
    text = ("## Measured results\n\n**LM** (`run.json`, chapter 10, GPT-2 BPE): perplexity 389.9, accuracy 37.4%,"
            "\nlower by 0.0187 (interval -0.0187 to 1,091), 2 runs.\n\n## Next\n")
    local = Records(tmp_path)
    good = {"**LM**": [Binding("perplexity {}, accuracy {}%", Key("run.json", "val/perplexity"),
                               100 * Key("run.json", "val/accuracy")),
                       Binding("lower by {} (interval {} to {}), {} runs", -1 * Key("run.json", "val/gap"),
                               Key("run.json", "val/gap"), Key("run.json", "runs/[seed=0]/s"),
                               Key("run.json", "runs/*/seed", reduce="count"))]}
    assert [q for _, q in quoted_numbers(results_items(text)[0])] == ["389.9", "37.4", "0.0187", "-0.0187", "1,091",
                                                                       "2"]
    assert not _failures(check(text, good, local))
    assert _failures(check(text.replace("389.9", "389.8"), good, local))
    assert _failures(check(text.replace("37.4%", "0.4%"), good, local))  # a percentage is 100 x, never x
    assert _failures(check(text.replace("(interval -0.0187", "(interval 0.0187"), good, local))  # a sign is read
    assert written_as(-0.00004, "0.0000") == "0.0000" and written_as(1090.6, "1,091") == "1091"
    assert any("matches no record" in (f.problem or "") for f in check(text.replace("`run.json`", "`gone_*.json`"),
                                                                       good, local))
    uncited = {"**LM**": [Binding("perplexity {}", Key("other.json", "val/perplexity"))] + good["**LM**"][1:]}
    assert any("does not cite" in (f.problem or "") for f in check(text, uncited, local))
    twice = {"**LM**": good["**LM**"] + [Binding("{} runs", Key("run.json", "runs/*/seed", reduce="count"))]}
    assert any("two templates" in (f.problem or "") for f in check(text, twice, local))
    assert shifted("2.4434") == "2.4678" and shifted("0") == "1" and shifted("1,371") == "1,385"
    assert shifted("-0.0398") == "-0.0394" and shifted("9") == "10"
