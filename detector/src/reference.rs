//! Reference rankings from the root-cause literature, computed on the same anomalies as the
//! detector so that `epicenter eval` can show them side by side:
//! - a robust z-score ranking in the manner of BARO / N-Sigma: every instance ranked by the
//!   largest robust score among the anomalous series measured at it (no graph);
//! - a personalized PageRank random walk over the instance graph in the manner of
//!   MicroRCA / MonitorRank: the walk starts at anomalous instances in proportion to their
//!   scores and moves along dependencies (callers to callees with weight 1, back to callers
//!   with weight 0.3, both scaled by the neighbour's anomaly), teleporting with
//!   probability 0.15; instances are ranked by the stationary probability.

use std::collections::BTreeMap;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::engine::{Anomaly, Dependency, InstanceInfo};

/// Instances ranked by their largest anomaly score (BARO / N-Sigma style), best first.
pub fn robust_z(anomalies: &[Anomaly]) -> Vec<String> {
    let mut best: BTreeMap<&str, f64> = BTreeMap::new();
    for anomaly in anomalies {
        let entry = best.entry(anomaly.instance.as_str()).or_insert(0.0);
        *entry = entry.max(anomaly.score);
    }
    let mut ranked: Vec<(&str, f64)> = best.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.into_iter().map(|(name, _)| name.to_string()).collect()
}

/// The instance dependency graph: an edge from every caller instance to every callee
/// instance its service depends on (within its datacenter where the dependency says so).
pub fn instance_graph(
    instances: &BTreeMap<String, InstanceInfo>,
    dependencies: &[Dependency],
) -> (DiGraph<String, ()>, BTreeMap<String, NodeIndex>) {
    let mut graph = DiGraph::new();
    let mut nodes = BTreeMap::new();
    for name in instances.keys() {
        nodes.insert(name.clone(), graph.add_node(name.clone()));
    }
    for caller in instances.values() {
        for dependency in dependencies.iter().filter(|d| d.caller == caller.service) {
            for callee in instances.values().filter(|i| i.service == dependency.callee) {
                if dependency.same_dc && callee.dc != caller.dc {
                    continue;
                }
                graph.add_edge(nodes[&caller.name], nodes[&callee.name], ());
            }
        }
    }
    (graph, nodes)
}

/// The graph a person looks at: instances with their placement, and edges from the service
/// dependencies (`configured`) and from series naming the other end of a call (`observed`: a
/// client's series its peer, a mesh's server-side series its caller).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GraphDocument {
    /// Every instance.
    pub nodes: Vec<InstanceInfo>,
    /// Caller → callee edges.
    pub edges: Vec<GraphEdge>,
}

/// One edge of [`GraphDocument`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct GraphEdge {
    /// Calling instance.
    pub caller: String,
    /// Called instance.
    pub callee: String,
    /// `configured` (from the service dependencies), `observed` (a client series names the
    /// peer, or a server series its calling service) or `both`.
    pub source: String,
}

/// Builds the [`GraphDocument`] from instances, dependencies and observed peer edges.
pub fn graph_document(
    instances: &BTreeMap<String, InstanceInfo>,
    dependencies: &[Dependency],
    observed: &std::collections::BTreeSet<(String, String)>,
) -> GraphDocument {
    let (graph, _) = instance_graph(instances, dependencies);
    let mut edges: BTreeMap<(String, String), &str> = BTreeMap::new();
    for edge in graph.edge_indices() {
        if let Some((a, b)) = graph.edge_endpoints(edge) {
            edges.insert((graph[a].clone(), graph[b].clone()), "configured");
        }
    }
    for (caller, callee) in observed {
        let entry = edges.entry((caller.clone(), callee.clone())).or_insert("observed");
        if *entry == "configured" {
            *entry = "both";
        }
    }
    GraphDocument {
        nodes: instances.values().cloned().collect(),
        edges: edges
            .into_iter()
            .map(|((caller, callee), source)| GraphEdge {
                caller,
                callee,
                source: source.to_string(),
            })
            .collect(),
    }
}

/// Graphviz DOT of a [`GraphDocument`]: one cluster per datacenter, nodes labelled with
/// service and host, observed edges dashed.
pub fn to_dot(document: &GraphDocument) -> String {
    let mut dcs: BTreeMap<&str, Vec<&InstanceInfo>> = BTreeMap::new();
    for node in &document.nodes {
        dcs.entry(node.dc.as_str()).or_default().push(node);
    }
    // Quotes escaped; a backslash is kept as is, so that `\n` in a label is DOT's line break.
    let quote = |text: &str| format!("\"{}\"", text.replace('"', "\\\""));
    let mut out = String::from("digraph epicenter {\n  rankdir=LR;\n");
    for (index, (dc, nodes)) in dcs.iter().enumerate() {
        out.push_str(&format!("  subgraph cluster_{index} {{\n    label={};\n", quote(dc)));
        for node in nodes {
            out.push_str(&format!(
                "    {} [label={}];\n",
                quote(&node.name),
                quote(&format!("{}\\n{} on {}", node.name, node.service, node.host))
            ));
        }
        out.push_str("  }\n");
    }
    for edge in &document.edges {
        let style = if edge.source == "observed" {
            " [style=dashed]"
        } else {
            ""
        };
        out.push_str(&format!(
            "  {} -> {}{style};\n",
            quote(&edge.caller),
            quote(&edge.callee)
        ));
    }
    out.push_str("}\n");
    out
}

