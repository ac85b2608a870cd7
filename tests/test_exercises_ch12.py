"""Chapter 12's checkers accept correct answers, name the common mistakes and report a stub as not attempted."""
import math

import pytest
import torch

from gma_teach.exercises import ExerciseError, NotAttempted, ch12


def _state_bytes(mixer, sizes):
    n, d, h, e = sizes["seq_len"], sizes["d_model"], sizes["n_heads"], sizes["bytes_per_number"]
    d_head, k, w = d // h, sizes["n_components"], sizes["window"]
    per_head = {"linear": d_head * (d_head + 1), "decay_linear": d_head * (d_head + 1),
                "performer": sizes["n_features"] * (d_head + 1) + 1, "gma": k * (d_head + 1),
                "decay_gma": k * (d_head + 1)}
    if mixer in per_head:
        return h * per_head[mixer] * e
    if mixer == "sdpa":
        return 2 * n * d * e
    if mixer == "window":
        return 2 * w * d * e
    local = sizes["local_heads"]
    return (local * 2 * w * d_head + (h - local) * k * (d_head + 1)) * e


def _route(keys, n_slots):
    slot = {int(key): index for index, key in enumerate(keys)}
    return lambda tokens: torch.nn.functional.one_hot(torch.tensor([slot[int(t)] for t in tokens]), n_slots).float()


def _expected(n_pairs, n_slots):
    occupied = n_slots * (1 - (1 - 1 / n_slots) ** n_pairs)
    return occupied / n_pairs


def test_correct_answers_pass(capsys):
    ch12.check_state_bytes(_state_bytes)
    ch12.check_state_bytes(lambda mixer, sizes: float(_state_bytes(mixer, sizes)))
    ch12.check_separating_routing(_route)
    ch12.check_random_capacity(_expected)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" -- ")[0] for line in lines] == [
        "Exercise 12.1: correct", "Exercise 12.1: correct", "Exercise 12.2: correct", "Exercise 12.3: correct"]
    assert "real states' nbytes()" in lines[0] and all(len(line) <= 75 for line in lines)


def test_soft_but_disjoint_routing_passes(capsys):
    def spread(keys, n_slots):  # each key over two slots of its own: still exact, no interference
        slot = {int(key): index for index, key in enumerate(keys)}

        def route(tokens):
            rows = torch.zeros(len(tokens), n_slots)
            for row, token in enumerate(tokens):
                index = slot[int(token)]
                if 2 * index + 1 < n_slots and 2 * len(keys) <= n_slots:
                    rows[row, 2 * index], rows[row, 2 * index + 1] = 0.3, 0.7
                else:
                    rows[row, index] = 1.0
            return rows
        return route

    ch12.check_separating_routing(spread)
    assert capsys.readouterr().out.startswith("Exercise 12.2: correct")


@pytest.mark.parametrize("check", [ch12.check_state_bytes, ch12.check_separating_routing,
                                   ch12.check_random_capacity, ch12.check_balanced_assignment])
def test_a_stub_is_not_attempted(check, capsys):
    def stub(*args):
        raise NotImplementedError

    assert check(stub) is None
    assert capsys.readouterr().out == (f"Exercise {check.exercise}: not attempted yet (fill in the cell above and "
                                       "run it again)\n")
    with pytest.raises(NotAttempted):
        check(stub, strict=True)


