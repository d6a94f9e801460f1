#!/usr/bin/env python3
"""What `ablate import ... && ablate report` should report, computed again from the documented
rules (docs/import.md, docs/statistics.md) by reading the SOURCE files directly: Harbor job
folders and Inspect `.json` eval logs. Plain python3 (3.11) + mpmath; none of ablate's code.

    python3 scripts/import_reference.py harbor JOB_DIR... [--threshold 1.0]
    python3 scripts/import_reference.py inspect LOG.json... [--threshold 1.0] [--scorer NAME]

(An Inspect `.eval` archive is a zip whose members may be Zstandard-compressed, which the
standard library cannot read: given `X.eval`, `X.json` beside it is read instead, else exit 2.)

Prints one JSON object: {"arms": [...], "comparisons": [...]} (see `main`).

----------------------------------------------------------------------------------------------
HAND COMPUTATION of the pass rates (status `passed` counts 1, every other status 0, every
started trial in the denominator; pass rate = mean over tasks of the task's pass fraction)
----------------------------------------------------------------------------------------------
Inspect fixture (tests/fixtures/import/make_inspect_logs.py, 10 samples x 3 epochs; E = the
solver raised RuntimeError -> `harness_error`, counts 0 but stays in the denominator):
  short     CCC CIC IEI III ICI III CII III IIC CCC
            1, 2/3, 0, 0, 1/3, 0, 1/3, 0, 1/3, 1      sum 11/3 -> 11/30 = 0.366667
            statuses: passed 11, failed 18, harness_error 1
  long      CCC CCC CEC ICI CCC CIC CCI ICI CIC CCC
            1, 1, 2/3, 1/3, 1, 2/3, 2/3, 1/3, 2/3, 1  sum 22/3 -> 22/30 = 0.733333
            statuses: passed 22, failed 7, harness_error 1
  long-hint CCC CCC CCC CCI CCC CIC CCC ICI CCC CIC
            1, 1, 1, 2/3, 1, 2/3, 1, 1/3, 1, 2/3      6 + 7/3 = 25/3 -> 25/30 = 0.833333
            statuses: passed 25, failed 5
  components: solver_args.style (short/long), solver_args.hint (false/true).
  comparisons: short->long ablation of style (d: 0,1/3,2/3,1/3,2/3,2/3,1/3,1/3,1/3,0;
  delta 11/30 = 0.366667; 8 positive d, 2 zero: sign-flip p = 2 * 2^2/2^10 = 0.0078125),
  short->long-hint combined (delta 14/30 = 0.466667), long->long-hint ablation of hint
  (d: 0,0,1/3,1/3,0,0,1/3,0,1/3,-1/3; delta 1/10 = 0.1; p = 2 * 6/32 = 0.375).
  Ablations m = 2: Holm's first step at 0.025 (interval level 0.975), the second at 0.05 when
  the first is rejected, else 0.025; combined at 0.05 (level 0.95).

Harbor fixture (tests/fixtures/import/make_harbor_jobs.py, 3 tasks x 2 attempts):
  job-a (gpt-4o-mini, temperature 0.0)
    hello-world: ok 1.0 -> passed; AgentTimeoutError -> timeout (NOT passed, though its
                 reward 1.0 is valid: only the "final state counts" rate counts it)  -> 1/2
    fix-git:     ok 0.0 -> failed; RewardFileNotFoundError -> grader_error            -> 0/2
    count-lines: ok 1.0 -> passed; VerifierTimeoutError -> grader_error               -> 1/2
    pass rate (1/2 + 0 + 1/2)/3 = 1/3 = 0.333333 (the fixture's "strict" 3/6 = 0.5 counts
    the timed-out trial's reward; ablate's first rate does not)
    statuses: passed 2, failed 1, timeout 1, grader_error 2
  job-b (gpt-4o-mini, temperature 0.7)
    hello-world 2/2; fix-git AuthenticationError -> provider_error + passed -> 1/2;
    count-lines RateLimitError -> provider_error (reward 0.0 recorded but invalid) + passed
    -> 1/2.  pass rate (1 + 1/2 + 1/2)/3 = 2/3 = 0.666667; statuses: passed 4, provider_error 2
  job-c (gpt-4o, temperature 0.7)
    hello-world 2/2, fix-git 1/2, count-lines 1/2 -> 2/3 = 0.666667; passed 4, failed 2
  components: model, kwargs.temperature. comparisons: a->b ablation of kwargs.temperature
  (d 1/2, 1/2, 0; delta 1/3), a->c combined (d 1/2, 1/2, 0; delta 1/3), b->c ablation of
  model (d 0, 0, 0; delta 0). With 3 tasks the sign-flip test cannot reject at any level
  used here (2/2^3 = 0.25), so every interval is [-1, 1].

----------------------------------------------------------------------------------------------
CONVENTIONS chosen where the docs leave room (all documented here, none read from ablate's code)
----------------------------------------------------------------------------------------------
* Sign-flip p-value (two-sided): an import records no temperatures, so its verdicts read the
  exact test (docs/statistics.md, "Which p-value"): over the 2^T sign vectors s, twice the
  smaller tail, a tail counting the vectors whose flipped sum sum_t s_t d_t lies at least as
  far as the observed one (to 1e-12): min(1, 2 min(beyond + equal) / 2^T). The same through
  the 2^T subsets B (empty included): 2 min(P(sum_B d <= 0), P(sum_B d >= 0)); both are
  computed and checked equal (and the mid-p, ties counted half, against its textbook form).
* Sign-flip interval at level conf = 1 - alpha': [-1, 1] when 2^(1 - T) > alpha' (too few
  tasks); otherwise the set of shifts mu at which the exact test of d_t - mu does NOT reject,
  i.e. p(mu) > alpha' (reject when p <= alpha'). p(mu) is constant strictly between subset
  means, so each mean and each midpoint between distinct means is tested; an end reached only
  between two means is open and reported as the next float inside (math.nextafter). Then, if
  the reported p exceeds alpha', the interval is widened to hold 0. Clamped to [-1, 1].
* The floors look at the tasks whose difference is not 0 (to 1e-12) when two or more did and
  not all (else at every task): T below is their number, d_bar their mean difference, and the
  floor's interval is multiplied by their share of the tasks.
* Trial-noise floor: s2 is the sample variance (n - 1) of a task's 0/1 pass outcomes in one
  arm; "the trials vary" means v > 1e-12. The floor interval is d_bar +- t_{T-1, 1-alpha'/2}
  sqrt(f/T), f = v chi2_{T-1}(0.025)/(T-1); its p-value is the two-sided t-test p of d_bar
  with that standard error. chi2 quantile fixed at 0.025 whatever the level (as documented).
* MOVER floor (only when there is no trial noise and no spread among the d_t): each arm's
  clustered Wilson interval over the paired tasks at the comparison's level, n_eff =
  min(trials, p(1-p)/se^2) * (z/t_{T-1})^2, se = sd(task means)/sqrt(T), and T*(z/t_{T-1})^2
  when the task means show no spread (this reproduces the docs' 14 x 10 all-passing ->
  [0.750, 1] and 14 x 6/10 -> [0.329, 0.821]); MOVER in Newcombe's paired form with the
  Pearson correlation of the arms' task means (0 when undefined). Its p-value inverts the
  nested intervals by bisection on the level. (Not exercised by either fixture.)
* Checked against docs/statistics.md's worked values with this code: 14 tasks 6/10 -> 8/10 at
  95%: [+12.4, +27.6] pp, p 2/2^14; 13 x 6/10 -> 6/10 and one 6/10 -> 7/10 at 90%:
  [-6.1, +7.5] pp; 16 one-trial tasks, 4 fail -> pass: p 0.125; clustered Wilson 14 x 10 all
  passing [0.750, 1], 14 x 6/10 [0.329, 0.821].
* Hull of the sign-flip and floor intervals, clamped to [-1, 1]; p = max(sign-flip p, floor p).
* Family: m = the number of ablation comparisons, adjusted by Holm's step-down: in ascending
  order of p the j-th (from 0) at level 1 - alpha/(m - j) while every smaller p was rejected,
  and from the first step not rejected on, every later one at that step's level; combined
  comparisons at 1 - alpha. p_adjusted = the running maximum of min(1, (m - j) p).
* An arm's `tasks` and `trials` count the analysed (non-`interrupted`) trials; `statuses`
  counts every trial, interrupted ones included.
* Arm identity values are compared as canonical JSON; a field absent from a trial is null.
* Inspect error class: the leading identifier of `error.message` (inspect writes the repr,
  `RuntimeError('...')`), its last dotted part.
* Inspect solver without eval.solver: `solver` = the list of the plan's step names.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
from bisect import bisect_left, bisect_right
from itertools import combinations

import mpmath

mpmath.mp.dps = 30

ALPHA = 0.05
TIE = 1e-12  # tolerance for ties and for "no spread" (docs/statistics.md: range <= 1e-12)


def die(msg: str) -> None:
    print(f"import_reference: {msg}", file=sys.stderr)
    sys.exit(2)


def canon(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


# ============================================================================================
# Harbor
# ============================================================================================
HARBOR_GRADER = {
    "VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
    "VerifierOutputParseError", "AddTestsDirError", "DownloadVerifierDirError",
}
HARBOR_PROVIDER = {
    "RateLimitError", "ApiRateLimitError", "ApiUsageLimitError", "AuthenticationError",
    "AgentAuthenticationError", "PermissionDeniedError", "NotFoundError", "ModelNotFoundError",
    "ApiProviderResourceNotFoundError", "InternalServerError", "ServiceUnavailableError",
    "APIConnectionError", "ApiConnectionError", "APIError", "ApiError", "ApiInternalServerError",
    "ApiOverloadedError", "ApiConnectionClosedError", "ApiResponseStalledError", "UnknownApiError",
    "NetworkConnectionError", "Timeout", "BadRequestError", "UnprocessableEntityError",
    "UnsupportedParamsError", "UnsupportedModelParametersError",
}
HARBOR_BUDGET_KEEP = {
    "ContextLengthExceededError", "ContextWindowExceededError", "OutputLengthExceededError",
    "OutputTokenExceededError",
}
HARBOR_GRADED = {"NonZeroAgentExitCodeError", "AgentSafetyRefusalError", "ContentPolicyViolationError"}


def harbor_fields(cfg: dict, agent_info: dict | None) -> dict:
    agent = cfg.get("agent") or {}
    f = {
        "agent": (agent_info or {}).get("name", agent.get("name")),
        "agent_version": (agent_info or {}).get("version"),
        "import_path": agent.get("import_path"),
        "model": agent.get("model_name"),
        "agent.override_timeout_sec": agent.get("override_timeout_sec"),
        "agent.max_timeout_sec": agent.get("max_timeout_sec"),
        "timeout_multiplier": cfg.get("timeout_multiplier"),
        "agent_timeout_multiplier": cfg.get("agent_timeout_multiplier"),
        "environment": (cfg.get("environment") or {}).get("type"),
    }
    for k, v in (agent.get("kwargs") or {}).items():
        f[f"kwargs.{k}"] = v
    for k, v in (agent.get("env") or {}).items():
        f[f"env.{k}"] = v
    return f


def harbor_reward(res: dict):
    """(reward or None, reward_valid)."""
    vr = res.get("verifier_result") or {}
    rewards = vr.get("rewards") or {}
    reward = None
    if "reward" in rewards:
        reward = rewards["reward"]
    elif len(rewards) == 1:
        reward = next(iter(rewards.values()))
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        reward = None
    exc = res.get("exception_info")
    if "reward_valid" in res and res["reward_valid"] is not None:
        valid = bool(res["reward_valid"])
    else:
        valid = exc is None or bool(((exc or {}).get("policy") or {}).get("has_valid_reward"))
    return reward, valid and reward is not None


def harbor_status(res: dict, threshold: float) -> str:
    reward, valid = harbor_reward(res)
    graded = ("passed" if reward >= threshold else "failed") if valid else None
    exc = res.get("exception_info")
    et = (exc or {}).get("exception_type")
    if not et:
        return graded or "grader_error"
    if et == "AgentTimeoutError":
        return "timeout"
    if et in HARBOR_GRADER:
        return "grader_error"
    if et in HARBOR_PROVIDER:
        return "provider_error"
    if et in HARBOR_BUDGET_KEEP or et == "BudgetExceededError":
        return "budget_exhausted"
    if et in HARBOR_GRADED:
        return graded or "harness_error"
    if et == "CancelledError":
        return "interrupted"
    return "harness_error"


def read_harbor(jobs: list[str], threshold: float) -> list[dict]:
    trials = []
    for job in jobs:
        if not os.path.isdir(job):
            die(f"{job}: not a folder")
        names = sorted(n for n in os.listdir(job)
                       if os.path.isfile(os.path.join(job, n, "config.json")))
        if not names:
            die(f"{job}: no trial folders (give the job folder, not `jobs`)")
        job_trials = []
        for n in names:
            d = os.path.join(job, n)
            rp = os.path.join(d, "result.json")
            if os.path.isfile(rp):
                with open(rp) as fh:
                    res = json.load(fh)
                cfg = res.get("config") or json.load(open(os.path.join(d, "config.json")))
                status = harbor_status(res, threshold)
                fields = harbor_fields(cfg, res.get("agent_info"))
                task = (res["task_name"], res.get("task_checksum"))
            else:  # never finished
                with open(os.path.join(d, "config.json")) as fh:
                    cfg = json.load(fh)
                status = "interrupted"
                fields = harbor_fields(cfg, None)
                tname = (cfg.get("task") or {}).get("name") or os.path.basename(
                    ((cfg.get("task") or {}).get("path") or n.split("__")[0]).rstrip("/"))
                task = (tname, None)  # checksum unknown: filled from a finished trial below
            job_trials.append({"file": rp, "task_name": task[0], "checksum": task[1],
                               "fields": fields, "status": status})
        # an unfinished trial has no agent_info: take its version from a finished trial of
        # the same agent in this job (else it would differ spuriously)
        for t in job_trials:
            if t["fields"]["agent_version"] is None:
                for u in job_trials:
                    if u["fields"]["agent"] == t["fields"]["agent"] and u["fields"]["agent_version"]:
                        t["fields"]["agent_version"] = u["fields"]["agent_version"]
                        break
        trials += job_trials
    # task key = name + checksum; a name seen with two checksums is refused
    seen: dict[str, tuple[str, str]] = {}
    for t in trials:
        if t["checksum"] is None:
            continue
        prev = seen.setdefault(t["task_name"], (t["checksum"], t["file"]))
        if prev[0] != t["checksum"]:
            die(f"task {t['task_name']}: task_checksum {prev[0]} in {prev[1]} but "
                f"{t['checksum']} in {t['file']}")
    for t in trials:
        t["task"] = canon([t["task_name"], t["checksum"] or seen.get(t["task_name"], (None,))[0]])
    return trials


# ============================================================================================
# Inspect
# ============================================================================================
INSPECT_PROVIDER_SUFFIXES = (
    "RateLimitError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "APIConnectionError", "APITimeoutError", "InternalServerError", "ServiceUnavailableError",
    "OverloadedError", "APIStatusError", "APIError",
)


def value_to_float(v):
    """Inspect's value_to_float (scorer/_metric.py), except that what does not read as a
    number gives None (ablate: grader_error) where Inspect gives 0 with a warning."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    if v == "C":
        return 1.0
    if v == "P":
        return 0.5
    if v in ("I", "N"):
        return 0.0
    if isinstance(v, str):
        s = v.lower()
        if s in ("yes", "true"):
            return 1.0
        if s in ("no", "false"):
            return 0.0
        if s.replace(".", "").isnumeric():
            try:
                return float(s)
            except ValueError:
                return None
    return None


