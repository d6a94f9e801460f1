//! A two-level factorial design (`[matrix.factorial]`): from one arm, every combination of two
//! values of `k` named components (the full 2^k design), or the fraction 2^(k-p) that a set of
//! generators picks. Each run is an arm of its own; the report estimates every main effect and
//! every two-factor interaction the design can tell apart as a contrast over all its runs
//! (`report::analysis::factorial`), so no effect is ever read from two arms that differ in several
//! components. The algebra here (defining relation, resolution, aliases) follows Box, Hunter &
//! Hunter, *Statistics for Experimenters* (2nd ed., ch. 6) and Montgomery, *Design and Analysis
//! of Experiments* (8th ed., ch. 8); the default generators are Montgomery's Table 8.14
//! (minimum aberration).

pub(crate) use super::matrix::RawFactorial;
use super::matrix::{Arm, ArmOrigin};
use super::{ArmSettings, ComponentValue, Components, HarnessKind};
use crate::error::InputError;
pub use crate::record::design::{Factor, FactorialDesign, FactorialRun, Generator};
use std::path::Path;

/// The most factors a design may have (a full design of 8 is 256 arms).
pub(crate) const MAX_FACTORS: usize = 8;
/// The lowest resolution ablate runs: at IV no main effect is aliased with a two-factor
/// interaction (at III it would be, and a "main effect" could be an interaction).
pub(crate) const MIN_RESOLUTION: u32 = 4;

/// A term of the design's algebra: a set of factors (bit i for factor i), a main effect with one,
/// a two-factor interaction with two, a word of the defining relation with more.
pub type Term = u32;

/// The documented generators of a 2^(k-p) fraction, by letter (A = the first factor):
/// Montgomery (2013), Table 8.14, the minimum-aberration designs of resolution IV or more.
const STANDARD: &[(usize, usize, &[&str])] = &[
    (4, 1, &["D=ABC"]),
    (5, 1, &["E=ABCD"]),
    (6, 1, &["F=ABCDE"]),
    (6, 2, &["E=ABC", "F=BCD"]),
    (7, 1, &["G=ABCDEF"]),
    (7, 2, &["F=ABCD", "G=ABDE"]),
    (7, 3, &["E=ABC", "F=BCD", "G=ACD"]),
    (8, 2, &["G=ABCD", "H=ABEF"]),
    (8, 3, &["F=ABC", "G=ABD", "H=BCDE"]),
    (8, 4, &["E=BCD", "F=ACD", "G=ABC", "H=ABD"]),
];

impl FactorialDesign {
    /// The number of factors.
    pub fn k(&self) -> usize {
        self.factors.len()
    }

    /// The number of generators (`p` of 2^(k-p)).
    pub fn p(&self) -> usize {
        self.generators.len()
    }

    /// `2^3` or `2^(4-1)`.
    pub fn notation(&self) -> String {
        match self.p() {
            0 => format!("2^{}", self.k()),
            p => format!("2^({}-{p})", self.k()),
        }
    }

    /// The words of the defining relation (`I = word`): every product of the generators' words.
    pub fn words(&self) -> Vec<Term> {
        let gens: Vec<Term> = self
            .generators
            .iter()
            .map(|g| g.product.iter().fold(1 << g.factor, |w, &f| w ^ (1 << f)))
            .collect();
        let mut words: Vec<Term> = (1u32..1 << gens.len())
            .map(|subset| {
                (0..gens.len()).filter(|i| subset >> i & 1 == 1).fold(0, |w, i| w ^ gens[i])
            })
            .collect();
        words.sort_by_key(|w| (w.count_ones(), *w));
        words
    }

    /// The resolution: the length of the shortest word; None for a full design (no word).
    pub fn resolution(&self) -> Option<u32> {
        self.words().iter().map(|w| w.count_ones()).min()
    }

    /// The terms aliased with `term` (confounded with it: the design cannot tell them apart),
    /// shortest first.
    pub fn aliases(&self, term: Term) -> Vec<Term> {
        let mut out: Vec<Term> = self.words().iter().map(|w| term ^ w).collect();
        out.sort_by_key(|t| (t.count_ones(), *t));
        out
    }

