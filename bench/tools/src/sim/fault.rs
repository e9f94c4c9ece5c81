//! Fault injection: `KIND[=RATE][,key=value...]` on the command line (`--fault cut=0.05,after=3`)
//! or per request in `x-sim-fault` (`cut,after=3`; several joined by `;`), where the rate is 1.

use std::str::FromStr;

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer with this status and an error body, and the retry headers asked for.
    Status(StatusFault),
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

/// How a status fault says when to come back: the header forms clients must understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterAs {
    /// `retry-after` in whole seconds (rounded up) and `retry-after-ms`, as the gateway sends.
    Both,
    /// `retry-after` in whole seconds (rounded up) only.
    Seconds,
    /// `retry-after` as an HTTP date only.
    Date,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StatusFault {
    pub code: u16,
    pub retry_after: Option<f64>,
    pub retry_after_as: RetryAfterAs,
    /// `x-should-retry: true|false`, the official SDKs' retry override.
    pub should_retry: Option<bool>,
}

impl StatusFault {
    /// The retry headers of the answer, for a response sent at `now`.
    pub fn headers(&self, now: std::time::SystemTime) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(after) = self.retry_after {
            match self.retry_after_as {
                RetryAfterAs::Both | RetryAfterAs::Seconds => {
                    out.push(("retry-after", format!("{}", after.ceil() as u64)));
                }
                RetryAfterAs::Date => {
                    // An HTTP date has whole seconds: the next one at or after the wait.
                    let at = now + std::time::Duration::from_secs_f64(after);
                    let secs = at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs_f64().ceil() as u64);
                    let rounded = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
                    out.push(("retry-after", httpdate::fmt_http_date(rounded)));
                }
            }
            if self.retry_after_as == RetryAfterAs::Both {
                out.push(("retry-after-ms", format!("{}", (after * 1000.0).round() as u64)));
            }
        }
        if let Some(retry) = self.should_retry {
            out.push(("x-should-retry", retry.to_string()));
        }
        out
    }
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
            "status" => &["code", "retry_after", "retry_after_as", "should_retry"],
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
                let retry_after_as = match get("retry_after_as") {
                    None | Some("both") => RetryAfterAs::Both,
                    Some("seconds") => RetryAfterAs::Seconds,
                    Some("date") => RetryAfterAs::Date,
                    Some(other) => return Err(format!("{s:?}: retry_after_as={other:?} is not both, seconds or date")),
                };
                if retry_after.is_none() && get("retry_after_as").is_some() {
                    return Err(format!("{s:?}: retry_after_as needs retry_after="));
                }
                let should_retry = match get("should_retry") {
                    None => None,
                    Some("true") => Some(true),
                    Some("false") => Some(false),
                    Some(other) => return Err(format!("{s:?}: should_retry={other:?} is not true or false")),
                };
                Fault::Status(StatusFault { code: code as u16, retry_after, retry_after_as, should_retry })
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
    pub status: Option<StatusFault>,
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
            Fault::Status(ref status) => self.status = Some(status.clone()),
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
        let status = |code, retry_after, retry_after_as, should_retry| {
            Fault::Status(StatusFault { code, retry_after, retry_after_as, should_retry })
        };
        assert_eq!(
            "status=0.1,code=429,retry_after=2".parse::<FaultSpec>().unwrap(),
            FaultSpec { fault: status(429, Some(2.0), RetryAfterAs::Both, None), rate: 0.1 }
        );
        assert_eq!(
            "status,code=503,retry_after=1.5,retry_after_as=date,should_retry=false"
                .parse::<FaultSpec>()
                .unwrap()
                .fault,
            status(503, Some(1.5), RetryAfterAs::Date, Some(false))
        );
        assert!("status,retry_after_as=date".parse::<FaultSpec>().is_err());
        assert!("status,retry_after=1,retry_after_as=hours".parse::<FaultSpec>().is_err());
        assert!("status,should_retry=maybe".parse::<FaultSpec>().is_err());
        assert_eq!("cut,after=3".parse::<FaultSpec>().unwrap().fault, Fault::Cut { after: 3, done: false });
        assert_eq!("cut,after=3,done=true".parse::<FaultSpec>().unwrap().fault, Fault::Cut { after: 3, done: true });
        assert!("cut".parse::<FaultSpec>().is_err());
        assert!("cut,before=3".parse::<FaultSpec>().is_err());
        assert!("explode".parse::<FaultSpec>().is_err());
        assert!("hang=2".parse::<FaultSpec>().is_err());
        assert!("status,code=200".parse::<FaultSpec>().is_err());
    }

    #[test]
    fn status_headers_in_each_form() {
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_millis(784_111_777_250);
        let fault = |retry_after_as, should_retry| StatusFault {
            code: 429,
            retry_after: Some(1.2),
            retry_after_as,
            should_retry,
        };
        assert_eq!(
            fault(RetryAfterAs::Both, None).headers(now),
            vec![("retry-after", "2".to_string()), ("retry-after-ms", "1200".to_string())]
        );
        assert_eq!(
            fault(RetryAfterAs::Seconds, Some(true)).headers(now),
            vec![("retry-after", "2".to_string()), ("x-should-retry", "true".to_string())]
        );
        // 784111777.25 s + 1.2 s, rounded up to a whole second: 784111779 (RFC 9110's example + 2).
        assert_eq!(
            fault(RetryAfterAs::Date, None).headers(now),
            vec![("retry-after", "Sun, 06 Nov 1994 08:49:39 GMT".to_string())]
        );
        let bare = StatusFault { code: 503, retry_after: None, retry_after_as: RetryAfterAs::Both, should_retry: None };
        assert!(bare.headers(now).is_empty());
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