def strip_ids(x):
    if isinstance(x, list):
        return [strip_ids(e) for e in x]
    if isinstance(x, dict):
        return {k: strip_ids(v) for k, v in x.items() if k != "id"}
    return x


def inspect_fields(log: dict) -> dict:
    ev = log.get("eval") or {}
    f = {"task": ev.get("task")}
    for k, v in (ev.get("task_args") or {}).items():
        f[f"task_args.{k}"] = v
    if ev.get("solver") is not None:
        f["solver"] = ev["solver"]
        for k, v in (ev.get("solver_args") or {}).items():
            f[f"solver_args.{k}"] = v
    else:
        steps = ((log.get("plan") or {}).get("steps")) or []
        f["solver"] = [s.get("solver") for s in steps]
        for s in steps:
            for k, v in (s.get("params") or {}).items():
                f[f"{s.get('solver')}.{k}"] = v
    f["model"] = ev.get("model")
    for k, v in (ev.get("model_generate_config") or {}).items():
        f[f"generate.{k}"] = v
    cfg = ev.get("config") or {}
    for k in ("message_limit", "token_limit", "time_limit", "working_limit", "cost_limit"):
        f[f"config.{k}"] = cfg.get(k)
    return f


def error_class(err) -> str:
    msg = err.get("message", "") if isinstance(err, dict) else str(err)
    m = re.match(r"\s*([A-Za-z_][\w.]*)", msg or "")
    return m.group(1).split(".")[-1] if m else ""