    /// The effects the design estimates: each main effect, then each class of two-factor
    /// interactions the design cannot tell apart (one interaction in a design of resolution V or
    /// more; in one of IV, the interactions aliased with each other, as one contrast).
    pub fn estimable(&self) -> Vec<Estimable> {
        let k = self.k();
        let mut out: Vec<Estimable> =
            (0..k).map(|i| Estimable { terms: vec![1 << i], contrast: 1 << i }).collect();
        let words = self.words();
        for i in 0..k {
            for j in i + 1..k {
                let t: Term = 1 << i | 1 << j;
                let class = words.iter().map(|w| t ^ w).chain([t]).min().unwrap_or(t);
                match out.iter_mut().find(|e| e.class(&words) == class) {
                    Some(e) => e.terms.push(t),
                    None => out.push(Estimable { terms: vec![t], contrast: t }),
                }
            }
        }
        out
    }

    /// The sign (+1 or -1) of `term` in run `r`: the product of its factors' levels.
    pub fn sign(&self, term: Term, r: &FactorialRun) -> f64 {
        let negatives = (0..self.k()).filter(|&i| term >> i & 1 == 1 && !r.high[i]).count();
        if negatives % 2 == 0 { 1.0 } else { -1.0 }
    }

    /// A term in the factors' names: `feedback`, `feedback x tools`; `I` for none.
    pub fn term_name(&self, term: Term) -> String {
        let names: Vec<&str> = (0..self.k())
            .filter(|&i| term >> i & 1 == 1)
            .map(|i| self.factors[i].component.as_str())
            .collect();
        if names.is_empty() { "I".into() } else { names.join(" x ") }
    }
}

/// An effect the design estimates: the terms its contrast cannot tell apart (one main effect, or
/// one or more two-factor interactions), the first being the one its signs are read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimable {
    pub terms: Vec<Term>,
    pub contrast: Term,
}

impl Estimable {
    /// A main effect's factor; None for an interaction.
    pub fn main(&self) -> Option<usize> {
        (self.contrast.count_ones() == 1).then(|| self.contrast.trailing_zeros() as usize)
    }

    /// The class of the contrast: its smallest alias.
    fn class(&self, words: &[Term]) -> Term {
        words.iter().map(|w| self.contrast ^ w).chain([self.contrast]).min().unwrap_or(0)
    }
}

/// Read `[matrix.factorial]` and add its runs to the arms (an arm with the same settings is
/// reused). Refused by name: an unknown `from` or component, a component with fewer or more than
/// two values, more than `MAX_FACTORS` factors, both `fraction` and `generators`, a fraction with
/// no documented generators, and a resolution below `MIN_RESOLUTION`.
pub(crate) fn expand(
    file: &Path,
    raw: &RawFactorial,
    arms: &mut Vec<Arm>,
    harness: &HarnessKind,
) -> Result<FactorialDesign, InputError> {
    let at = |key: &str, msg: String| InputError::at(file, format!("matrix.factorial{key}"), msg);
    let Some(from) = arms.iter().find(|a| a.name == raw.from).cloned() else {
        let names = arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
        return Err(at(".from", format!("no arm named `{}`; arms: {names}", raw.from)));
    };
    if !(2..=MAX_FACTORS).contains(&raw.components.len()) {
        return Err(at(
            ".components",
            format!("names {} components; a design has 2 to {MAX_FACTORS}", raw.components.len()),
        ));
    }
    let mut factors = Vec::new();
    for (i, name) in raw.components.iter().enumerate() {
        if raw.components[..i].contains(name) {
            return Err(at(&format!(".components[{i}]"), format!("`{name}` is named twice")));
        }
        let levels = levels(&from.settings, name, harness);
        factors.push(levels.map_err(|msg| at(&format!(".components[{i}]"), msg))?);
    }
    let generators = generators(raw, &factors).map_err(|(key, msg)| at(key, msg))?;
    let mut design = FactorialDesign { from: from.name.clone(), factors, generators, runs: vec![] };
    if let Some(r) = design.resolution().filter(|&r| r < MIN_RESOLUTION) {
        let short = design.words().into_iter().find(|w| w.count_ones() == r).unwrap_or(0);
        return Err(at(
            "",
            format!(
                "{} reaches resolution {}: I = {} aliases main effects with two-factor interactions; use fewer generators or more components",
                design.notation(),
                roman(r),
                design.term_name(short).replace(" x ", "·"),
            ),
        ));
    }
    design.runs = runs(file, &design, &from, arms, harness)?;
    Ok(design)
}

