//! [`resource_as!`]: a cache's slim type as the Kubernetes resource it holds, for the watcher
//! and the reflector, which need `kube::Resource` (kind, group, version, plural, metadata).

/// Implement `kube::Resource` for `$cached` (a struct with a `metadata: ObjectMeta` field) as the
/// resource `$k8s` it is read from: the same kind, group, version and plural, so the watcher
/// lists and watches `$k8s` and hands out `$cached`.
macro_rules! resource_as {
    ($cached:ty, $k8s:ty) => {
        impl kube::Resource for $cached {
            type DynamicType = ();
            type Scope = <$k8s as kube::Resource>::Scope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$k8s as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$k8s as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$k8s as kube::Resource>::version(dt)
            }
            fn api_version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$k8s as kube::Resource>::api_version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$k8s as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub(crate) use resource_as;

/// The identity a cache's slim type keeps of its object: what the reflector store keys it by
/// (name, namespace) and what tells one version of it from another (uid, resourceVersion).
pub(crate) fn identity(
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name,
        namespace,
        uid,
        resource_version,
        ..Default::default()
    }
}
