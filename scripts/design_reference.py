#!/usr/bin/env python3
"""A factorial design's effects and the variance by source (docs/statistics.md, "Factorial
designs" and "Variance by source"), computed again from a run folder's trials.csv and
manifest.json by textbook rules, and compared with the report's report.json. Plain python3;
none of ablate's code, and other algorithms than ablate's:

    python3 scripts/design_reference.py RUN_DIR

Prints how many numbers it compared; exits 1 (naming each) when one differs by more than 1e-9,
2 on bad input.

The rules:
- the outcome: a pass (status `passed`) of each counted attempt; a cell is a (task, arm, model)
  and its mean the mean of its trials.
- effects by Yates's algorithm (Montgomery, Design and Analysis of Experiments, section 6.6):
  the cell means of a task in the design's standard order, k - p passes of sums and
  differences; the contrast of a term is its Yates total over 2^(k-p-1). A fraction's generated
  factors are read through its generators (a term's Yates row is the term with the generated
  factors replaced by their base products). An interaction is reported as twice the textbook
  effect. An effect is the mean over the tasks of the task's contrast.
- the between-task variance of an effect, DerSimonian-Laird, with each task's sampling variance
  sum over cells of p(1 - p) / n / (runs/2)^2 times the scale squared, p = (passes + 0.5) / (n + 1).
- variance by source: the cell means of a T x A x M layout (the tasks every arm and model ran),
  the textbook three-way ANOVA sums of squares of the cell means (Montgomery, section 5.4), the
  within-cell mean square for the noise, and the expected mean squares of the mixed model (tasks
  random, arms and models fixed, unrestricted): task = (MS_T - MS_TA - MS_TM + MS_TAM) / (A M),
  arm = (MS_A - MS_TA) / (T M), model = (MS_M - MS_TM) / (T A), arm x model = (MS_AM - MS_TAM) /
  T, task x configuration = (MS_TA - MS_TAM) / M + (MS_TM - MS_TAM) / A + MS_TAM - noise / n,
  each less noise / n where the formula leaves it; negatives as 0.
"""

import csv
import json
import sys
from collections import defaultdict


def mean(xs):
    return sum(xs) / len(xs)


def yates(values, base):
    """Yates's algorithm: `base` passes of pairwise sums then differences."""
    v = list(values)
    for _ in range(base):
        half = len(v) // 2
        v = [v[2 * i] + v[2 * i + 1] for i in range(half)] + [v[2 * i + 1] - v[2 * i] for i in range(half)]
    return v


def main(run):
    manifest = json.load(open(f"{run}/manifest.json"))
    report = json.load(open(f"{run}/report.json"))
    design = manifest["experiment"]["factorial"]
    with open(f"{run}/trials.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["counted"] == "true"]
    cells = defaultdict(list)
    for r in rows:
        cells[(r["task"], r["arm"], r["model"])].append(1.0 if r["status"] == "passed" else 0.0)
    tasks = sorted({r["task"] for r in rows})
    models = sorted({r["model"] for r in rows})
    arms = sorted({r["arm"] for r in rows})
    factors = [f["component"] for f in design["factors"]]
    k = len(factors)
    gens = {g["factor"]: g["product"] for g in design.get("generators", [])}
    base = [i for i in range(k) if i not in gens]
    runs = design["runs"]
    # Standard order of the base factors: run i has base factor b high when bit b of i is set.
    def run_index(run):
        return sum(1 << j for j, b in enumerate(base) if run["high"][b])
    order = sorted(runs, key=run_index)
    assert [run_index(r) for r in order] == list(range(1 << len(base))), "runs are not a full base design"
    n_runs = len(order)
    failures, compared = [], 0

    def close(what, got, want, tol=1e-9):
        nonlocal compared
        compared += 1
        if not (abs(got - want) <= tol * max(1.0, abs(want))):
            failures.append(f"{what}: report {got}, reference {want}")

    def yates_row(term):
        """The Yates row of a term: generated factors replaced by their base products."""
        bits = set()
        for f in term:
            for b in (gens[f] if f in gens else [f]):
                bits ^= {b}
        return sum(1 << base.index(b) for b in bits)

    by_name = {}
    for e in report["factorial"]["effects"]:
        t = e["term"]
        name = t["component"] if t["kind"] == "main" else f'{t["a"]} x {t["b"]}'
        by_name[(e["model"], name)] = e
    for model in models:
        contrasts = {}
        for ti, task in enumerate(tasks):
            means = [cells.get((task, r["arm"], model)) for r in order]
            if any(m is None for m in means):
                continue
            totals = yates([mean(m) for m in means], len(base))
            for i in range(k):
                contrasts.setdefault((factors[i],), []).append((task, totals[yates_row([i])] / (n_runs / 2), means))
            for i in range(k):
                for j in range(i + 1, k):
                    contrasts.setdefault((factors[i], factors[j]), []).append(
                        (task, 2 * totals[yates_row([i, j])] / (n_runs / 2), means)
                    )
        for term, per_task in contrasts.items():
            name = " x ".join(term)
            e = by_name.get((model, name))
            if e is None:
                continue  # an alias the report names by its class's first interaction
            close(f"{model} {name} estimate", e["estimate"], mean([c for _, c, _ in per_task]))
            got = {t["task"]: t["effect"] for t in e["tasks"]["tasks"]}
            for task, c, _ in per_task:
                close(f"{model} {name} task {task}", got[task], c)
            scale = 1.0 if len(term) == 1 else 2.0
            d = [c for _, c, _ in per_task]
            v = []
            for _, _, means in per_task:
                s = 0.0
                for m in means:
                    p = (sum(m) + 0.5) / (len(m) + 1)
                    s += p * (1 - p) / len(m) / (n_runs / 2) ** 2
                v.append(max(scale * scale * s, 1e-9))
            w = [1 / x for x in v]
            mu = sum(a * b for a, b in zip(w, d)) / sum(w)
            q = sum(a * (b - mu) ** 2 for a, b in zip(w, d))
            c = sum(w) - sum(a * a for a in w) / sum(w)
            tau = max(0.0, (q - (len(d) - 1)) / c) ** 0.5
            close(f"{model} {name} tau", e["tasks"]["tau"], tau)
    variance(report, cells, tasks, arms, models, close)
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"compared {compared} numbers")


