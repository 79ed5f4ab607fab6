//! The call graph: service edges from the configured dependencies, from client series naming
//! their peer and from server series naming their caller, and what reaches what along them.

use super::*;

/// Caller service → callee service edges, with whether every call seen stays within a
/// datacenter.
pub(super) type ServiceEdges = BTreeMap<(String, String), bool>;

impl Detector {
    /// Instance-level edges observed in client series: (caller instance, peer instance) for
    /// every series whose rule names a peer that resolves to a known instance.
    pub fn peer_edges(&self) -> BTreeSet<(String, String)> {
        self.peer_links
            .iter()
            .filter_map(|(instance, peer)| Some((instance.clone(), self.resolve(peer)?)))
            .collect()
    }

    /// A number that changes whenever what [`Detector::observed_edges`] and the instances
    /// would show changes (an instance seen or re-placed, a link observed): a graph built at
    /// one value stands until it moves.
    pub fn graph_generation(&self) -> u64 {
        self.graph_generation
    }

    /// Every instance-level call edge the series show: [`Detector::peer_edges`], and for each
    /// server series that names its calling service (`caller` in its rule: a mesh's
    /// destination-side series), an edge from each instance of that service in the callee's
    /// datacenter (from every instance of it when none runs there; a caller no scraped
    /// instance belongs to, such as an ingress gateway, gives none). What `/api/v1/graph`
    /// shows as `observed`.
    pub fn observed_edges(&self) -> BTreeSet<(String, String)> {
        let mut edges = self.peer_edges();
        if self.caller_links.is_empty() {
            return edges;
        }
        let mut by_service: HashMap<&str, Vec<&InstanceInfo>> = HashMap::new();
        for info in self.instances.values() {
            by_service.entry(info.service.as_str()).or_default().push(info);
        }
        for (caller, callee) in &self.caller_links {
            let (Some(callers), Some(callee_info)) = (by_service.get(caller.as_str()), self.instances.get(callee))
            else {
                continue;
            };
            let local = callers.iter().any(|info| info.dc == callee_info.dc);
            for info in callers {
                if info.name != *callee && (!local || info.dc == callee_info.dc) {
                    edges.insert((info.name.clone(), callee.clone()));
                }
            }
        }
        edges
    }

    /// Caller → callee service edges: the configured dependencies, the calls client series
    /// show (a series whose peer label resolves to a known instance), and the callers server
    /// series name (a mesh's destination side; calls taken to stay in a datacenter when the
    /// caller service runs in the callee's, as [`Detector::observed_edges`] draws them).
    pub(super) fn service_edges(&self) -> ServiceEdges {
        let mut edges = ServiceEdges::new();
        for dependency in &self.dependencies {
            let same = edges
                .entry((dependency.caller.clone(), dependency.callee.clone()))
                .or_insert(dependency.same_dc);
            *same &= dependency.same_dc;
        }
        for (caller, callee) in self.peer_edges() {
            let (Some(caller), Some(callee)) = (self.instances.get(&caller), self.instances.get(&callee)) else {
                continue;
            };
            if caller.service == callee.service {
                continue;
            }
            let same = edges
                .entry((caller.service.clone(), callee.service.clone()))
                .or_insert(true);
            *same &= caller.dc == callee.dc;
        }
        if !self.caller_links.is_empty() {
            let placed: BTreeSet<(&str, &str)> = self
                .instances
                .values()
                .map(|info| (info.service.as_str(), info.dc.as_str()))
                .collect();
            let services: BTreeSet<&str> = placed.iter().map(|(service, _)| *service).collect();
            for (caller, callee) in &self.caller_links {
                let Some(callee) = self.instances.get(callee) else {
                    continue;
                };
                if *caller == callee.service || !services.contains(caller.as_str()) {
                    continue;
                }
                let same = edges.entry((caller.clone(), callee.service.clone())).or_insert(true);
                *same &= placed.contains(&(caller.as_str(), callee.dc.as_str()));
            }
        }
        edges
    }