def inspect_status(sample: dict, scorer: str, threshold: float) -> str:
    err = sample.get("error")
    if err:
        cls = error_class(err)
        return "provider_error" if cls.endswith(INSPECT_PROVIDER_SUFFIXES) else "harness_error"
    lim = sample.get("limit")
    if lim:
        lt = lim.get("type") if isinstance(lim, dict) else lim
        if lt in ("time", "working"):
            return "timeout"
        if lt in ("token", "context", "cost", "message", "turn", "custom"):
            return "budget_exhausted"
        return "harness_error"  # operator (and anything unknown)
    score = (sample.get("scores") or {}).get(scorer)
    x = value_to_float(score.get("value")) if isinstance(score, dict) else None
    if x is None:
        return "grader_error"
    return "passed" if x >= threshold else "failed"


def load_inspect(path: str) -> tuple[str, dict]:
    if path.endswith(".eval"):
        alt = path[: -len(".eval")] + ".json"
        if not os.path.isfile(alt):
            die(f"{path}: .eval archives (zstd) are not readable with the standard library, "
                f"and no {os.path.basename(alt)} beside it")
        path = alt
    with open(path) as fh:
        # bare NaN / Infinity parse as float nan / inf and are read as no value later
        return path, json.load(fh)


def read_inspect(paths: list[str], threshold: float, scorer: str | None) -> list[dict]:
    logs = [load_inspect(p) for p in paths]
    scorers = []
    for _, log in logs:
        for s in log.get("samples") or []:
            for k in (s.get("scores") or {}):
                if k not in scorers:
                    scorers.append(k)
    if scorer is None:
        if len(scorers) > 1:
            die(f"several scorers ({', '.join(scorers)}): name one with --scorer")
        scorer = scorers[0] if scorers else ""
    trials = []
    digests: dict[str, tuple[str, str]] = {}
    seen_trial: dict[tuple, str] = {}
    for path, log in logs:
        fields = inspect_fields(log)
        arm_key = canon(fields)
        samples = log.get("samples") or []
        present = set()
        for i, s in enumerate(samples):
            sid = s.get("id")
            dig = hashlib.sha256(canon([strip_ids(s.get("input")), s.get("choices"),
                                        s.get("target")]).encode()).hexdigest()
            prev = digests.setdefault(canon(sid), (dig, path))
            if prev[0] != dig:
                die(f"sample {sid}: two versions (input/choices/target) in {prev[1]} and {path}")
            key = (arm_key, canon(sid), s.get("epoch"))
            if key in seen_trial:
                die(f"{path}: samples[{i}] (id {sid}, epoch {s.get('epoch')}) already in {seen_trial[key]}")
            seen_trial[key] = path
            present.add((canon(sid), s.get("epoch")))
            trials.append({"file": path, "task": canon(sid), "fields": fields,
                           "status": inspect_status(s, scorer, threshold)})
        if log.get("status") != "success":
            ds = ((log.get("eval") or {}).get("dataset") or {})
            epochs = ((log.get("eval") or {}).get("config") or {}).get("epochs") or 1
            if present:  # the task has a finished sample in this log
                for sid in ds.get("sample_ids") or []:
                    for e in range(1, epochs + 1):
                        if (canon(sid), e) not in present:
                            trials.append({"file": path, "task": canon(sid), "fields": fields,
                                           "status": "interrupted"})
    return trials


