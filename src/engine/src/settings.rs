//! S3 connection settings from the command line and the environment, checked before anything
//! starts so that a mistake is reported in one line that names the variable or option.
//!
//! Environment (as the AWS SDKs and upstream Mountpoint read it):
//! - `AWS_REGION`, `AWS_DEFAULT_REGION`: signing region when `--region` is absent (else us-east-1);
//! - `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`: endpoint when `--endpoint-url` is absent;
//! - `AWS_CA_BUNDLE`: PEM file whose certificates *replace* the default trust store (`--ca-bundle`
//!   wins over it);
//! - `https_proxy`/`HTTPS_PROXY` (https endpoints), `http_proxy`/`HTTP_PROXY` (http endpoints),
//!   `no_proxy`/`NO_PROXY`: the lower-case name wins, as in the AWS Common Runtime that reads them;
//!   a proxy URL may carry `user:password@` (the CRT then authenticates with Basic), which is never
//!   printed ([`Proxy::redacted_url`]);
//! - `AWS_MAX_ATTEMPTS`: attempts per request when `--aws-max-attempts` is absent (else 10);
//! - `AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`: must be readable when set.

use std::path::{Path, PathBuf};

use crate::cli::{MountArgs, check_url};
use crate::exit::Failure;

/// Attempts per S3 request by default: file systems should ride out transient errors (as
/// upstream Mountpoint).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// Where S3 requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    pub region: String,
    /// Custom endpoint, or None for AWS.
    pub endpoint: Option<String>,
    /// `AWS_CA_BUNDLE`.
    pub ca_bundle: Option<PathBuf>,
    /// The proxy for the endpoint's scheme, if any.
    pub proxy: Option<Proxy>,
    pub max_attempts: u32,
}

/// A proxy found in the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    /// Variable it came from.
    pub variable: &'static str,
    pub url: String,
    /// `no_proxy`/`NO_PROXY`, if set.
    pub no_proxy: Option<String>,
}

impl Proxy {
    /// The URL without its user and password, for logs and error messages.
    pub fn redacted_url(&self) -> String {
        redact_userinfo(&self.url)
    }
}

/// `url` with the user and password before its host (`scheme://user:pass@host`) replaced by
/// `[REDACTED]`; unchanged when it has none.
pub fn redact_userinfo(url: &str) -> String {
    match userinfo_split(url) {
        Some((scheme, _, rest)) => format!("{scheme}[REDACTED]@{rest}"),
        None => url.to_string(),
    }
}

/// `(scheme://, userinfo, host and the rest)` of a URL with a user; None without one.
fn userinfo_split(url: &str) -> Option<(&str, &str, &str)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let at = url[start..authority_end].rfind('@')? + start;
    Some((&url[..start], &url[start..at], &url[at + 1..]))
}

/// A proxy URL is checked like an endpoint once its user and password are set aside.
fn check_proxy_url(url: &str) -> Result<(), String> {
    match userinfo_split(url) {
        Some((scheme, userinfo, rest)) => {
            if userinfo.is_empty() || userinfo.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err("has an empty or malformed user:password part".into());
            }
            check_url(&format!("{scheme}{rest}"))
        }
        None => check_url(url),
    }
}

impl S3Settings {
    /// Whether requests use TLS (an https endpoint, or AWS).
    pub fn uses_tls(&self) -> bool {
        self.endpoint.as_deref().is_none_or(|e| e.starts_with("https://"))
    }

    /// Human-readable endpoint.
    pub fn endpoint_description(&self) -> String {
        match &self.endpoint {
            Some(e) => e.clone(),
            None => format!("AWS S3 in {}", self.region),
        }
    }
}

