//! `caBundle` injection into the webhook configurations, by name, and reading back what they
//! trust (readiness and CA rotation both depend on what the apiserver actually has).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, PostParams};

/// Conflicting writers (replicas, `kubectl apply`) are retried this often before giving up
/// until the next round.
const CONFLICT_RETRIES: usize = 5;

/// The two configurations the webhook serves.
#[derive(Clone)]
pub struct WebhookConfigs {
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    /// Name of the MutatingWebhookConfiguration whose webhooks get the `caBundle`.
    pub mutating_name: String,
    /// Name of the ValidatingWebhookConfiguration whose webhooks get the `caBundle`.
    pub validating_name: String,
}

/// The `caBundle` of every webhook in both configurations (empty if unset), as PEM text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Injected {
    /// One entry per webhook: the mutating configuration's webhooks first, then the validating
    /// one's, each in the order the configuration lists them.
    pub bundles: Vec<String>,
}

impl Injected {
    /// The bundle, if every webhook has the same non-empty one.
    pub fn common(&self) -> Option<&str> {
        let first = self.bundles.first()?;
        (!first.trim().is_empty() && self.bundles.iter().all(|b| b == first)).then_some(first.as_str())
    }
}

fn bundle_text(ca: Option<&ByteString>) -> String {
    ca.map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default()
}

impl WebhookConfigs {
    /// The two cluster-scoped configurations, by name. Nothing is read until asked.
    pub fn new(client: kube::Client, mutating_name: &str, validating_name: &str) -> Self {
        Self {
            mutating: Api::all(client.clone()),
            validating: Api::all(client),
            mutating_name: mutating_name.to_owned(),
            validating_name: validating_name.to_owned(),
        }
    }

    /// The MutatingWebhookConfigurations API (to watch [`Self::mutating_name`]).
    pub fn mutating_api(&self) -> Api<MutatingWebhookConfiguration> {
        self.mutating.clone()
    }

    /// The ValidatingWebhookConfigurations API (to watch [`Self::validating_name`]).
    pub fn validating_api(&self) -> Api<ValidatingWebhookConfiguration> {
        self.validating.clone()
    }

    /// What both configurations trust now. A missing configuration is an error (nothing is
    /// trusted, and it says which one).
    pub async fn observed(&self) -> Result<Injected, kube::Error> {
        let mutating = self.mutating.get(&self.mutating_name).await?;
        let validating = self.validating.get(&self.validating_name).await?;
        let mut bundles: Vec<String> =
            mutating.webhooks.iter().flatten().map(|w| bundle_text(w.client_config.ca_bundle.as_ref())).collect();
        bundles.extend(validating.webhooks.iter().flatten().map(|w| bundle_text(w.client_config.ca_bundle.as_ref())));
        Ok(Injected { bundles })
    }

    /// Set `caBundle` of every webhook in both configurations to `bundle_pem`. Returns whether
    /// anything changed. Replaces at the read resourceVersion, retrying on conflicts.
    pub async fn inject(&self, bundle_pem: &str) -> Result<bool, kube::Error> {
        let want = ByteString(bundle_pem.as_bytes().to_vec());
        let mut changed = false;
        for attempt in 0.. {
            let mut config = self.mutating.get(&self.mutating_name).await?;
            if config.webhooks.iter().flatten().all(|w| w.client_config.ca_bundle.as_ref() == Some(&want)) {
                break;
            }
            for w in config.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = Some(want.clone());
            }
            match self.mutating.replace(&self.mutating_name, &PostParams::default(), &config).await {
                Ok(_) => {
                    changed = true;
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < CONFLICT_RETRIES => continue,
                Err(e) => return Err(e),
            }
        }
        for attempt in 0.. {
            let mut config = self.validating.get(&self.validating_name).await?;
            if config.webhooks.iter().flatten().all(|w| w.client_config.ca_bundle.as_ref() == Some(&want)) {
                break;
            }
            for w in config.webhooks.iter_mut().flatten() {
                w.client_config.ca_bundle = Some(want.clone());
            }
            match self.validating.replace(&self.validating_name, &PostParams::default(), &config).await {
                Ok(_) => {
                    changed = true;
                    break;
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < CONFLICT_RETRIES => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_common_bundle_needs_every_webhook_to_agree() {
        let cases = [
            (vec![], None),
            (vec!["a", "a"], Some("a")),
            (vec!["a", "b"], None),
            (vec!["", ""], None),
            (vec!["a", ""], None),
        ];
        for (bundles, want) in cases {
            let injected = Injected { bundles: bundles.iter().map(|s| (*s).to_owned()).collect() };
            assert_eq!(injected.common(), want, "{bundles:?}");
        }
    }
}
