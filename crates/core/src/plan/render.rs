//! Text rendering of a plan for `ablate plan`.

use super::{Plan, Shard};
use crate::experiment::config::{Experiment, Provider};
use crate::experiment::matrix::{ArmOrigin, ComparisonKind};
use crate::suite::Suite;
use std::fmt::Write;

/// A context that holds the longest first prompt of the CLI agents of
/// examples/harnesses (Claude Code's, about 11.8k tokens), with room to work.
const AGENT_PROMPT_TOKENS: u32 = 16_384;

/// The model's context where ablate knows it: the configured one, or the embedded engine's default.
fn context(m: &crate::experiment::config::ModelSpec) -> Option<u32> {
    match m.provider {
        Provider::Local => Some(
            m.context_tokens.unwrap_or(crate::experiment::config::DEFAULT_LOCAL_CONTEXT_TOKENS),
        ),
        _ => m.context_tokens,
    }
}

/// What an external harness may ask that never reaches `m` (docs/delivery.md):
/// comparisons that differ only in it are reported "not delivered".
fn undeliverable(m: &crate::experiment::config::ModelSpec) -> String {
    let reasoning = match (m.provider, m.reasoning) {
        (Provider::Local, _) | (_, false) => "reasoning settings (effort, thinking budget, on/off)",
        (Provider::Openai, true) => {
            "a thinking budget or on/off (an effort goes as reasoning_effort)"
        }
        (Provider::Ollama, true) => "a thinking budget (an effort or on/off goes as think)",
    };
    format!(
        "{reasoning}; hosted tools (web_search, file_search, code_interpreter, ...); sampling, the output cap and the seed (fixed by the experiment)"
    )
}

pub fn render(exp: &Experiment, suite: &Suite, plan: &Plan, shard: Option<Shard>) -> String {
    let mut s = String::new();
    let tasks = if exp.tasks.is_empty() { suite.tasks.len() } else { exp.tasks.len() };
    let _ = writeln!(
        s,
        "experiment {} ({}), config digest {}",
        exp.name,
        exp.config_path.display(),
        &plan.config_digest[..12]
    );
    let _ = writeln!(
        s,
        "suite {} {} at {}: {} of {} tasks, digest {}",
        suite.name,
        suite.version,
        exp.suite,
        tasks,
        suite.tasks.len(),
        &suite.digest[..12]
    );
    model_lines(&mut s, exp);
    budget_lines(&mut s, exp);
    harness_lines(&mut s, exp);
    arm_lines(&mut s, exp);
    comparison_lines(&mut s, exp);
    let total = tasks * exp.arms.len() * exp.models.len() * exp.trials as usize;
    let _ = writeln!(
        s,
        "\ntrials: {tasks} tasks x {} arms x {} models x {} trials = {total}",
        exp.arms.len(),
        exp.models.len(),
        exp.trials
    );
    if let Some(d) = &exp.factorial {
        s.push_str(&factorial_lines(d, tasks * exp.models.len() * exp.trials as usize));
    }
    if let Some(p) = &exp.primary {
        let _ = writeln!(s, "primary outcome: {p} (the verdicts decide on it, a score in [0, 1])");
    }
    sequential_lines(&mut s, exp, plan, tasks, total);
    order_lines(&mut s, exp, plan, shard);
    s
}

/// Each model: its provider, place and sampling; for an external harness, what cannot reach
/// it and a context too short for the CLI agents' first prompts.
fn model_lines(s: &mut String, exp: &Experiment) {
    let _ = writeln!(s, "models:");
    for m in &exp.models {
        let place = match m.provider {
            Provider::Local => m.path.clone().unwrap_or_default(),
            _ => m.endpoint.clone().unwrap_or_default(),
        };
        let provider = match m.provider {
            Provider::Openai => "openai",
            Provider::Ollama => "ollama",
            Provider::Local => "local",
        };
        let _ = writeln!(
            s,
            "  {:<20} {provider} {} at {place}, temperature {}, top_p {}",
            m.name, m.model, m.temperature, m.top_p
        );
        // An external harness may ask what the model cannot be given: said before the run.
        if exp.harness_kind.external().is_some() {
            let _ = writeln!(s, "  {:<20} cannot reach it: {}", "", undeliverable(m));
            if let Some(n) = context(m).filter(|n| *n < AGENT_PROMPT_TOKENS) {
                let _ = writeln!(
                    s,
                    "  {:<20} context {n} tokens: the CLI agents' first prompts are about 6.2k (Codex CLI), 7.4k (opencode) and 11.8k (Claude Code) tokens; a longer prompt fails its call",
                    ""
                );
            }
        }
    }
}

/// The `[budget]` every arm runs with, and the budget sweep's levels if any.
fn budget_lines(s: &mut String, exp: &Experiment) {
    let b = &exp.budget;
    let money = b
        .max_cost_usd
        .map(|c| format!("${c} per trial"))
        .unwrap_or_else(|| "no money limit".into());
    let _ = writeln!(
        s,
        "budget ({}): {} steps, {} output tokens per step, {} total tokens, {} s working time, {money}",
        if exp.arms.iter().any(|a| a.budget.is_some()) {
            "every arm, but for the sweep below"
        } else {
            "every arm"
        },
        b.max_steps,
        b.max_output_tokens_per_step,
        b.max_total_tokens,
        b.max_working_seconds
    );
    if let Some(line) = budget_sweep_line(exp) {
        let _ = writeln!(s, "{line}");
    }
}

