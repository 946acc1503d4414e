//! Which redirects an `http` check follows. A monitor's own headers and body are the
//! operator's (an API key, a token), and reqwest sends them again on every hop, stripping only
//! `Authorization` and cookies when the host changes. So a check that sends headers or a body
//! follows a redirect only within its origin (scheme, host and port) or to its own host over
//! https; a redirect anywhere else ends the check `down`, naming where it pointed, and nothing
//! is sent there. A check without either follows up to 10 redirects anywhere. No check follows
//! a redirect from https to http: what was asked over TLS is not fetched in the clear.
//!
//! Owns the decision only; the clients that apply it are `HttpClients`'.

use std::sync::Arc;

use shared_proto::settings::HttpSettings;
use url::Url;

use super::super::networks::Networks;

/// The refusal of `url`'s host when it is an IP literal the policy refuses.
pub fn refused_literal(networks: &Networks, url: &Url) -> Option<String> {
    let ip = match url.host()? {
        url::Host::Ipv4(ip) => std::net::IpAddr::V4(ip),
        url::Host::Ipv6(ip) => std::net::IpAddr::V6(ip),
        url::Host::Domain(_) => return None,
    };
    (!networks.permits(ip)).then(|| networks.refusal(ip))
}

/// At most this many redirects in one check.
const MAX_REDIRECTS: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    Never,
    Anywhere,
    SameOrigin,
}

impl Follow {
    pub const ALL: [Follow; 3] = [Follow::Never, Follow::Anywhere, Follow::SameOrigin];

    pub fn of(settings: &HttpSettings) -> Follow {
        if !settings.follow_redirects {
            Follow::Never
        } else if settings.headers.is_empty() && settings.body.is_none() {
            Follow::Anywhere
        } else {
            Follow::SameOrigin
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The policy, which also refuses a hop to an IP literal the agent's network policy
    /// refuses (a name is judged by the resolver).
    pub fn policy(self, networks: Arc<Networks>) -> reqwest::redirect::Policy {
        if self == Follow::Never {
            return reqwest::redirect::Policy::none();
        }
        reqwest::redirect::Policy::custom(move |attempt| {
            if let Some(refusal) = refused_literal(&networks, attempt.url()) {
                return attempt.error(refusal);
            }
            match decide(self, attempt.previous(), attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(refusal) => attempt.error(refusal),
            }
        })
    }
}

/// Whether the next hop to `next` may be taken after `previous` (the first request included).
pub fn decide(follow: Follow, previous: &[Url], next: &Url) -> Result<(), String> {
    let Some(from) = previous.last() else {
        return Ok(());
    };
    if previous.len() > MAX_REDIRECTS {
        return Err(format!("more than {MAX_REDIRECTS} redirects"));
    }
    if from.scheme() == "https" && next.scheme() == "http" {
        return Err(format!("redirect from https to http refused ({next})"));
    }
    let origin = |url: &Url| {
        (
            url.scheme().to_string(),
            url.host_str().map(str::to_string),
            url.port_or_known_default(),
        )
    };
    let same_origin = origin(from) == origin(next);
    let upgrade = from.scheme() == "http"
        && next.scheme() == "https"
        && from.host_str() == next.host_str()
        && from.port().is_none()
        && next.port().is_none();
    match follow {
        Follow::Never => Err("redirects are not followed".into()),
        Follow::Anywhere => Ok(()),
        Follow::SameOrigin if same_origin || upgrade => Ok(()),
        Follow::SameOrigin => Err(format!(
            "redirect to another origin not followed ({}): the monitor's headers and body \
             would go there too",
            next.origin().ascii_serialization()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        text.parse().unwrap()
    }

    #[test]
    fn a_check_with_secrets_stays_in_its_origin_and_nobody_goes_from_https_to_http() {
        let start = [url("http://api.example.com/v1")];
        assert!(decide(
            Follow::SameOrigin,
            &start,
            &url("http://api.example.com/v2")
        )
        .is_ok());
        assert!(decide(
            Follow::SameOrigin,
            &start,
            &url("https://api.example.com/v1")
        )
        .is_ok());
        let elsewhere = decide(
            Follow::SameOrigin,
            &start,
            &url("https://evil.example.net/"),
        );
        assert!(elsewhere.unwrap_err().contains("https://evil.example.net"));
        assert!(decide(
            Follow::SameOrigin,
            &start,
            &url("http://api.example.com:8080/")
        )
        .is_err());
        assert!(decide(Follow::Anywhere, &start, &url("https://evil.example.net/")).is_ok());

        let secure = [url("https://api.example.com/")];
        for follow in [Follow::Anywhere, Follow::SameOrigin] {
            let down = decide(follow, &secure, &url("http://api.example.com/"));
            assert!(down.unwrap_err().contains("https to http"));
        }
        let many: Vec<Url> = (0..=MAX_REDIRECTS)
            .map(|i| url(&format!("http://a.example/{i}")))
            .collect();
        assert!(decide(Follow::Anywhere, &many, &url("http://a.example/x")).is_err());
    }
}
