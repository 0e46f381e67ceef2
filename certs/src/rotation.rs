//! Self-managed certificates as a pure state machine: given what is stored (the Secret) and
//! what the webhook configurations trust (the injected `caBundle`), decide what to store next.
//!
//! The stored state has a *signing* CA, optionally a *next* CA, the trust bundle that gets
//! injected, and the serving certificate. Rotation keeps every served certificate trusted:
//!
//! 1. The serving certificate is re-issued `renew_before` ahead of its expiry (never outliving
//!    its CA).
//! 2. `2 × renew_before` ahead of the signing CA's expiry a next CA is generated and *only added
//!    to the trust bundle*.
//! 3. Once the injected `caBundle` holds the next CA and `propagation` has passed, the next CA
//!    becomes the signer and a serving certificate is issued by it.
//! 4. Once the serving certificate comes from the new signer and `propagation` has passed again
//!    (replicas swap within that time), CAs other than the signer and a pending next CA leave
//!    the bundle.
//!
//! The I/O around it (the Secret, the configurations, the served certificate) is in
//! [`crate::manager`].

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::pki::{CertificateAuthority, CertifiedKeyPem, LeafSpec, PkiError};
use crate::trust::{Validity, bundle_certs, validity_pem, verify_leaf};
use myownshell_runtime::tls::{certified_key_from_pem, certs_from_pem};

/// The shortest and longest wait between two looks at the state.
const MIN_RECHECK: Duration = Duration::from_millis(100);
const MAX_RECHECK: Duration = Duration::from_secs(3600);
/// How soon to look again while waiting for the injected bundle to show the next CA.
const INJECTION_RECHECK: Duration = Duration::from_millis(500);

/// What certificates to make and when to renew them.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Common name of generated CAs.
    pub ca_name: String,
    /// DNS names of the serving certificate; the first is the name clients verify.
    pub dns_names: Vec<String>,
    /// IP addresses of the serving certificate (for clients that dial an IP, as in local runs).
    pub ip_addresses: Vec<IpAddr>,
    /// Lifetime of each serving certificate (cut short where its CA expires sooner).
    pub cert_validity: Duration,
    /// Lifetime of each generated CA; must exceed twice `renew_before` (see [`Policy::check`]).
    pub ca_validity: Duration,
    /// Renew the serving certificate this long before it expires (the CA twice as long before).
    pub renew_before: Duration,
    /// How long a change takes to reach every client and replica (webhook configuration
    /// informers in kube-apiserver, Secret watches of other replicas).
    pub propagation: Duration,
}

impl Policy {
    /// The default propagation wait for a renew window: a quarter of it, at most 10 s.
    pub fn default_propagation(renew_before: Duration) -> Duration {
        (renew_before / 4).min(Duration::from_secs(10))
    }

    /// Reject settings under which rotation could not keep a trusted certificate.
    pub fn check(&self) -> Result<(), String> {
        if self.dns_names.is_empty() {
            return Err("at least one DNS name is needed".into());
        }
        if self.renew_before.is_zero() || self.renew_before >= self.cert_validity {
            return Err(format!(
                "renew-before ({:?}) must be positive and shorter than the certificate validity ({:?})",
                self.renew_before, self.cert_validity
            ));
        }
        if self.renew_before * 2 >= self.ca_validity {
            return Err(format!(
                "the CA validity ({:?}) must exceed twice renew-before ({:?})",
                self.ca_validity, self.renew_before
            ));
        }
        if self.propagation * 2 >= self.renew_before {
            return Err(format!(
                "renew-before ({:?}) must exceed twice the propagation wait ({:?})",
                self.renew_before, self.propagation
            ));
        }
        Ok(())
    }

    /// Every name the serving certificate must be valid for (DNS names and IPs as text).
    pub fn server_names(&self) -> Vec<String> {
        self.dns_names.iter().cloned().chain(self.ip_addresses.iter().map(IpAddr::to_string)).collect()
    }

    fn leaf_spec(&self, validity: Duration) -> LeafSpec {
        LeafSpec::server(
            self.dns_names.first().cloned().unwrap_or_default(),
            self.dns_names.clone(),
            self.ip_addresses.clone(),
            validity,
        )
    }