/// An external harness: its command, files and components (nothing for a built-in one).
fn harness_lines(s: &mut String, exp: &Experiment) {
    if let Some(ext) = exp.harness_kind.external() {
        let files = if ext.files.is_empty() {
            "no files".to_string()
        } else {
            format!("files {}", ext.files.join(", "))
        };
        let _ = writeln!(
            s,
            "harness: external, command {:?}, {files} (digest {})",
            ext.command,
            &ext.files_digest[..12]
        );
        let _ = writeln!(s, "components (an arm that does not set one takes its first value):");
        for d in &ext.components {
            let _ = writeln!(s, "  {:<20} {}", d.name, d.display_values());
        }
    }
}

/// Each arm: its settings and resources, where it came from, and its budget level.
fn arm_lines(s: &mut String, exp: &Experiment) {
    let _ = writeln!(s, "\narms ({}):", exp.arms.len());
    let width = exp.arms.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    for arm in &exp.arms {
        let external = arm.settings.external().is_some();
        let value = |c: &str| arm.settings.value_of(c).unwrap_or_default();
        let origin = match &arm.origin {
            ArmOrigin::Declared => String::new(),
            ArmOrigin::LeaveOneOut { from, component } if external => {
                format!("  [leave-one-out: {from} with {component}={}]", value(component))
            }
            ArmOrigin::AddOneIn { from, component } if external => {
                format!("  [add-one-in: {from} with {component}={}]", value(component))
            }
            ArmOrigin::LeaveOneOut { from, component } => {
                format!("  [leave-one-out: {from} without {component}]")
            }
            ArmOrigin::AddOneIn { from, component } => {
                format!("  [add-one-in: {from} with {component}]")
            }
            ArmOrigin::Factorial { from } => format!("  [factorial from {from}]"),
        };
        let level = arm.budget.as_ref().map(|b| format!("  [at {}]", b.level)).unwrap_or_default();
        let resources: String =
            arm.resources_set().iter().map(|(k, v)| format!(" {k}={v}")).collect();
        let summary = arm.settings.summary();
        let _ = writeln!(s, "  {:<width$}  {summary}{resources}{origin}{level}", arm.name);
    }
}

/// Each comparison: treatment vs control, and what they differ in.
fn comparison_lines(s: &mut String, exp: &Experiment) {
    let _ = writeln!(s, "\ncomparisons ({}), effect = treatment - control:", exp.comparisons.len());
    for c in &exp.comparisons {
        match &c.kind {
            ComparisonKind::Ablation { component } => {
                let d = &c.differs[0];
                let _ = writeln!(
                    s,
                    "  ablation  {:<18} {} vs {}  ({component}: {} vs {})",
                    component, c.treatment, c.control, d.treatment, d.control
                );
            }
            ComparisonKind::Combined => {
                let list =
                    c.differs.iter().map(|d| d.component.as_str()).collect::<Vec<_>>().join(", ");
                let _ = writeln!(
                    s,
                    "  combined  {:<18} {} vs {}  (differs in {}: {list}; not attributable to one component)",
                    "-",
                    c.treatment,
                    c.control,
                    c.differs.len()
                );
            }
        }
    }
}

/// The sequential design (nothing for a fixed one): its rule and level, its budget, and the
/// order tasks enter in.
fn sequential_lines(s: &mut String, exp: &Experiment, plan: &Plan, tasks: usize, total: usize) {
    let Some(d) = &exp.sequential else { return };
    let max_tasks = d.max_tasks.map_or(tasks, |n| (n as usize).min(tasks));
    let ablations = exp.comparisons.iter().filter(|c| c.is_ablation()).count() * exp.models.len();
    let level = match ablations {
        0 => format!("at alpha {}, no ablations", exp.alpha),
        1 => format!("ablations at {:.4}, i.e. alpha {} over 1 ablation", exp.alpha, exp.alpha),
        n => format!(
            "ablations at {:.4}, i.e. alpha {} over {n} ablations",
            exp.alpha / n as f64,
            exp.alpha
        ),
    };
    let _ = writeln!(
        s,
        "design: sequential (run until decided): tasks enter in a seeded order; after each, every comparison's anytime-valid confidence sequence \
         ({level}) decides helps / hurts{}; trials that serve only decided comparisons are not started",
        exp.margin
            .map(|m| format!(" / equivalent within ±{:.1} pp", m * 100.0))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "budget: at most {max_tasks} of {tasks} tasks{}{}{}; at most {total} trials if nothing is decided",
        d.max_trials.map(|n| format!(" and {n} trials")).unwrap_or_default(),
        d.max_cost_usd
            .map(|c| format!("; no trial starts once the trials cost ${c}"))
            .unwrap_or_default(),
        d.max_seconds
            .map(|t| format!("; no trial starts after {t} s of running time"))
            .unwrap_or_default()
    );
    let mut seen = std::collections::HashSet::new();
    let order: Vec<&str> =
        plan.trials.iter().map(|t| t.task.as_str()).filter(|t| seen.insert(*t)).collect();
    let _ = writeln!(
        s,
        "task order (first {} of {}): {}",
        order.len().min(8),
        order.len(),
        order.iter().take(8).copied().collect::<Vec<_>>().join(", ")
    );
}

