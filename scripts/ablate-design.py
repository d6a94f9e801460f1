#!/usr/bin/env python3
"""How long `make ablate` takes to a decision, simulated from its pilot (configs/CALIBRATION.md,
"`make ablate`: the harness against the model at its best").

The pilot, configs/calibration/ablate-pilot.csv, holds each paired problem's outcome in the two
arms and its trials' wall times at -j 4 (4 steps a trial). Each simulated run draws 164 problems
with replacement from it, applies the sequential rule at alpha 0.05 to the per-problem
differences (harness minus bare) - the betting confidence sequence of betting_cs_reference.py,
bets sized for 82 tasks as a run of 164 sizes them; helps or hurts once 0 leaves it, equivalent
once both margins have - and charges each problem its two trials' wall times divided by 4, the
trials decoded together; with fewer steps a failing harness trial is charged that share of its
4-step wall time. A run is decided in time when its decision comes within 1,800 s.

    python3 scripts/ablate-design.py        # the table of configs/CALIBRATION.md (400 runs a row)
"""
import collections
import csv
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from betting_cs_reference import C, THETA, bets  # noqa: E402

ALPHA, HORIZON, BUDGET, JOBS, RUNS = 0.05, 82, 1800.0, 4, 400


def pilot():
    path = os.path.join(os.path.dirname(__file__), "..", "configs", "calibration", "ablate-pilot.csv")
    with open(path) as f:
        return list(csv.DictReader(f))


def difference(p):
    return (p["harness_status"] == "passed") - (p["bare_status"] == "passed")


def seconds(p, steps):
    harness = float(p["harness_wall_seconds"])
    taken = int(p["harness_steps"])
    if taken > steps:
        harness *= steps / taken
    return (float(p["bare_wall_seconds"]) + harness) / JOBS


def decision(ds, margin):
    """(tasks, decision) at the first decision, or (None, 'undecided')."""
    xs = [(d + 1) / 2 for d in ds]
    lo, hi = 0.5 - margin / 2, 0.5 + margin / 2
    up = down = zero_up = zero_down = 1.0
    below = above = False
    for t, (x, lam) in enumerate(zip(xs, bets(xs, ALPHA, HORIZON)), start=1):
        zero_up *= 1 + min(lam, C / 0.5) * (x - 0.5)
        zero_down *= 1 - min(lam, C / 0.5) * (x - 0.5)
        up *= 1 + min(lam, C / lo) * (x - lo)
        down *= 1 - min(lam, C / (1 - hi)) * (x - hi)
        if THETA * zero_up >= 1 / ALPHA:
            return t, "helps"
        if (1 - THETA) * zero_down >= 1 / ALPHA:
            return t, "hurts"
        below = below or THETA * up >= 1 / ALPHA
        above = above or (1 - THETA) * down >= 1 / ALPHA
        if below and above:
            return t, "equivalent"
    return None, "undecided"


def simulate(problems, steps, margin, rng):
    times, decisions = [], collections.Counter()
    for _ in range(RUNS):
        run = [rng.choice(problems) for _ in range(164)]
        t, said = decision([difference(p) for p in run], margin)
        decisions[said] += 1
        if t is not None:
            spent = sum(seconds(p, steps) for p in run[:t])
            if spent <= BUDGET:
                times.append(spent / 60)
    return sorted(times), decisions


def main():
    problems = pilot()
    rng = random.Random(1)
    print("steps | margin | decided within 30 min | minutes: median [10%, 90%] | decisions")
    for steps in (4, 2):
        for margin in (0.06, 0.08, 0.10):
            times, decisions = simulate(problems, steps, margin, rng)
            q = lambda f: times[int(f * (len(times) - 1))] if times else float("nan")  # noqa: E731
            print(f"{steps} | ±{margin * 100:.0f} pp | {len(times) / RUNS:.1%} | {q(0.5):.1f} [{q(0.1):.1f}, {q(0.9):.1f}] | {dict(decisions)}")
    for steps in (4, 2):
        per = sum(seconds(p, steps) for p in problems) / len(problems)
        print(f"{steps} steps: {per:.1f} s a problem, {BUDGET / per:.0f} problems in 30 minutes")
    for margin in (0.06, 0.08, 0.10):
        shown = []
        for losses in range(3):
            ds = [0] * 164
            for i in range(losses):
                ds[10 + 30 * i] = -1
            shown.append(decision(ds, margin)[0])
        print(f"±{margin * 100:.0f} pp with no change shown after {shown[0]} problems; with 1 and 2 lost: {shown[1]}, {shown[2]}")


if __name__ == "__main__":
    main()