    fn ca_renew_before(&self) -> Duration {
        self.renew_before * 2
    }
}

/// Everything stored in the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertState {
    /// The serving certificate (`tls.crt`, `tls.key`).
    pub serving: CertifiedKeyPem,
    /// The CA that issues serving certificates now.
    pub signer: CertifiedKeyPem,
    /// A CA already in the trust bundle that will sign next.
    pub next: Option<CertifiedKeyPem>,
    /// The CAs clients must trust (`ca.crt`, injected as `caBundle`).
    pub trust_bundle: String,
    /// When `next` entered the trust bundle (Unix milliseconds: propagation waits can be
    /// shorter than a second).
    pub next_since: Option<i64>,
    /// When `signer` became the signer (Unix milliseconds).
    pub signer_since: Option<i64>,
}

/// Why the state changes (for logs and events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Nothing was stored: made the first CA and serving certificate.
    Created,
    /// The stored state could not be used (bad PEM, expired CA): started over.
    Regenerated,
    /// The serving certificate entered its renew window: a new one from the same CA (step 1).
    RenewedServing,
    /// The serving certificate did not match the wanted names or its signer.
    ReissuedServing,
    /// The signing CA is within twice `renew_before` of expiry: a next CA was generated and
    /// added to the trust bundle, not yet signing (step 2).
    IntroducedNextCa,
    /// The injected `caBundle` holds the next CA and `propagation` has passed: it became the
    /// signer and issued a serving certificate (step 3).
    PromotedNextCa,
    /// The serving certificate comes from the signer and `propagation` has passed since the
    /// promotion: CAs other than the signer and a pending next CA left the trust bundle (step 4).
    RemovedOldCas,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::Created => "created a CA and a serving certificate",
            Reason::Regenerated => "stored certificates unusable: generated a new CA and serving certificate",
            Reason::RenewedServing => "renewed the serving certificate",
            Reason::ReissuedServing => "re-issued the serving certificate (names or signer changed)",
            Reason::IntroducedNextCa => "added the next CA to the trust bundle",
            Reason::PromotedNextCa => "the next CA now signs; issued a serving certificate with it",
            Reason::RemovedOldCas => "removed old CAs from the trust bundle",
        })
    }
}

/// The decision: store `write` (if any), then look again after `recheck_in`.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The state to store and why, or `None` when the stored state is fine as it is.
    pub write: Option<(CertState, Reason)>,
    /// When to run the planner again if nothing wakes the loop sooner: shortly (100 ms) after a
    /// write, otherwise when the next step falls due (between 100 ms and an hour from now).
    pub recheck_in: Duration,
}

/// Unix milliseconds.
fn unix_ms(now: SystemTime) -> i64 {
    now.duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

fn at(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0).unsigned_abs())
}

fn until(now: SystemTime, then: SystemTime) -> Duration {
    then.duration_since(now).unwrap_or(Duration::ZERO)
}

/// A CA and a serving certificate made from scratch.
pub fn fresh(policy: &Policy, now: SystemTime) -> Result<CertState, PkiError> {
    let ca = CertificateAuthority::generate_at(&policy.ca_name, policy.ca_validity, now)?;
    let serving = ca.issue_at(&policy.leaf_spec(policy.cert_validity), now)?;
    Ok(CertState {
        serving,
        trust_bundle: ca.cert_pem().to_owned(),
        signer: ca.pem().clone(),
        next: None,
        next_since: None,
        signer_since: Some(unix_ms(now)),
    })
}

fn issue_serving(signer: &CertifiedKeyPem, policy: &Policy, now: SystemTime) -> Result<CertifiedKeyPem, PkiError> {
    let ca = CertificateAuthority::from_pem(signer.clone())?;
    // A serving certificate never outlives its CA.
    let ca_left = validity_pem(&signer.cert_pem).map(|v| v.remaining(now)).unwrap_or(policy.cert_validity);
    ca.issue_at(&policy.leaf_spec(policy.cert_validity.min(ca_left)), now)
}