/// The shard's share of the plan (when one is given), and the first trials in run order.
fn order_lines(s: &mut String, exp: &Experiment, plan: &Plan, shard: Option<Shard>) {
    if let Some(shard) = shard {
        let n = plan.shard(Some(shard)).len();
        let share = if exp.sequential.is_some() {
            format!(
                " (at most: a sequential shard follows its own tasks of the order with 1/{} of max_trials and max_cost_usd, and max_seconds of its own running time)",
                shard.count
            )
        } else {
            String::new()
        };
        let _ = writeln!(s, "shard {shard}: {n} trials{share}");
    }
    let shown = plan.shard(shard);
    let _ = writeln!(s, "order (first {} of {}):", shown.len().min(8), shown.len());
    for t in shown.iter().take(8) {
        let _ = writeln!(
            s,
            "  #{:<5} {}  {} / {} / {} / repeat {}  seed {}",
            t.order, t.id, t.task, t.arm, t.model, t.repeat, t.seed
        );
    }
}

/// The sweep's levels, said once: each arm and comparison runs at every one, the `[budget]`
/// value of the key replaced.
fn budget_sweep_line(exp: &Experiment) -> Option<String> {
    let mut levels: Vec<crate::experiment::matrix::BudgetLevel> = Vec::new();
    for l in exp.arms.iter().filter_map(|a| a.budget.as_ref().map(|b| b.level)) {
        if !levels.contains(&l) {
            levels.push(l);
        }
    }
    let key = levels.first()?.key;
    let values: Vec<String> = levels.iter().map(|l| l.value_text()).collect();
    Some(format!(
        "budget sweep: {} at {} (in place of [budget]'s value); every arm runs at each level, and each comparison is made at each level between its arms there",
        key.name(),
        values.join(", ")
    ))
}

/// A factorial design as the plan shows it: the design, its generators and defining relation,
/// the resolution it reaches, each effect's aliases, and the trials it needs against the
/// leave-one-out design that estimates its main effects as precisely.
fn factorial_lines(d: &crate::experiment::factorial::FactorialDesign, per_arm: usize) -> String {
    use crate::experiment::factorial::roman;
    let mut s = String::new();
    let dot = |t| d.term_name(t).replace(" x ", "·");
    let names: Vec<&str> = d.factors.iter().map(|f| f.component.as_str()).collect();
    let resolution = match d.resolution() {
        None => "full: every effect apart".to_string(),
        Some(r) => format!("resolution {}", roman(r)),
    };
    let _ = writeln!(
        s,
        "\nfactorial design {} from `{}` over {} ({resolution}), {} runs; each factor low/high:",
        d.notation(),
        d.from,
        names.join(", "),
        d.runs.len()
    );
    for f in &d.factors {
        let _ = writeln!(s, "  {:<20} {} / {}", f.component, f.low, f.high);
    }
    for g in &d.generators {
        let product: Vec<&str> = g.product.iter().map(|&i| names[i]).collect();
        let _ = writeln!(s, "  generator: {} = {}", names[g.factor], product.join("·"));
    }
    let words = d.words();
    if !words.is_empty() {
        let list: Vec<String> = words.iter().map(|&w| dot(w)).collect();
        let _ = writeln!(s, "  defining relation: I = {}", list.join(" = "));
    }
    let _ =
        writeln!(s, "  effects estimated (aliases up to three factors, higher ones assumed 0):");
    for e in d.estimable() {
        let mut terms: Vec<String> = e.terms.iter().map(|&t| dot(t)).collect();
        let others = e.terms.iter().flat_map(|&t| d.aliases(t)).filter(|a| a.count_ones() == 3);
        let mut higher: Vec<String> = others.map(dot).collect();
        higher.dedup();
        terms.extend(higher);
        let kind = if e.main().is_some() { "main" } else { "interaction" };
        let _ = writeln!(s, "    {kind:<11} {}", terms.join(" = "));
    }
    let k = d.k();
    let trials = d.runs.len() * per_arm;
    // Leave-one-out estimates a main effect from two arms; at the factorial's precision each of
    // its k + 1 arms needs runs/2 times the trials: (k + 1) / 2 times the design's in all.
    let loo = (k + 1) * d.runs.len() / 2 * per_arm;
    let _ = writeln!(
        s,
        "  trials: {} runs x {per_arm} = {trials}; leave-one-out over the same {k} components needs {loo} ({:.1} times) for main effects as precise, and estimates no interaction",
        d.runs.len(),
        loo as f64 / trials as f64
    );
    s
}