fn non_empty(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

fn first_of(env: &dyn Fn(&str) -> Option<String>, names: &[&'static str]) -> Option<(&'static str, String)> {
    names.iter().find_map(|n| non_empty(env, n).map(|v| (*n, v)))
}

/// Resolve and check the settings.
pub fn resolve(args: &MountArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<S3Settings, Failure> {
    let region = match &args.region {
        Some(r) => r.clone(),
        None => match first_of(env, &["AWS_REGION", "AWS_DEFAULT_REGION"]) {
            Some((name, r)) => {
                if r.len() > 64 || !r.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
                    return Err(Failure::usage(format!(
                        "{name}='{r}' is not a region name such as us-east-1"
                    )));
                }
                r
            }
            None => "us-east-1".to_string(),
        },
    };

    let endpoint = match &args.endpoint_url {
        Some(e) => Some(e.clone()),
        None => match first_of(env, &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]) {
            Some((name, e)) => {
                check_url(&e).map_err(|what| Failure::usage(format!("{name}='{e}' {what}")))?;
                Some(e)
            }
            None => None,
        },
    };

    // `--ca-bundle` (upstream's flag) wins over the variable.
    let ca_bundle = match (&args.ca_bundle, non_empty(env, "AWS_CA_BUNDLE")) {
        (Some(path), _) => {
            check_ca_bundle("--ca-bundle", path)?;
            Some(path.clone())
        }
        (None, Some(path)) => {
            check_ca_bundle("AWS_CA_BUNDLE", Path::new(&path))?;
            Some(PathBuf::from(path))
        }
        (None, None) => None,
    };

    let tls = endpoint.as_deref().is_none_or(|e| e.starts_with("https://"));
    let names: &[&'static str] = if tls {
        &["https_proxy", "HTTPS_PROXY"]
    } else {
        &["http_proxy", "HTTP_PROXY"]
    };
    let proxy = match first_of(env, names) {
        Some((variable, url)) => {
            check_proxy_url(&url)
                .map_err(|what| Failure::usage(format!("{variable}='{}' {what}", redact_userinfo(&url))))?;
            let no_proxy = first_of(env, &["no_proxy", "NO_PROXY"]).map(|(_, v)| v);
            Some(Proxy {
                variable,
                url,
                no_proxy,
            })
        }
        None => None,
    };

    let max_attempts = match args.aws_max_attempts {
        Some(n) => n,
        None => match non_empty(env, "AWS_MAX_ATTEMPTS") {
            Some(v) => v.parse::<u32>().ok().filter(|n| (1..=100).contains(n)).ok_or_else(|| {
                Failure::usage(format!(
                    "AWS_MAX_ATTEMPTS='{v}' must be a number of attempts from 1 to 100"
                ))
            })?,
            None => DEFAULT_MAX_ATTEMPTS,
        },
    };

    for name in ["AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"] {
        if let Some(path) = non_empty(env, name)
            && let Err(e) = std::fs::File::open(&path)
        {
            return Err(Failure::setup(format!("{name}='{path}' cannot be read: {e}")));
        }
    }

    Ok(S3Settings {
        region,
        endpoint,
        ca_bundle,
        proxy,
        max_attempts,
    })
}

/// The CA bundle must be a readable file holding at least one PEM certificate (the CRT's own error
/// for a bad file says only "failed to build TLS context").
fn check_ca_bundle(source: &str, path: &Path) -> Result<(), Failure> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| Failure::setup(format!("{source}='{shown}' cannot be read: {e}")))?;
    if !String::from_utf8_lossy(&text).contains("-----BEGIN CERTIFICATE-----") {
        return Err(Failure::setup(format!("{source}='{shown}' holds no PEM certificate")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, parse};
    use crate::exit::{SETUP, USAGE};
    use std::collections::HashMap;

    fn args(extra: &[&str]) -> MountArgs {
        let mut all = vec!["bucket", "/mnt"];
        all.extend_from_slice(extra);
        match parse(all) {
            Ok(Command::Mount(m)) => *m,
            other => panic!("{other:?}"),
        }
    }

    fn resolve_with(extra: &[&str], vars: &[(&str, &str)]) -> Result<S3Settings, Failure> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        resolve(&args(extra), &|k| map.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let s = resolve_with(&[], &[]).unwrap();
        assert_eq!(s.region, "us-east-1");
        assert_eq!(s.endpoint, None);
        assert_eq!(s.ca_bundle, None);
        assert_eq!(s.proxy, None);
        assert_eq!(s.max_attempts, 10);
        assert!(s.uses_tls());
    }

    #[test]
    fn flags_win_over_the_environment() {
        let s = resolve_with(
            &[
                "--region=eu-west-3",
                "--endpoint-url=http://127.0.0.1:9000",
                "--aws-max-attempts=3",
            ],
            &[
                ("AWS_REGION", "us-west-1"),
                ("AWS_ENDPOINT_URL", "https://x.example"),
                ("AWS_MAX_ATTEMPTS", "7"),
            ],
        )
        .unwrap();
        assert_eq!(s.region, "eu-west-3");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.max_attempts, 3);
        assert!(!s.uses_tls());
    }

    #[test]
    fn environment_fallbacks() {
        let s = resolve_with(
            &[],
            &[
                ("AWS_DEFAULT_REGION", "ap-south-1"),
                ("AWS_ENDPOINT_URL", "https://a.example"),
                ("AWS_ENDPOINT_URL_S3", "https://s3.example:8443"),
                ("AWS_MAX_ATTEMPTS", "4"),
            ],
        )
        .unwrap();
        assert_eq!(s.region, "ap-south-1");
        assert_eq!(s.endpoint.as_deref(), Some("https://s3.example:8443"));
        assert_eq!(s.max_attempts, 4);
    }

    #[test]
    fn proxy_follows_the_endpoint_scheme_and_lower_case_wins() {
        let vars = [
            ("HTTPS_PROXY", "http://upper:3128"),
            ("https_proxy", "http://lower:3128"),
            ("HTTP_PROXY", "http://plain:3128"),
            ("NO_PROXY", "localhost,.internal"),
        ];
        let tls = resolve_with(&["--endpoint-url=https://s3.example"], &vars).unwrap();
        assert_eq!(
            tls.proxy,
            Some(Proxy {
                variable: "https_proxy",
                url: "http://lower:3128".into(),
                no_proxy: Some("localhost,.internal".into())
            })
        );
        let plain = resolve_with(&["--endpoint-url=http://s3.example"], &vars).unwrap();
        assert_eq!(plain.proxy.unwrap().url, "http://plain:3128");
        let none = resolve_with(&["--endpoint-url=http://s3.example"], &[("HTTPS_PROXY", "http://p:1")]).unwrap();
        assert_eq!(none.proxy, None);
    }

    #[test]
    fn a_proxy_user_and_password_reach_the_settings_but_never_a_message() {
        let vars = [("HTTPS_PROXY", "http://proxyuser:pr0xy%40pass@proxy.corp:3128")];
        let s = resolve_with(&[], &vars).unwrap();
        let proxy = s.proxy.unwrap();
        assert_eq!(proxy.url, "http://proxyuser:pr0xy%40pass@proxy.corp:3128", "the CRT needs it");
        assert_eq!(proxy.redacted_url(), "http://[REDACTED]@proxy.corp:3128");
        assert_eq!(redact_userinfo("http://proxy.corp:3128"), "http://proxy.corp:3128");
        assert_eq!(redact_userinfo("http://h/p@q"), "http://h/p@q", "an @ after the host is no user");
        let e = resolve_with(&[], &[("HTTPS_PROXY", "http://proxyuser:secret@")]).unwrap_err();
        assert_eq!(e.code, USAGE);
        assert!(!e.message.contains("secret"), "{}", e.message);
        assert!(e.message.starts_with("HTTPS_PROXY='http://[REDACTED]@' must name a host"), "{}", e.message);
    }

    #[test]
    fn bad_environment_values_name_the_variable() {
        let e = resolve_with(&[], &[("AWS_REGION", "Europe West")]).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (USAGE, "AWS_REGION='Europe West' is not a region name such as us-east-1")
        );
        let e = resolve_with(&[], &[("AWS_ENDPOINT_URL", "s3.local:9000")]).unwrap_err();
        assert_eq!(e.code, USAGE);
        assert!(
            e.message
                .starts_with("AWS_ENDPOINT_URL='s3.local:9000' must be an http"),
            "{}",
            e.message
        );
        let e = resolve_with(&[], &[("HTTPS_PROXY", "proxy:3128")]).unwrap_err();
        assert!(
            e.message.starts_with("HTTPS_PROXY='proxy:3128' must be an http"),
            "{}",
            e.message
        );
        let e = resolve_with(&[], &[("AWS_MAX_ATTEMPTS", "many")]).unwrap_err();
        assert!(e.message.starts_with("AWS_MAX_ATTEMPTS='many'"), "{}", e.message);
    }

    #[test]
    fn files_must_be_readable() {
        let e = resolve_with(&[], &[("AWS_CA_BUNDLE", "/nonexistent/ca.pem")]).unwrap_err();
        assert_eq!(e.code, SETUP);
        assert!(
            e.message
                .starts_with("AWS_CA_BUNDLE='/nonexistent/ca.pem' cannot be read"),
            "{}",
            e.message
        );
        let e = resolve_with(&[], &[("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/creds")]).unwrap_err();
        assert_eq!(e.code, SETUP);
        assert!(
            e.message
                .starts_with("AWS_SHARED_CREDENTIALS_FILE='/nonexistent/creds'"),
            "{}",
            e.message
        );

        let dir = std::env::temp_dir().join(format!("mount-s3-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let e = resolve_with(&[], &[("AWS_CA_BUNDLE", not_pem.to_str().unwrap())]).unwrap_err();
        assert!(e.message.ends_with("holds no PEM certificate"), "{}", e.message);
        let pem = dir.join("ca.pem");
        std::fs::write(&pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").unwrap();
        let s = resolve_with(&[], &[("AWS_CA_BUNDLE", pem.to_str().unwrap())]).unwrap();
        assert_eq!(s.ca_bundle, Some(pem.clone()));
        // The flag wins over the variable, and names itself when it is wrong.
        let flag = format!("--ca-bundle={}", pem.display());
        let s = resolve_with(&[&flag], &[("AWS_CA_BUNDLE", "/nonexistent/ca.pem")]).unwrap();
        assert_eq!(s.ca_bundle, Some(pem));
        let e = resolve_with(&["--ca-bundle=/nonexistent/flag.pem"], &[]).unwrap_err();
        assert!(e.message.starts_with("--ca-bundle='/nonexistent/flag.pem' cannot be read"), "{}", e.message);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