/// Whether `serving` is usable, issued by `signer` and valid for every wanted name at `now`.
fn serving_fits(state: &CertState, policy: &Policy, now: SystemTime) -> bool {
    let Ok(leaf) = certs_from_pem(&state.serving.cert_pem).map(|mut c| c.remove(0)) else { return false };
    certified_key_from_pem(&state.serving.cert_pem, &state.serving.key_pem).is_ok()
        && policy.server_names().iter().all(|name| verify_leaf(&leaf, &state.signer.cert_pem, name, now).is_ok())
}

/// Parse what a state needs to be usable: the signer (cert + key), the serving validity and
/// the bundle.
fn usable(state: &CertState, now: SystemTime) -> Result<(Validity, Validity), String> {
    CertificateAuthority::from_pem(state.signer.clone()).map_err(|e| e.to_string())?;
    if let Some(next) = &state.next {
        CertificateAuthority::from_pem(next.clone()).map_err(|e| format!("next CA: {e}"))?;
    }
    let signer = validity_pem(&state.signer.cert_pem)?;
    if signer.remaining(now).is_zero() {
        return Err("the signing CA has expired".into());
    }
    bundle_certs(&state.trust_bundle)?;
    if !crate::trust::bundle_contains(&state.trust_bundle, &state.signer.cert_pem) {
        return Err("the trust bundle does not hold the signing CA".into());
    }
    let serving = validity_pem(&state.serving.cert_pem).unwrap_or(Validity { not_before: 0, not_after: 0 });
    Ok((signer, serving))
}

/// What one step of [`plan`] decided: write this state now, or nothing before a time (if any).
enum Step {
    Write(CertState, Reason),
    Wait(Option<SystemTime>),
}

/// One step of [`plan`].
type StepFn<'a> = fn(&Planner<'a>) -> Result<Step, PkiError>;

/// What the steps of [`plan`] look at: a usable stored state and the moment.
struct Planner<'a> {
    state: &'a CertState,
    injected: Option<&'a str>,
    now: SystemTime,
    policy: &'a Policy,
    signer_validity: Validity,
    serving_validity: Validity,
}

