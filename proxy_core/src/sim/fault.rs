//! Fault injection: `KIND[=RATE][,key=value...]` on the command line (`--fault cut=0.05,after=3`)
//! or per request in `x-sim-fault` (`cut,after=3`; several joined by `;`), where the rate is 1.

use std::str::FromStr;

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer with this status and an error body (429 carries `retry-after`).
    Status { code: u16, retry_after: Option<f64> },
    /// Never send response headers.
    Hang,
    /// Stream `after` tokens, then go silent.
    HangAfter { after: u32 },
    /// Stream `after` tokens, then end: abruptly (reset), or with a `[DONE]` that hides the cut.
    Cut { after: u32, done: bool },
    /// Inter-token latency of `ms` regardless of the timing model.
    Drip { ms: f64 },
    /// Send one chunk that is not valid JSON before token `after`.
    Malformed { after: u32 },
    /// Leave the usage out (no usage chunk, no usage object).
    NoUsage,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    pub fault: Fault,
    pub rate: f64,
}

impl FromStr for FaultSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(',').map(str::trim);
        let head = parts.next().unwrap_or_default();
        let (kind, rate) = match head.split_once('=') {
            Some((kind, rate)) => {
                let rate: f64 = rate.parse().map_err(|_| format!("{s:?}: rate {rate:?} is not a number"))?;
                if !(0.0..=1.0).contains(&rate) {
                    return Err(format!("{s:?}: rate must be between 0 and 1"));
                }
                (kind, rate)
            }
            None => (head, 1.0),
        };
        let mut params = Vec::new();
        for p in parts {
            let (k, v) = p.split_once('=').ok_or_else(|| format!("{s:?}: parameter {p:?} is not key=value"))?;
            params.push((k, v));
        }
        let get = |name: &str| params.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        let num = |name: &str, default: Option<f64>| -> Result<f64, String> {
            match get(name) {
                Some(v) => v.parse().map_err(|_| format!("{s:?}: {name}={v:?} is not a number")),
                None => default.ok_or_else(|| format!("{s:?}: {kind} needs {name}=")),
            }
        };
        let known: &[&str] = match kind {
            "status" => &["code", "retry_after"],
            "hang" | "no_usage" => &[],
            "hang_after" | "malformed" => &["after"],
            "cut" => &["after", "done"],
            "drip" => &["ms"],
            _ => {
                return Err(format!(
                    "{s:?}: unknown fault {kind:?} (status, hang, hang_after, cut, drip, malformed, no_usage)"
                ))
            }
        };
        if let Some((k, _)) = params.iter().find(|(k, _)| !known.contains(k)) {
            return Err(format!("{s:?}: {kind} takes no parameter {k:?}"));
        }
        let fault = match kind {
            "status" => {
                let code = num("code", Some(500.0))?;
                if !(400.0..600.0).contains(&code) {
                    return Err(format!("{s:?}: code must be 4xx or 5xx"));
                }
                let retry_after = get("retry_after").map(|_| num("retry_after", None)).transpose()?;
                Fault::Status { code: code as u16, retry_after }
            }
            "hang" => Fault::Hang,
            "hang_after" => Fault::HangAfter { after: num("after", None)? as u32 },
            "cut" => Fault::Cut {
                after: num("after", None)? as u32,
                done: matches!(get("done"), Some("true" | "1" | "yes")),
            },
            "drip" => Fault::Drip { ms: num("ms", None)? },
            "malformed" => Fault::Malformed { after: num("after", Some(0.0))? as u32 },
            _ => Fault::NoUsage,
        };
        Ok(FaultSpec { fault, rate })
    }
}

/// The faults one request suffers; each kind at most once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSet {
    pub status: Option<(u16, Option<f64>)>,
    pub hang: bool,
    pub hang_after: Option<u32>,
    pub cut: Option<(u32, bool)>,
    pub drip_ms: Option<f64>,
    pub malformed_after: Option<u32>,
    pub no_usage: bool,
    /// The specs that fired, for the record file.
    pub names: Vec<String>,
}

impl FaultSet {
    pub fn add(&mut self, fault: &Fault) {
        match *fault {
            Fault::Status { code, retry_after } => self.status = Some((code, retry_after)),
            Fault::Hang => self.hang = true,
            Fault::HangAfter { after } => self.hang_after = Some(after),
            Fault::Cut { after, done } => self.cut = Some((after, done)),
            Fault::Drip { ms } => self.drip_ms = Some(ms),
            Fault::Malformed { after } => self.malformed_after = Some(after),
            Fault::NoUsage => self.no_usage = true,
        }
        self.names.push(format!("{fault:?}"));
    }

    /// Roll the configured rates, or take the request's header when it has one.
    pub fn choose(configured: &[FaultSpec], header: Option<&str>, rng: &mut fastrand::Rng) -> Result<FaultSet, String> {
        let mut set = FaultSet::default();
        match header {
            Some(text) => {
                for spec in text.split(';').filter(|s| !s.trim().is_empty()) {
                    set.add(&spec.trim().parse::<FaultSpec>()?.fault);
                }
            }
            None => {
                for spec in configured {
                    if rng.f64() < spec.rate {
                        set.add(&spec.fault);
                    }
                }
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_refuse_mistakes() {
        assert_eq!(
            "status=0.1,code=429,retry_after=2".parse::<FaultSpec>().unwrap(),
            FaultSpec { fault: Fault::Status { code: 429, retry_after: Some(2.0) }, rate: 0.1 }
        );
        assert_eq!("cut,after=3".parse::<FaultSpec>().unwrap().fault, Fault::Cut { after: 3, done: false });
        assert_eq!("cut,after=3,done=true".parse::<FaultSpec>().unwrap().fault, Fault::Cut { after: 3, done: true });
        assert!("cut".parse::<FaultSpec>().is_err());
        assert!("cut,before=3".parse::<FaultSpec>().is_err());
        assert!("explode".parse::<FaultSpec>().is_err());
        assert!("hang=2".parse::<FaultSpec>().is_err());
        assert!("status,code=200".parse::<FaultSpec>().is_err());
    }

    #[test]
    fn header_overrides_rates() {
        let configured = vec!["hang=1".parse::<FaultSpec>().unwrap()];
        let mut rng = fastrand::Rng::with_seed(1);
        let set = FaultSet::choose(&configured, Some("no_usage; drip,ms=5"), &mut rng).unwrap();
        assert!(!set.hang && set.no_usage && set.drip_ms == Some(5.0));
        let set = FaultSet::choose(&configured, None, &mut rng).unwrap();
        assert!(set.hang);
    }
}
