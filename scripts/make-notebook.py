# Writes examples/notebook/runs.ipynb (the notebook's source of truth): python3 scripts/make-notebook.py
import json
cells = []
def md(s): cells.append({"cell_type": "markdown", "metadata": {}, "source": s.strip("\n").splitlines(True)})
def code(s): cells.append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s.strip("\n").splitlines(True)})
md("""
# Two runs of ablate, in polars

This notebook loads the exports of two run folders (`arms.csv`, `effects.csv`, `trials.csv`,
written by `ablate report`), stacks them, checks that the counted trials give the report's pass
rates, and draws each arm's pass rate with its interval and a forest plot of the effects.

The run folders come from the environment: `ABLATE_RUNS=run-a:run-b` (as `scripts/test-notebook.sh`
sets it); figures go to `ABLATE_NOTEBOOK_OUT` (default: the current folder). Column types are
the ones `docs/exports.md` states.
""")
code("""
import os
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

runs = [pathlib.Path(p) for p in os.environ["ABLATE_RUNS"].split(os.pathsep)]
out = pathlib.Path(os.environ.get("ABLATE_NOTEBOOK_OUT", "."))
assert len(runs) == 2, runs
runs
""")
md("""
## Loading with the documented types

Every CSV starts with `run_id`, `experiment`, `config_digest` and `suite_digest`, so rows of the
two runs stay apart after stacking. The types below are those of `docs/exports.md`; a float
column is always written as floats (`3.0`), so plain inference gives the same types too, except
for columns that are empty in every row (`cost_usd` without prices).
""")
code("""
FLOAT = {
    "alpha", "pass_rate", "pass_rate_lo", "pass_rate_hi", "pass_rate_excl_infra", "pass_rate_excl_infra_lo",
    "pass_rate_excl_infra_hi", "tests_passed_fraction", "tests_passed_fraction_lo", "tests_passed_fraction_hi",
    "tokens_per_trial", "working_seconds_per_trial", "steps_per_trial", "cost_per_trial", "tokens_per_solved",
    "working_seconds_per_solved", "cost_per_solved", "interval_level", "working_seconds", "wall_seconds",
    "rate_limit_wait_seconds", "cost_usd", "control_rate", "treatment_rate", "delta", "lo", "hi", "p_value",
    "p_adjusted", "mde", "delta_excl_infra", "lo_excl_infra", "hi_excl_infra", "p_value_excl_infra",
    "tokens_per_trial_lo", "tokens_per_trial_hi", "cost_per_trial_lo", "cost_per_trial_hi",
}
INT = {
    "repeat", "attempt", "tests_passed", "tests_total", "steps", "sessions", "tokens_input", "tokens_output",
    "tokens_cached", "loop_guard_hits", "invalid_tool_calls", "unparsed_replies", "path_refusals", "trials", "tasks",
    "trials_excl_infra", "passed", "failed", "timeout", "budget_exhausted", "provider_error", "harness_error",
    "grader_error", "policy_violation", "interrupted", "n_tasks", "family_size", "infra_errors_control",
    "infra_errors_treatment",
}
BOOL = {"counted", "infra_differs"}


def typed(df: pl.DataFrame) -> pl.DataFrame:
    casts = []
    for c in df.columns:
        if c in FLOAT:
            casts.append(pl.col(c).cast(pl.Float64))
        elif c == "seed":
            casts.append(pl.col(c).cast(pl.UInt64))
        elif c in INT:
            casts.append(pl.col(c).cast(pl.Int64))
        elif c in BOOL:
            casts.append(pl.col(c) == "true")
    return df.with_columns(casts)


def load(name: str) -> pl.DataFrame:
    return pl.concat([typed(pl.read_csv(run / name, infer_schema=False)) for run in runs], how="diagonal")


arms, effects, trials = load("arms.csv"), load("effects.csv"), load("trials.csv")
assert arms["run_id"].n_unique() == 2 and effects["run_id"].n_unique() == 2
assert trials.schema["working_seconds"] == pl.Float64 and trials.schema["counted"] == pl.Boolean
arms.select("run_id", "arm", "model", "trials", "pass_rate", "pass_rate_lo", "pass_rate_hi", "component.feedback")
""")
code("""
# Plain inference works as well: whole-number floats are written as floats in both runs.
plain = [pl.read_csv(run / "trials.csv", schema_overrides={"cost_usd": pl.Float64}) for run in runs]
assert all(p.schema["working_seconds"] == pl.Float64 for p in plain)
stacked = pl.concat(plain, how="vertical_relaxed")
assert stacked.height == trials.height
""")
md("""
## The counted trials give the report's pass rate

`trials.csv` has one row per attempt; `counted` marks the one the analysis uses. The pass rate of
an arm is the mean over tasks of each task's mean.
""")
code("""
recomputed = (
    trials.filter(pl.col("counted"))
    .group_by("run_id", "arm", "model", "task")
    .agg((pl.col("status") == "passed").mean().alias("task_rate"))
    .group_by("run_id", "arm", "model")
    .agg(pl.col("task_rate").mean().alias("recomputed"))
)
check = arms.join(recomputed, on=["run_id", "arm", "model"])
assert check.height == arms.height
assert (check["pass_rate"] - check["recomputed"]).abs().max() < 1e-12
check.select("run_id", "arm", "pass_rate", "recomputed")
""")
md("## Each arm's pass rate with its interval")
code("""
fig, ax = plt.subplots(figsize=(7, 0.35 * arms.height + 1.2))
labels = []
for i, (run_id, rows) in enumerate(arms.sort("run_id", "arm").group_by("run_id", maintain_order=True)):
    rows = rows.sort("arm")
    y = [len(labels) + k for k in range(rows.height)]
    labels += [f"{a} ({run_id[0][-12:]})" for a in rows["arm"]]
    err = [rows["pass_rate"] - rows["pass_rate_lo"], rows["pass_rate_hi"] - rows["pass_rate"]]
    bars = ax.errorbar(rows["pass_rate"], y, xerr=err, fmt="o", capsize=3, label=run_id[0])
    assert len(bars.lines[0].get_xdata()) == rows.height
ax.set_yticks(range(len(labels)), labels)
ax.set_xlim(0, 1)
ax.set_xlabel(f"pass rate ({arms['interval_level'][0]:.0%} interval)")
ax.legend(loc="lower right", fontsize="small")
fig.tight_layout()
fig.savefig(out / "pass_rates.png", dpi=100)
assert len(labels) == arms.height
""")
md("""
## Forest plot of the effects

Delta = treatment - control, paired over tasks; the interval is at `interval_level` (adjusted for
the run's ablations), from the inference named in `method`, and the verdict is read from it.
""")
code("""
rows = effects.sort("run_id", "kind", "name")
fig, ax = plt.subplots(figsize=(9, 0.35 * rows.height + 1.2))
colour = {"helps": "tab:green", "hurts": "tab:red"}
for y, e in enumerate(rows.iter_rows(named=True)):
    c = colour.get(e["verdict"].split()[0], "tab:gray")
    ax.plot([e["lo"], e["hi"]], [y, y], color=c, lw=2)
    ax.plot([e["delta"]], [y], "o", color=c)
assert len(ax.lines) == 2 * rows.height
ax.axvline(0, color="black", lw=0.8)
ax.set_yticks(range(rows.height), [f"{n} ({r[-12:]})" for n, r in zip(rows["name"], rows["run_id"])])
ax.set_xlabel("effect on pass rate (treatment - control)")
fig.tight_layout()
fig.savefig(out / "forest.png", dpi=100)
rows.select("run_id", "name", "control_rate", "treatment_rate", "delta", "lo", "hi", "method", "verdict")
""")
md("""
## Pass rate against cost

Each arm's pass rate against its tokens per trial, both with their intervals. `beaten_by` names
an arm whose pass rate interval lies wholly above and whose tokens interval wholly below (it
beats this one on both with confidence); the arms without one, filled, are the frontier
(report.html draws the same, on the cost when every arm has prices).
""")
code("""
fig, ax = plt.subplots(figsize=(7, 4.5))
for run_id, rows in arms.group_by("run_id", maintain_order=True):
    for a in rows.iter_rows(named=True):
        front = a["beaten_by"] in (None, "")
        ax.errorbar(
            a["tokens_per_trial"], a["pass_rate"],
            xerr=[[a["tokens_per_trial"] - a["tokens_per_trial_lo"]], [a["tokens_per_trial_hi"] - a["tokens_per_trial"]]],
            yerr=[[a["pass_rate"] - a["pass_rate_lo"]], [a["pass_rate_hi"] - a["pass_rate"]]],
            fmt="o", capsize=3, mfc=None if front else "white", color="tab:blue" if front else "tab:gray",
        )
        ax.annotate(f"{a['arm']} ({run_id[0][-12:]})", (a["tokens_per_trial"], a["pass_rate"]), fontsize="x-small")
ax.set_ylim(0, 1)
ax.set_xlabel("tokens per trial")
ax.set_ylabel("pass rate")
fig.tight_layout()
fig.savefig(out / "frontier.png", dpi=100)
assert len(ax.containers) == arms.height
arms.select("run_id", "arm", "pass_rate", "tokens_per_trial", "tokens_per_trial_lo", "tokens_per_trial_hi", "beaten_by")
""")
nb = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
for i, c in enumerate(nb["cells"]):
    c["id"] = f"cell-{i}"
json.dump(nb, open("examples/notebook/runs.ipynb", "w"), indent=1)