    /// The instances that reach `start` through `edges` in at most `hops` calls (callers,
    /// directly or through others, when `upward`; callees otherwise), keeping to a datacenter
    /// along edges whose calls stay within one. `usize::MAX` hops: everything reachable.
    pub(super) fn reach(
        &self,
        start: &[&InstanceInfo],
        edges: &ServiceEdges,
        upward: bool,
        hops: usize,
    ) -> BTreeSet<String> {
        let mut seen: BTreeSet<(String, Option<String>)> = BTreeSet::new();
        let mut frontier: Vec<(String, Option<String>)> = start
            .iter()
            .map(|info| (info.service.clone(), Some(info.dc.clone())))
            .collect();
        for _ in 0..hops {
            let mut next_frontier = Vec::new();
            for (service, dc) in frontier {
                for ((caller, callee), same_dc) in edges {
                    let (from, to) = if upward { (callee, caller) } else { (caller, callee) };
                    if *from != service {
                        continue;
                    }
                    let next = (to.clone(), if *same_dc { dc.clone() } else { None });
                    if seen.insert(next.clone()) {
                        next_frontier.push(next);
                    }
                }
            }
            if next_frontier.is_empty() {
                break;
            }
            frontier = next_frontier;
        }
        self.instances
            .values()
            .filter(|info| {
                seen.contains(&(info.service.clone(), None))
                    || seen.contains(&(info.service.clone(), Some(info.dc.clone())))
            })
            .map(|info| info.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;

    /// A mesh's destination-side series name the calling service: with no dependencies
    /// configured, they give service edges (same-datacenter where the caller runs in the
    /// callee's datacenter) and instance edges from the caller's instances there; a caller
    /// no scraped instance belongs to (an ingress gateway) gives none.
    #[test]
    fn server_series_naming_their_caller_give_the_call_graph() {
        let rules = crate::rules::parse(
            "signals:\n  - {metric: lat, kind: gauge, class: latency, bad: up, floor: 1, caller: {label: source_workload}}\n",
        )
        .unwrap();
        let mut detector = Detector::new(rules, Vec::new(), 10_000, Settings::default());
        let series = |caller: &str| -> Vec<(&'static str, BTreeMap<String, String>, f64)> {
            vec![("lat", [("source_workload".to_string(), caller.to_string())].into(), 1.0)]
        };
        for (name, dc, service) in [
            ("api-1", "dc-1", "api"),
            ("api-2", "dc-1", "api"),
            ("api-3", "dc-2", "api"),
            ("web-1", "dc-3", "web"),
        ] {
            detector.observe(0, &info(name, dc, name, service), series("istio-ingressgateway"));
        }
        // backend-1 in dc-1 is called by api (which runs there) and by web (which does not).
        detector.observe(0, &info("backend-1", "dc-1", "h9", "backend"), series("api"));
        detector.observe(0, &info("backend-1", "dc-1", "h9", "backend"), series("web"));
        // backend-2 in dc-3: api does not run there, so every api instance may call it.
        detector.observe(0, &info("backend-2", "dc-3", "h8", "backend"), series("api"));
        let edges = detector.service_edges();
        assert_eq!(
            edges
                .iter()
                .map(|(edge, same)| (edge.0.as_str(), edge.1.as_str(), *same))
                .collect::<Vec<_>>(),
            vec![("api", "backend", false), ("web", "backend", false)]
        );
        let observed = detector.observed_edges();
        let expected: BTreeSet<(String, String)> = [
            ("api-1", "backend-1"),
            ("api-2", "backend-1"),
            ("web-1", "backend-1"),
            ("api-1", "backend-2"),
            ("api-2", "backend-2"),
            ("api-3", "backend-2"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(observed, expected);
        assert!(detector.peer_edges().is_empty());
        // Only backend-1's callers: api stays in dc-1.
        let mut local = Detector::new(
            crate::rules::parse(
                "signals:\n  - {metric: lat, kind: gauge, class: latency, bad: up, floor: 1, caller: {label: source_workload}}\n",
            )
            .unwrap(),
            Vec::new(),
            10_000,
            Settings::default(),
        );
        local.observe(0, &info("api-1", "dc-1", "h1", "api"), Vec::new());
        local.observe(0, &info("api-3", "dc-2", "h3", "api"), Vec::new());
        local.observe(0, &info("backend-1", "dc-1", "h9", "backend"), series("api"));
        assert_eq!(
            local.service_edges().get(&("api".to_string(), "backend".to_string())),
            Some(&true)
        );
        assert_eq!(
            local.observed_edges().into_iter().collect::<Vec<_>>(),
            vec![("api-1".to_string(), "backend-1".to_string())]
        );
    }
}
