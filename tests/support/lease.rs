//! Who holds a Lease, as the tests and benchmarks of replicas taking turns read it.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

/// A Lease's holder and its last renewal (or acquisition).
pub struct Holding {
    pub holder: String,
    pub renewed: SystemTime,
    pub duration: Duration,
}

impl Holding {
    /// When the Lease expires without another renewal.
    pub fn expiry(&self) -> SystemTime {
        self.renewed + self.duration
    }
}

/// Who holds Lease `name` of `namespace`, if anyone.
pub async fn holding(client: &kube::Client, namespace: &str, name: &str) -> Option<Holding> {
    let lease = Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .ok()??;
    let spec = lease.spec?;
    Some(Holding {
        holder: spec.holder_identity.filter(|holder| !holder.is_empty())?,
        renewed: SystemTime::from(spec.renew_time.or(spec.acquire_time)?.0),
        duration: Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).ok()?),
    })
}