/// A factor's two values in `from`'s harness: a builtin component's bare (low) and full (high)
/// values; an external component's two declared values, in the declared order.
fn levels(settings: &ArmSettings, name: &str, harness: &HarnessKind) -> Result<Factor, String> {
    let factor = |low: String, high: String| Factor { component: name.into(), low, high };
    match settings {
        ArmSettings::Builtin(_) => {
            let c = super::Component::parse(name).map_err(|e| e.to_string())?;
            let (low, high) = (Components::bare().value(c), Components::full().value(c));
            if low == high {
                return Err(format!(
                    "`{name}` is {low} in both presets; a factor needs two values (bare and full)"
                ));
            }
            Ok(factor(low, high))
        }
        ArmSettings::External(_) => {
            let ext = harness.external().ok_or("the arm is external but the harness is not")?;
            let d = ext.component(name).ok_or_else(|| {
                format!("no component named `{name}`; declared components: {}", ext.names())
            })?;
            match d.values.as_slice() {
                [low, high] => Ok(factor(super::value_text(low), super::value_text(high))),
                values => Err(format!(
                    "`{name}` declares {} values; a factor has exactly two",
                    values.len()
                )),
            }
        }
    }
}

/// The generators: the documented ones for `fraction`, or the config's; none for a full design.
fn generators(
    raw: &RawFactorial,
    factors: &[Factor],
) -> Result<Vec<Generator>, (&'static str, String)> {
    let texts: Vec<String> = match (&raw.fraction, &raw.generators) {
        (Some(_), Some(_)) => {
            return Err(("", "set `fraction` or `generators`, not both".into()));
        }
        (None, None) | (Some(0), None) => return Ok(vec![]),
        (Some(p), None) => documented(factors, *p as usize)?,
        (None, Some(texts)) => texts.clone(),
    };
    let out = texts.iter().map(|t| generator(t, factors)).collect::<Result<Vec<_>, _>>()?;
    let generated: Vec<usize> = out.iter().map(|g| g.factor).collect();
    for g in &out {
        if generated.iter().filter(|&&f| f == g.factor).count() > 1
            || g.product.iter().any(|f| generated.contains(f))
        {
            return Err((
                ".generators",
                format!(
                    "`{}` is generated twice or generates from a generated factor; a generator's product names base factors only",
                    factors[g.factor].component
                ),
            ));
        }
    }
    if out.len() + 1 >= factors.len() {
        return Err((
            ".generators",
            format!("{} generators leave fewer than two base factors", out.len()),
        ));
    }
    Ok(out)
}

/// The documented generators of 2^(k-p) (`STANDARD`), written with the factors' names.
fn documented(factors: &[Factor], p: usize) -> Result<Vec<String>, (&'static str, String)> {
    let k = factors.len();
    let Some((_, _, gens)) = STANDARD.iter().find(|(kk, pp, _)| *kk == k && *pp == p) else {
        let known: Vec<String> =
            STANDARD.iter().filter(|(kk, _, _)| *kk == k).map(|(_, p, _)| p.to_string()).collect();
        let with = if known.is_empty() {
            "the full design only".into()
        } else {
            format!("fraction {}", known.join(" or "))
        };
        return Err((
            ".fraction",
            format!(
                "no documented 2^({k}-{p}) design of resolution IV or more; with {k} components: {with}"
            ),
        ));
    };
    let letter = |c: char| factors[(c as u8 - b'A') as usize].component.clone();
    Ok(gens
        .iter()
        .map(|g| {
            let (lhs, rhs) = g.split_once('=').expect("a generator has one '='");
            let product: Vec<String> = rhs.chars().map(letter).collect();
            format!("{} = {}", letter(lhs.chars().next().unwrap_or('A')), product.join(" * "))
        })
        .collect())
}

/// One generator, `generated = a * b * c`, over the factors' names.
fn generator(text: &str, factors: &[Factor]) -> Result<Generator, (&'static str, String)> {
    let index = |name: &str| factors.iter().position(|f| f.component == name.trim());
    let bad = |msg: String| (".generators", format!("`{text}`: {msg}"));
    let (lhs, rhs) =
        text.split_once('=').ok_or_else(|| bad("write `generated = a * b * c`".into()))?;
    let factor = index(lhs).ok_or_else(|| bad(format!("`{}` is no factor", lhs.trim())))?;
    let mut product = Vec::new();
    for name in rhs.split('*') {
        let f = index(name).ok_or_else(|| bad(format!("`{}` is no factor", name.trim())))?;
        if f == factor || product.contains(&f) {
            return Err(bad(format!("`{}` appears twice", name.trim())));
        }
        product.push(f);
    }
    if product.len() < 2 {
        return Err(bad("a product of two factors or more".into()));
    }
    Ok(Generator { factor, product })
}

