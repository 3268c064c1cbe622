//! The fallback walk every lookup takes: a device's own key, then its
//! architecture's, then its vendor's (CLBlast's order); the most specific
//! level that answers wins, and none means the caller's portable default.
//!
//! [`best`] is the one rule; the kernel lookup ([`crate::Db::best`], over
//! the winners) and the model plan ([`crate::Db::model_choice`], over the
//! model-latency reports) both walk through it, each with its own test of
//! what "answers" means at a level. No SQL here.

use crate::{DeviceKeys, Level};

/// The first of `found` (given most specific level first) that `answers`,
/// with its level. Entries of one level keep their order.
pub fn best<T>(found: impl IntoIterator<Item = (Level, T)>, mut answers: impl FnMut(Level, &T) -> bool) -> Option<(Level, T)> {
    let mut found: Vec<(Level, T)> = found.into_iter().collect();
    // Stable: callers may hand the levels in any order, never reorder within one.
    found.sort_by_key(|(level, _)| *level);
    found.into_iter().find(|(level, t)| answers(*level, t))
}

/// The stored levels of `keys` with a key to look under (an empty arch or
/// vendor key, as a bare device key may imply, has nothing stored), most
/// specific first.
pub fn levels(keys: &DeviceKeys) -> impl Iterator<Item = (Level, &str)> {
    Level::STORED.into_iter().filter_map(|level| keys.key(level).filter(|k| !k.is_empty()).map(|k| (level, k)))
}

/// What a winner's kernel must fit to answer a lookup: the candidate space
/// the asker's rules build (a winner voted under other rules is stale) and
/// the threads the asker runs (arch and vendor keys are shared by clients
/// with and without Wasm threads). `None` accepts any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fit<'a> {
    pub space_checksum: Option<&'a str>,
    pub max_threads: Option<u32>,
}

impl<'a> From<Option<&'a str>> for Fit<'a> {
    /// A fit on the space alone, any thread count.
    fn from(space_checksum: Option<&'a str>) -> Fit<'a> {
        Fit { space_checksum, max_threads: None }
    }
}

impl Fit<'_> {
    /// Whether a winner in space `space_checksum` whose kernel metadata is
    /// `meta_json` fits. A kernel's `threads` defaults to 1; metadata that
    /// does not parse (read only under a thread limit) is an error, never a
    /// silent skip.
    pub fn fits(&self, space_checksum: &str, meta_json: &str) -> Result<bool, serde_json::Error> {
        if self.space_checksum.is_some_and(|c| c != space_checksum) {
            return Ok(false);
        }
        let Some(limit) = self.max_threads else { return Ok(true) };
        let meta: serde_json::Value = serde_json::from_str(meta_json)?;
        Ok(meta.get("threads").and_then(|t| t.as_u64()).unwrap_or(1) <= u64::from(limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_answering_level_wins() {
        let found = [(Level::Vendor, 3), (Level::Device, 1), (Level::Arch, 2), (Level::Device, 4)];
        assert_eq!(best(found, |_, _| true), Some((Level::Device, 1)));
        assert_eq!(best(found, |_, &t| t != 1), Some((Level::Device, 4)));
        assert_eq!(best(found, |l, _| l != Level::Device), Some((Level::Arch, 2)));
        assert_eq!(best(found, |_, &t| t == 3), Some((Level::Vendor, 3)));
        assert_eq!(best(found, |_, _| false), None);
    }

    #[test]
    fn levels_skip_empty_keys() {
        let keys = DeviceKeys { device_key: "d".into(), arch_key: String::new(), vendor_key: "v".into(), rho: String::new() };
        assert_eq!(levels(&keys).collect::<Vec<_>>(), [(Level::Device, "d"), (Level::Vendor, "v")]);
    }

    #[test]
    fn fit_checks_space_and_threads() {
        let fits = |f: Fit, space: &str, meta: &str| f.fits(space, meta).unwrap();
        assert!(fits(Fit::default(), "a", "not json"));
        let space = Fit::from(Some("a"));
        assert!(fits(space, "a", "{}") && !fits(space, "b", "{}"));
        let one = Fit { space_checksum: Some("a"), max_threads: Some(1) };
        assert!(fits(one, "a", "{}") && fits(one, "a", r#"{"threads":1}"#));
        assert!(!fits(one, "a", r#"{"threads":2}"#) && !fits(one, "b", "not json"));
        assert!(one.fits("a", "not json").is_err());
        assert!(fits(Fit { max_threads: Some(2), ..one }, "a", r#"{"threads":2}"#));
    }
}
