"""Chapter 11's checkers accept correct answers, name the common mistakes and report a stub as not attempted."""
import math

import pytest
import torch

from gma_teach.exercises import (
    ExerciseError,
    NotAttempted,
    check_mutual_information,
    check_purity,
    check_routing_information,
    check_token_entropy,
)


def _purity(assignments, categories):
    total = 0
    for component in assignments.unique():
        total += torch.bincount(categories[assignments == component]).max().item()
    return total / assignments.numel()


def _mutual_information(assignments, categories, log=math.log):
    n = assignments.numel()
    joint = {}
    for z, c in zip(assignments.tolist(), categories.tolist()):
        joint[(z, c)] = joint.get((z, c), 0) + 1
    p_z = {z: (assignments == z).sum().item() / n for z in set(assignments.tolist())}
    p_c = {c: (categories == c).sum().item() / n for c in set(categories.tolist())}
    return sum(v / n * log(v / n / (p_z[z] * p_c[c])) for (z, c), v in joint.items())


def _token_entropy(resp):
    return (-torch.special.xlogy(resp, resp).sum(-1) / math.log(resp.shape[-1])).mean().item()


def test_correct_answers_pass(capsys):
    check_purity(_purity)
    check_token_entropy(_token_entropy)
    check_mutual_information(_mutual_information)
    check_token_entropy(lambda resp: torch.tensor(_token_entropy(resp)))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" -- ")[0] for line in lines] == [
        "Exercise 11.1: correct", "Exercise 11.2: correct", "Exercise 11.3: correct", "Exercise 11.2: correct"]


@pytest.mark.parametrize("check", [check_purity, check_token_entropy, check_mutual_information,
                                   check_routing_information])
def test_a_stub_is_not_attempted(check, capsys):
    def stub(*args):
        raise NotImplementedError

    assert check(stub) is None
    assert capsys.readouterr().out == (f"Exercise {check.exercise}: not attempted yet (fill in the cell above and "
                                       "run it again)\n")
    with pytest.raises(NotAttempted):
        check(stub, strict=True)


def test_purity_mistakes_are_named():
    def macro(assignments, categories):
        values = [torch.bincount(categories[assignments == k]).max().item() / (assignments == k).sum().item()
                  for k in assignments.unique()]
        return sum(values) / len(values)

    with pytest.raises(ExerciseError, match="^Exercise 11.1: you averaged the per-component purities"):
        check_purity(macro)
    with pytest.raises(ExerciseError, match="returned a count"):
        check_purity(lambda a, c: _purity(a, c) * a.numel())
    with pytest.raises(ExerciseError, match="expected a float"):
        check_purity(lambda a, c: "0.5")
    with pytest.raises(ExerciseError, match="raised ZeroDivisionError"):
        check_purity(lambda a, c: 1 / 0)


def test_mutual_information_mistakes_are_named():
    with pytest.raises(ExerciseError, match="^Exercise 11.3: .*bits"):
        check_mutual_information(lambda a, c: _mutual_information(a, c, log=math.log2))
    with pytest.raises(ExerciseError, match="expected"):
        check_mutual_information(lambda a, c: _mutual_information(a, c) + 0.01)


def test_token_entropy_mistakes_are_named():
    with pytest.raises(ExerciseError, match="^Exercise 11.2: you did not normalize"):
        check_token_entropy(lambda resp: (-torch.special.xlogy(resp, resp).sum(-1)).mean().item())
    with pytest.raises(ExerciseError, match="usage entropy"):
        check_token_entropy(lambda resp: _token_entropy(resp.mean(0, keepdim=True)))
    with pytest.raises(ExerciseError, match="non-finite"):
        check_token_entropy(lambda resp: (-(resp * resp.log()).sum(-1) / math.log(resp.shape[-1])).mean().item())
    with pytest.raises(ExerciseError, match="single number"):
        check_token_entropy(lambda resp: -torch.special.xlogy(resp, resp).sum(-1))


def test_token_entropy_in_bits_over_log2_k_passes_and_mixed_logarithms_are_named(capsys):
    def entropy(resp, log):  # each row's entropy with the given logarithm, 0 log 0 = 0
        return -torch.special.xlogy(resp, resp).sum(-1) * log(math.e)

    check_token_entropy(lambda resp: (entropy(resp, math.log2) / math.log2(resp.shape[-1])).mean().item())
    assert capsys.readouterr().out.startswith("Exercise 11.2: correct")
    # at K = 2 (the first size) nats over log2 K equals the unnormalized entropy: it must not be called unnormalized
    with pytest.raises(ExerciseError, match="^Exercise 11.2: you divided an entropy in nats by log2 K"):
        check_token_entropy(lambda resp: (entropy(resp, math.log) / math.log2(resp.shape[-1])).mean().item())
    with pytest.raises(ExerciseError, match="^Exercise 11.2: you divided an entropy in bits by ln K"):
        check_token_entropy(lambda resp: (entropy(resp, math.log2) / math.log(resp.shape[-1])).mean().item())
    with pytest.raises(ExerciseError, match="^Exercise 11.2: token entropy for K=2: got 0.300000"):
        check_token_entropy(lambda resp: 0.3)


def _entropy(rows):
    return -torch.special.xlogy(rows, rows).sum(-1)


def _routing_information(resp):
    return ((_entropy(resp.mean(0)) - _entropy(resp).mean()) / math.log(2)).item()


def test_routing_information_accepts_a_correct_answer_and_names_the_mistakes(capsys):
    check_routing_information(_routing_information)
    assert capsys.readouterr().out.startswith("Exercise 11.4: correct")
    mistakes = {
        "in nats": lambda resp: _routing_information(resp) * math.log(2),
        "divided by ln K": lambda resp: _routing_information(resp) * math.log(2) / math.log(resp.shape[-1]),
        "sign is flipped": lambda resp: -_routing_information(resp),
        "entropy of the mean row alone": lambda resp: (_entropy(resp.mean(0)) / math.log(2)).item(),
        "argmax winners": lambda resp: (_entropy(torch.bincount(resp.argmax(-1), minlength=resp.shape[-1]).double()
                                                 / resp.shape[0]) / math.log(2)).item(),
        "non-finite": lambda resp: ((-(resp.mean(0) * resp.mean(0).log()).sum() + (resp * resp.log()).sum(-1).mean())
                                    / math.log(2)).item(),
    }
    for message, wrong in mistakes.items():
        with pytest.raises(ExerciseError, match=f"^Exercise 11.4: .*{message}"):
            check_routing_information(wrong)
