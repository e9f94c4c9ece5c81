//! Distributions for the simulator's timing model and the load generator's request shapes,
//! written on the command line as `fixed:V` (or just `V`), `uniform:LO:HI`, `normal:MEAN:SD`,
//! `lognormal:MEDIAN:SIGMA` or `exp:MEAN`. Samples are never negative.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    Fixed(f64),
    Uniform { lo: f64, hi: f64 },
    Normal { mean: f64, sd: f64 },
    LogNormal { median: f64, sigma: f64 },
    Exp { mean: f64 },
}

impl Dist {
    pub fn sample(&self, rng: &mut fastrand::Rng) -> f64 {
        let v = match *self {
            Dist::Fixed(v) => v,
            Dist::Uniform { lo, hi } => lo + (hi - lo) * rng.f64(),
            Dist::Normal { mean, sd } => mean + sd * standard_normal(rng),
            Dist::LogNormal { median, sigma } => median * (sigma * standard_normal(rng)).exp(),
            Dist::Exp { mean } => -mean * (1.0 - rng.f64()).ln(),
        };
        v.max(0.0)
    }

    /// The distribution's mean (used for capacity planning and overhead statements).
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Fixed(v) => v,
            Dist::Uniform { lo, hi } => (lo + hi) / 2.0,
            Dist::Normal { mean, .. } => mean,
            Dist::LogNormal { median, sigma } => median * (sigma * sigma / 2.0).exp(),
            Dist::Exp { mean } => mean,
        }
    }
}

/// Box-Muller; one of the pair is enough here.
fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = 1.0 - rng.f64(); // (0, 1]
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

impl FromStr for Dist {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |i: usize| -> Result<f64, String> {
            let text = parts.get(i).ok_or_else(|| format!("{s:?}: missing parameter {i}"))?;
            let v: f64 = text.trim().parse().map_err(|_| format!("{s:?}: {text:?} is not a number"))?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{s:?}: parameters must be finite and non-negative"));
            }
            Ok(v)
        };
        let arity = |n: usize| -> Result<(), String> {
            if parts.len() == n + 1 {
                Ok(())
            } else {
                Err(format!("{s:?}: {} takes {n} parameter(s)", parts[0]))
            }
        };
        let dist = match parts[0] {
            "fixed" => {
                arity(1)?;
                Dist::Fixed(num(1)?)
            }
            "uniform" => {
                arity(2)?;
                let (lo, hi) = (num(1)?, num(2)?);
                if hi < lo {
                    return Err(format!("{s:?}: uniform needs LO <= HI"));
                }
                Dist::Uniform { lo, hi }
            }
            "normal" => {
                arity(2)?;
                Dist::Normal { mean: num(1)?, sd: num(2)? }
            }
            "lognormal" => {
                arity(2)?;
                Dist::LogNormal { median: num(1)?, sigma: num(2)? }
            }
            "exp" => {
                arity(1)?;
                Dist::Exp { mean: num(1)? }
            }
            _ if parts.len() == 1 => Dist::Fixed(num(0)?),
            other => {
                return Err(format!("{s:?}: unknown distribution {other:?} (fixed, uniform, normal, lognormal, exp)"))
            }
        };
        Ok(dist)
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dist::Fixed(v) => write!(f, "fixed:{v}"),
            Dist::Uniform { lo, hi } => write!(f, "uniform:{lo}:{hi}"),
            Dist::Normal { mean, sd } => write!(f, "normal:{mean}:{sd}"),
            Dist::LogNormal { median, sigma } => write!(f, "lognormal:{median}:{sigma}"),
            Dist::Exp { mean } => write!(f, "exp:{mean}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_and_rejects_nonsense() {
        assert_eq!("5".parse::<Dist>().unwrap(), Dist::Fixed(5.0));
        assert_eq!("uniform:1:3".parse::<Dist>().unwrap(), Dist::Uniform { lo: 1.0, hi: 3.0 });
        assert!("uniform:3:1".parse::<Dist>().is_err());
        assert!("lognormal:1".parse::<Dist>().is_err());
        assert!("gamma:1:2".parse::<Dist>().is_err());
        assert!("fixed:-1".parse::<Dist>().is_err());
        let d: Dist = "lognormal:20:0.2".parse().unwrap();
        assert_eq!(d.to_string().parse::<Dist>().unwrap(), d);
    }

    #[test]
    fn sample_means_converge() {
        let mut rng = fastrand::Rng::with_seed(7);
        for d in ["uniform:10:30", "normal:20:2", "lognormal:20:0.3", "exp:20"] {
            let d: Dist = d.parse().unwrap();
            let n = 200_000;
            let mean = (0..n).map(|_| d.sample(&mut rng)).sum::<f64>() / n as f64;
            assert!((mean - d.mean()).abs() / d.mean() < 0.02, "{d}: {mean}");
        }
    }
}
