//! The simulated cloud of a runner, set up from the environment: how fast it answers,
//! how many calls it admits, and whether its lists are complete.

use std::time::Duration;

/// At most this many calls per second per API ([`SimCloud::set_rate_limit`]):
/// `INFRA_SIM_RATE=50`.
///
/// [`SimCloud::set_rate_limit`]: super::SimCloud::set_rate_limit
pub const RATE_VAR: &str = "INFRA_SIM_RATE";

/// Every call takes this many milliseconds ([`SimCloud::set_latency`]):
/// `INFRA_SIM_LATENCY_MS=50`.
///
/// [`SimCloud::set_latency`]: super::SimCloud::set_latency
pub const LATENCY_VAR: &str = "INFRA_SIM_LATENCY_MS";

/// With `1` (or `true`), every list is bare ([`SimCloud::set_bare_lists`]):
/// `INFRA_SIM_BARE_LISTS=1`.
///
/// [`SimCloud::set_bare_lists`]: super::SimCloud::set_bare_lists
pub const BARE_LISTS_VAR: &str = "INFRA_SIM_BARE_LISTS";

/// What the environment asks of the simulated cloud.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) rate: Option<u32>,
    pub(crate) latency: Option<Duration>,
    pub(crate) bare_lists: bool,
}

impl Settings {
    /// The settings the variables hold, read through `var`; unset or empty variables
    /// leave the cloud as it is.
    ///
    /// # Errors
    /// A value that does not parse, naming its variable.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let read = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let rate = match read(RATE_VAR) {
            None => None,
            Some(v) => match v.parse::<u32>() {
                Ok(r) if r > 0 => Some(r),
                _ => {
                    return Err(format!(
                        "{RATE_VAR}={v}: not a whole number of calls per second above zero"
                    ));
                }
            },
        };
        let latency = match read(LATENCY_VAR) {
            None => None,
            Some(v) => match v.parse::<u64>() {
                Ok(ms) => Some(Duration::from_millis(ms)),
                Err(_) => {
                    return Err(format!(
                        "{LATENCY_VAR}={v}: not a whole number of milliseconds"
                    ));
                }
            },
        };
        let bare_lists = match read(BARE_LISTS_VAR).as_deref() {
            None | Some("0" | "false") => false,
            Some("1" | "true") => true,
            Some(v) => return Err(format!("{BARE_LISTS_VAR}={v}: not 1 or 0")),
        };
        Ok(Settings {
            rate,
            latency,
            bare_lists,
        })
    }

    /// Whether the cloud must keep real time: a latency to wait, or a rate to meter,
    /// means nothing on a clock that moves only when slept on.
    pub(crate) fn real_time(&self) -> bool {
        self.rate.is_some() || self.latency.is_some_and(|l| !l.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, String> {
        Settings::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_variables_set_rate_latency_and_bare_lists() {
        assert_eq!(settings(&[]), Ok(Settings::default()));
        assert!(!Settings::default().real_time());
        let s = settings(&[
            (RATE_VAR, "50"),
            (LATENCY_VAR, " 50 "),
            (BARE_LISTS_VAR, "1"),
        ])
        .unwrap();
        assert_eq!(s.rate, Some(50));
        assert_eq!(s.latency, Some(Duration::from_millis(50)));
        assert!(s.bare_lists && s.real_time());
        assert!(settings(&[(LATENCY_VAR, "0")]).is_ok_and(|s| !s.real_time()));
    }

    #[test]
    fn a_value_that_does_not_parse_is_refused_with_its_variable() {
        assert!(settings(&[(RATE_VAR, "0")]).unwrap_err().contains(RATE_VAR));
        assert!(
            settings(&[(RATE_VAR, "fast")])
                .unwrap_err()
                .contains(RATE_VAR)
        );
        assert!(
            settings(&[(LATENCY_VAR, "50ms")])
                .unwrap_err()
                .contains(LATENCY_VAR)
        );
        assert!(
            settings(&[(BARE_LISTS_VAR, "yes")])
                .unwrap_err()
                .contains(BARE_LISTS_VAR)
        );
    }
}