@pytest.mark.parametrize("mistake, message", [
    (lambda m, s: _state_bytes(m, s) // s["bytes_per_number"], "counted numbers, not bytes"),
    (lambda m, s: _state_bytes(m, s) // 2 if m == "sdpa" else _state_bytes(m, s), "keys \\*and\\* the values"),
    (lambda m, s: (s["n_heads"] * (s["d_model"] // s["n_heads"]) ** 2 * s["bytes_per_number"] if m == "linear"
                   else _state_bytes(m, s)), "left out the normalizer Z: d_k"),
    (lambda m, s: ((s["d_model"] ** 2 + s["d_model"]) * s["bytes_per_number"] if m == "linear"
                   else _state_bytes(m, s)), "per head"),
    (lambda m, s: (s["n_heads"] * s["n_components"] * (s["d_model"] // s["n_heads"]) * s["bytes_per_number"]
                   if m == "gma" else _state_bytes(m, s)), "K more numbers per head"),
    (lambda m, s: (_state_bytes("window", s) + _state_bytes("gma", s) if m == "local_gma"
                   else _state_bytes(m, s)), "splits its heads"),
    (lambda m, s: _state_bytes(m, s) + 4, r"expected \d"),
    (lambda m, s: "many", "expected an int number of bytes"),
])
def test_state_bytes_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match="^Exercise 12.1: .*" + message):
        ch12.check_state_bytes(mistake)


def test_routing_mistakes_are_named():
    def modulo(keys, n_slots):  # a per-token rule: two keys can land in one slot
        return lambda tokens: torch.nn.functional.one_hot(tokens % n_slots, n_slots).double()

    with pytest.raises(ExerciseError, match="^Exercise 12.2: .*share slots"):
        ch12.check_separating_routing(modulo)

    def uniform(keys, n_slots):
        return lambda tokens: torch.full((len(tokens), n_slots), 1 / n_slots)

    with pytest.raises(ExerciseError, match="share slots"):
        ch12.check_separating_routing(lambda keys, k: uniform(keys, k) if len(keys) > 1 else _route(keys, k))

    def unnormalized(keys, n_slots):
        route = _route(keys, n_slots)
        return lambda tokens: 2 * route(tokens)

    with pytest.raises(ExerciseError, match="every row must sum to 1"):
        ch12.check_separating_routing(unnormalized)

    def by_position(keys, n_slots):  # row i gets slot i, whatever the token: breaks when asked in another order
        return lambda tokens: torch.nn.functional.one_hot(torch.arange(len(tokens)), n_slots).double()

    with pytest.raises(ExerciseError, match="a different row when it is asked in another order"):
        ch12.check_separating_routing(by_position)
    with pytest.raises(ExerciseError, match="expected shape"):
        ch12.check_separating_routing(lambda keys, k: lambda tokens: torch.ones(len(tokens), k + 1) / (k + 1))
    with pytest.raises(ExerciseError, match="expected a function route"):
        ch12.check_separating_routing(lambda keys, k: torch.eye(k))


@pytest.mark.parametrize("mistake, message", [
    (lambda n, k: min(1.0, k / n), "balanced \\(round-robin\\)"),
    (lambda n, k: (1 - 1 / k) ** (n - 1), "alone in their slot"),
    (lambda n, k: (1 - 1 / k) ** n, "stays empty, not the accuracy"),
    (lambda n, k: _expected(n, k) + 0.2, "more than four standard errors"),
    (lambda n, k: "high", "expected a finite float"),
])
def test_capacity_mistakes_are_named(mistake, message):
    with pytest.raises(ExerciseError, match="^Exercise 12.3: .*" + message):
        ch12.check_random_capacity(mistake)


def test_the_exponent_n_minus_1_is_named_as_such():
    """At K = 1 it agrees with (1 - 1/K)^n (both 0): the diagnosis must fit every size, not the first that fails."""
    named = r"^Exercise 12.3: n_pairs=1, n_slots=1: .*the exponent is n, not n - 1"
    with pytest.raises(ExerciseError, match=named) as raised:
        ch12.check_random_capacity(lambda n, k: k * (1 - (1 - 1 / k) ** (n - 1)) / n)
    assert "stays empty, not the accuracy" not in str(raised.value)


def test_an_approximation_is_named_and_a_near_miss_refused():
    with pytest.raises(ExerciseError, match=r"e\^\(-n/K\) approximates"):
        ch12.check_random_capacity(lambda n, k: k * (1 - math.exp(-n / k)) / n)
    with pytest.raises(ExerciseError, match="close to the demo but not the exact expectation"):
        ch12.check_random_capacity(lambda n, k: _expected(n, k) + (1e-6 if n > 2 else 0.0))


def _greedy(scores):
    """Level filling written out: the best (key, slot) pair among unplaced keys and the emptiest slots, first."""
    n_keys, n_slots = scores.shape
    held, slots, todo = [0] * n_slots, [-1] * n_keys, set(range(n_keys))
    while todo:
        level = min(held)
        _, key, slot = max((float(scores[t, k]), t, k) for t in todo for k in range(n_slots) if held[k] == level)
        slots[key] = slot
        held[slot] += 1
        todo.remove(key)
    return torch.tensor(slots)


def test_the_balanced_assignment_passes_and_its_mistakes_are_named(capsys):
    ch12.check_balanced_assignment(_greedy)
    assert capsys.readouterr().out.startswith("Exercise 12.4: correct")
    with pytest.raises(ExerciseError, match="^Exercise 12.4: .*each key's own best slot: keys that prefer the same"):
        ch12.check_balanced_assignment(lambda scores: scores.argmax(-1))

    def in_order(scores):  # each key in turn takes its best slot still open at its level
        n_keys, n_slots = scores.shape
        held, slots = [0] * n_slots, []
        for t in range(n_keys):
            slot = max((k for k in range(n_slots) if held[k] == min(held)), key=lambda k: float(scores[t, k]))
            held[slot] += 1
            slots.append(slot)
        return torch.tensor(slots)

    with pytest.raises(ExerciseError, match="^Exercise 12.4: .*You placed the keys in their order"):
        ch12.check_balanced_assignment(in_order)
    float_slots = r"^Exercise 12.4: .*a \(1,\) integer tensor, one slot per key, got a torch.float64"
    with pytest.raises(ExerciseError, match=float_slots):
        ch12.check_balanced_assignment(lambda scores: scores.argmax(-1).double())
    with pytest.raises(ExerciseError, match=r"^Exercise 12.4: .*must lie in \[0, 1\)"):
        ch12.check_balanced_assignment(lambda scores: torch.full((len(scores),), 7))