/// The runs in standard order (the first base factor alternating fastest), each an arm: an
/// existing arm with the same settings and resources, or a new one named after its high factors.
fn runs(
    file: &Path,
    design: &FactorialDesign,
    from: &Arm,
    arms: &mut Vec<Arm>,
    harness: &HarnessKind,
) -> Result<Vec<FactorialRun>, InputError> {
    let k = design.k();
    let base: Vec<usize> =
        (0..k).filter(|f| design.generators.iter().all(|g| g.factor != *f)).collect();
    let mut out = Vec::new();
    for i in 0u32..1 << base.len() {
        let mut high = vec![false; k];
        for (bit, &f) in base.iter().enumerate() {
            high[f] = i >> bit & 1 == 1;
        }
        for g in &design.generators {
            // The generated factor's sign is the product's: high when an even number are low.
            high[g.factor] = g.product.iter().filter(|&&f| !high[f]).count() % 2 == 0;
        }
        let settings = settings_at(&from.settings, &design.factors, &high, harness);
        let same = |a: &&Arm| {
            a.settings == settings && a.resources == from.resources && a.budget.is_none()
        };
        let arm = match arms.iter().find(same) {
            Some(existing) => existing.name.clone(),
            None => {
                let name = run_name(&from.settings, &from.name, &design.factors, &high);
                if arms.iter().any(|a| a.name == name) {
                    return Err(InputError::at(
                        file,
                        format!("arms.{name}"),
                        "this name is taken by a run of matrix.factorial, with other settings; rename the arm",
                    ));
                }
                arms.push(Arm {
                    name: name.clone(),
                    description: String::new(),
                    settings,
                    origin: ArmOrigin::Factorial { from: from.name.clone() },
                    budget: None,
                    resources: from.resources,
                });
                name
            }
        };
        out.push(FactorialRun { arm, high });
    }
    Ok(out)
}

/// `from`'s settings with each factor at its level.
fn settings_at(
    from: &ArmSettings,
    factors: &[Factor],
    high: &[bool],
    harness: &HarnessKind,
) -> ArmSettings {
    match from {
        ArmSettings::Builtin(c0) => {
            let mut c = c0.clone();
            for (f, &h) in factors.iter().zip(high) {
                let component = super::Component::parse(&f.component).expect("a checked factor");
                let preset = if h { Components::full() } else { Components::bare() };
                c = c.with_from(component, &preset);
            }
            ArmSettings::Builtin(c)
        }
        ArmSettings::External(values) => {
            let ext = harness.external().expect("a checked external factor");
            let mut values = values.clone();
            for (f, &h) in factors.iter().zip(high) {
                let d = ext.component(&f.component).expect("a checked factor");
                let v: &ComponentValue = &d.values[usize::from(h)];
                values.insert(f.component.clone(), v.clone());
            }
            ArmSettings::External(values)
        }
    }
}

/// The run named after what it changes in `from`, as the sweeps name arms: `full-minus-tools`,
/// `bare-plus-feedback-tools`, `x-minus-tools-plus-feedback` (a run that changes nothing is
/// `from` itself, reused).
fn run_name(from: &ArmSettings, name: &str, factors: &[Factor], high: &[bool]) -> String {
    let (mut minus, mut plus) = (Vec::new(), Vec::new());
    for (f, &h) in factors.iter().zip(high) {
        let value = if h { &f.high } else { &f.low };
        if from.value_of(&f.component).as_ref() != Some(value) {
            let slug = super::matrix::slugify(&f.component);
            if h { plus.push(slug) } else { minus.push(slug) }
        }
    }
    let mut out = name.to_string();
    for (word, list) in [("minus", minus), ("plus", plus)] {
        if !list.is_empty() {
            out.push_str(&format!("-{word}-{}", list.join("-")));
        }
    }
    out
}

/// A resolution in Roman numerals, as the literature writes it.
pub fn roman(r: u32) -> &'static str {
    ["0", "I", "II", "III", "IV", "V", "VI", "VII", "VIII"]
        .get(r as usize)
        .copied()
        .unwrap_or("IX+")
}