/// Instances ranked by personalized PageRank over the dependency graph, best first.
pub fn pagerank(
    anomalies: &[Anomaly],
    instances: &BTreeMap<String, InstanceInfo>,
    dependencies: &[Dependency],
) -> Vec<String> {
    let (graph, nodes) = instance_graph(instances, dependencies);
    let count = graph.node_count();
    if count == 0 {
        return Vec::new();
    }
    let mut anomaly_of = vec![0.0f64; count];
    for anomaly in anomalies {
        if let Some(&node) = nodes.get(&anomaly.instance) {
            anomaly_of[node.index()] = anomaly_of[node.index()].max(anomaly.score.min(50.0));
        }
    }
    let total: f64 = anomaly_of.iter().sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let personal: Vec<f64> = anomaly_of.iter().map(|score| score / total).collect();
    // Transition weights: to callees 1, back to callers 0.3, scaled by the target's anomaly.
    let mut out: Vec<Vec<(usize, f64)>> = vec![Vec::new(); count];
    for edge in graph.edge_indices() {
        let Some((caller, callee)) = graph.edge_endpoints(edge) else {
            continue;
        };
        let (a, b) = (caller.index(), callee.index());
        out[a].push((b, anomaly_of[b] + 0.01));
        out[b].push((a, 0.3 * (anomaly_of[a] + 0.01)));
    }
    let mut rank = personal.clone();
    for _ in 0..60 {
        let mut next: Vec<f64> = personal.iter().map(|p| 0.15 * p).collect();
        for (from, targets) in out.iter().enumerate() {
            let weight: f64 = targets.iter().map(|(_, w)| w).sum();
            if weight <= 0.0 {
                next[from] += 0.85 * rank[from];
                continue;
            }
            for &(to, w) in targets {
                next[to] += 0.85 * rank[from] * w / weight;
            }
        }
        rank = next;
    }
    let mut ranked: Vec<(String, f64)> = nodes
        .iter()
        .map(|(name, node)| (name.clone(), rank[node.index()]))
        .filter(|(_, score)| *score > 0.0)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.into_iter().map(|(name, _)| name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, dc: &str, service: &str) -> InstanceInfo {
        InstanceInfo {
            name: name.into(),
            dc: dc.into(),
            host: format!("{name}-host"),
            service: service.into(),
        }
    }

    #[test]
    fn the_graph_expands_dependencies_and_marks_observed_edges() {
        let instances: BTreeMap<String, InstanceInfo> = [
            info("b1", "dc-1", "backend"),
            info("b2", "dc-2", "backend"),
            info("d1", "dc-1", "db"),
            info("d2", "dc-2", "db"),
            info("r1", "dc-1", "redis"),
        ]
        .into_iter()
        .map(|i| (i.name.clone(), i))
        .collect();
        let dependencies = vec![
            Dependency {
                caller: "backend".into(),
                callee: "db".into(),
                same_dc: true,
            },
            Dependency {
                caller: "backend".into(),
                callee: "redis".into(),
                same_dc: false,
            },
        ];
        let observed = [
            ("b1".to_string(), "r1".to_string()),
            ("b1".to_string(), "d2".to_string()),
        ]
        .into_iter()
        .collect();
        let document = graph_document(&instances, &dependencies, &observed);
        let edges: Vec<(&str, &str, &str)> = document
            .edges
            .iter()
            .map(|e| (e.caller.as_str(), e.callee.as_str(), e.source.as_str()))
            .collect();
        // Same-dc db edges only; redis from both backends; b1 -> d2 only observed.
        assert_eq!(
            edges,
            vec![
                ("b1", "d1", "configured"),
                ("b1", "d2", "observed"),
                ("b1", "r1", "both"),
                ("b2", "d2", "configured"),
                ("b2", "r1", "configured"),
            ]
        );
        let dot = to_dot(&document);
        assert!(dot.starts_with("digraph epicenter {"), "{dot}");
        assert!(dot.contains("label=\"dc-2\""), "{dot}");
        assert!(dot.contains("\"b1\" -> \"d2\" [style=dashed];"), "{dot}");
        assert!(dot.contains("\"b1\\nbackend on b1-host\""), "{dot}");
    }
}