# ============================================================================================
# Arms and comparisons
# ============================================================================================
def build_arms(trials: list[dict]):
    names: list[str] = []
    for t in trials:
        for k in t["fields"]:
            if k not in names:
                names.append(k)
    components = [k for k in names
                  if len({canon(t["fields"].get(k)) for t in trials}) > 1]
    arms: list[dict] = []
    index: dict[str, int] = {}
    for t in trials:
        vals = {k: t["fields"].get(k) for k in components}
        key = canon(vals)
        if key not in index:
            index[key] = len(arms)
            arms.append({"values": vals, "trials": []})
        arms[index[key]]["trials"].append(t)
    return components, arms


def arm_tasks(arm: dict) -> dict[str, list[int]]:
    """task -> 0/1 outcomes of its analysed (non-interrupted) trials."""
    out: dict[str, list[int]] = {}
    for t in arm["trials"]:
        if t["status"] == "interrupted":
            continue
        out.setdefault(t["task"], []).append(1 if t["status"] == "passed" else 0)
    return out


def mean(xs):
    return sum(xs) / len(xs)


def svar(xs):
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def no_spread(xs) -> bool:
    return max(xs) - min(xs) <= TIE


# ----------------------------------------------------------------------------- distributions
def t_cdf(x, df):
    x, df = mpmath.mpf(x), mpmath.mpf(df)
    tail = mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + x * x), regularized=True) / 2
    return 1 - tail if x >= 0 else tail