impl Planner<'_> {
    /// A copy of the stored state, to change into the one a step writes.
    fn new_state(&self) -> CertState {
        self.state.clone()
    }

    /// Step 1: promote the next CA once clients trust it (it is in the injected caBundle and
    /// has been for the propagation delay).
    fn promote_next_ca(&self) -> Result<Step, PkiError> {
        let (state, now, policy) = (self.state, self.now, self.policy);
        let Some(next) = &state.next else { return Ok(Step::Wait(None)) };
        let since = at(state.next_since.unwrap_or(unix_ms(now)));
        let injected_has_next = self.injected.is_some_and(|b| crate::trust::bundle_contains(b, &next.cert_pem));
        if now >= since + policy.propagation && injected_has_next {
            let mut new = self.new_state();
            new.signer = next.clone();
            new.next = None;
            new.next_since = None;
            new.signer_since = Some(unix_ms(now));
            new.serving = issue_serving(&new.signer, policy, now)?;
            return Ok(Step::Write(new, Reason::PromotedNextCa));
        }
        Ok(Step::Wait(Some(if injected_has_next { since + policy.propagation } else { now + INJECTION_RECHECK })))
    }

    /// Step 2: bring in the next CA (into the trust bundle only) ahead of the signer's expiry.
    fn introduce_next_ca(&self) -> Result<Step, PkiError> {
        let (state, now, policy) = (self.state, self.now, self.policy);
        if state.next.is_some() {
            return Ok(Step::Wait(None));
        }
        let rotate_at =
            self.signer_validity.not_after_time().checked_sub(policy.ca_renew_before()).unwrap_or(UNIX_EPOCH);
        if now < rotate_at {
            return Ok(Step::Wait(Some(rotate_at)));
        }
        let ca = CertificateAuthority::generate_at(&policy.ca_name, policy.ca_validity, now)?;
        let mut new = self.new_state();
        new.trust_bundle = format!("{}\n{}", state.trust_bundle.trim_end_matches('\n'), ca.cert_pem());
        new.next = Some(ca.pem().clone());
        new.next_since = Some(unix_ms(now));
        Ok(Step::Write(new, Reason::IntroducedNextCa))
    }

    /// Step 3: the serving certificate has the right names and signer, and is renewed ahead of
    /// expiry. While a next CA is pending, a still-valid certificate waits for it (re-issuing
    /// from the old CA would only be cut short by the old CA's expiry).
    fn renew_serving(&self) -> Result<Step, PkiError> {
        let (state, now, policy) = (self.state, self.now, self.policy);
        let pending = state.next.is_some() && !self.serving_validity.remaining(now).is_zero();
        if pending {
            return Ok(Step::Wait(None));
        }
        let renew_at = self.serving_validity.not_after_time().checked_sub(policy.renew_before).unwrap_or(UNIX_EPOCH);
        let reason = if !serving_fits(state, policy, now) {
            Reason::ReissuedServing
        } else if now >= renew_at {
            Reason::RenewedServing
        } else {
            return Ok(Step::Wait(Some(renew_at)));
        };
        let mut new = self.new_state();
        new.serving = issue_serving(&state.signer, policy, now)?;
        Ok(Step::Write(new, reason))
    }

    /// Step 4: drop the CAs nobody depends on any more (neither the signer nor the next one),
    /// once the signer has been trusted for the propagation delay.
    fn drop_old_cas(&self) -> Result<Step, PkiError> {
        let (state, now, policy) = (self.state, self.now, self.policy);
        let keep: Vec<&str> = std::iter::once(state.signer.cert_pem.as_str())
            .chain(state.next.as_ref().map(|n| n.cert_pem.as_str()))
            .collect();
        let bundle = bundle_certs(&state.trust_bundle).unwrap_or_default();
        let kept_ders: Vec<_> = keep.iter().filter_map(|pem| certs_from_pem(pem).ok()?.into_iter().next()).collect();
        if bundle.iter().all(|c| kept_ders.contains(c)) {
            return Ok(Step::Wait(None));
        }
        let removable_at = at(state.signer_since.unwrap_or(unix_ms(now))) + policy.propagation;
        if now >= removable_at && serving_fits(state, policy, now) {
            let mut new = self.new_state();
            new.trust_bundle = keep.iter().map(|p| p.trim_end_matches('\n')).collect::<Vec<_>>().join("\n") + "\n";
            return Ok(Step::Write(new, Reason::RemovedOldCas));
        }
        Ok(Step::Wait(Some(removable_at.max(now + MIN_RECHECK))))
    }
}

/// A fresh CA and serving certificate for a stored state that is unusable. The old CAs that
/// still parse stay trusted, so replicas still serving an old certificate are not cut off;
/// they are dropped by the usual removal step.
fn regenerate(state: &CertState, why: &str, policy: &Policy, now: SystemTime) -> Result<Plan, PkiError> {
    tracing::warn!(reason = %why, "stored certificates are unusable; starting over");
    let mut next = fresh(policy, now)?;
    if let Ok(old) = bundle_certs(&state.trust_bundle)
        && !old.is_empty()
    {
        next.trust_bundle = format!("{}{}", state.trust_bundle.trim_end_matches('\n'), "\n") + &next.trust_bundle;
    }
    Ok(Plan { write: Some((next, Reason::Regenerated)), recheck_in: MIN_RECHECK })
}