def variance(report, cells, tasks, arms, models, close):
    T, A, M = len(tasks), len(arms), len(models)
    y = {(t, a, m): mean(cells[(t, a, m)]) for t in tasks for a in arms for m in models}
    g = mean(list(y.values()))
    mt = {t: mean([y[(t, a, m)] for a in arms for m in models]) for t in tasks}
    ma = {a: mean([y[(t, a, m)] for t in tasks for m in models]) for a in arms}
    mm = {m: mean([y[(t, a, m)] for t in tasks for a in arms]) for m in models}
    mta = {(t, a): mean([y[(t, a, m)] for m in models]) for t in tasks for a in arms}
    mtm = {(t, m): mean([y[(t, a, m)] for a in arms]) for t in tasks for m in models}
    mam = {(a, m): mean([y[(t, a, m)] for t in tasks]) for a in arms for m in models}
    ss_t = A * M * sum((mt[t] - g) ** 2 for t in tasks)
    ss_a = T * M * sum((ma[a] - g) ** 2 for a in arms)
    ss_m = T * A * sum((mm[m] - g) ** 2 for m in models)
    ss_ta = M * sum((mta[(t, a)] - mt[t] - ma[a] + g) ** 2 for t in tasks for a in arms)
    ss_tm = A * sum((mtm[(t, m)] - mt[t] - mm[m] + g) ** 2 for t in tasks for m in models)
    ss_am = T * sum((mam[(a, m)] - ma[a] - mm[m] + g) ** 2 for a in arms for m in models)
    ss_total = sum((v - g) ** 2 for v in y.values())
    ss_tam = ss_total - ss_t - ss_a - ss_m - ss_ta - ss_tm - ss_am
    ms = lambda ss, df: ss / df if df > 0 else 0.0  # a source the layout does not have
    MS_T, MS_A, MS_M = ms(ss_t, T - 1), ms(ss_a, A - 1), ms(ss_m, M - 1)
    MS_TA, MS_TM, MS_AM = ms(ss_ta, (T - 1) * (A - 1)), ms(ss_tm, (T - 1) * (M - 1)), ms(ss_am, (A - 1) * (M - 1))
    MS_TAM = ms(ss_tam, (T - 1) * (A - 1) * (M - 1))
    within = sum(sum((x - mean(c)) ** 2 for x in c) for c in cells.values())
    df = sum(len(c) - 1 for c in cells.values())
    noise = within / df
    n = len(cells) / sum(1 / len(c) for c in cells.values())
    e = noise / n
    if M == 1:
        # One model: the task x arm mean square is the residual; no model terms.
        MS_TAM, MS_TM, MS_AM = MS_TA, 0.0, 0.0
        tam, ta, tm = MS_TA - e, 0.0, 0.0
    else:
        tam = MS_TAM - e
        ta = (MS_TA - MS_TAM) / M
        tm = (MS_TM - MS_TAM) / A
    want = {
        "task": max(0.0, (MS_T - MS_TA - MS_TM + MS_TAM) / (A * M)) if M > 1 else max(0.0, (MS_T - MS_TA) / A),
        "arm": max(0.0, (MS_A - MS_TA) / (T * M)),
        "model": max(0.0, (MS_M - MS_TM) / (T * A)),
        "arm x model": max(0.0, (MS_AM - MS_TAM) / T),
        "task x configuration": max(0.0, ta + tm + tam),
        "trial noise": noise,
    }
    got = {c["component"]: c["variance"] for c in report["variance"]["components"]}
    for name, value in want.items():
        close(f"variance {name}", got[name], value)



if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1])
