//! Users an authenticating proxy in front of the gateway vouches for, the way kube-apiserver's
//! request-header authentication (and kube-rbac-proxy) take them: the proxy connects with a
//! client certificate signed by `--client-ca-file` (and, with `--requestheader-allowed-names`,
//! one of those common names), and names the user in `X-Remote-User`, their groups in
//! `X-Remote-Group` and extras in `X-Remote-Extra-<key>` (header names configurable). The
//! headers count only on such a connection: from anyone else they are ignored, whatever they
//! say.

use std::collections::BTreeMap;

use http::HeaderMap;
use rustls_pki_types::CertificateDer;

use crate::authn::user_from_certificate;
use crate::{AuthMethod, AuthenticatedUser};

/// Where a proxy's users are read from.
#[derive(Debug, Clone)]
pub struct FrontProxy {
    /// Common names a proxy's certificate may have; empty: any the CA signed.
    pub allowed_names: Vec<String>,
    /// Headers naming the user, the first present wins.
    pub user_headers: Vec<String>,
    /// Headers naming groups, each value one group.
    pub group_headers: Vec<String>,
    /// Prefixes of headers naming extras (`<prefix><key>`, the key percent-decoded).
    pub extra_prefixes: Vec<String>,
}

/// What a request's connection and headers say.
#[derive(Debug, PartialEq, Eq)]
pub enum Vouched {
    /// Not a proxy's request (no certificate, or no user header): other credentials decide.
    No,
    /// A proxy's request for this user.
    User(AuthenticatedUser),
    /// A certificate the gateway will not take users from: why.
    Refused(String),
}

impl FrontProxy {
    /// Read the user a request's proxy names, if any.
    pub fn vouched(&self, certificate: Option<&CertificateDer<'_>>, headers: &HeaderMap) -> Vouched {
        let Some(certificate) = certificate else { return Vouched::No };
        let user = first(headers, &self.user_headers);
        let Some(user) = user.filter(|u| !u.is_empty()) else { return Vouched::No };
        let proxy = match user_from_certificate(certificate) {
            Ok(proxy) => proxy.name,
            Err(e) => return Vouched::Refused(e.to_string()),
        };
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(&proxy) {
            return Vouched::Refused(format!(
                "client certificate {proxy:?} is not one of --requestheader-allowed-names"
            ));
        }
        let groups = self.group_headers.iter().flat_map(|h| values(headers, h)).collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let name = name.as_str();
            let key = self.extra_prefixes.iter().find_map(|p| strip_prefix_ignore_case(name, p));
            if let (Some(key), Ok(value)) = (key, value.to_str()) {
                extra.entry(percent_decode(key).to_ascii_lowercase()).or_default().push(value.to_owned());
            }
        }
        Vouched::User(AuthenticatedUser { name: user, uid: None, groups, extra, method: AuthMethod::ClientCertificate })
    }
}

fn first(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names.iter().find_map(|h| headers.get(h.as_str())?.to_str().ok().map(str::to_owned))
}

fn values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_owned).collect()
}

fn strip_prefix_ignore_case<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let head = name.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &name[prefix.len()..]).filter(|k| !k.is_empty())
}

/// `%XX` escapes decoded (as the apiserver reads extra keys); anything malformed is kept as is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b))) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;
    use myownshell_certs::pki::{CertificateAuthority, LeafSpec};
    use rustls_pki_types::pem::PemObject;

    use super::*;

    fn certificate(cn: &str) -> CertificateDer<'static> {
        let ca = CertificateAuthority::generate("front-proxy-ca", Duration::from_secs(3600)).expect("a CA");
        let leaf = ca.issue(&LeafSpec::client(cn, vec![], Duration::from_secs(3600))).expect("a leaf");
        CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).expect("PEM")
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        h
    }

    fn proxy(allowed: &[&str]) -> FrontProxy {
        FrontProxy {
            allowed_names: allowed.iter().map(|s| (*s).to_owned()).collect(),
            user_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }

    #[test]
    fn who_a_proxy_vouches_for() {
        let front = certificate("front-proxy");
        let other = certificate("someone");
        let full = [
            ("x-remote-user", "alice@example.com"),
            ("x-remote-group", "devs"),
            ("x-remote-group", "ops"),
            ("x-remote-extra-acme.com%2Fproject", "shells"),
        ];
        // (what, proxy, the connection's certificate, headers, the user or "no" or "refused")
        type Case<'a> = (&'a str, FrontProxy, Option<&'a CertificateDer<'a>>, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case<'_>] = &[
            ("no certificate: the headers are ignored", proxy(&[]), None, &full, "no"),
            ("a certificate but no user header", proxy(&[]), Some(&front), &[("x-remote-group", "devs")], "no"),
            ("an empty user header", proxy(&[]), Some(&front), &[("x-remote-user", "")], "no"),
            ("any name the CA signed", proxy(&[]), Some(&other), &full, "alice@example.com"),
            ("an allowed name", proxy(&["front-proxy"]), Some(&front), &full, "alice@example.com"),
            ("a name not allowed", proxy(&["front-proxy"]), Some(&other), &full, "refused"),
        ];
        for (name, proxy, certificate, pairs, want) in cases {
            let got = proxy.vouched(*certificate, &headers(pairs));
            match (got, *want) {
                (Vouched::No, "no") => {}
                (Vouched::Refused(why), "refused") => assert!(why.contains("someone"), "{name}: {why}"),
                (Vouched::User(user), want) => {
                    assert_eq!(user.name, want, "{name}");
                    assert_eq!(user.groups, ["devs", "ops"], "{name}");
                    assert_eq!(user.extra.get("acme.com/project").map(Vec::as_slice), Some(&["shells".to_owned()][..]));
                }
                (got, want) => panic!("{name}: got {got:?}, want {want}"),
            }
        }
    }

    #[test]
    fn extra_keys_are_unescaped() {
        assert_eq!(percent_decode("acme.com%2Fproject"), "acme.com/project");
        assert_eq!(percent_decode("bad%zz%2"), "bad%zz%2");
    }
}