def t_quantile(p, df):
    lo, hi = mpmath.mpf(-1e6), mpmath.mpf(1e6)
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return float((lo + hi) / 2)


def chi2_quantile(p, df):
    k = mpmath.mpf(df) / 2
    cdf = lambda x: mpmath.gammainc(k, 0, mpmath.mpf(x) / 2, regularized=True)  # noqa: E731
    lo, hi = mpmath.mpf(0), mpmath.mpf(10 * df + 100)
    for _ in range(200):
        mid = (lo + hi) / 2
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return float((lo + hi) / 2)


def z_quantile(p):
    return float(mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(p) - 1))


# ----------------------------------------------------------------------------- sign flip
def subset_sums(d):
    """Sums and sizes of all 2^T subsets (index bit t = task t in B)."""
    sums, sizes = [0.0], [0]
    for x in d:
        sums = sums + [s + x for s in sums]
        sizes = sizes + [n + 1 for n in sizes]
    return sums, sizes


def sign_flip(d, conf):
    """The exact sign-flip test (ties counted whole) and the interval that inverts it: the
    test an imported run's verdicts read, its models' temperatures unknown (docs/statistics.md,
    "Which p-value"). The mid-p is computed too, and checked against its textbook form."""
    T = len(d)
    n_all = 2 ** T
    total = sum(d)
    sums, sizes = subset_sums(d)
    # textbook mid-p at 0: sign vector s <-> subset B of flipped tasks; flipped sum = total - 2 sum_B;
    # a tail counts the vectors beyond the observed sum and half of those equal to it
    flipped = [total - 2 * s for s in sums]
    beyond_up = sum(1 for f in flipped if f > total + TIE)
    beyond_down = sum(1 for f in flipped if f < total - TIE)
    equal = n_all - beyond_up - beyond_down
    p_text = min(1.0, 2 * min(beyond_up, beyond_down) / n_all + equal / n_all)
    # the same test through subset means (the empty subset is a tie at every mu)
    means = sorted(s / n for s, n in zip(sums, sizes) if n > 0)

    def p_of(mu):
        le = 1 + bisect_right(means, mu + TIE)  # subsets with sum_B (d - mu) <= 0
        ge = 1 + (len(means) - bisect_left(means, mu - TIE))
        eq = le + ge - (len(means) + 1)  # subsets with sum_B (d - mu) = 0
        return min(1.0, max(0.0, (2 * min(le, ge) - eq) / n_all))

    p_mid = p_of(0.0)
    assert abs(p_text - p_mid) < 1e-12, (p_text, p_mid)

    def p_exact_of(mu):
        le = 1 + bisect_right(means, mu + TIE)
        ge = 1 + (len(means) - bisect_left(means, mu - TIE))
        return min(1.0, 2 * min(le, ge) / n_all)

    # the textbook exact test: a tail counts the vectors at least as far as the observed sum
    p_text_exact = min(1.0, 2 * min(beyond_up + equal, beyond_down + equal) / n_all)
    assert abs(p_text_exact - p_exact_of(0.0)) < 1e-12
    p_of = p_exact_of
    p = p_exact_of(0.0)
    alpha = 1 - conf
    if 2.0 ** (1 - T) > alpha:
        lo, hi = -1.0, 1.0
    else:
        # non-rejection set {mu : p_of(mu) > alpha}: p_of is constant strictly between subset
        # means, so the candidates are the means and the midpoints between distinct ones
        distinct = [m for i, m in enumerate(means) if i == 0 or m - means[i - 1] > TIE]
        cands = []
        for i, m in enumerate(distinct):
            cands.append((m, m, m))  # (where tested, reported end from below, from above)
            if i + 1 < len(distinct):
                mid = (m + distinct[i + 1]) / 2
                # accepted only strictly between: the ends are open, reported one float inside
                cands.append((mid, math.nextafter(m, 2.0), math.nextafter(distinct[i + 1], -2.0)))
        keep = [c for c in cands if p_of(c[0]) > alpha]
        lo, hi = (keep[0][1], keep[-1][2]) if keep else (float("nan"), float("nan"))
        if p_of(distinct[0] - 1.0) > alpha:
            lo = -1.0
        if p_of(distinct[-1] + 1.0) > alpha:
            hi = 1.0
    if p > alpha:  # the floor keeps 0: so does the interval
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return max(-1.0, lo), min(1.0, hi), p


