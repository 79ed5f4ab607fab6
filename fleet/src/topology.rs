//! The fleet's topology: which services exist and where each instance runs (datacenter and
//! host). Instances are laid out from the scenario's shape ([`crate::scenario::FleetShape::layout`]).

/// A service kind of the simulated fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    /// Public API tier.
    Api,
    /// JVM backend.
    Backend,
    /// Redis node.
    Redis,
    /// Database (one per datacenter), behind the backend's HikariCP pool.
    Db,
    /// Session gateway (BEAM): holds client sessions.
    Gateway,
    /// Voice-state service (BEAM): one supervisor per datacenter takes every session start.
    Voice,
    /// Media server: the voice-state service's RPC peer.
    Media,
    /// A host's node_exporter (with the fleet's `node_exporter`): one per host.
    Node,
    /// A host's kubelet serving cAdvisor's container families (with the fleet's `cadvisor`):
    /// one per host.
    Kubelet,
}

impl Service {
    /// The `service` label value.
    pub fn name(self) -> &'static str {
        match self {
            Service::Api => "api",
            Service::Backend => "backend",
            Service::Redis => "redis",
            Service::Db => "db",
            Service::Gateway => "gateway",
            Service::Voice => "voice",
            Service::Media => "media",
            Service::Node => "node",
            Service::Kubelet => "kubelet",
        }
    }
}

/// One instance: where it runs and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Instance name, `<service>-<dc number>-<n>` (`redis-2-1`).
    pub name: String,
    /// Its service.
    pub service: Service,
    /// Datacenter (`dc-2`).
    pub dc: String,
    /// Host (`dc-2-host-3`).
    pub host: String,
}

/// FNV-1a, 64 bits, of `bytes` (the `fnv` crate): the stable hash the simulated clients use
/// for their hash ring and the exporters for stable per-instance numbers.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = fnv::FnvHasher::default();
    std::hash::Hasher::write(&mut hash, bytes);
    std::hash::Hasher::finish(&hash)
}