/// A factorial design under a budget sweep is refused by name: the sweep would repeat its runs
/// at each level, and the design's effects are contrasts at one budget. (The sequential design is
/// refused by the plan, which also sees `--until-decided`.)
pub(crate) fn refuse_budget_sweep(file: &Path) -> InputError {
    InputError::at(
        file,
        "matrix.factorial",
        "a factorial design under a budget sweep ([matrix.budget]) is not supported: run one design per budget",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(k: usize, generators: &[(usize, &[usize])]) -> FactorialDesign {
        let factors = (0..k)
            .map(|i| Factor {
                component: ((b'a' + i as u8) as char).to_string(),
                low: "false".into(),
                high: "true".into(),
            })
            .collect();
        let generators =
            generators.iter().map(|(f, p)| Generator { factor: *f, product: p.to_vec() }).collect();
        FactorialDesign { from: "x".into(), factors, generators, runs: vec![] }
    }

    const A: Term = 1;
    const B: Term = 2;
    const C: Term = 4;
    const D: Term = 8;
    const E: Term = 16;
    const F: Term = 32;

    /// Box, Hunter & Hunter (2005), section 6.3 and Montgomery (2013), Example 8.1: the 2^(4-1)
    /// design with D = ABC has I = ABCD, resolution IV, and the two-factor interactions aliased
    /// in pairs AB = CD, AC = BD, AD = BC; each main effect with a three-factor interaction.
    #[test]
    fn the_half_fraction_of_four_factors_is_resolution_four() {
        let d = design(4, &[(3, &[0, 1, 2])]);
        assert_eq!(d.words(), vec![A | B | C | D]);
        assert_eq!(d.resolution(), Some(4));
        assert_eq!(d.aliases(A), vec![B | C | D]);
        assert_eq!(d.aliases(A | B), vec![C | D]);
        let e = d.estimable();
        assert_eq!(e.len(), 4 + 3);
        let interactions: Vec<Vec<Term>> = e[4..].iter().map(|e| e.terms.clone()).collect();
        assert_eq!(interactions, vec![vec![A | B, C | D], vec![A | C, B | D], vec![A | D, B | C]]);
        assert_eq!(d.term_name(A | C), "a x c");
    }

    /// Montgomery (2013), Table 8.14: 2^(5-1) with E = ABCD is resolution V (every two-factor
    /// interaction apart: 5 + 10 effects); 2^(6-2) with E = ABC, F = BCD has
    /// I = ABCE = BCDF = ADEF (Example 8.4).
    #[test]
    fn the_documented_fractions_reach_their_resolutions() {
        let d = design(5, &[(4, &[0, 1, 2, 3])]);
        assert_eq!(d.resolution(), Some(5));
        assert_eq!(d.estimable().len(), 15);
        assert!(d.estimable().iter().all(|e| e.terms.len() == 1));
        let d = design(6, &[(4, &[0, 1, 2]), (5, &[1, 2, 3])]);
        let mut words = d.words();
        words.sort();
        let mut expected = vec![A | B | C | E, B | C | D | F, A | D | E | F];
        expected.sort();
        assert_eq!(words, expected);
        assert_eq!(d.resolution(), Some(4));
        for (k, p, gens) in STANDARD {
            let letters: Vec<(usize, Vec<usize>)> = gens
                .iter()
                .map(|g| {
                    let (l, r) = g.split_once('=').unwrap();
                    let at = |c: char| (c as u8 - b'A') as usize;
                    (at(l.chars().next().unwrap()), r.chars().map(at).collect())
                })
                .collect();
            let refs: Vec<(usize, &[usize])> =
                letters.iter().map(|(f, p)| (*f, p.as_slice())).collect();
            let d = design(*k, &refs);
            assert!(d.resolution().unwrap() >= 4, "2^({k}-{p}): {:?}", d.resolution());
            assert_eq!(d.words().len(), (1 << p) - 1);
        }
    }

    /// A 2^3 design's eight runs in standard order ((1), a, b, ab, c, ac, bc, abc) and the
    /// contrast signs of Montgomery's Table 6.3: AB is + in (1), ab, c, abc.
    #[test]
    fn runs_come_in_standard_order_with_the_textbook_signs() {
        let mut d = design(3, &[]);
        d.runs = (0..8u32)
            .map(|i| FactorialRun {
                arm: i.to_string(),
                high: (0..3).map(|b| i >> b & 1 == 1).collect(),
            })
            .collect();
        let signs = |t: Term| d.runs.iter().map(|r| d.sign(t, r) as i32).collect::<Vec<_>>();
        assert_eq!(signs(A), vec![-1, 1, -1, 1, -1, 1, -1, 1]);
        assert_eq!(signs(A | B), vec![1, -1, -1, 1, 1, -1, -1, 1]);
        assert_eq!(signs(A | B | C), vec![-1, 1, 1, -1, 1, -1, -1, 1]);
    }
}