/// The one function that decides. `injected` is the `caBundle` currently in the webhook
/// configurations (`None` if they do not all agree or could not be read). The steps run in
/// order; the first that writes wins, else the plan looks again at the earliest time any
/// step named.
pub fn plan<'a>(
    current: Option<&'a CertState>,
    injected: Option<&'a str>,
    now: SystemTime,
    policy: &'a Policy,
) -> Result<Plan, PkiError> {
    let Some(state) = current else {
        return Ok(Plan { write: Some((fresh(policy, now)?, Reason::Created)), recheck_in: MIN_RECHECK });
    };
    let (signer_validity, serving_validity) = match usable(state, now) {
        Ok(v) => v,
        Err(why) => return regenerate(state, &why, policy, now),
    };
    let planner = Planner { state, injected, now, policy, signer_validity, serving_validity };
    let steps: [StepFn<'a>; 4] =
        [Planner::promote_next_ca, Planner::introduce_next_ca, Planner::renew_serving, Planner::drop_old_cas];
    let mut wake: Vec<SystemTime> = Vec::new();
    for step in steps {
        match step(&planner)? {
            Step::Write(new, reason) => return Ok(Plan { write: Some((new, reason)), recheck_in: MIN_RECHECK }),
            Step::Wait(at) => wake.extend(at),
        }
    }
    let next_wake = wake.into_iter().min().map(|t| until(now, t)).unwrap_or(MAX_RECHECK);
    Ok(Plan { write: None, recheck_in: next_wake.clamp(MIN_RECHECK, MAX_RECHECK) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            ca_name: "test-ca".into(),
            dns_names: vec!["svc.ns.svc".into(), "svc.ns.svc.cluster.local".into()],
            ip_addresses: vec!["127.0.0.1".parse().unwrap()],
            cert_validity: Duration::from_secs(100),
            ca_validity: Duration::from_secs(1000),
            renew_before: Duration::from_secs(20),
            propagation: Duration::from_secs(2),
        }
    }

    fn leaf(state: &CertState) -> rustls_pki_types::CertificateDer<'static> {
        certs_from_pem(&state.serving.cert_pem).unwrap().remove(0)
    }

    /// Run the planner until it settles, pretending injection is instant; return each write.
    fn settle(state: &mut Option<CertState>, now: SystemTime, p: &Policy) -> Vec<Reason> {
        let mut reasons = Vec::new();
        for _ in 0..10 {
            let injected = state.as_ref().map(|s| s.trust_bundle.clone());
            let plan = plan(state.as_ref(), injected.as_deref(), now, p).unwrap();
            match plan.write {
                Some((next, reason)) => {
                    *state = Some(next);
                    reasons.push(reason);
                }
                None => return reasons,
            }
        }
        panic!("the planner does not settle: {reasons:?}");
    }

    #[test]
    fn policy_checks_catch_settings_that_cannot_rotate() {
        assert!(policy().check().is_ok());
        type Change = fn(&mut Policy);
        let cases: [(&str, Change); 4] = [
            ("renew >= validity", |p| p.renew_before = p.cert_validity),
            ("ca too short", |p| p.ca_validity = p.renew_before * 2),
            ("propagation too long", |p| p.propagation = p.renew_before),
            ("no names", |p| p.dns_names.clear()),
        ];
        for (what, change) in cases {
            let mut p = policy();
            change(&mut p);
            assert!(p.check().is_err(), "{what}");
        }
        assert_eq!(Policy::default_propagation(Duration::from_secs(4)), Duration::from_secs(1));
        assert_eq!(Policy::default_propagation(Duration::from_secs(86_400)), Duration::from_secs(10));
    }

    #[test]
    fn nothing_stored_creates_a_trusted_serving_certificate() {
        let p = policy();
        let now = SystemTime::now();
        let mut state = None;
        assert_eq!(settle(&mut state, now, &p), vec![Reason::Created]);
        let s = state.unwrap();
        for name in p.server_names() {
            verify_leaf(&leaf(&s), &s.trust_bundle, &name, now).unwrap();
        }
        let plan = plan(Some(&s), Some(&s.trust_bundle), now, &p).unwrap();
        assert!(plan.write.is_none());
        // Next look: when the serving certificate enters its renew window (~80 s).
        assert!(plan.recheck_in > Duration::from_secs(70) && plan.recheck_in <= Duration::from_secs(80));
    }

    #[test]
    fn the_serving_certificate_is_renewed_before_expiry_by_the_same_ca() {
        let p = policy();
        let t0 = SystemTime::now();
        let mut state = None;
        settle(&mut state, t0, &p);
        let before = state.clone().unwrap();
        let t1 = t0 + Duration::from_secs(85);
        assert_eq!(settle(&mut state, t1, &p), vec![Reason::RenewedServing]);
        let after = state.unwrap();
        assert_ne!(before.serving, after.serving);
        assert_eq!(before.signer, after.signer);
        assert_eq!(before.trust_bundle, after.trust_bundle);
        verify_leaf(&leaf(&after), &before.trust_bundle, "svc.ns.svc", t1).unwrap();
    }

    #[test]
    fn ca_rotation_adds_first_signs_after_injection_and_removes_last() {
        let p = policy();
        let t0 = SystemTime::now();
        let mut state = None;
        settle(&mut state, t0, &p);
        // Keep the serving certificate current up to shortly before the CA rotation.
        settle(&mut state, t0 + Duration::from_secs(950), &p);
        let old = state.clone().unwrap();

        // 2 × renew_before (40 s) before the CA's expiry (1000 s): the next CA enters the bundle
        // but does not sign yet. The serving cert is also near the CA's end, but waits.
        let t1 = t0 + Duration::from_secs(965);
        let introduced = plan(state.as_ref(), Some(&old.trust_bundle), t1, &p).unwrap();
        let (s1, reason) = introduced.write.unwrap();
        assert_eq!(reason, Reason::IntroducedNextCa);
        assert_eq!(s1.signer, old.signer);
        assert_eq!(s1.serving, old.serving);
        let next = s1.next.clone().unwrap();
        assert!(crate::trust::bundle_contains(&s1.trust_bundle, &next.cert_pem));
        assert!(crate::trust::bundle_contains(&s1.trust_bundle, &old.signer.cert_pem));

        // Not promoted while the injected bundle lacks the next CA, however long it takes.
        let waiting = plan(Some(&s1), Some(&old.trust_bundle), t1 + Duration::from_secs(10), &p).unwrap();
        assert!(waiting.write.is_none(), "{:?}", waiting.write.map(|w| w.1));
        assert!(waiting.recheck_in <= Duration::from_secs(1));
        // Nor before the propagation wait after it was added.
        let early = plan(Some(&s1), Some(&s1.trust_bundle), t1 + Duration::from_secs(1), &p).unwrap();
        assert!(early.write.is_none());

        // Injected and propagated: the next CA signs the new serving cert; both CAs trusted.
        let t2 = t1 + Duration::from_secs(3);
        let (s2, reason) = plan(Some(&s1), Some(&s1.trust_bundle), t2, &p).unwrap().write.unwrap();
        assert_eq!(reason, Reason::PromotedNextCa);
        assert_eq!(s2.signer, next);
        assert!(s2.next.is_none());
        verify_leaf(&leaf(&s2), &next.cert_pem, "svc.ns.svc", t2).unwrap();
        verify_leaf(&leaf(&old), &s2.trust_bundle, "svc.ns.svc", t2).unwrap();

        // The old CA stays until the propagation wait after the promotion, then goes.
        assert!(plan(Some(&s2), Some(&s2.trust_bundle), t2 + Duration::from_secs(1), &p).unwrap().write.is_none());
        let t3 = t2 + Duration::from_secs(3);
        let (s3, reason) = plan(Some(&s2), Some(&s2.trust_bundle), t3, &p).unwrap().write.unwrap();
        assert_eq!(reason, Reason::RemovedOldCas);
        assert!(!crate::trust::bundle_contains(&s3.trust_bundle, &old.signer.cert_pem));
        verify_leaf(&leaf(&s3), &s3.trust_bundle, "svc.ns.svc", t3).unwrap();
        assert!(verify_leaf(&leaf(&old), &s3.trust_bundle, "svc.ns.svc", t3).is_err());
        let mut settled = Some(s3);
        assert_eq!(settle(&mut settled, t3, &p), Vec::<Reason>::new());
    }

    #[test]
    fn sub_second_propagation_waits_are_kept() {
        // Timestamps are stored in milliseconds: with a 750 ms wait, the old CA must not leave
        // the bundle 50 ms after the promotion just because the second turned over.
        let mut p = policy();
        p.propagation = Duration::from_millis(750);
        let t0 = UNIX_EPOCH + Duration::from_millis(1_000_000_900);
        let mut state = None;
        settle(&mut state, t0, &p);
        settle(&mut state, t0 + Duration::from_secs(950), &p);
        let t1 = t0 + Duration::from_secs(965);
        let (s1, _) = plan(state.as_ref(), None, t1, &p).unwrap().write.unwrap();
        let t2 = t1 + Duration::from_millis(800);
        let (s2, reason) = plan(Some(&s1), Some(&s1.trust_bundle), t2, &p).unwrap().write.unwrap();
        assert_eq!(reason, Reason::PromotedNextCa);
        let soon = plan(Some(&s2), Some(&s2.trust_bundle), t2 + Duration::from_millis(150), &p).unwrap();
        assert!(soon.write.is_none(), "{:?}", soon.write.map(|w| w.1));
        assert!(soon.recheck_in <= Duration::from_millis(600), "{:?}", soon.recheck_in);
        let later = plan(Some(&s2), Some(&s2.trust_bundle), t2 + Duration::from_millis(760), &p).unwrap();
        assert_eq!(later.write.map(|w| w.1), Some(Reason::RemovedOldCas));
    }

    #[test]
    fn every_certificate_served_during_a_long_run_is_trusted_by_the_bundle_of_its_time() {
        // Simulate 3 CA lifetimes in 1 s steps. The injected bundle lags one step behind the
        // Secret (the planner sees the lagging one), and so do replicas' served certificates:
        // a new serving cert must be trusted by the old bundle, and the old cert by the new one.
        let p = policy();
        let t0 = SystemTime::now();
        let mut state: Option<CertState> = None;
        let mut injected: Option<String> = None;
        let mut reasons = Vec::new();
        for step in 0..3000u64 {
            let now = t0 + Duration::from_secs(step);
            let before = state.clone();
            if let Some((next, reason)) = plan(state.as_ref(), injected.as_deref(), now, &p).unwrap().write {
                reasons.push(reason);
                state = Some(next);
            }
            if let (Some(old), Some(new), Some(bundle)) = (&before, &state, &injected)
                && old != new
            {
                verify_leaf(&leaf(new), bundle, "svc.ns.svc", now)
                    .unwrap_or_else(|e| panic!("step {step}: new cert, old bundle: {e}; {reasons:?}"));
                verify_leaf(&leaf(old), &new.trust_bundle, "svc.ns.svc", now)
                    .unwrap_or_else(|e| panic!("step {step}: old cert, new bundle: {e}; {reasons:?}"));
            }
            injected = state.as_ref().map(|s| s.trust_bundle.clone());
        }
        let count = |r: Reason| reasons.iter().filter(|x| **x == r).count();
        assert_eq!(count(Reason::Created), 1);
        assert!(count(Reason::PromotedNextCa) >= 2, "{reasons:?}");
        assert!(count(Reason::RenewedServing) >= 20, "{reasons:?}");
        assert_eq!(count(Reason::Regenerated), 0, "{reasons:?}");
    }

    #[test]
    fn unusable_or_mismatched_state_is_repaired() {
        let p = policy();
        let now = SystemTime::now();
        let mut state = None;
        settle(&mut state, now, &p);
        let good = state.unwrap();

        let mut broken = good.clone();
        broken.signer.key_pem = "garbage".into();
        let (fixed, reason) = plan(Some(&broken), None, now, &p).unwrap().write.unwrap();
        assert_eq!(reason, Reason::Regenerated);
        assert!(crate::trust::bundle_contains(&fixed.trust_bundle, &good.signer.cert_pem), "old CA kept for now");

        let mut wider = p.clone();
        wider.dns_names.push("extra.example.com".into());
        let (reissued, reason) = plan(Some(&good), Some(&good.trust_bundle), now, &wider).unwrap().write.unwrap();
        assert_eq!(reason, Reason::ReissuedServing);
        verify_leaf(&leaf(&reissued), &good.trust_bundle, "extra.example.com", now).unwrap();

        let expired_ca = plan(Some(&good), None, now + Duration::from_secs(2000), &p).unwrap();
        assert_eq!(expired_ca.write.map(|w| w.1), Some(Reason::Regenerated));
    }
}
