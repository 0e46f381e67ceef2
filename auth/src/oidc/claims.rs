//! Who a verified ID token names (pure): the user and groups, read from claims with
//! kube-apiserver's `--oidc-*` meanings, so that the gateway and the apiserver name the same
//! person; and the checks the signature library does not make (the nonce, the authorized party).

use std::collections::BTreeMap;

use serde_json::Value;

use super::OidcError;
use crate::user::{AuthMethod, AuthenticatedUser};

/// How claims become a user, as kube-apiserver's flags of the same names say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRules {
    /// `--oidc-username-claim`: the claim holding the user name (default `sub`).
    pub username_claim: String,
    /// `--oidc-username-prefix`: put before every user name. Unset: the issuer URL and `#` for
    /// every claim but `email` (so that another issuer's `sub` cannot be someone here); `-`:
    /// nothing.
    pub username_prefix: Option<String>,
    /// `--oidc-groups-claim`: the claim holding the groups (a string or a list); unset: none.
    pub groups_claim: Option<String>,
    /// `--oidc-groups-prefix`: put before every group.
    pub groups_prefix: String,
}

impl Default for ClaimRules {
    fn default() -> Self {
        Self { username_claim: "sub".into(), username_prefix: None, groups_claim: None, groups_prefix: String::new() }
    }
}

impl ClaimRules {
    /// The user `claims` name, for a token of `issuer`.
    pub fn user(&self, issuer: &str, claims: &Value) -> Result<AuthenticatedUser, OidcError> {
        let name =
            claims.get(&self.username_claim).and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(|| {
                OidcError::Token(format!("the token has no {:?} claim to name its user", self.username_claim))
            })?;
        if self.username_claim == "email" && claims.get("email_verified").is_some_and(|v| v != &Value::Bool(true)) {
            return Err(OidcError::Token("the token's email is not verified (email_verified is not true)".into()));
        }
        let prefix = match self.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(prefix) => prefix.to_owned(),
            None if self.username_claim == "email" => String::new(),
            None => format!("{issuer}#"),
        };
        let groups = match &self.groups_claim {
            None => Vec::new(),
            Some(claim) => match claims.get(claim) {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::String(group)) => vec![format!("{}{group}", self.groups_prefix)],
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(|g| format!("{}{g}", self.groups_prefix)).ok_or_else(|| {
                            OidcError::Token(format!(
                                "the token's {claim:?} claim holds something that is not a group name"
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => {
                    return Err(OidcError::Token(format!(
                        "the token's {claim:?} claim is neither a group name nor a list of them"
                    )));
                }
            },
        };
        Ok(AuthenticatedUser {
            name: format!("{prefix}{name}"),
            uid: None,
            groups,
            extra: BTreeMap::new(),
            method: AuthMethod::OidcIdToken,
        })
    }
}

/// The checks of an ID token the signature library leaves to its caller (OpenID Connect Core
/// 3.1.3.7): the nonce this sign-in sent, and, for a token with several audiences, that this
/// client is the party it was issued to.
pub fn check_binding(claims: &Value, client_id: &str, nonce: Option<&str>) -> Result<(), OidcError> {
    if let Some(nonce) = nonce
        && claims.get("nonce").and_then(Value::as_str) != Some(nonce)
    {
        return Err(OidcError::Token("the token's nonce is not the one this sign-in sent".into()));
    }
    let audiences = match claims.get("aud") {
        Some(Value::Array(items)) => items.len(),
        _ => 1,
    };
    match claims.get("azp").and_then(Value::as_str) {
        Some(azp) if azp != client_id => {
            Err(OidcError::Token(format!("the token was issued to {azp:?}, not to this client")))
        }
        None if audiences > 1 => {
            Err(OidcError::Token("the token has several audiences and no authorized party (azp)".into()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ISSUER: &str = "https://idp.example";

    /// The user name and groups a case wants, or words of its error.
    type Want = Result<(&'static str, Vec<&'static str>), &'static str>;
    /// A case of the binding checks: its name, the claims, the nonce sent, words of its error.
    type Binding = (&'static str, Value, Option<&'static str>, Result<(), &'static str>);

    #[test]
    fn claims_name_the_user_as_the_apiserver_does() {
        let rules = |claim: &str, prefix: Option<&str>, groups: Option<&str>| ClaimRules {
            username_claim: claim.into(),
            username_prefix: prefix.map(Into::into),
            groups_claim: groups.map(Into::into),
            groups_prefix: "oidc:".into(),
        };
        let alice = json!({"sub": "1234", "email": "alice@example.org", "email_verified": true,
            "preferred_username": "alice", "groups": ["users", "admins"]});
        let cases: [(&str, ClaimRules, Value, Want); 10] = [
            ("sub, issuer prefix", rules("sub", None, None), alice.clone(), Ok(("https://idp.example#1234", vec![]))),
            (
                "email, no prefix",
                rules("email", None, Some("groups")),
                alice.clone(),
                Ok(("alice@example.org", vec!["oidc:users", "oidc:admins"])),
            ),
            (
                "a set prefix",
                rules("preferred_username", Some("oidc:"), None),
                alice.clone(),
                Ok(("oidc:alice", vec![])),
            ),
            ("dash: none", rules("sub", Some("-"), None), alice.clone(), Ok(("1234", vec![]))),
            (
                "one group as a string",
                rules("sub", Some("-"), Some("groups")),
                json!({"sub": "b", "groups": "users"}),
                Ok(("b", vec!["oidc:users"])),
            ),
            ("no groups claim", rules("sub", Some("-"), Some("groups")), json!({"sub": "b"}), Ok(("b", vec![]))),
            (
                "unverified email",
                rules("email", None, None),
                json!({"email": "m@x", "email_verified": false}),
                Err("not verified"),
            ),
            (
                "no user claim",
                rules("preferred_username", None, None),
                json!({"sub": "1"}),
                Err("\"preferred_username\" claim"),
            ),
            ("empty user", rules("sub", None, None), json!({"sub": ""}), Err("\"sub\" claim")),
            (
                "groups of numbers",
                rules("sub", Some("-"), Some("groups")),
                json!({"sub": "b", "groups": [1]}),
                Err("not a group name"),
            ),
        ];
        for (name, rules, claims, want) in cases {
            match (rules.user(ISSUER, &claims), want) {
                (Ok(user), Ok((user_name, groups))) => {
                    assert_eq!(user.name, user_name, "{name}");
                    assert_eq!(user.groups, groups, "{name}");
                    assert_eq!(user.method, AuthMethod::OidcIdToken, "{name}");
                }
                (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_nonce_and_the_authorized_party_bind_a_token_to_this_sign_in() {
        let cases: [Binding; 7] = [
            ("nonce matches", json!({"aud": "gw", "nonce": "n1"}), Some("n1"), Ok(())),
            ("nonce differs", json!({"aud": "gw", "nonce": "n2"}), Some("n1"), Err("nonce")),
            ("nonce missing", json!({"aud": "gw"}), Some("n1"), Err("nonce")),
            ("no nonce asked (a refreshed token)", json!({"aud": "gw"}), None, Ok(())),
            ("several audiences, azp is us", json!({"aud": ["gw", "other"], "azp": "gw"}), None, Ok(())),
            ("several audiences, no azp", json!({"aud": ["gw", "other"]}), None, Err("authorized party")),
            ("azp is another client", json!({"aud": "gw", "azp": "other"}), None, Err("issued to")),
        ];
        for (name, claims, nonce, want) in cases {
            match (check_binding(&claims, "gw", nonce), want) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
