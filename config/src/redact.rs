//! URLs as they may be shown: in logs, errors, `check config` output and API responses.
//!
//! A configured URL can carry secrets in two places: the userinfo (`http://user:password@host`,
//! RFC 3986 section 3.2.1) and the query (`?token=…`, how many webhook receivers take their
//! key), and for some receivers (Slack, Discord) the path. [`redacted_url`] keeps what tells a reader which endpoint is meant (scheme, user
//! name, host, port, path, the names of query parameters) and replaces the rest with `xxxxx`,
//! as Go's `url.URL.Redacted` does for the password (which Prometheus prints).

/// The mask put where a secret was.
pub const MASK: &str = "xxxxx";

/// `url` with its password, every query value and every path segment that looks like a key
/// (16 characters or more mixing letters and digits) replaced by [`MASK`], and any fragment
/// dropped: `http://u:pw@db:8123/x?token=t&a=1` → `http://u:xxxxx@db:8123/x?token=xxxxx&a=xxxxx`.
///
/// A user name without a password is masked too (it is often a token). Text that is not an
/// absolute URL with a host (a typo such as `u:pw@db:8123`, a password holding `#`, a
/// forgotten host) keeps its scheme and what precedes the first `:`, `@`, `/`, `?` or `#`;
/// the rest is masked.
pub fn redacted_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            // A user name without a password is often a token (`https://<token>@host`).
            let lone_user = parsed.password().is_none() && !parsed.username().is_empty();
            if lone_user {
                let _ = parsed.set_username(MASK);
            }
            let secret_free = !lone_user
                && parsed.password().is_none()
                && parsed.query().is_none()
                && parsed.fragment().is_none()
                && !parsed
                    .path_segments()
                    .is_some_and(|mut segments| segments.any(looks_like_a_key));
            if secret_free {
                // Shown as written (the parser would add a `/` to `http://host:8123`).
                return url.to_string();
            }
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some(MASK));
            }
            let names: Vec<String> = parsed.query_pairs().map(|(name, _)| name.into_owned()).collect();
            if parsed.query().is_some() {
                let query: Vec<String> = names.iter().map(|name| format!("{name}={MASK}")).collect();
                parsed.set_query(
                    Some(&query.join("&"))
                        .filter(|query| !query.is_empty())
                        .map(String::as_str),
                );
            }
            parsed.set_fragment(None);
            if parsed
                .path_segments()
                .is_some_and(|mut segments| segments.any(looks_like_a_key))
            {
                let path: Vec<&str> = parsed
                    .path_segments()
                    .map(|segments| {
                        segments
                            .map(|segment| if looks_like_a_key(segment) { MASK } else { segment })
                            .collect()
                    })
                    .unwrap_or_default();
                parsed.set_path(&path.join("/"));
            }
            parsed.to_string()
        }
        // Not a URL with a host (a typo, a password holding `#` or `?`, a forgotten host):
        // keep the scheme and what precedes the first separator, mask everything after it.
        _ => {
            let (scheme, rest) = url.split_once("://").map_or(("", url), |(scheme, rest)| (scheme, rest));
            let scheme = if scheme.is_empty() && !url.contains("://") {
                String::new()
            } else {
                format!("{scheme}://")
            };
            match rest.find([':', '@', '/', '?', '#']) {
                Some(at) => format!("{scheme}{}{}{MASK}", &rest[..at], &rest[at..=at]),
                None => format!("{scheme}{rest}"),
            }
        }
    }
}

/// Whether a path segment is probably a key: 16 characters or more, mixing letters and
/// digits (the last segments of Slack's `/services/T…/B…/<key>` and Discord's
/// `/api/webhooks/<id>/<key>` webhook URLs).
fn looks_like_a_key(segment: &str) -> bool {
    segment.len() >= 16
        && segment.bytes().any(|byte| byte.is_ascii_digit())
        && segment.bytes().any(|byte| byte.is_ascii_alphabetic())
}

/// The user name and password a URL's userinfo carries (percent-decoded), and the URL
/// without them: `http://reader:pw@db:8123` → `(Some(("reader", Some("pw"))), "http://db:8123/")`.
/// `None` for a URL without userinfo or that does not parse (returned unchanged).
pub fn split_userinfo(url: &str) -> (Option<(String, Option<String>)>, String) {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return (None, url.to_string());
    };
    if parsed.username().is_empty() && parsed.password().is_none() {
        return (None, url.to_string());
    }
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = decode(parsed.username());
    let password = parsed.password().map(decode);
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    (Some((user, password)), parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_query_values_are_masked_names_kept() {
        assert_eq!(
            redacted_url("http://u:pw@db:8123/x?token=t&a=1#frag"),
            "http://u:xxxxx@db:8123/x?token=xxxxx&a=xxxxx"
        );
        assert_eq!(redacted_url("https://db:8443"), "https://db:8443");
        assert_eq!(redacted_url("http://token@db:8123/"), "http://xxxxx@db:8123/");
        assert_eq!(redacted_url("http://u@SECRET@db:8123"), "http://xxxxx@db:8123/");
        assert_eq!(redacted_url("http://db:8123/path@x"), "http://db:8123/path@x");
        assert_eq!(redacted_url("http://hook/?"), "http://hook/");
        assert_eq!(
            redacted_url("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXX0000XXXXXXXX"),
            "https://hooks.slack.com/services/T00000000/B00000000/xxxxx"
        );
        assert_eq!(
            redacted_url("http://exporter:9100/metrics"),
            "http://exporter:9100/metrics"
        );
    }

    #[test]
    fn text_that_is_no_url_is_masked_too() {
        assert_eq!(redacted_url("u:pw@db:8123"), "u:xxxxx");
        assert_eq!(redacted_url("db:8123/x?token=t"), "db:xxxxx");
        assert_eq!(redacted_url("ftp//u:pw@db"), "ftp/xxxxx");
        // A password holding `#` or `?`, a forgotten host: nothing after the user name.
        assert_eq!(redacted_url("http://u:SECRET18#x@127.0.0.1:18123"), "http://u:xxxxx");
        assert_eq!(redacted_url("http://u:SECRET19?x@h:1"), "http://u:xxxxx");
        assert_eq!(redacted_url("http://default:SECRET21"), "http://default:xxxxx");
    }

    #[test]
    fn userinfo_is_split_off_and_decoded() {
        assert_eq!(
            split_userinfo("http://reader:p%40ss+w@db:8123/"),
            (
                Some(("reader".to_string(), Some("p@ss+w".to_string()))),
                "http://db:8123/".to_string()
            )
        );
        assert_eq!(split_userinfo("http://db:8123"), (None, "http://db:8123".to_string()));
        assert_eq!(split_userinfo("not a url"), (None, "not a url".to_string()));
    }
}