# ----------------------------------------------------------------------------- floors
def wilson(p, n, z):
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered_wilson(task_means, n_trials, conf):
    T = len(task_means)
    p = mean(task_means)
    z = z_quantile(1 - (1 - conf) / 2)
    t = t_quantile(1 - (1 - conf) / 2, T - 1)
    scale = (z / t) ** 2
    if no_spread(task_means):
        n_eff = T * scale
    else:
        se2 = svar(task_means) / T
        n_eff = min(n_trials, p * (1 - p) / se2) * scale
    lo, hi = wilson(p, n_eff, z)
    return p, lo, hi


def pearson(x, y):
    mx, my = mean(x), mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return 0.0
    return sxy / math.sqrt(sxx * syy)


def mover(ctrl_means, treat_means, n_c, n_t, conf):
    p1, l1, u1 = clustered_wilson(ctrl_means, n_c, conf)
    p2, l2, u2 = clustered_wilson(treat_means, n_t, conf)
    r = pearson(ctrl_means, treat_means)
    D = p2 - p1
    a, b = p2 - l2, u1 - p1
    lo = D - math.sqrt(max(0.0, a * a + b * b - 2 * r * a * b))
    a, b = u2 - p2, p1 - l1
    hi = D + math.sqrt(max(0.0, a * a + b * b - 2 * r * a * b))
    return max(-1.0, lo), min(1.0, hi)


