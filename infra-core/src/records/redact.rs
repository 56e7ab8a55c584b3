//! A database URL as errors, logs and [`describe`](super::PostgresStore) show it: without
//! its password.
//!
//! A URL is read the way the `url` crate (which sqlx parses with) reads a non-special
//! scheme: the user-info ends at the last `@` before the query. A password holding a raw
//! `/` makes the rest of the URL look like a path; the `@` is looked for there too, so
//! that such a password is cut as well (the place shown may then lose its host, never
//! keep the password). `password=` query parameters are dropped.

/// Where the records are, as shown, and the secrets to scrub from any text about them.
#[cfg(feature = "postgres")]
#[derive(Clone)]
pub(super) struct Place {
    shown: String,
    secrets: Vec<String>,
}

#[cfg(feature = "postgres")]
impl Place {
    /// The place of `url`; `parses` says whether the URL parsed as connect options (one
    /// that does not is not shown at all: it cannot be told where a password ends).
    pub(super) fn of(url: &str, parses: bool) -> Place {
        let shown = if parses {
            redact_url(url)
        } else {
            "a database URL that does not parse (not shown: it may hold a password)".to_owned()
        };
        let mut secrets: Vec<String> = passwords(url)
            .into_iter()
            .flat_map(|p| [percent_decoded(&p), p])
            .filter(|p| !p.is_empty())
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Place { shown, secrets }
    }

    /// The URL without its password.
    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    /// `text` with every password of the URL replaced by `***`.
    pub(super) fn scrub(&self, text: &str) -> String {
        self.secrets
            .iter()
            .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "***"))
    }
}

/// The parts of a URL: up to the user-info, the user-info, then the rest before the
/// query, and the query.
struct Parts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    location: &'a str,
    query: Option<&'a str>,
}

fn parts(url: &str) -> Parts<'_> {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let query_start = rest[authority_end..]
        .find(['?', '#'])
        .map_or(rest.len(), |q| authority_end + q);
    let (userinfo, after) = match rest[..query_start].rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let (location, query) = match after.find('?') {
        Some(q) => (&after[..q], Some(&after[q + 1..])),
        None => (after, None),
    };
    Parts {
        scheme,
        userinfo,
        location,
        query,
    }
}

fn is_password_parameter(pair: &str) -> bool {
    let key = pair.split('=').next().unwrap_or("");
    key.eq_ignore_ascii_case("password")
}

/// `url` with any password removed: the user-info's `:password`, and `password=` query
/// parameters (`postgres://infra:secret@db/x` → `postgres://infra@db/x`), for messages
/// and descriptions.
pub fn redact_url(url: &str) -> String {
    let p = parts(url);
    let mut shown = p.scheme.to_owned();
    if let Some(info) = p.userinfo {
        let user = info.split(':').next().unwrap_or("");
        if !user.is_empty() {
            shown.push_str(user);
            shown.push('@');
        }
    }
    shown.push_str(p.location);
    if let Some(query) = p.query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| !is_password_parameter(pair))
            .collect();
        if !kept.is_empty() {
            shown.push('?');
            shown.push_str(&kept.join("&"));
        }
    }
    shown
}

/// The passwords `url` holds, as written.
#[cfg(feature = "postgres")]
fn passwords(url: &str) -> Vec<String> {
    let p = parts(url);
    let from_userinfo = p
        .userinfo
        .and_then(|info| info.split_once(':'))
        .map(|(_, password)| password.to_owned());
    let from_query = p.query.into_iter().flat_map(|q| {
        q.split('&')
            .filter(|pair| is_password_parameter(pair))
            .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.to_owned()))
    });
    from_userinfo.into_iter().chain(from_query).collect()
}

#[cfg(feature = "postgres")]
/// `%XX` escapes decoded (and `+`, as a query writes a space); what is not valid UTF-8
/// afterwards is kept as written.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_removed_and_the_rest_kept() {
        let cases = [
            (
                "postgres://infra:s3cret@db.internal:5432/infra",
                "postgres://infra@db.internal:5432/infra",
            ),
            (
                "postgres://infra@127.0.0.1:55434/postgres",
                "postgres://infra@127.0.0.1:55434/postgres",
            ),
            ("postgresql://:pw@host/db", "postgresql://host/db"),
            ("postgres://u:p%40ss@host/db", "postgres://u@host/db"),
            ("postgres://u:p@ss@host/db", "postgres://u@host/db"),
            ("postgres://u:pa/ss@host/db", "postgres://u@host/db"),
            (
                "postgres://host/db?password=x&sslmode=disable",
                "postgres://host/db?sslmode=disable",
            ),
            (
                "postgres://host/db?user=a@b&PASSWORD=x",
                "postgres://host/db?user=a@b",
            ),
            ("postgres://u:p@host/db?password=q", "postgres://u@host/db"),
            (
                "postgres:///db?host=/run/postgresql",
                "postgres:///db?host=/run/postgresql",
            ),
            ("postgres://host", "postgres://host"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn a_password_is_scrubbed_from_any_text_in_either_spelling() {
        let place = Place::of("postgres://u:p%40ss@host/db?password=two", true);
        assert_eq!(place.shown(), "postgres://u@host/db");
        let text = place.scrub("failed with p%40ss, p@ss and two");
        assert_eq!(text, "failed with ***, *** and ***");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn a_url_that_does_not_parse_is_not_shown() {
        let place = Place::of("postgres://u:p?ss@host/db", false);
        assert!(!place.shown().contains("p?ss"), "{}", place.shown());
        assert!(!place.shown().contains("host"), "{}", place.shown());
    }
}