def p_by_inversion(interval):
    """The alpha at which 0 is on the edge of the 1 - alpha interval (bisection)."""
    lo_a, hi_a = 1e-12, 1 - 1e-12
    def excl(a):
        lo, hi = interval(1 - a)
        return lo > 0 or hi < 0
    if not excl(hi_a):
        return 1.0
    if excl(lo_a):
        return lo_a
    for _ in range(80):
        mid = (lo_a + hi_a) / 2
        if excl(mid):
            hi_a = mid
        else:
            lo_a = mid
    return (lo_a + hi_a) / 2


def newcombe_one_task(c, t, conf):
    z = z_quantile(1 - (1 - conf) / 2)
    p1, p2 = mean(c), mean(t)
    l1, u1 = wilson(p1, len(c), z)
    l2, u2 = wilson(p2, len(t), z)
    D = p2 - p1
    return (D - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2),
            D + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2))


def paired(ctrl: dict, treat: dict, conf: float) -> dict:
    tasks = [k for k in ctrl if k in treat]
    T = len(tasks)
    if T == 0:
        return {"n_tasks": 0, "delta": None, "lo": None, "hi": None, "p_value": None,
                "method": "none"}
    if T == 1:
        c, t = ctrl[tasks[0]], treat[tasks[0]]
        lo, hi = newcombe_one_task(c, t, conf)
        return {"n_tasks": 1, "delta": mean(t) - mean(c), "lo": lo, "hi": hi,
                "p_value": p_by_inversion(lambda cf: newcombe_one_task(c, t, cf)),
                "method": "newcombe_one_task"}
    d = [mean(treat[k]) - mean(ctrl[k]) for k in tasks]
    dbar = mean(d)
    sf_lo, sf_hi, p_sf = sign_flip(d, conf)
    out = {"n_tasks": T, "delta": dbar, "sign_flip": {"lo": sf_lo, "hi": sf_hi, "p_value": p_sf}}
    # The floor looks at the tasks that changed when two or more did (and not all), its interval
    # for their mean scaled by their share to the mean over all tasks.
    changed = [k for k, x in zip(tasks, d) if abs(x) > 1e-12]
    basis = changed if 2 <= len(changed) < T else tasks
    share = len(basis) / T
    db = [mean(treat[k]) - mean(ctrl[k]) for k in basis]
    B, dbar_b = len(basis), mean(db)
    every2 = all(len(ctrl[k]) >= 2 and len(treat[k]) >= 2 for k in basis)
    v = mean([svar(ctrl[k]) / len(ctrl[k]) + svar(treat[k]) / len(treat[k]) for k in basis]) \
        if every2 else 0.0
    if every2 and v > TIE:
        factor = chi2_quantile(0.025, B - 1) / (B - 1)
        f = v * factor
        se = math.sqrt(f / B)
        tq = t_quantile(1 - (1 - conf) / 2, B - 1)
        fl_lo, fl_hi = share * (dbar_b - tq * se), share * (dbar_b + tq * se)
        p_fl = float(2 * (1 - t_cdf(abs(dbar_b) / se, B - 1)))
        out["floor"] = {"kind": "trial_noise", "lo": fl_lo, "hi": fl_hi, "p_value": p_fl,
                        "v": v, "chi2_factor": factor, "t": tq, "share": share}
        method = "sign_flip+trial_noise"
    elif no_spread(db):
        cm = [mean(ctrl[k]) for k in basis]
        tm = [mean(treat[k]) for k in basis]
        n_c = sum(len(ctrl[k]) for k in basis)
        n_t = sum(len(treat[k]) for k in basis)
        fl_lo, fl_hi = mover(cm, tm, n_c, n_t, conf)
        fl_lo, fl_hi = share * fl_lo, share * fl_hi
        p_fl = p_by_inversion(lambda cf: mover(cm, tm, n_c, n_t, cf))
        out["floor"] = {"kind": "mover", "lo": fl_lo, "hi": fl_hi, "p_value": p_fl}
        method = "sign_flip+mover"
    else:
        fl_lo = fl_hi = None
        p_fl = 0.0
        method = "sign_flip"
    lo = sf_lo if fl_lo is None else min(sf_lo, fl_lo)
    hi = sf_hi if fl_hi is None else max(sf_hi, fl_hi)
    out.update({"lo": max(-1.0, lo), "hi": min(1.0, hi), "p_value": max(p_sf, p_fl),
                "method": method})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", choices=["harbor", "inspect"])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--threshold", type=float, default=1.0)
    ap.add_argument("--scorer")
    a = ap.parse_args()
    if a.tool == "harbor":
        if a.scorer:
            die("--scorer is for inspect logs")
        trials = read_harbor(a.inputs, a.threshold)
    else:
        trials = read_inspect(a.inputs, a.threshold, a.scorer)
    components, arms = build_arms(trials)

    arms_out = []
    for arm in arms:
        tasks = arm_tasks(arm)
        statuses: dict[str, int] = {}
        for t in arm["trials"]:
            statuses[t["status"]] = statuses.get(t["status"], 0) + 1
        arms_out.append({
            "values": arm["values"],
            "tasks": len(tasks),
            "trials": sum(len(v) for v in tasks.values()),
            "pass_rate": mean([mean(v) for v in tasks.values()]) if tasks else None,
            "statuses": dict(sorted(statuses.items())),
        })

    pairs = list(combinations(range(len(arms)), 2))

    def differs(i, j):
        return [k for k in components
                if canon(arms[i]["values"][k]) != canon(arms[j]["values"][k])]

    if len(pairs) > 15:
        pairs = [(i, j) for i, j in pairs if len(differs(i, j)) == 1]
    plan = []
    for i, j in pairs:  # i was seen first
        diff = differs(i, j)
        ctrl, treat = i, j
        bools = [k for k in diff if isinstance(arms[i]["values"][k], bool)
                 and isinstance(arms[j]["values"][k], bool)]
        if bools and arms[i]["values"][bools[0]] is True and arms[j]["values"][bools[0]] is False:
            ctrl, treat = j, i  # the arm with the boolean component off is the control
        plan.append((ctrl, treat, diff))
    m = sum(1 for _, _, diff in plan if len(diff) == 1)

    # Holm's step-down over the ablations (Holm 1979): in ascending order of p the j-th (from 0)
    # is tested at ALPHA / (m - j) while every smaller one was rejected; from the first not
    # rejected on, every later one at that step's level. Adjusted p: the running maximum of
    # min(1, (m - j) p). The p-values do not depend on the level.
    ablation_ids = [k for k, (_, _, diff) in enumerate(plan) if len(diff) == 1]
    p_of = {k: paired(arm_tasks(arms[plan[k][0]]), arm_tasks(arms[plan[k][1]]), 0.95)["p_value"]
            for k in ablation_ids}
    order = sorted(ablation_ids, key=lambda k: (p_of[k] is None, p_of[k] or 0.0))
    holm_level, holm_adjusted, stopped, running = {}, {}, None, 0.0
    for j, k in enumerate(order):
        p = p_of[k]
        if stopped is None and (p is None or p > ALPHA / (m - j)):
            stopped = j
        holm_level[k] = ALPHA / (m - (j if stopped is None else stopped))
        if p is not None:
            running = max(running, min(1.0, (m - j) * p))
            holm_adjusted[k] = running

    comps = []
    for idx, (ctrl, treat, diff) in enumerate(plan):
        ablation = len(diff) == 1
        level = 1 - holm_level[idx] if ablation else 1 - ALPHA
        r = paired(arm_tasks(arms[ctrl]), arm_tasks(arms[treat]), level)
        row = {
            "control": arms[ctrl]["values"],
            "treatment": arms[treat]["values"],
            "kind": "ablation" if ablation else "combined",
            "component": diff[0] if ablation else None,
            "differs": diff,
            "n_tasks": r["n_tasks"],
            "delta": r["delta"],
            "lo": r["lo"],
            "hi": r["hi"],
            "p_value": r["p_value"],
            "interval_level": level,
            "method": r["method"],
        }
        if ablation and r["p_value"] is not None:
            row["p_adjusted"] = holm_adjusted[idx]
        for k in ("sign_flip", "floor"):
            if k in r:
                row[k] = r[k]
        comps.append(row)
    json.dump({"components": components, "arms": arms_out, "comparisons": comps},
              sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
